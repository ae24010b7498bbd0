// The Java conformance client: kafka-clients 4.4 driven through the
// scenarios of tests/conformance/scenarios.json, printing what the client
// observes as "<scenario>\t<json>" lines (see tests/conformance/PROTOCOL.md).
//
// Consumers use assign() + seek, never subscribe(), except in the group-*
// scenarios: those join a classic consumer group (group.protocol=classic).
//
// A second mode, --create-topics name:partitions,..., creates topics through
// the Admin API; the runner uses it to prepare the reference broker.

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ConformanceClient {
    private static final long TS0 = 1700000000000L;

    private final String bootstrap;
    private final String prefix;
    private String scenario;

    private ConformanceClient(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i], args[i + 1]);
        }
        String bootstrap = opts.get("--bootstrap");
        if (bootstrap == null) {
            System.err.println("usage: --bootstrap HOST:PORT (--prefix P --scenarios a,b | --create-topics name:n,...)");
            System.exit(2);
        }
        ConformanceClient c = new ConformanceClient(bootstrap, opts.getOrDefault("--prefix", "c-java"));
        if (opts.containsKey("--create-topics")) {
            c.createTopics(opts.get("--create-topics"));
            return;
        }
        for (String s : opts.getOrDefault("--scenarios", "").split(",")) {
            if (s.isEmpty()) continue;
            c.scenario = s;
            try {
                c.run(s);
            } catch (Exception e) {
                // An unexpected failure is an observation too: the same
                // failure on both brokers is parity, a different one is not.
                System.err.println(s + ": " + e);
                c.emit("op", "scenario", "error", errorName(e));
            }
            System.out.flush();
        }
        System.exit(0); // do not wait for client threads
    }

    private String topic(int i) {
        return prefix + "-" + scenario + "-" + i;
    }

    private String missing() {
        return prefix + "-" + scenario + "-missing";
    }

    private void run(String s) throws Exception {
        switch (s) {
            case "metadata-topic" -> metadataTopic();
            case "produce-consume-none" -> produceConsume("none");
            case "produce-consume-gzip" -> produceConsume("gzip");
            case "produce-consume-snappy" -> produceConsume("snappy");
            case "produce-consume-lz4" -> produceConsume("lz4");
            case "produce-consume-zstd" -> produceConsume("zstd");
            case "null-keys" -> nullKeys();
            case "headers" -> headers();
            case "timestamps" -> timestamps();
            case "large-record" -> largeRecord();
            case "too-large-record" -> tooLargeRecord();
            case "list-offsets" -> listOffsets();
            case "list-offsets-max-timestamp" -> listOffsetsMax();
            case "unknown-topic-metadata" -> unknownTopicMetadata();
            case "unknown-topic-list-offsets" -> unknownTopicListOffsets();
            case "unknown-partition" -> unknownPartition();
            case "idempotent-producer" -> idempotent();
            case "auto-create" -> autoCreate();
            case "offset-out-of-range" -> offsetOutOfRange();
            case "empty-topic" -> emptyTopic();
            case "group-consume-commit" -> groupConsumeCommit();
            case "group-describe" -> groupDescribe();
            case "group-list" -> groupList();
            case "group-errors" -> groupErrors();
            default -> emit("skip", "scenario unknown to the java client");
        }
    }

    // ---- consumer groups (classic protocol) ----

    private String group() {
        return prefix + "-" + scenario + "-g";
    }

    private KafkaConsumer<byte[], byte[]> groupMember() {
        Properties p = new Properties();
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group());
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        KafkaConsumer<byte[], byte[]> c = consumer(p);
        c.subscribe(List.of(topic(0)));
        return c;
    }

    private static void waitAssigned(KafkaConsumer<byte[], byte[]> c) {
        long end = System.currentTimeMillis() + 20000;
        while (c.assignment().isEmpty()) {
            if (System.currentTimeMillis() > end) throw new TimeoutException("no assignment in 20 s");
            c.poll(Duration.ofMillis(200));
        }
    }

    private void groupConsumeCommit() throws Exception {
        try (KafkaProducer<byte[], byte[]> prod = producer(new Properties())) {
            for (int i = 0; i < 6; i++) {
                prod.send(new ProducerRecord<>(topic(0), i % 3, bytes("k" + i), bytes("v" + i)));
            }
            prod.flush();
        }
        int n = 0;
        try (KafkaConsumer<byte[], byte[]> c = groupMember()) {
            long end = System.currentTimeMillis() + 15000;
            while (n < 6 && System.currentTimeMillis() < end) {
                n += c.poll(Duration.ofMillis(200)).count();
            }
            c.commitSync();
        }
        emit("consumed", n);
        try (Admin admin = admin()) {
            Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> offs =
                    admin.listConsumerGroupOffsets(group()).partitionsToOffsetAndMetadata().get(20, TimeUnit.SECONDS);
            for (int p = 0; p < 3; p++) {
                var om = offs.get(new TopicPartition(topic(0), p));
                emit("partition", p, "committed", om == null ? -1 : om.offset());
            }
        }
        int after = 0;
        try (KafkaConsumer<byte[], byte[]> c = groupMember()) {
            long end = System.currentTimeMillis() + 3000;
            while (System.currentTimeMillis() < end) {
                after += c.poll(Duration.ofMillis(200)).count();
            }
        }
        emit("records_after_restart", after);
    }

    private void groupDescribe() throws Exception {
        try (KafkaConsumer<byte[], byte[]> c = groupMember(); Admin admin = admin()) {
            waitAssigned(c);
            var d = admin.describeConsumerGroups(List.of(group())).describedGroups().get(group()).get(20, TimeUnit.SECONDS);
            emit("state", d.groupState().toString(), "protocol_type", d.isSimpleConsumerGroup() ? "" : "consumer",
                    "protocol", d.partitionAssignor(), "members", d.members().size());
            List<List<Integer>> assigned = new ArrayList<>();
            for (var m : d.members()) {
                List<Integer> ps = new ArrayList<>();
                for (TopicPartition tp : m.assignment().topicPartitions()) {
                    if (tp.topic().equals(topic(0))) ps.add(tp.partition());
                }
                Collections.sort(ps);
                assigned.add(ps);
            }
            assigned.sort((a, b) -> a.toString().compareTo(b.toString()));
            for (int i = 0; i < assigned.size(); i++) {
                emit("member", i, "assigned", new ArrayList<Object>(assigned.get(i)));
            }
        }
    }

    private void groupList() throws Exception {
        try (KafkaConsumer<byte[], byte[]> c = groupMember()) {
            waitAssigned(c);
            c.commitSync(Map.of(new TopicPartition(topic(0), 0), new org.apache.kafka.clients.consumer.OffsetAndMetadata(0)));
        }
        try (Admin admin = admin()) {
            boolean present = false;
            String state = null, type = null;
            for (var g : admin.listGroups().all().get(20, TimeUnit.SECONDS)) {
                if (g.groupId().equals(group())) {
                    present = true;
                    state = g.groupState().map(Object::toString).orElse("?");
                    type = g.type().map(Object::toString).orElse("?");
                }
            }
            if (present) {
                emit("present", true, "state", state, "type", type);
            } else {
                emit("present", false);
            }
        }
    }

    private void groupErrors() throws Exception {
        String unknown = group() + "-unknown";
        try (KafkaConsumer<byte[], byte[]> c = groupMember(); Admin admin = admin()) {
            waitAssigned(c);
            try {
                var d = admin.describeConsumerGroups(List.of(unknown)).describedGroups().get(unknown).get(20, TimeUnit.SECONDS);
                emit("op", "describe_unknown_group", "error", "NONE", "state", d.groupState().toString());
            } catch (ExecutionException e) {
                emit("op", "describe_unknown_group", "error", errorName(e));
            }
            for (String[] op : new String[][] {{"delete_non_empty_group", group()}, {"delete_unknown_group", unknown}}) {
                try {
                    admin.deleteConsumerGroups(List.of(op[1])).all().get(20, TimeUnit.SECONDS);
                    emit("op", op[0], "error", "NONE");
                } catch (ExecutionException e) {
                    emit("op", op[0], "error", errorName(e));
                }
            }
            // a commit from a consumer that is no member of the live group
            Properties p = new Properties();
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group());
            try (KafkaConsumer<byte[], byte[]> outsider = consumer(p)) {
                outsider.assign(List.of(new TopicPartition(topic(0), 0)));
                try {
                    outsider.commitSync(Map.of(new TopicPartition(topic(0), 0), new org.apache.kafka.clients.consumer.OffsetAndMetadata(0)));
                    emit("op", "offset_commit_not_member", "error", "NONE");
                } catch (Exception e) {
                    emit("op", "offset_commit_not_member", "error", errorName(e));
                }
            }
        }
    }

    // ---- scenarios ----

    private void metadataTopic() throws Exception {
        try (Admin admin = admin()) {
            TopicDescription d = admin.describeTopics(List.of(topic(0))).allTopicNames().get(20, TimeUnit.SECONDS).get(topic(0));
            for (TopicPartitionInfo p : d.partitions()) {
                emit("partition", p.partition(), "leader", p.leader() == null ? -1 : p.leader().id(),
                        "replicas", nodeIds(p.replicas()), "isr", nodeIds(p.isr()));
            }
            emit("topic", d.name(), "partitions", d.partitions().size());
        }
    }

    private void produceConsume(String compression) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        try (KafkaProducer<byte[], byte[]> prod = producer(p)) {
            for (int i = 0; i < 20; i++) {
                prod.send(new ProducerRecord<>(topic(0), bytes("k" + i), bytes("v" + i)));
            }
            prod.flush();
        }
        for (ConsumerRecord<byte[], byte[]> r : consume(topic(0), 20, 15000)) {
            emit("partition", r.partition(), "offset", r.offset(), "key", show(r.key()), "value", show(r.value()));
        }
    }

    private void nullKeys() throws Exception {
        produceValues(topic(0), new Properties(), 5, "n");
        for (ConsumerRecord<byte[], byte[]> r : consume(topic(0), 5, 15000)) {
            emit("offset", r.offset(), "key", show(r.key()), "value", show(r.value()));
        }
    }

    private void headers() throws Exception {
        List<List<Header>> sets = List.of(
                List.of(new RecordHeader("h1", bytes("a"))),
                List.of(new RecordHeader("h2", (byte[]) null)),
                List.of(new RecordHeader("h1", bytes("x")), new RecordHeader("h1", bytes("y"))));
        try (KafkaProducer<byte[], byte[]> prod = producer(new Properties())) {
            for (int i = 0; i < sets.size(); i++) {
                prod.send(new ProducerRecord<byte[], byte[]>(topic(0), 0, (byte[]) null, bytes("hv" + i), sets.get(i)));
            }
            prod.flush();
        }
        for (ConsumerRecord<byte[], byte[]> r : consume(topic(0), 3, 15000)) {
            List<Object> hs = new ArrayList<>();
            for (Header h : r.headers()) {
                hs.add(Arrays.asList(h.key(), show(h.value())));
            }
            emit("offset", r.offset(), "value", show(r.value()), "headers", hs);
        }
    }

    private void timestamps() throws Exception {
        long[] ts = {TS0, TS0 + 500, TS0 + 1000};
        produceTimestamps(topic(0), ts);
        for (ConsumerRecord<byte[], byte[]> r : consume(topic(0), 3, 15000)) {
            emit("offset", r.offset(), "timestamp", r.timestamp(), "timestamp_type", r.timestampType().name);
        }
    }

    private void largeRecord() throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "2000000");
        try (KafkaProducer<byte[], byte[]> prod = producer(p)) {
            prod.send(new ProducerRecord<>(topic(0), 0, null, "x".repeat(1_000_000).getBytes(StandardCharsets.UTF_8))).get(20, TimeUnit.SECONDS);
        }
        for (ConsumerRecord<byte[], byte[]> r : consume(topic(0), 1, 15000)) {
            emit("offset", r.offset(), "value_len", r.value() == null ? -1 : r.value().length);
        }
    }

    private void tooLargeRecord() throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, "2000000");
        try (KafkaProducer<byte[], byte[]> prod = producer(p)) {
            prod.send(new ProducerRecord<>(topic(0), 0, null, "x".repeat(1_100_000).getBytes(StandardCharsets.UTF_8))).get(20, TimeUnit.SECONDS);
            emit("op", "produce", "error", "NONE");
        } catch (ExecutionException e) {
            emit("op", "produce", "error", errorName(e.getCause()));
        }
    }

    private void listOffsets() throws Exception {
        long[] ts = new long[5];
        for (int i = 0; i < 5; i++) ts[i] = TS0 + 1000L * i;
        produceTimestamps(topic(0), ts);
        TopicPartition tp = new TopicPartition(topic(0), 0);
        try (Admin admin = admin()) {
            emit("query", "earliest", "offset", listOffset(admin, tp, OffsetSpec.earliest()).offset());
            emit("query", "latest", "offset", listOffset(admin, tp, OffsetSpec.latest()).offset());
            emit("query", "timestamp:" + (TS0 + 2500), "offset", listOffset(admin, tp, OffsetSpec.forTimestamp(TS0 + 2500)).offset());
            emit("query", "timestamp:1800000000000", "offset", listOffset(admin, tp, OffsetSpec.forTimestamp(1800000000000L)).offset());
        }
    }

    private void listOffsetsMax() throws Exception {
        produceTimestamps(topic(0), new long[] {TS0 + 5000, TS0 + 9000, TS0 + 7000});
        try (Admin admin = admin()) {
            ListOffsetsResult.ListOffsetsResultInfo info = listOffset(admin, new TopicPartition(topic(0), 0), OffsetSpec.maxTimestamp());
            emit("query", "max", "offset", info.offset(), "timestamp", info.timestamp());
        }
    }

    private void unknownTopicMetadata() throws Exception {
        // Admin metadata requests never ask for auto-creation.
        try (Admin admin = admin()) {
            admin.describeTopics(List.of(missing())).allTopicNames().get(20, TimeUnit.SECONDS);
            emit("op", "metadata", "error", "NONE");
        } catch (ExecutionException e) {
            emit("op", "metadata", "error", errorName(e.getCause()));
        }
    }

    private void unknownTopicListOffsets() throws Exception {
        try (Admin admin = admin()) {
            listOffset(admin, new TopicPartition(missing(), 0), OffsetSpec.latest());
            emit("op", "list_offsets", "error", "NONE");
        } catch (ExecutionException e) {
            emit("op", "list_offsets", "error", errorName(e.getCause()));
        }
    }

    private void unknownPartition() throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "3000");
        try (KafkaProducer<byte[], byte[]> prod = producer(p)) {
            prod.send(new ProducerRecord<>(topic(0), 5, null, bytes("v"))).get(20, TimeUnit.SECONDS);
            emit("op", "produce", "error", "NONE");
        } catch (ExecutionException e) {
            emit("op", "produce", "error", unknownPartitionName(e.getCause()));
        } catch (Exception e) {
            emit("op", "produce", "error", unknownPartitionName(e));
        }
    }

    // The producer refuses a partition missing from metadata locally, by
    // timing out waiting for it; the scenario maps that refusal.
    private static String unknownPartitionName(Throwable e) {
        if (e instanceof TimeoutException && String.valueOf(e.getMessage()).contains("not present in metadata")) {
            return "UNKNOWN_TOPIC_OR_PARTITION";
        }
        return errorName(e);
    }

    private void idempotent() throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        produceValues(topic(0), p, 50, "v");
        for (ConsumerRecord<byte[], byte[]> r : consume(topic(0), 50, 15000)) {
            emit("offset", r.offset(), "value", show(r.value()));
        }
    }

    private void autoCreate() throws Exception {
        String t = prefix + "-auto-create-new";
        try (KafkaProducer<byte[], byte[]> prod = producer(new Properties())) {
            prod.send(new ProducerRecord<>(t, bytes("auto"))).get(20, TimeUnit.SECONDS);
        }
        try (Admin admin = admin()) {
            TopicDescription d = admin.describeTopics(List.of(t)).allTopicNames().get(20, TimeUnit.SECONDS).get(t);
            emit("topic_partitions", d.partitions().size());
        }
        for (ConsumerRecord<byte[], byte[]> r : consume(t, 1, 15000)) {
            emit("offset", r.offset(), "value", show(r.value()));
        }
    }

    private void offsetOutOfRange() throws Exception {
        produceValues(topic(0), new Properties(), 5, "v");
        Properties p = new Properties();
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        TopicPartition tp = new TopicPartition(topic(0), 0);
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            c.assign(List.of(tp));
            c.seek(tp, 100);
            long deadline = System.currentTimeMillis() + 15000;
            String err = "NONE";
            while (System.currentTimeMillis() < deadline) {
                try {
                    if (!c.poll(Duration.ofMillis(500)).isEmpty()) {
                        err = "RECORDS_RETURNED";
                        break;
                    }
                } catch (Exception e) {
                    err = errorName(e);
                    break;
                }
            }
            emit("op", "fetch", "error", err);
        }
    }

    private void emptyTopic() throws Exception {
        TopicPartition tp = new TopicPartition(topic(0), 0);
        int n = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer(new Properties())) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 2000;
            while (System.currentTimeMillis() < deadline) {
                n += c.poll(Duration.ofMillis(200)).count();
            }
            emit("records", n);
            emit("query", "latest", "offset", c.endOffsets(List.of(tp), Duration.ofSeconds(10)).get(tp));
        }
    }

    // ---- helpers ----

    private void createTopics(String spec) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (String t : spec.split(",")) {
            if (t.isEmpty()) continue;
            int colon = t.lastIndexOf(':');
            topics.add(new NewTopic(t.substring(0, colon), Integer.parseInt(t.substring(colon + 1)), (short) 1));
        }
        try (Admin admin = admin()) {
            admin.createTopics(topics).all().get(60, TimeUnit.SECONDS);
        }
    }

    private Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        return Admin.create(p);
    }

    private KafkaProducer<byte[], byte[]> producer(Properties extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
        p.putAll(extra);
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    private KafkaConsumer<byte[], byte[]> consumer(Properties extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "2000000");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
        p.putAll(extra);
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private void produceValues(String t, Properties extra, int n, String valuePrefix) throws Exception {
        try (KafkaProducer<byte[], byte[]> prod = producer(extra)) {
            for (int i = 0; i < n; i++) {
                prod.send(new ProducerRecord<>(t, 0, null, bytes(valuePrefix + i)));
            }
            prod.flush();
        }
    }

    private void produceTimestamps(String t, long[] ts) throws Exception {
        try (KafkaProducer<byte[], byte[]> prod = producer(new Properties())) {
            for (int i = 0; i < ts.length; i++) {
                prod.send(new ProducerRecord<>(t, 0, ts[i], null, bytes("t" + i))).get(20, TimeUnit.SECONDS);
            }
        }
    }

    // Reads from the start of every partition until want records arrived or
    // the time is up; records come back in arrival order.
    private List<ConsumerRecord<byte[], byte[]>> consume(String t, int want, long timeoutMs) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(new Properties())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(t, Duration.ofSeconds(10))) {
                tps.add(new TopicPartition(t, pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (out.size() < want && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                rs.forEach(out::add);
            }
        }
        return out;
    }

    private static ListOffsetsResult.ListOffsetsResultInfo listOffset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        return admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get(20, TimeUnit.SECONDS);
    }

    private static List<Object> nodeIds(List<Node> nodes) {
        List<Object> ids = new ArrayList<>();
        for (Node n : nodes) ids.add(n.id());
        Collections.sort(ids, (a, b) -> Integer.compare((Integer) a, (Integer) b));
        return ids;
    }

    // Kafka's own mapping from exception to protocol error name.
    private static String errorName(Throwable e) {
        while (e instanceof ExecutionException && e.getCause() != null) e = e.getCause();
        // the consumer reports OFFSET_OUT_OF_RANGE with its own exception class
        if (e instanceof org.apache.kafka.clients.consumer.OffsetOutOfRangeException) {
            return Errors.OFFSET_OUT_OF_RANGE.name();
        }
        Errors err = Errors.forException(e);
        if (err == Errors.UNKNOWN_SERVER_ERROR) {
            return "UNKNOWN_SERVER_ERROR:" + e.getClass().getSimpleName();
        }
        return err.name();
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    // UTF-8 text when valid, else "hex:<hex>", null as JSON null.
    private static Object show(byte[] b) {
        if (b == null) return null;
        try {
            CharBuffer cb = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(b));
            return cb.toString();
        } catch (CharacterCodingException e) {
            StringBuilder sb = new StringBuilder("hex:");
            for (byte x : b) sb.append(String.format("%02x", x));
            return sb.toString();
        }
    }

    // ---- output: one line per observation, keys sorted ----

    private void emit(Object... kv) {
        Map<String, Object> m = new TreeMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        StringBuilder sb = new StringBuilder(scenario).append('\t');
        json(sb, m);
        System.out.println(sb);
    }

    private static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : new TreeMap<>(m).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                json(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof List<?> l) {
            sb.append('[');
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) sb.append(',');
                json(sb, l.get(i));
            }
            sb.append(']');
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else {
            String s = v.toString();
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char ch = s.charAt(i);
                switch (ch) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    default -> {
                        if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
                        else sb.append(ch);
                    }
                }
            }
            sb.append('"');
        }
    }
}
