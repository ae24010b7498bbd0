package io.kafgres.txn;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The Kafka Streams word count of TestTransactionsKafkaStreamsWordCount
 * (tests/integration/transactions_test.go), with processing.guarantee =
 * exactly_once_v2: lines of the input topic split into words, counted per
 * word, each new count (a long) written to the output topic keyed by the
 * word. Stock settings otherwise; a stream thread that dies of an error is
 * replaced, as production applications configure it.
 *
 * Usage: WordCount bootstrap applicationId input output stateDir
 * Stdout: "state S" on each state change. SIGTERM closes it.
 */
public final class WordCount {
    public static void main(String[] a) throws InterruptedException {
        if (a.length != 5) {
            System.err.println("usage: WordCount bootstrap applicationId input output stateDir");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a[1]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, a[4]);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(CommonClientConfigs.RECONNECT_BACKOFF_MAX_MS_CONFIG, 1_000);

        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(a[2])
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\s+")))
            .filter((k, w) -> !w.isEmpty())
            .groupBy((k, w) -> w)
            .count(Materialized.as("counts"))
            .toStream()
            .to(a[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("stream thread died, replacing it: " + e);
            return StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            System.out.flush();
        });
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
