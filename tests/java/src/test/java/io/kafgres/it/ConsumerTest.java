package io.kafgres.it;

import static io.kafgres.it.Kit.TIMEOUT;
import static io.kafgres.it.Kit.get;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.NoOffsetForPartitionException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The stock KafkaConsumer: groups (classic and KIP-848), manual assignment, offset look-ups. */
class ConsumerTest extends TopicFixture {


    /** Writes values prefix+i for i in [from, to) round-robin over the partitions, keyed by value. */
    private static void produce(String topic, int partitions, String prefix, int from, int to) {
        List<ProducerRecord<String, String>> recs = new ArrayList<>();
        for (int i = from; i < to; i++) {
            recs.add(new ProducerRecord<>(topic, i % partitions, prefix + i, prefix + i));
        }
        try (KafkaProducer<String, String> p = Kit.producer()) {
            Kit.sendAll(p, recs);
        }
    }

    /**
     * A group consumes everything and commits; a second member of the same
     * group starts exactly where the first stopped. "classic" is the default
     * protocol, "consumer" is KIP-848's.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"classic", "consumer"})
    void groupCommitsAndASecondMemberResumes(String protocol) {
        String t = newTopic("group-" + protocol, 3);
        String group = Kit.topic("g-" + protocol);
        produce(t, 3, "a", 0, 30);
        String[] conf = {
            ConsumerConfig.GROUP_ID_CONFIG, group,
            ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol,
            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
            ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false",
        };
        Set<TopicPartition> tps = Kit.partitions(t, 3);
        try (KafkaConsumer<String, String> c = Kit.consumer(conf)) {
            c.subscribe(List.of(t));
            Set<String> seen = new HashSet<>();
            for (ConsumerRecord<String, String> r : Kit.pollExactly(c, 30)) {
                assertTrue(seen.add(r.value()), "duplicate " + r.value());
            }
            assertEquals(tps, c.assignment(), "the only member owns every partition");
            c.commitSync(TIMEOUT);
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(tps, TIMEOUT);
            for (TopicPartition tp : tps) {
                assertEquals(10, committed.get(tp).offset(), "committed offset of " + tp);
            }
        }
        // the group's offsets as Admin sees them
        Map<TopicPartition, OffsetAndMetadata> viaAdmin = get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        assertEquals(3, viaAdmin.size());
        viaAdmin.values().forEach(o -> assertEquals(10, o.offset()));

        produce(t, 3, "b", 0, 9);
        try (KafkaConsumer<String, String> c = Kit.consumer(conf)) {
            c.subscribe(List.of(t));
            List<ConsumerRecord<String, String>> got = Kit.pollExactly(c, 9);
            for (ConsumerRecord<String, String> r : got) {
                assertTrue(r.value().startsWith("b"), "resumed member re-read " + r.value());
                assertTrue(r.offset() >= 10);
            }
            c.commitSync(TIMEOUT);
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(tps, TIMEOUT);
            for (TopicPartition tp : tps) {
                assertEquals(13, committed.get(tp).offset(), "committed offset of " + tp);
            }
        }
    }

    @Test
    void assignSeekAndPositions() {
        String t = newTopic("seek", 1);
        TopicPartition tp = new TopicPartition(t, 0);
        Kit.fill(t, 0, 10);
        try (KafkaConsumer<String, String> c = Kit.consumer()) {
            c.assign(List.of(tp));
            c.seek(tp, 5);
            assertEquals(5, c.position(tp, TIMEOUT));
            List<ConsumerRecord<String, String>> got = Kit.pollExactly(c, 5);
            for (int i = 0; i < 5; i++) {
                assertEquals(5 + i, got.get(i).offset());
                assertEquals("v" + (5 + i), got.get(i).value());
            }
            assertEquals(10, c.position(tp, TIMEOUT));

            c.seekToBeginning(List.of(tp));
            assertEquals(0, c.position(tp, TIMEOUT));
            assertEquals("v0", Kit.pollExactly(c, 10).get(0).value());

            c.seekToEnd(List.of(tp));
            assertEquals(10, c.position(tp, TIMEOUT));
            Kit.fill(t, 0, 2);
            List<ConsumerRecord<String, String>> more = Kit.pollExactly(c, 2);
            assertEquals(10, more.get(0).offset(), "after seekToEnd only new records arrive");
        }
    }

    @Test
    void beginningAndEndOffsets() {
        String t = newTopic("ends", 3);
        Kit.fill(t, 0, 4);
        Kit.fill(t, 1, 7);
        Set<TopicPartition> tps = Kit.partitions(t, 3);
        try (KafkaConsumer<String, String> c = Kit.consumer()) {
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps, TIMEOUT);
            Map<TopicPartition, Long> end = c.endOffsets(tps, TIMEOUT);
            assertEquals(Map.of(new TopicPartition(t, 0), 0L, new TopicPartition(t, 1), 0L, new TopicPartition(t, 2), 0L), begin);
            assertEquals(Map.of(new TopicPartition(t, 0), 4L, new TopicPartition(t, 1), 7L, new TopicPartition(t, 2), 0L), end);
        }
    }

    @Test
    void offsetsForTimes() {
        String t = newTopic("times", 1);
        TopicPartition tp = new TopicPartition(t, 0);
        long t0 = System.currentTimeMillis() - 60_000;
        List<ProducerRecord<String, String>> recs = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            recs.add(new ProducerRecord<>(t, 0, t0 + i * 1000L, "k" + i, "v" + i));
        }
        try (KafkaProducer<String, String> p = Kit.producer()) {
            Kit.sendAll(p, recs);
        }
        try (KafkaConsumer<String, String> c = Kit.consumer()) {
            OffsetAndTimestamp mid = c.offsetsForTimes(Map.of(tp, t0 + 2500), TIMEOUT).get(tp);
            assertNotNull(mid);
            assertEquals(3, mid.offset(), "first record at or after the time");
            assertEquals(t0 + 3000, mid.timestamp());
            OffsetAndTimestamp exact = c.offsetsForTimes(Map.of(tp, t0 + 7000), TIMEOUT).get(tp);
            assertEquals(7, exact.offset());
            OffsetAndTimestamp first = c.offsetsForTimes(Map.of(tp, 0L), TIMEOUT).get(tp);
            assertEquals(0, first.offset());
            assertEquals(t0, first.timestamp());
            Map<TopicPartition, OffsetAndTimestamp> none = c.offsetsForTimes(Map.of(tp, t0 + 100_000), TIMEOUT);
            assertTrue(none.containsKey(tp));
            assertNull(none.get(tp), "no record that late");

            // seeking to a looked-up offset reads from there
            c.assign(List.of(tp));
            c.seek(tp, mid.offset());
            assertEquals("v3", Kit.pollExactly(c, 7).get(0).value());
        }
    }

    @Test
    void deleteRecordsMovesTheBeginning() {
        String t = newTopic("delrec", 1);
        TopicPartition tp = new TopicPartition(t, 0);
        Kit.fill(t, 0, 10);
        long low = get(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp)).lowWatermark();
        assertEquals(4, low);
        try (KafkaConsumer<String, String> c = Kit.consumer()) {
            assertEquals(4L, c.beginningOffsets(List.of(tp), TIMEOUT).get(tp));
            assertEquals(10L, c.endOffsets(List.of(tp), TIMEOUT).get(tp));
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            assertEquals(4, c.position(tp, TIMEOUT));
            List<ConsumerRecord<String, String>> got = Kit.pollExactly(c, 6);
            assertEquals(4, got.get(0).offset());
            assertEquals("v4", got.get(0).value());
        }
        // a deleted offset is out of range: auto.offset.reset=earliest lands on the new beginning
        try (KafkaConsumer<String, String> c = Kit.consumer(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest")) {
            c.assign(List.of(tp));
            c.seek(tp, 1);
            assertEquals(4, Kit.pollExactly(c, 6).get(0).offset());
        }
    }

    @Test
    void outOfRangeWithResetNoneThrows() {
        String t = newTopic("oor", 1);
        TopicPartition tp = new TopicPartition(t, 0);
        Kit.fill(t, 0, 10);
        try (KafkaConsumer<String, String> c = Kit.consumer(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none")) {
            c.assign(List.of(tp));
            c.seek(tp, 100);
            OffsetOutOfRangeException e = pollUntilThrows(c, OffsetOutOfRangeException.class);
            assertEquals(Map.of(tp, 100L), e.offsetOutOfRangePartitions());
        }
        // no position and nothing committed: reset=none has nowhere to start
        try (KafkaConsumer<String, String> c = Kit.consumer(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none")) {
            c.assign(List.of(tp));
            NoOffsetForPartitionException e = pollUntilThrows(c, NoOffsetForPartitionException.class);
            assertEquals(Set.of(tp), e.partitions());
        }
        // the same out-of-range seek with reset=earliest starts over from 0
        try (KafkaConsumer<String, String> c = Kit.consumer(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest")) {
            c.assign(List.of(tp));
            c.seek(tp, 100);
            assertEquals(0, Kit.pollExactly(c, 10).get(0).offset());
        }
        // ... and with the default (latest) waits at the end for new records
        try (KafkaConsumer<String, String> c = Kit.consumer()) {
            c.assign(List.of(tp));
            c.seek(tp, 100);
            c.poll(Duration.ofMillis(500));
            Kit.eventually("position reset to the end", () -> {
                c.poll(Duration.ofMillis(100));
                return c.position(tp, TIMEOUT) == 10;
            });
        }
    }

    private static <E extends RuntimeException> E pollUntilThrows(KafkaConsumer<String, String> c, Class<E> want) {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        Map<String, Integer> stray = new HashMap<>();
        while (System.nanoTime() < deadline) {
            try {
                c.poll(Duration.ofMillis(200)).forEach(r -> stray.merge(r.value(), 1, Integer::sum));
            } catch (RuntimeException e) {
                assertTrue(stray.isEmpty(), "records before the error: " + stray);
                return assertInstanceOf(want, e);
            }
        }
        return fail("poll never threw " + want.getSimpleName());
    }
}
