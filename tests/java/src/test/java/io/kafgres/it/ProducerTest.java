package io.kafgres.it;

import static io.kafgres.it.Kit.TIMEOUT;
import static io.kafgres.it.Kit.get;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The stock KafkaProducer: idempotent, acks=all, no overrides unless the test is about one. */
class ProducerTest extends TopicFixture {


    /** The defaults this suite relies on: if kafka-clients changed them, the tests below would test something else. */
    @Test
    void defaultsAreIdempotentAcksAll() {
        try (KafkaProducer<String, String> p = Kit.producer()) {
            var cfg = new ProducerConfig(Map.of(
                    ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, Kit.bootstrap(),
                    ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, org.apache.kafka.common.serialization.StringSerializer.class,
                    ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, org.apache.kafka.common.serialization.StringSerializer.class));
            assertEquals(true, cfg.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG));
            assertTrue(List.of("all", "-1").contains(cfg.getString(ProducerConfig.ACKS_CONFIG)));
            // a first send makes the producer fetch its producer id
            String t = newTopic("defaults", 1, Map.of());
            RecordMetadata md = get(p.send(new ProducerRecord<>(t, "k", "v")));
            assertEquals(0, md.offset());
        }
    }

    @Test
    void syncAndAsyncSendsGetDenseOffsetsPerPartition() throws Exception {
        String t = newTopic("dense", 3, Map.of());
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        Map<String, String> sent = new HashMap<>();
        try (KafkaProducer<String, String> p = Kit.producer()) {
            // synchronous: one get() per send
            for (int i = 0; i < 30; i++) {
                String k = "sync-" + i;
                RecordMetadata md = get(p.send(new ProducerRecord<>(t, k, "value-" + k)));
                assertEquals(t, md.topic());
                offsets.computeIfAbsent(md.partition(), x -> new ArrayList<>()).add(md.offset());
                sent.put(k, md.partition() + "@" + md.offset());
            }
            // asynchronous: callbacks, many records in flight
            int n = 300;
            CountDownLatch done = new CountDownLatch(n);
            Map<String, Object> results = new ConcurrentHashMap<>();
            for (int i = 0; i < n; i++) {
                String k = "async-" + i;
                p.send(new ProducerRecord<>(t, i % 3, k, "value-" + k), (md, err) -> {
                    results.put(k, err != null ? err : md);
                    done.countDown();
                });
            }
            p.flush();
            assertTrue(done.await(TIMEOUT.toSeconds(), TimeUnit.SECONDS), "callbacks within " + TIMEOUT);
            for (var e : results.entrySet()) {
                RecordMetadata md = assertInstanceOf(RecordMetadata.class, e.getValue(), "send of " + e.getKey());
                int want = Integer.parseInt(e.getKey().substring("async-".length())) % 3;
                assertEquals(want, md.partition(), "explicit partition of " + e.getKey());
                offsets.computeIfAbsent(md.partition(), x -> new ArrayList<>()).add(md.offset());
                sent.put(e.getKey(), md.partition() + "@" + md.offset());
            }
        }
        long total = 0;
        for (var e : offsets.entrySet()) {
            List<Long> o = new ArrayList<>(e.getValue());
            Collections.sort(o);
            for (int i = 0; i < o.size(); i++) {
                assertEquals(i, o.get(i), "partition " + e.getKey() + ": offsets must be 0..n-1 without gaps or repeats");
            }
            total += o.size();
        }
        assertEquals(330, total);
        // what the acks said is where the records are
        List<ConsumerRecord<String, String>> got = Kit.readAll(Kit.partitions(t, 3));
        for (ConsumerRecord<String, String> r : got) {
            assertEquals(sent.get(r.key()), r.partition() + "@" + r.offset(), "record " + r.key());
            assertEquals("value-" + r.key(), r.value());
        }
    }

    @Test
    void headersNullKeysAndExplicitTimestamps() {
        String t = newTopic("headers", 1, Map.of());
        long ts = 1_700_000_000_123L;
        RecordHeaders h = new RecordHeaders();
        h.add("trace", "abc".getBytes(StandardCharsets.UTF_8));
        h.add("trace", "def".getBytes(StandardCharsets.UTF_8)); // repeated keys are kept, in order
        h.add("empty", new byte[0]);
        h.add("nil", null);
        try (KafkaProducer<String, String> p = Kit.producer()) {
            RecordMetadata md = get(p.send(new ProducerRecord<>(t, 0, ts, null, "no key", h)));
            assertEquals(ts, md.timestamp(), "CreateTime topic: the ack carries the record's own timestamp");
            RecordMetadata md2 = get(p.send(new ProducerRecord<>(t, 0, ts + 5, "k", (String) null)));
            assertEquals(md.offset() + 1, md2.offset());
        }
        List<ConsumerRecord<String, String>> got = Kit.readAll(Kit.partitions(t, 1));
        ConsumerRecord<String, String> r = got.get(0);
        assertNull(r.key());
        assertEquals("no key", r.value());
        assertEquals(ts, r.timestamp());
        assertEquals(TimestampType.CREATE_TIME, r.timestampType());
        Header[] hs = r.headers().toArray();
        assertEquals(4, hs.length);
        assertEquals("trace", hs[0].key());
        assertArrayEquals("abc".getBytes(StandardCharsets.UTF_8), hs[0].value());
        assertEquals("trace", hs[1].key());
        assertArrayEquals("def".getBytes(StandardCharsets.UTF_8), hs[1].value());
        assertEquals("empty", hs[2].key());
        assertArrayEquals(new byte[0], hs[2].value());
        assertEquals("nil", hs[3].key());
        assertNull(hs[3].value());
        ConsumerRecord<String, String> tomb = got.get(1);
        assertEquals("k", tomb.key());
        assertNull(tomb.value(), "a null value stays null (a tombstone), not empty");
        assertEquals(ts + 5, tomb.timestamp());
        assertEquals(0, tomb.headers().toArray().length);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void compressionRoundTrips(String codec) {
        String t = newTopic("codec-" + codec, 2, Map.of());
        List<ProducerRecord<String, String>> recs = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
            // compressible values, and several records per batch
            recs.add(new ProducerRecord<>(t, i % 2, "key-" + i, (codec + "-" + i + "-").repeat(20)));
        }
        List<RecordMetadata> mds;
        try (KafkaProducer<String, String> p = Kit.producer(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                ProducerConfig.LINGER_MS_CONFIG, "20")) {
            mds = Kit.sendAll(p, recs);
        }
        long maxOffset = mds.stream().mapToLong(RecordMetadata::offset).max().orElseThrow();
        assertEquals(249, maxOffset, "250 records per partition, offsets 0..249");
        List<ConsumerRecord<String, String>> got = Kit.readAll(Kit.partitions(t, 2));
        Map<String, String> byKey = new HashMap<>();
        long[] next = new long[2];
        for (ConsumerRecord<String, String> r : got) {
            assertEquals(next[r.partition()]++, r.offset(), "offsets within a compressed batch are consecutive");
            byKey.put(r.key(), r.value());
        }
        for (ProducerRecord<String, String> r : recs) {
            assertEquals(r.value(), byKey.get(r.key()), "record " + r.key());
        }
    }

    @Test
    void recordOverTopicMaxMessageBytesIsRejected() throws Exception {
        String t = newTopic("toolarge", 1, Map.of("max.message.bytes", "2000"));
        try (KafkaProducer<String, String> p = Kit.producer()) {
            Future<RecordMetadata> big = p.send(new ProducerRecord<>(t, "big", "x".repeat(5000)));
            try {
                big.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                throw new AssertionError("a 5000-byte record was accepted by a topic with max.message.bytes=2000");
            } catch (ExecutionException e) {
                assertInstanceOf(RecordTooLargeException.class, e.getCause(), "cause: " + e.getCause());
            }
            // the producer is still usable, and nothing of the big record was written
            RecordMetadata md = get(p.send(new ProducerRecord<>(t, "small", "y".repeat(100))));
            assertEquals(0, md.offset());
        }
        List<ConsumerRecord<String, String>> got = Kit.readAll(Kit.partitions(t, 1));
        assertEquals("small", got.get(0).key());
    }

    @Test
    void logAppendTimeTopicStampsBrokerTime() {
        String t = newTopic("logappend", 1, Map.of("message.timestamp.type", "LogAppendTime"));
        long old = 1_500_000_000_000L; // 2017: far from now
        long before = System.currentTimeMillis();
        RecordMetadata md;
        try (KafkaProducer<String, String> p = Kit.producer()) {
            md = get(p.send(new ProducerRecord<>(t, 0, old, "k", "v")));
        }
        long after = System.currentTimeMillis();
        assertTrue(md.timestamp() >= before - 5000 && md.timestamp() <= after + 5000,
                "LogAppendTime: ack timestamp " + md.timestamp() + " should be the broker's clock, near " + before);
        ConsumerRecord<String, String> r = Kit.readAll(Kit.partitions(t, 1)).get(0);
        assertEquals(TimestampType.LOG_APPEND_TIME, r.timestampType());
        assertEquals(md.timestamp(), r.timestamp(), "the consumer sees the time the ack reported");
    }

    /** Both kafgres and the reference broker auto-create topics (auto.create.topics.enable=true, one partition). */
    @Test
    void unknownTopicIsAutoCreated() throws Exception {
        String t = newName("auto");
        try (KafkaProducer<String, String> p = Kit.producer()) {
            RecordMetadata md = get(p.send(new ProducerRecord<>(t, "k", "v")));
            assertEquals(0, md.partition());
            assertEquals(0, md.offset());
        }
        TopicDescription d = get(admin.describeTopics(List.of(t)).allTopicNames()).get(t);
        assertEquals(1, d.partitions().size());
        assertEquals("v", Kit.readAll(List.of(new TopicPartition(t, 0))).get(0).value());
    }
}
