package io.kafgres.txn;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One worker of the consume-transform-produce pipeline of
 * TestTransactionsJavaSendOffsets (tests/integration/transactions_test.go):
 * the textbook exactly-once loop of the Java client. Poll read_committed,
 * produce each record to the output topic's same partition in a
 * transaction, add the consumed offsets with sendOffsetsToTransaction and the
 * consumer's group metadata, commit. Every abortEvery-th transaction is
 * aborted on purpose (its records prefixed "aborted-") and the consumer
 * rewound to the group's committed offsets.
 *
 * Any other error ends the session: producer and consumer are closed and
 * made anew, and initTransactions with the same transactional id settles
 * whatever the old producer left open — the recovery Kafka documents for a
 * producer in an unknown state.
 *
 * Usage: TxnPipeline bootstrap input output group transactionalId abortEvery
 * Stdout: "committed N" / "aborted N" per transaction, "restart ERROR" per
 * new session, for the test to follow progress. SIGTERM stops it between
 * transactions.
 */
public final class TxnPipeline {
    private static final byte[] ABORTED = "aborted-".getBytes(StandardCharsets.UTF_8);

    private final String bootstrap, input, output, group, transactionalId;
    private final int abortEvery;
    private volatile boolean stopping;
    private final AtomicReference<KafkaConsumer<byte[], byte[]>> consumer = new AtomicReference<>();

    private TxnPipeline(String[] a) {
        bootstrap = a[0];
        input = a[1];
        output = a[2];
        group = a[3];
        transactionalId = a[4];
        abortEvery = Integer.parseInt(a[5]);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: TxnPipeline bootstrap input output group transactionalId abortEvery");
            System.exit(2);
        }
        TxnPipeline p = new TxnPipeline(args);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            p.stopping = true;
            KafkaConsumer<byte[], byte[]> c = p.consumer.get();
            if (c != null) {
                c.wakeup();
            }
            try {
                main.join(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        p.run();
    }

    private void run() throws InterruptedException {
        for (int failures = 0; !stopping; failures++) {
            try {
                session();
            } catch (WakeupException e) {
                // stopping
            } catch (RuntimeException e) {
                if (stopping) {
                    break;
                }
                if (failures == 30) {
                    System.err.println(transactionalId + ": giving up after " + failures + " failed sessions");
                    e.printStackTrace();
                    Runtime.getRuntime().halt(1);
                }
                System.out.println("restart " + e);
                System.out.flush();
                System.err.println(transactionalId + ": session ended: " + e);
                Thread.sleep(200);
            }
        }
        System.out.println("stopped");
        System.out.flush();
    }

    private void session() {
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 20_000);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30_000);
        pp.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 1_000);

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 300);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10_000);
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1_000);
        cp.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        cp.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 1_000);

        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp);
        consumer.set(c);
        try {
            producer.initTransactions();
            c.subscribe(List.of(input));
            for (long batch = 1; !stopping; ) {
                ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                boolean abort = batch++ % abortEvery == 0;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    producer.send(new ProducerRecord<>(output, r.partition(), r.key(), abort ? prefixed(r.value()) : r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, c.groupMetadata());
                if (abort) {
                    producer.abortTransaction();
                    rewind(c);
                    System.out.println("aborted " + records.count());
                } else {
                    producer.commitTransaction();
                    System.out.println("committed " + records.count());
                }
                System.out.flush();
            }
        } finally {
            consumer.set(null);
            producer.close(Duration.ofSeconds(5));
            c.close(CloseOptions.timeout(Duration.ofSeconds(5)));
        }
    }

    /** Seeks every assigned partition back to the group's committed offset. */
    private static void rewind(KafkaConsumer<byte[], byte[]> c) {
        Set<TopicPartition> assigned = c.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(assigned);
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata om = committed.get(tp);
            if (om == null) {
                c.seekToBeginning(List.of(tp));
            } else {
                c.seek(tp, om);
            }
        }
    }

    private static byte[] prefixed(byte[] v) {
        byte[] out = new byte[ABORTED.length + v.length];
        System.arraycopy(ABORTED, 0, out, 0, ABORTED.length);
        System.arraycopy(v, 0, out, ABORTED.length, v.length);
        return out;
    }
}
