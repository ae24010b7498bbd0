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
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
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
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
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
    // PROTOCOL.md "Security": how to connect; all null for PLAINTEXT
    private String securityProtocol, saslMechanism, username, password, caFile;

    private ConformanceClient(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
    }

    // The client settings for the runner's security flags (none for
    // PLAINTEXT); every producer, consumer and admin gets them.
    private void secure(Properties p) {
        if (securityProtocol == null || securityProtocol.equals("PLAINTEXT")) return;
        p.put("security.protocol", securityProtocol);
        p.put("sasl.mechanism", saslMechanism);
        String module = saslMechanism.equals("PLAIN")
                ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
        p.put("sasl.jaas.config", module + " required username=\"" + username + "\" password=\"" + password + "\";");
        if (securityProtocol.equals("SASL_SSL")) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", caFile);
        }
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
        c.securityProtocol = opts.get("--security-protocol");
        c.saslMechanism = opts.get("--sasl-mechanism");
        c.username = opts.get("--username");
        c.password = opts.get("--password");
        c.caFile = opts.get("--ca-file");
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
            case "topics-create" -> topicsCreate();
            case "topics-create-validate-only" -> topicsCreateValidateOnly();
            case "topics-create-configs" -> topicsCreateConfigs();
            case "topics-list" -> topicsList();
            case "topics-alter-partitions" -> topicsAlterPartitions();
            case "topics-delete" -> topicsDelete();
            case "configs-topic-describe" -> configsTopicDescribe();
            case "configs-topic-alter" -> configsTopicAlter();
            case "delete-records" -> deleteRecords();
            case "log-dirs" -> logDirs();
            case "features-describe" -> featuresDescribe();
            case "features-update" -> featuresUpdate();
            case "configs-broker-describe", "configs-broker-alter" ->
                emit("skip", "broker configs are cluster-wide: java-tools alters them while other clients run");
            case "broker-api-versions", "console-produce-consume", "kafka-acls" ->
                emit("skip", "a kafka-*.sh tool scenario (java-tools)");
            case "sasl-scram-ok", "sasl-ssl-scram-ok", "sasl-ssl-plain-ok" -> saslOk();
            case "sasl-bad-password", "sasl-unknown-user" -> saslRefused();
            case "acl-denied", "acl-allowed" -> aclOps();
            case "txn-commit" -> txnCommit();
            case "txn-abort" -> txnAbort();
            case "txn-fencing" -> txnFencing();
            case "txn-timeout-abort" -> txnTimeoutAbort();
            case "txn-offsets" -> txnOffsets();
            case "transactions-tool" -> emit("skip", "a kafka-*.sh tool scenario (java-tools)");
            case "compaction" -> compaction();
            default -> emit("skip", "scenario unknown to the java client");
        }
    }

    // ---- security (PROTOCOL.md "Security"): logins and ACLs ----

    private void saslOk() throws Exception {
        try (KafkaProducer<byte[], byte[]> prod = producer(new Properties())) {
            RecordMetadata md = prod.send(new ProducerRecord<>(topic(0), 0, bytes("k"), bytes("v"))).get(20, TimeUnit.SECONDS);
            emit("op", "produce", "error", null, "offset", md.offset());
        } catch (ExecutionException e) {
            emit("op", "produce", "error", errorName(e));
            return;
        }
        for (ConsumerRecord<byte[], byte[]> r : consume(topic(0), 1, 15000)) {
            emit("op", "consume", "offset", r.offset(), "key", show(r.key()), "value", show(r.value()));
        }
    }

    private void saslRefused() {
        try (Admin admin = admin()) {
            admin.listTopics().names().get(20, TimeUnit.SECONDS);
            emit("op", "connect", "error", null);
        } catch (Exception e) {
            emit("op", "connect", "error", errorName(e));
        }
    }

    // one {op, error} observation: null (not "NONE") when the call succeeded
    private void secureOp(String name, AdminCall call) {
        try {
            call.run();
            emit("op", name, "error", null);
        } catch (Exception e) {
            System.err.println(scenario + ": " + name + ": " + e);
            emit("op", name, "error", errorName(e));
        }
    }

    // acl-denied and acl-allowed: the eight operations in PROTOCOL.md's order
    private void aclOps() throws Exception {
        TopicPartition tp = new TopicPartition(topic(0), 0);
        Properties quick = new Properties();
        quick.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "8000");
        quick.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "8000");
        quick.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        secureOp("produce", () -> {
            try (KafkaProducer<byte[], byte[]> prod = producer(quick)) {
                prod.send(new ProducerRecord<>(topic(0), 0, bytes("k"), bytes("v"))).get(10, TimeUnit.SECONDS);
            }
        });
        secureOp("fetch", () -> {
            try (KafkaConsumer<byte[], byte[]> c = consumer(new Properties())) {
                c.assign(List.of(tp));
                c.seek(tp, 0);
                long end = System.currentTimeMillis() + 8000;
                while (c.poll(Duration.ofMillis(200)).isEmpty()) {
                    if (System.currentTimeMillis() > end) throw new TimeoutException("no record in 8 s");
                }
            }
        });
        try (Admin admin = admin()) {
            secureOp("metadata", () -> admin.describeTopics(List.of(topic(0))).allTopicNames().get(10, TimeUnit.SECONDS));
            secureOp("group-join", () -> {
                try (KafkaConsumer<byte[], byte[]> c = groupMember()) {
                    long end = System.currentTimeMillis() + 8000;
                    while (c.assignment().isEmpty()) {
                        if (System.currentTimeMillis() > end) throw new TimeoutException("no assignment in 8 s");
                        c.poll(Duration.ofMillis(200));
                    }
                }
            });
            secureOp("offset-commit", () -> {
                Properties p = new Properties();
                p.put(ConsumerConfig.GROUP_ID_CONFIG, group());
                try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
                    c.assign(List.of(tp));
                    c.commitSync(Map.of(tp, new org.apache.kafka.clients.consumer.OffsetAndMetadata(0)), Duration.ofSeconds(10));
                }
            });
            secureOp("describe-configs", () -> admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, topic(0))))
                    .all().get(10, TimeUnit.SECONDS));
            secureOp("create-topic", () -> admin.createTopics(List.of(new NewTopic(prefix + "-" + scenario + "-new", 1, (short) 1)))
                    .all().get(10, TimeUnit.SECONDS));
            secureOp("delete-topic", () -> admin.deleteTopics(List.of(topic(0))).all().get(10, TimeUnit.SECONDS));
        }
    }

    // ---- transactions (issue #14) ----

    private String txnID() {
        return prefix + "-" + scenario + "-tx";
    }

    private KafkaProducer<byte[], byte[]> txnProducer(Properties extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID());
        p.putAll(extra);
        return producer(p);
    }

    // Runs one transactional step and prints {op, error} plus the extra
    // key/values; returns whether it succeeded.
    private boolean txnStep(AdminCall call, Object... kv) {
        String err = null;
        try {
            call.run();
        } catch (Exception e) {
            err = errorName(e);
        }
        Object[] all = Arrays.copyOf(kv, kv.length + 2);
        all[kv.length] = "error";
        all[kv.length + 1] = err;
        emit(all);
        return err == null;
    }

    // Reads every partition of t from the start with the isolation level
    // until want records arrived or the time is up, sorted by partition and
    // offset.
    private List<ConsumerRecord<byte[], byte[]>> consumeIsolated(String t, String isolation, int want, long timeoutMs) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        Properties p = new Properties();
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        try (KafkaConsumer<byte[], byte[]> c = consumer(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(t, Duration.ofSeconds(10))) {
                tps.add(new TopicPartition(t, pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (out.size() < want && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(200)).forEach(out::add);
            }
        }
        out.sort((a, b) -> a.partition() != b.partition() ? Integer.compare(a.partition(), b.partition()) : Long.compare(a.offset(), b.offset()));
        return out;
    }

    private long latest(Admin admin, TopicPartition tp, org.apache.kafka.common.IsolationLevel iso) throws Exception {
        return admin.listOffsets(Map.of(tp, OffsetSpec.latest()), new org.apache.kafka.clients.admin.ListOffsetsOptions(iso))
                .partitionResult(tp).get(20, TimeUnit.SECONDS).offset();
    }

    private void txnCommit() throws Exception {
        try (KafkaProducer<byte[], byte[]> prod = txnProducer(new Properties())) {
            if (!txnStep(prod::initTransactions, "op", "init")) return;
            boolean ok = txnStep(() -> {
                prod.beginTransaction();
                prod.send(new ProducerRecord<>(topic(0), 0, bytes("k0"), bytes("v0")));
                prod.send(new ProducerRecord<>(topic(0), 1, bytes("k1"), bytes("v1")));
                prod.send(new ProducerRecord<>(topic(0), 0, bytes("k2"), bytes("v2")));
                prod.commitTransaction();
            }, "op", "commit", "transaction", 1);
            if (!ok) return;
            txnStep(() -> {
                prod.beginTransaction();
                prod.send(new ProducerRecord<>(topic(0), 1, bytes("k3"), bytes("v3")));
                prod.commitTransaction();
            }, "op", "commit", "transaction", 2);
        }
        for (ConsumerRecord<byte[], byte[]> r : consumeIsolated(topic(0), "read_committed", 4, 15000)) {
            emit("partition", r.partition(), "offset", r.offset(), "key", show(r.key()), "value", show(r.value()));
        }
        try (Admin admin = admin()) {
            for (int p = 0; p < 2; p++) {
                emit("partition", p, "query", "latest", "offset", latest(admin, new TopicPartition(topic(0), p), org.apache.kafka.common.IsolationLevel.READ_UNCOMMITTED));
            }
        }
    }

    private void txnAbort() throws Exception {
        try (KafkaProducer<byte[], byte[]> prod = txnProducer(new Properties())) {
            if (!txnStep(prod::initTransactions, "op", "init")) return;
            txnStep(() -> {
                prod.beginTransaction();
                prod.send(new ProducerRecord<>(topic(0), 0, null, bytes("a0")));
                prod.send(new ProducerRecord<>(topic(0), 0, null, bytes("a1"))).get(20, TimeUnit.SECONDS);
                prod.abortTransaction();
            }, "op", "abort");
            txnStep(() -> {
                prod.beginTransaction();
                prod.send(new ProducerRecord<>(topic(0), 0, null, bytes("c0")));
                prod.commitTransaction();
            }, "op", "commit");
        }
        printIsolated(topic(0), "read_committed", 1);
        printIsolated(topic(0), "read_uncommitted", 3);
        try (Admin admin = admin()) {
            TopicPartition tp = new TopicPartition(topic(0), 0);
            emit("query", "latest", "isolation", "read_committed", "offset", latest(admin, tp, org.apache.kafka.common.IsolationLevel.READ_COMMITTED));
            emit("query", "latest", "isolation", "read_uncommitted", "offset", latest(admin, tp, org.apache.kafka.common.IsolationLevel.READ_UNCOMMITTED));
        }
    }

    // Prints {isolation, offset, value} per record read with isolation;
    // reads for 3 s past the last expected record, so that a record that
    // should not be seen has the time to show.
    private void printIsolated(String t, String isolation, int want) {
        for (ConsumerRecord<byte[], byte[]> r : consumeIsolated(t, isolation, want + 1, want == 0 ? 4000 : 3000 + 500L * want)) {
            emit("isolation", isolation, "offset", r.offset(), "value", show(r.value()));
        }
    }

    private void txnFencing() throws Exception {
        KafkaProducer<byte[], byte[]> first = txnProducer(new Properties());
        try {
            if (!txnStep(first::initTransactions, "producer", "first", "op", "init")) return;
            if (!txnStep(() -> {
                first.beginTransaction();
                first.send(new ProducerRecord<>(topic(0), 0, null, bytes("f0"))).get(20, TimeUnit.SECONDS);
            }, "producer", "first", "op", "send")) return;
            try (KafkaProducer<byte[], byte[]> second = txnProducer(new Properties())) {
                if (!txnStep(second::initTransactions, "producer", "second", "op", "init")) return;
                txnStep(() -> first.send(new ProducerRecord<>(topic(0), 0, null, bytes("f1"))).get(20, TimeUnit.SECONDS),
                        "producer", "first", "op", "send");
                txnStep(first::commitTransaction, "producer", "first", "op", "commit");
                txnStep(() -> {
                    second.beginTransaction();
                    second.send(new ProducerRecord<>(topic(0), 0, null, bytes("s0")));
                    second.commitTransaction();
                }, "producer", "second", "op", "commit");
            }
        } finally {
            first.close(Duration.ZERO);
        }
        for (ConsumerRecord<byte[], byte[]> r : consumeIsolated(topic(0), "read_committed", 2, 4000)) {
            emit("offset", r.offset(), "value", show(r.value()));
        }
        describeProducers(new TopicPartition(topic(0), 0));
    }

    // Prints {producer_epoch, last_sequence, current_txn_start_offset} per
    // active producer of tp (DescribeProducers): the epochs show how often
    // the coordinator bumped them.
    private void describeProducers(TopicPartition tp) throws Exception {
        try (Admin admin = admin()) {
            for (org.apache.kafka.clients.admin.ProducerState ps : admin.describeProducers(List.of(tp)).partitionResult(tp).get(20, TimeUnit.SECONDS).activeProducers()) {
                emit("producer_epoch", ps.producerEpoch(), "last_sequence", ps.lastSequence(),
                        "current_txn_start_offset", ps.currentTransactionStartOffset().isPresent() ? ps.currentTransactionStartOffset().getAsLong() : -1);
            }
        }
    }

    private void txnTimeoutAbort() throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "2000");
        try (KafkaProducer<byte[], byte[]> prod = txnProducer(p)) {
            if (!txnStep(prod::initTransactions, "op", "init")) return;
            if (!txnStep(() -> {
                prod.beginTransaction();
                prod.send(new ProducerRecord<>(topic(0), 0, null, bytes("t0"))).get(20, TimeUnit.SECONDS);
            }, "op", "send")) return;
            Thread.sleep(5000);
            txnStep(prod::commitTransaction, "op", "commit");
        }
        printIsolated(topic(0), "read_committed", 0);
        printIsolated(topic(0), "read_uncommitted", 1);
        TopicPartition tp = new TopicPartition(topic(0), 0);
        try (Admin admin = admin()) {
            emit("query", "latest", "offset", latest(admin, tp, org.apache.kafka.common.IsolationLevel.READ_UNCOMMITTED));
        }
        describeProducers(tp);
    }

    private void txnOffsets() throws Exception {
        String group = group();
        TopicPartition in = new TopicPartition(topic(0), 0);
        produceValues(topic(0), new Properties(), 3, "i");
        try (KafkaProducer<byte[], byte[]> prod = txnProducer(new Properties()); Admin admin = admin()) {
            if (!txnStep(prod::initTransactions, "op", "init")) return;
            if (!txnStep(() -> {
                prod.beginTransaction();
                for (int i = 0; i < 3; i++) prod.send(new ProducerRecord<>(topic(1), 0, null, bytes("I" + i)));
                prod.sendOffsetsToTransaction(Map.of(in, new org.apache.kafka.clients.consumer.OffsetAndMetadata(3)),
                        new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
                prod.flush();
            }, "op", "send_offsets")) return;
            committedOffset(admin, group, in, "before_commit", false);
            committedOffset(admin, group, in, "before_commit", true);
            if (!txnStep(prod::commitTransaction, "op", "commit")) return;
            // The commit's markers reach the group after EndTxn's answer,
            // on Kafka too, and Admin leaves out a partition answered
            // UNSTABLE_OFFSET_COMMIT rather than retrying it: ask again
            // while the offset is not visible yet, as the other clients do.
            committedOffset(admin, group, in, "after_commit", true, true);
            committedOffset(admin, group, in, "after_commit", false, true);
        }
        for (ConsumerRecord<byte[], byte[]> r : consumeIsolated(topic(1), "read_committed", 3, 15000)) {
            emit("offset", r.offset(), "value", show(r.value()));
        }
    }

    // Prints the group's committed offset of tp as OffsetFetch shows it:
    // {when, require_stable, offset} (null: none), or {..., error} when the
    // call fails (Admin retries UNSTABLE_OFFSET_COMMIT until its timeout).
    private void committedOffset(Admin admin, String group, TopicPartition tp, String when, boolean requireStable) {
        committedOffset(admin, group, tp, when, requireStable, false);
    }

    // settle: ask again, for up to 10 s, while there is no offset.
    private void committedOffset(Admin admin, String group, TopicPartition tp, String when, boolean requireStable, boolean settle) {
        long end = System.currentTimeMillis() + 10000;
        try {
            var spec = Map.of(group, new org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec().topicPartitions(List.of(tp)));
            var opts = new org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions().requireStable(requireStable).timeoutMs(3000);
            while (true) {
                var got = admin.listConsumerGroupOffsets(spec, opts).partitionsToOffsetAndMetadata(group).get(10, TimeUnit.SECONDS).get(tp);
                if (got != null || !settle || System.currentTimeMillis() > end) {
                    emit("when", when, "require_stable", requireStable, "offset", got == null ? null : got.offset());
                    return;
                }
                Thread.sleep(100);
            }
        } catch (Exception e) {
            emit("when", when, "require_stable", requireStable, "error", errorName(e));
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


    // ---- admin: topics, configs, records, log dirs, features (issue #6) ----

    // Runs an admin call and prints {op, error} (error NONE on success);
    // returns whether it succeeded.
    private boolean op(String op, AdminCall call) {
        try {
            call.run();
            emit("op", op, "error", "NONE");
            return true;
        } catch (Exception e) {
            emit("op", op, "error", errorName(e));
            return false;
        }
    }

    private interface AdminCall {
        void run() throws Exception;
    }

    private static final long ADMIN_WAIT = 20;

    private void describeLayout(Admin admin, String t) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(t)).allTopicNames().get(ADMIN_WAIT, TimeUnit.SECONDS).get(t);
        emit("topic", d.name(), "partitions", d.partitions().size(), "internal", d.isInternal());
        for (TopicPartitionInfo p : d.partitions()) {
            emit("partition", p.partition(), "leader", p.leader() == null ? -1 : p.leader().id(),
                    "replicas", nodeIds(p.replicas()), "isr", nodeIds(p.isr()));
        }
    }

    private void topicsCreate() throws Exception {
        String t = prefix + "-topics-create-new";
        try (Admin admin = admin()) {
            CreateTopicsResult r = admin.createTopics(List.of(new NewTopic(t, 3, (short) 1)));
            if (op("create", () -> r.all().get(ADMIN_WAIT, TimeUnit.SECONDS))) {
                emit("op", "create", "num_partitions", r.numPartitions(t).get(), "replication_factor", r.replicationFactor(t).get());
            }
            awaitTopic(admin, t, 3);
            describeLayout(admin, t);
            op("create_existing", () -> admin.createTopics(List.of(new NewTopic(t, 3, (short) 1))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            String d = prefix + "-topics-create-default";
            CreateTopicsResult rd = admin.createTopics(List.of(new NewTopic(d, Optional.empty(), Optional.empty())));
            if (op("create_defaults", () -> rd.all().get(ADMIN_WAIT, TimeUnit.SECONDS))) {
                emit("op", "create_defaults", "num_partitions", rd.numPartitions(d).get(), "replication_factor", rd.replicationFactor(d).get());
            }
            awaitTopic(admin, d, 1);
            describeLayout(admin, d);
            op("create_invalid_name", () -> admin.createTopics(List.of(new NewTopic(prefix + "-topics-create-bad!", 1, (short) 1))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("create_zero_partitions", () -> admin.createTopics(List.of(new NewTopic(prefix + "-topics-create-zero", 0, (short) 1))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("create_replication_factor_3", () -> admin.createTopics(List.of(new NewTopic(prefix + "-topics-create-rf3", 1, (short) 3))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
        }
    }

    private void topicsCreateValidateOnly() throws Exception {
        String t = prefix + "-topics-create-validate-only-new";
        CreateTopicsOptions validate = new CreateTopicsOptions().validateOnly(true);
        try (Admin admin = admin()) {
            CreateTopicsResult r = admin.createTopics(List.of(new NewTopic(t, 3, (short) 1)), validate);
            if (op("validate_new", () -> r.all().get(ADMIN_WAIT, TimeUnit.SECONDS))) {
                emit("op", "validate_new", "num_partitions", r.numPartitions(t).get(), "replication_factor", r.replicationFactor(t).get());
            }
            op("describe_validated", () -> admin.describeTopics(List.of(t)).allTopicNames().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("validate_existing", () -> admin.createTopics(List.of(new NewTopic(topic(0), 1, (short) 1)), validate).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("validate_unknown_config", () -> admin.createTopics(List.of(new NewTopic(t, 1, (short) 1).configs(Map.of("no.such.config", "1"))), validate).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("validate_invalid_value", () -> admin.createTopics(List.of(new NewTopic(t, 1, (short) 1).configs(Map.of("retention.ms", "abc"))), validate).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("validate_zero_partitions", () -> admin.createTopics(List.of(new NewTopic(t, 0, (short) 1)), validate).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
        }
    }

    // the entries set on the resource itself or inherited from a dynamic or
    // static broker config: {name, value, source}, sorted by name
    private void nonDefaultConfigs(String op, Config c) {
        List<ConfigEntry> es = new ArrayList<>(c.entries());
        es.sort((a, b) -> a.name().compareTo(b.name()));
        for (ConfigEntry e : es) {
            if (e.source() != ConfigEntry.ConfigSource.DEFAULT_CONFIG) {
                emit("op", op, "name", e.name(), "value", e.value(), "source", e.source().name());
            }
        }
    }

    private Config topicConfig(Admin admin, String t) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, t);
        return admin.describeConfigs(List.of(res)).all().get(ADMIN_WAIT, TimeUnit.SECONDS).get(res);
    }

    private void topicsCreateConfigs() throws Exception {
        String t = prefix + "-topics-create-configs-new";
        Map<String, String> cfg = Map.of("retention.ms", "86400000", "cleanup.policy", "compact", "max.message.bytes", "2000000");
        try (Admin admin = admin()) {
            CreateTopicsResult r = admin.createTopics(List.of(new NewTopic(t, 2, (short) 1).configs(cfg)));
            if (op("create", () -> r.all().get(ADMIN_WAIT, TimeUnit.SECONDS))) {
                nonDefaultConfigs("create_result", r.config(t).get());
            }
            awaitTopic(admin, t, 2);
            nonDefaultConfigs("describe_configs", topicConfig(admin, t));
            String bad = prefix + "-topics-create-configs-bad";
            op("create_unknown_config", () -> admin.createTopics(List.of(new NewTopic(bad, 1, (short) 1).configs(Map.of("no.such.config", "1")))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("create_invalid_value", () -> admin.createTopics(List.of(new NewTopic(bad, 1, (short) 1).configs(Map.of("retention.ms", "abc")))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("create_invalid_policy", () -> admin.createTopics(List.of(new NewTopic(bad, 1, (short) 1).configs(Map.of("cleanup.policy", "bogus")))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
        }
    }

    private void topicsList() throws Exception {
        try (Admin admin = admin()) {
            awaitTopic(admin, topic(1), 1);
            List<String> names = new ArrayList<>();
            for (String n : admin.listTopics().names().get(ADMIN_WAIT, TimeUnit.SECONDS)) {
                if (n.startsWith(prefix + "-topics-list-")) names.add(n);
            }
            Collections.sort(names);
            for (String n : names) emit("topic", n);
        }
    }

    private void topicsAlterPartitions() throws Exception {
        try (Admin admin = admin()) {
            op("increase_to_3", () -> admin.createPartitions(Map.of(topic(0), NewPartitions.increaseTo(3))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            awaitTopic(admin, topic(0), 3);
            describeLayout(admin, topic(0));
            op("increase_to_2", () -> admin.createPartitions(Map.of(topic(0), NewPartitions.increaseTo(2))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("increase_to_3_again", () -> admin.createPartitions(Map.of(topic(0), NewPartitions.increaseTo(3))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("increase_missing", () -> admin.createPartitions(Map.of(missing(), NewPartitions.increaseTo(2))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
        }
        try (KafkaProducer<byte[], byte[]> prod = producer(new Properties())) {
            RecordMetadata md = prod.send(new ProducerRecord<>(topic(0), 2, TS0, null, bytes("p2"))).get(20, TimeUnit.SECONDS);
            emit("op", "produce_to_new_partition", "partition", md.partition(), "offset", md.offset());
        }
    }

    private void topicsDelete() throws Exception {
        try (Admin admin = admin()) {
            op("delete", () -> admin.deleteTopics(List.of(topic(0))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            awaitGone(admin, topic(0));
            op("describe_deleted", () -> admin.describeTopics(List.of(topic(0))).allTopicNames().get(ADMIN_WAIT, TimeUnit.SECONDS));
            op("delete_missing", () -> admin.deleteTopics(List.of(missing())).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            Uuid id = admin.describeTopics(List.of(topic(1))).allTopicNames().get(ADMIN_WAIT, TimeUnit.SECONDS).get(topic(1)).topicId();
            op("delete_by_id", () -> admin.deleteTopics(TopicCollection.ofTopicIds(List.of(id))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            awaitGone(admin, topic(1));
            op("delete_unknown_id", () -> admin.deleteTopics(TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
            List<String> left = new ArrayList<>();
            for (String n : admin.listTopics().names().get(ADMIN_WAIT, TimeUnit.SECONDS)) {
                if (n.startsWith(prefix + "-topics-delete-")) left.add(n);
            }
            emit("op", "list_after_delete", "topics", new ArrayList<Object>(left));
        }
    }

    // every config of the topic with its synonyms, in name order
    private void configsTopicDescribe() throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic(0));
        try (Admin admin = admin()) {
            Config c = admin.describeConfigs(List.of(res), new DescribeConfigsOptions().includeSynonyms(true))
                    .all().get(ADMIN_WAIT, TimeUnit.SECONDS).get(res);
            List<ConfigEntry> es = new ArrayList<>(c.entries());
            es.sort((a, b) -> a.name().compareTo(b.name()));
            for (ConfigEntry e : es) {
                List<Object> syn = new ArrayList<>();
                for (ConfigEntry.ConfigSynonym s : e.synonyms()) syn.add(Arrays.asList(s.source().name(), s.name(), s.value()));
                emit("name", e.name(), "value", e.value(), "source", e.source().name(), "sensitive", e.isSensitive(),
                        "read_only", e.isReadOnly(), "synonyms", syn);
            }
            ConfigResource gone = new ConfigResource(ConfigResource.Type.TOPIC, missing());
            op("describe_missing", () -> admin.describeConfigs(List.of(gone)).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
        }
    }

    private void configsTopicAlter() throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic(0));
        try (Admin admin = admin()) {
            alter(admin, "set", res, false, set("retention.ms", "86400000"), set("max.message.bytes", "2000000"));
            awaitTopicConfig(admin, "retention.ms", "86400000");
            nonDefaultConfigs("describe_after_set", topicConfig(admin, topic(0)));
            alter(admin, "delete", res, false, new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE));
            awaitTopicConfig(admin, "retention.ms", null);
            nonDefaultConfigs("describe_after_delete", topicConfig(admin, topic(0)));
            alter(admin, "append", res, false, new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
            awaitTopicConfig(admin, "cleanup.policy", "delete,compact");
            nonDefaultConfigs("describe_after_append", topicConfig(admin, topic(0)));
            alter(admin, "subtract", res, false, new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT));
            awaitTopicConfig(admin, "cleanup.policy", "compact");
            nonDefaultConfigs("describe_after_subtract", topicConfig(admin, topic(0)));
            alter(admin, "validate_only", res, true, set("segment.ms", "3600000"));
            alter(admin, "unknown_config", res, false, set("no.such.config", "1"));
            alter(admin, "invalid_value", res, false, set("retention.ms", "abc"));
            alter(admin, "missing_topic", new ConfigResource(ConfigResource.Type.TOPIC, missing()), false, set("retention.ms", "1000"));
            nonDefaultConfigs("describe_after_errors", topicConfig(admin, topic(0)));
        }
    }

    private static AlterConfigOp set(String name, String value) {
        return new AlterConfigOp(new ConfigEntry(name, value), AlterConfigOp.OpType.SET);
    }

    private void alter(Admin admin, String op, ConfigResource res, boolean validateOnly, AlterConfigOp... ops) {
        op(op, () -> admin.incrementalAlterConfigs(Map.of(res, List.of(ops)), new AlterConfigsOptions().validateOnly(validateOnly))
                .all().get(ADMIN_WAIT, TimeUnit.SECONDS));
    }

    private void deleteRecords() throws Exception {
        long[] ts = new long[5];
        for (int i = 0; i < 5; i++) ts[i] = TS0 + 1000L * i;
        produceTimestamps(topic(0), ts);
        try (KafkaProducer<byte[], byte[]> prod = producer(new Properties())) {
            for (int i = 0; i < 2; i++) prod.send(new ProducerRecord<>(topic(0), 1, TS0 + i, null, bytes("p1-" + i))).get(20, TimeUnit.SECONDS);
        }
        TopicPartition p0 = new TopicPartition(topic(0), 0), p1 = new TopicPartition(topic(0), 1);
        try (Admin admin = admin()) {
            var r = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(3), p1, RecordsToDelete.beforeOffset(-1)));
            for (TopicPartition tp : List.of(p0, p1)) {
                try {
                    emit("op", "delete", "partition", tp.partition(), "low_watermark", r.lowWatermarks().get(tp).get(ADMIN_WAIT, TimeUnit.SECONDS).lowWatermark());
                } catch (ExecutionException e) {
                    emit("op", "delete", "partition", tp.partition(), "error", errorName(e));
                }
            }
            for (TopicPartition tp : List.of(p0, p1)) {
                emit("query", "earliest", "partition", tp.partition(), "offset", listOffset(admin, tp, OffsetSpec.earliest()).offset());
                emit("query", "latest", "partition", tp.partition(), "offset", listOffset(admin, tp, OffsetSpec.latest()).offset());
            }
            for (long before : new long[] {1, 10}) {
                try {
                    long low = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(before))).lowWatermarks().get(p0).get(ADMIN_WAIT, TimeUnit.SECONDS).lowWatermark();
                    emit("op", "delete_before_" + before, "low_watermark", low);
                } catch (ExecutionException e) {
                    emit("op", "delete_before_" + before, "error", errorName(e));
                }
            }
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer(new Properties())) {
            c.assign(List.of(p0));
            c.seekToBeginning(List.of(p0));
            emit("op", "position_from_beginning", "offset", c.position(p0, Duration.ofSeconds(15)));
        }
    }

    // ---- compaction (issue #15) ----
    // The same keyed records go to a cleanup.policy=compact topic on both
    // brokers, their log cleaners (which the runner has look for work every
    // 500 ms) clean it, and what survives is read from offset 0. Segments
    // roll by segment.ms, which both brokers measure from the segment's
    // first batch, so sends 300 ms apart each start a segment and the
    // surviving records do not depend on timing.

    private static final long COMPACTION_STEP_MS = 300;

    private void compaction() throws Exception {
        String t = topic(0) + "-c";
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(t, 1, (short) 1).configs(Map.of(
                    "cleanup.policy", "compact",
                    "segment.ms", "100",
                    "min.cleanable.dirty.ratio", "0.01",
                    "delete.retention.ms", "0",
                    "min.compaction.lag.ms", "0")))).all().get(ADMIN_WAIT, TimeUnit.SECONDS);
            awaitTopic(admin, t, 1);
        }
        TopicPartition tp = new TopicPartition(t, 0);
        int produced = 0;
        try (KafkaProducer<byte[], byte[]> prod = producer(new Properties());
             KafkaConsumer<byte[], byte[]> c = consumer(new Properties())) {
            String[][][] steps = {
                {{"k0", "a0"}, {"k1", "b0"}, {"k2", "c0"}},
                {{"k0", "a1"}, {"k1", "b1"}},
                {{"k0", "a2"}, {"k2", "c1"}},
                {{"k1", null}},
            };
            for (String[][] step : steps) {
                sendStep(prod, t, step);
                produced += step.length;
            }
            // A keyless record on a compacted topic: refused (INVALID_RECORD).
            // Its own producer, so that the failed batch leaves the others alone.
            try (KafkaProducer<byte[], byte[]> nk = producer(new Properties())) {
                nk.send(new ProducerRecord<>(t, 0, null, bytes("no key"))).get(20, TimeUnit.SECONDS);
                emit("op", "produce_null_key", "error", null);
            } catch (ExecutionException e) {
                emit("op", "produce_null_key", "error", errorName(e));
            }
            sendStep(prod, t, new String[][] {{"k2", "c2"}});
            produced++;

            c.assign(List.of(tp));
            List<List<Object>> phase1 = awaitCleaned(c, tp, produced);
            emitCompacted(c, tp, 1, phase1);

            // The second clean removes the tombstone: the first one gave it a
            // delete horizon of that clean's time plus delete.retention.ms (0).
            sendStep(prod, t, new String[][] {{"k0", "a3"}});
            sendStep(prod, t, new String[][] {{"k2", "c3"}});
            emitCompacted(c, tp, 2, awaitCleaned(c, tp, phase1.size() + 2));
        }
    }

    private static void sendStep(KafkaProducer<byte[], byte[]> prod, String t, String[][] recs) throws Exception {
        Thread.sleep(COMPACTION_STEP_MS);
        for (String[] kv : recs) {
            prod.send(new ProducerRecord<>(t, 0, bytes(kv[0]), kv[1] == null ? null : bytes(kv[1])));
        }
        prod.flush();
    }

    // Reads the log from offset 0 until a clean shows (fewer than before
    // records) and nothing changed for 2 s (four rounds of the cleaner),
    // or 12 s passed; returns the last read as [offset, key, value] lists.
    private static List<List<Object>> awaitCleaned(KafkaConsumer<byte[], byte[]> c, TopicPartition tp, int before) throws Exception {
        long deadline = System.currentTimeMillis() + 12000;
        List<List<Object>> last = null;
        long since = 0;
        while (true) {
            List<List<Object>> recs = readCompacted(c, tp);
            long now = System.currentTimeMillis();
            if (last == null || !recs.equals(last)) {
                last = recs;
                since = now;
            } else if (recs.size() < before && now - since >= 2000) {
                return recs;
            }
            if (now > deadline) return last;
            Thread.sleep(250);
        }
    }

    // every record from offset 0 to the high watermark
    private static List<List<Object>> readCompacted(KafkaConsumer<byte[], byte[]> c, TopicPartition tp) {
        long end = c.endOffsets(List.of(tp), Duration.ofSeconds(10)).get(tp);
        c.seek(tp, 0);
        List<List<Object>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 10000;
        while (c.position(tp, Duration.ofSeconds(10)) < end) {
            if (System.currentTimeMillis() > deadline) throw new TimeoutException("reading " + tp + " up to offset " + end);
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                out.add(Arrays.asList(r.offset(), show(r.key()), show(r.value())));
            }
        }
        return out;
    }

    private void emitCompacted(KafkaConsumer<byte[], byte[]> c, TopicPartition tp, int phase, List<List<Object>> recs) {
        for (List<Object> r : recs) emit("phase", phase, "offset", r.get(0), "key", r.get(1), "value", r.get(2));
        emit("phase", phase, "query", "earliest", "offset", c.beginningOffsets(List.of(tp), Duration.ofSeconds(10)).get(tp));
        emit("phase", phase, "query", "latest", "offset", c.endOffsets(List.of(tp), Duration.ofSeconds(10)).get(tp));
    }

    // sizes are exact: three records with fixed timestamps, one batch each
    private void logDirs() throws Exception {
        produceTimestamps(topic(0), new long[] {TS0, TS0 + 1000, TS0 + 2000});
        try (Admin admin = admin()) {
            Map<Integer, Map<String, LogDirDescription>> all = admin.describeLogDirs(List.of(1)).allDescriptions().get(ADMIN_WAIT, TimeUnit.SECONDS);
            for (var broker : new TreeMap<>(all).entrySet()) {
                emit("broker", broker.getKey(), "log_dirs", broker.getValue().size());
                for (LogDirDescription d : broker.getValue().values()) {
                    emit("log_dir_error", d.error() == null ? "NONE" : errorName(d.error()),
                            "total_bytes_known", d.totalBytes().isPresent(), "usable_bytes_known", d.usableBytes().isPresent());
                    Map<TopicPartition, ReplicaInfo> ours = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
                    d.replicaInfos().forEach((tp, info) -> {
                        if (tp.topic().equals(topic(0))) ours.put(tp, info);
                    });
                    ours.forEach((tp, info) -> emit("partition", tp.partition(), "size", info.size(), "offset_lag", info.offsetLag(),
                            "is_future", info.isFuture()));
                }
            }
        }
    }

    private void featuresDescribe() throws Exception {
        try (Admin admin = admin()) {
            FeatureMetadata f = admin.describeFeatures().featureMetadata().get(ADMIN_WAIT, TimeUnit.SECONDS);
            for (var e : new TreeMap<>(f.supportedFeatures()).entrySet()) {
                SupportedVersionRange r = e.getValue();
                emit("supported", e.getKey(), "min", r.minVersion(), "max", r.maxVersion());
            }
            for (var e : new TreeMap<>(f.finalizedFeatures()).entrySet()) {
                FinalizedVersionRange r = e.getValue();
                emit("finalized", e.getKey(), "min", r.minVersionLevel(), "max", r.maxVersionLevel());
            }
            emit("finalized_epoch_known", f.finalizedFeaturesEpoch().isPresent());
        }
    }

    private void featuresUpdate() throws Exception {
        try (Admin admin = admin()) {
            updateFeature(admin, "upgrade_validate", "group.version", 1, FeatureUpdate.UpgradeType.UPGRADE, true);
            updateFeature(admin, "safe_downgrade_validate", "group.version", 0, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE, true);
            updateFeature(admin, "upgrade_to_current", "group.version", 1, FeatureUpdate.UpgradeType.UPGRADE, false);
            updateFeature(admin, "upgrade_unsupported", "group.version", 9, FeatureUpdate.UpgradeType.UPGRADE, true);
            updateFeature(admin, "upgrade_unknown", "no.such.feature", 1, FeatureUpdate.UpgradeType.UPGRADE, true);
            updateFeature(admin, "downgrade_without_type", "transaction.version", 1, FeatureUpdate.UpgradeType.UPGRADE, true);
            FinalizedVersionRange r = admin.describeFeatures().featureMetadata().get(ADMIN_WAIT, TimeUnit.SECONDS).finalizedFeatures().get("group.version");
            emit("finalized", "group.version", "min", r == null ? -1 : r.minVersionLevel(), "max", r == null ? -1 : r.maxVersionLevel());
        }
    }

    private void updateFeature(Admin admin, String op, String feature, int level, FeatureUpdate.UpgradeType type, boolean validateOnly) {
        op(op, () -> admin.updateFeatures(Map.of(feature, new FeatureUpdate((short) level, type)),
                new UpdateFeaturesOptions().validateOnly(validateOnly)).all().get(ADMIN_WAIT, TimeUnit.SECONDS));
    }

    // waits, not observed: metadata and configs reach the broker's caches a
    // moment after the admin call that changed them returned
    private static void awaitTopic(Admin admin, String t, int partitions) throws Exception {
        long end = System.currentTimeMillis() + 15000;
        while (true) {
            try {
                TopicDescription d = admin.describeTopics(List.of(t)).allTopicNames().get(10, TimeUnit.SECONDS).get(t);
                if (d.partitions().size() == partitions) return;
            } catch (ExecutionException e) {
                // not there yet
            }
            if (System.currentTimeMillis() > end) throw new TimeoutException("topic " + t + " with " + partitions + " partitions");
            Thread.sleep(200);
        }
    }

    private static void awaitGone(Admin admin, String t) throws Exception {
        long end = System.currentTimeMillis() + 15000;
        while (admin.listTopics().names().get(10, TimeUnit.SECONDS).contains(t)) {
            if (System.currentTimeMillis() > end) throw new TimeoutException("topic " + t + " still listed");
            Thread.sleep(200);
        }
    }

    // value null: until the topic no longer sets the config itself
    private void awaitTopicConfig(Admin admin, String name, String value) throws Exception {
        long end = System.currentTimeMillis() + 15000;
        while (true) {
            ConfigEntry e = topicConfig(admin, topic(0)).get(name);
            boolean set = e != null && e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG;
            if (value == null ? !set : set && value.equals(e.value())) return;
            if (System.currentTimeMillis() > end) throw new TimeoutException("config " + name + "=" + value);
            Thread.sleep(200);
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
        secure(p);
        return Admin.create(p);
    }

    private KafkaProducer<byte[], byte[]> producer(Properties extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "10000");
        secure(p);
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
        secure(p);
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
