#!/usr/bin/env bash
# kafka-transactions.sh: list, describe, describe-producers, find-hanging
# and abort (ListTransactions, DescribeTransactions, DescribeProducers,
# WriteTxnMarkers) around a transaction left open by a transactional
# producer killed mid-transaction (Kafka's VerifiableProducer, kill -9).
# The conformance gate compares the same commands with Kafka 4.4
# (transactions-tool).
source "$(dirname "$0")/lib.sh"
t=$PREFIX-t
txn=$PREFIX-tx

tool kafka-topics.sh --create --topic "$t" --partitions 1
expect_rc 0 "create the topic"

# a transactional producer that dies (halts, closing nothing) once its
# records are acknowledged, leaving its transaction open; run from source
# by kafka-run-class.sh's java (single-file source launch)
cat >"$WORK/Hang.java" <<'JAVA'
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class Hang {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("transactional.id", args[2]);
        KafkaProducer<String, String> prod = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
        prod.initTransactions();
        prod.beginTransaction();
        for (int i = 0; i < 3; i++) prod.send(new ProducerRecord<>(args[1], 0, null, "h" + i)).get();
        System.out.println("acked");
        Runtime.getRuntime().halt(0);
    }
}
JAVA
run "$BIN/kafka-run-class.sh" "$WORK/Hang.java" "$BOOTSTRAP" "$t" "$txn"
expect_equals "$OUT" "acked" "a transactional producer's records are acknowledged and it dies mid-transaction"

tool kafka-transactions.sh list
expect_rc 0 "list exits 0"
expect_match "$OUT" '^TransactionalId[[:space:]]+Coordinator[[:space:]]+ProducerId[[:space:]]+TransactionState[[:space:]]*$' "list prints its header"
expect_match "$OUT" "^$txn[[:space:]]+1[[:space:]]+[0-9]+[[:space:]]+Ongoing[[:space:]]*\$" "list shows the open transaction on coordinator 1"

tool kafka-transactions.sh describe --transactional-id "$txn"
expect_rc 0 "describe exits 0"
expect_match "$OUT" '^CoordinatorId[[:space:]]+TransactionalId[[:space:]]+ProducerId[[:space:]]+ProducerEpoch[[:space:]]+TransactionState[[:space:]]+TransactionTimeoutMs[[:space:]]+CurrentTransactionStartTimeMs[[:space:]]+TransactionDurationMs[[:space:]]+TopicPartitions[[:space:]]*$' "describe prints its header"
expect_match "$OUT" "^1[[:space:]]+$txn[[:space:]]+[0-9]+[[:space:]]+0[[:space:]]+Ongoing[[:space:]]+60000[[:space:]]+[0-9]+[[:space:]]+[0-9]+[[:space:]]+$t-0[[:space:]]*\$" "describe shows the ongoing transaction and its partition"

tool kafka-transactions.sh describe --transactional-id "$txn-missing"
expect_rc 1 "describe of an unknown transactional id exits 1"
expect_contains "$ERR" "failed because the ID could not be found" "describe names the error"

tool kafka-transactions.sh describe-producers --topic "$t" --partition 0
expect_rc 0 "describe-producers exits 0"
expect_match "$OUT" '^ProducerId[[:space:]]+ProducerEpoch[[:space:]]+LatestCoordinatorEpoch[[:space:]]+LastSequence[[:space:]]+LastTimestamp[[:space:]]+CurrentTransactionStartOffset[[:space:]]*$' "describe-producers prints its header"
expect_match "$OUT" '^[0-9]+[[:space:]]+0[[:space:]]+-1[[:space:]]+[0-9]+[[:space:]]+[0-9]+[[:space:]]+0[[:space:]]*$' "describe-producers shows the transaction open since offset 0"

# the coordinator knows the transaction (it times out by itself): not hanging
tool kafka-transactions.sh find-hanging --broker-id 1
expect_rc 0 "find-hanging --broker-id exits 0"
expect_match "$OUT" '^Topic[[:space:]]+Partition[[:space:]]+ProducerId[[:space:]]+ProducerEpoch[[:space:]]+CoordinatorEpoch[[:space:]]+StartOffset[[:space:]]+LastTimestamp[[:space:]]+Duration\(min\)[[:space:]]*$' "find-hanging prints its header"
expect_lacks "$OUT" "$t" "find-hanging does not list a transaction its coordinator knows"
tool kafka-transactions.sh find-hanging --topic "$t" --max-transaction-timeout 0
expect_rc 0 "find-hanging --topic exits 0"
expect_lacks "$OUT" "$t" "find-hanging --topic does not list it either"

tool kafka-transactions.sh abort --topic "$t" --partition 0 --start-offset 0
expect_rc 0 "abort exits 0"
tool kafka-transactions.sh describe-producers --topic "$t" --partition 0
expect_match "$OUT" '^[0-9]+[[:space:]]+0[[:space:]]+0[[:space:]]+[0-9]+[[:space:]]+[0-9]+[[:space:]]+None[[:space:]]*$' "after the abort the partition has no open transaction (marker of coordinator epoch 0)"
tool kafka-transactions.sh abort --topic "$t" --partition 0 --start-offset 0
expect_rc 1 "a second abort exits 1"
expect_contains "$ERR" "Could not find any open transactions starting at offset 0" "a second abort finds no open transaction"

tool kafka-console-consumer.sh --topic "$t" --partition 0 --offset earliest --timeout-ms 3000 --isolation-level read_committed
expect_equals "$OUT" "" "read_committed sees nothing of the aborted transaction"
tool kafka-console-consumer.sh --topic "$t" --partition 0 --offset earliest --max-messages 1 --timeout-ms 15000
expect_rc 0 "read_uncommitted sees the aborted records"
expect_match "$OUT" '^h0$' "the first aborted record is h0"

finish
