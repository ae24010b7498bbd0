// TxnProducerBench: transactional produce throughput with the stock Java
// client, in transactions of a fixed number of records (ProducerPerformance
// can only commit by time). Run as a single-file source program:
//   java -cp <kafka classpath> TxnProducerBench.java BOOTSTRAP TOPIC RECORDS SIZE PER_TXN TXN_ID
// Prints one line: records/s, MB/s, commit latency percentiles (ms) and how
// many times the producer had to be replaced (see the catch below).
import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TxnProducerBench {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        long records = Long.parseLong(args[2]);
        int size = Integer.parseInt(args[3]), perTxn = Integer.parseInt(args[4]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[5]);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        byte[] value = new byte[size];
        Arrays.fill(value, (byte) 'x');
        long txns = (records + perTxn - 1) / perTxn;
        long[] commitNanos = new long[(int) txns];
        int restarts = 0;
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        try {
            producer.initTransactions();
            long start = System.nanoTime();
            long sent = 0;
            for (int t = 0; t < txns; ) {
                producer.beginTransaction();
                long n = Math.min(perTxn, records - sent);
                for (int i = 0; i < n; i++) {
                    producer.send(new ProducerRecord<>(topic, value));
                }
                long c = System.nanoTime();
                try {
                    producer.commitTransaction();
                } catch (InvalidTxnStateException e) {
                    // The Java client 4.4 now and then sends EndTxn before
                    // the transaction's first batch (seen against Apache
                    // Kafka 4.4 as well): its producer is then unusable.
                    // Start a new one (its init aborts the transaction) and
                    // send those records again.
                    if (++restarts > 100) throw e;
                    producer.close(Duration.ZERO);
                    producer = new KafkaProducer<>(p);
                    producer.initTransactions();
                    continue;
                }
                commitNanos[t++] = System.nanoTime() - c;
                sent += n;
            }
            double secs = (System.nanoTime() - start) / 1e9;
            Arrays.sort(commitNanos);
            System.out.printf("records/s=%.0f MB/s=%.2f txns=%d commit_p50_ms=%.2f commit_p99_ms=%.2f restarts=%d%n",
                    records / secs, records * (double) size / secs / (1024 * 1024), txns,
                    commitNanos[(int) (txns * 0.50)] / 1e6, commitNanos[(int) Math.min(txns - 1, txns * 0.99)] / 1e6, restarts);
        } finally {
            producer.close();
        }
    }
}
