// The "java-tools" conformance client: Kafka's own command-line tools
// (what kafka-topics.sh, kafka-configs.sh, kafka-get-offsets.sh,
// kafka-delete-records.sh, kafka-log-dirs.sh, kafka-features.sh,
// kafka-broker-api-versions.sh, the console producer and consumer and
// kafka-consumer-groups.sh run), called in one JVM through their main
// methods, with their stdout parsed into observations
// (tests/conformance/PROTOCOL.md).
//
// Only what the tools print is observed: stdout, and of stderr only the
// "Caused by:" line kafka-configs.sh prints for an error. Records a scenario
// needs are produced with kafka-clients first, and waits for metadata or
// configs to settle use the Admin client; that setup is not observed. No
// observation holds a log directory path or an epoch; topic ids, the cluster
// id and the broker's address are normalized by the runner.

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.internals.Exit;

public final class ToolsClient {
    private static final long TS0 = 1700000000000L;

    private final String bootstrap;
    private final String prefix;
    private String scenario;
    // PROTOCOL.md "Security": the client config file every tool is given
    // (--command-config, --producer.config, --consumer.config); null for
    // PLAINTEXT
    private String clientConfig;

    /** Thrown instead of exiting the JVM when a tool calls Exit.exit. */
    private static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code) {
            super("exit " + code);
            this.code = code;
        }
    }

    /** The first exit status the running tool asked for (null: none yet). */
    private static volatile Integer firstExit;

    private ToolsClient(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
    }

    public static void main(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
        ToolsClient c = new ToolsClient(opts.get("--bootstrap"), opts.getOrDefault("--prefix", "c-java-tools"));
        try {
            c.clientConfig = securityConfig(opts);
        } catch (java.io.IOException e) {
            System.err.println("writing the client config: " + e);
            System.exit(1);
        }
        // the tools end with Exit.exit; keep the JVM for the next scenario.
        // The first exit is the tool's status: kafka-topics.sh catches the
        // ToolExit of its own Exit.exit(0) and exits again with 1.
        Exit.setExitProcedure((code, msg) -> {
            if (firstExit == null) firstExit = code;
            throw new ToolExit(code);
        });
        Exit.setHaltProcedure((code, msg) -> {
            if (firstExit == null) firstExit = code;
            throw new ToolExit(code);
        });
        // log4j binds its console appender to stderr when it starts: start it
        // now, before tool() swaps System.err for a buffer
        org.slf4j.LoggerFactory.getLogger(ToolsClient.class);
        PrintStream out = System.out;
        for (String s : opts.getOrDefault("--scenarios", "").split(",")) {
            if (s.isEmpty()) continue;
            c.scenario = s;
            try {
                c.run(s, out);
            } catch (Exception e) {
                System.err.println(s + ": " + e);
                c.emit(out, "op", "scenario", "error", e.getClass().getSimpleName());
            }
            out.flush();
        }
        Runtime.getRuntime().halt(0); // tools may leave non-daemon threads
    }

    private String topic() {
        return topic(0);
    }

    private String topic(int i) {
        return prefix + "-" + scenario + "-" + i;
    }

    private String missing() {
        return prefix + "-" + scenario + "-missing";
    }

    private void run(String s, PrintStream out) throws Exception {
        switch (s) {
            case "metadata-topic" -> describe(out, topic());
            case "unknown-topic-metadata" -> describe(out, missing());
            case "list-offsets" -> {
                long[] ts = new long[5];
                for (int i = 0; i < 5; i++) ts[i] = TS0 + 1000L * i;
                produce(topic(), ts);
                for (String time : new String[] {"-2", "-1", String.valueOf(TS0 + 2500), "1800000000000"}) {
                    offsets(out, topic(), time);
                }
            }
            case "list-offsets-max-timestamp" -> {
                produce(topic(), new long[] {TS0 + 5000, TS0 + 9000, TS0 + 7000});
                offsets(out, topic(), "-3");
            }
            case "unknown-topic-list-offsets" -> offsets(out, missing(), "-1");
            case "empty-topic" -> {
                consume(out, topic());
                offsets(out, topic(), "-1");
            }
            case "group-reset-offsets" -> resetOffsets(out);
            case "group-list" -> {
                commit(Map.of(0, 0L));
                boolean present = false;
                for (String line : tool(GROUPS, "--bootstrap-server", bootstrap, "--list").stdout) {
                    if (line.trim().equals(group())) present = true;
                }
                emit(out, "present", String.valueOf(present));
            }
            case "topics-create" -> topicsCreate(out);
            case "topics-create-validate-only" ->
                emit(out, "skip", "kafka-topics.sh has no --validate-only; the java client sends CreateTopics with validateOnly");
            case "topics-create-configs" -> topicsCreateConfigs(out);
            case "topics-list" -> topicsList(out);
            case "topics-alter-partitions" -> topicsAlterPartitions(out);
            case "topics-delete" -> topicsDelete(out);
            case "configs-topic-describe" -> configsTopicDescribe(out);
            case "configs-topic-alter" -> configsTopicAlter(out);
            case "configs-broker-describe" -> configsBrokerDescribe(out);
            case "configs-broker-alter" -> configsBrokerAlter(out);
            case "delete-records" -> deleteRecords(out);
            case "log-dirs" -> logDirs(out);
            case "features-describe" -> featuresDescribe(out);
            case "features-update" -> featuresUpdate(out);
            case "broker-api-versions" -> brokerApiVersions(out);
            case "console-produce-consume" -> consoleProduceConsume(out);
            case "sasl-scram-ok", "sasl-ssl-scram-ok", "sasl-ssl-plain-ok" -> saslOk(out);
            case "sasl-bad-password", "sasl-unknown-user" -> {
                // the tool's verdict is on stderr: its "Error ..." line (log lines carry timestamps)
                Tool r = tool(TOPICS, secured("--list"));
                List<String> shown = new ArrayList<>(r.stdout);
                for (String l : r.stderr) if (l.startsWith("Error")) shown.add(l);
                lines(out, "list", new Tool(shown, r.stderr, r.exit));
            }
            case "acl-denied", "acl-allowed" ->
                emit(out, "skip", "per-request outcomes: the java client observes them through the same kafka-clients");
            case "kafka-acls" -> kafkaAcls(out);
            case "transactions-tool" -> transactionsTool(out);
            case "compaction" -> emit(out, "skip", "the brokers' log cleaners are compared, not clients: franz and java run it");
            default -> emit(out, "skip", "no Kafka command-line tool observes this scenario");
        }
    }

    // ---- security (PROTOCOL.md "Security") ----

    // The security flags as a client config file, or null for PLAINTEXT.
    private static String securityConfig(Map<String, String> opts) throws java.io.IOException {
        String protocol = opts.get("--security-protocol");
        if (protocol == null || protocol.equals("PLAINTEXT")) return null;
        String mechanism = opts.get("--sasl-mechanism");
        String module = "PLAIN".equals(mechanism)
                ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
        Properties p = new Properties();
        p.put("security.protocol", protocol);
        p.put("sasl.mechanism", mechanism);
        p.put("sasl.jaas.config", module + " required username=\"" + opts.get("--username") + "\" password=\"" + opts.get("--password") + "\";");
        if (protocol.equals("SASL_SSL")) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", opts.get("--ca-file"));
        }
        Path f = Files.createTempFile("kafgres-conformance-client", ".properties");
        f.toFile().deleteOnExit();
        try (java.io.Writer w = Files.newBufferedWriter(f)) {
            p.store(w, "conformance client security");
        }
        return f.toString();
    }

    // --bootstrap-server and --command-config, then args
    private String[] secured(String... args) {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", bootstrap));
        if (clientConfig != null) all.addAll(List.of("--command-config", clientConfig));
        all.addAll(List.of(args));
        return all.toArray(new String[0]);
    }

    // one observation per printed line (trimmed, empty ones dropped, sorted:
    // the tools print hash-map order), then the exit status
    private void lines(PrintStream out, String step, Tool r) {
        List<String> ls = new ArrayList<>();
        for (String l : r.stdout) if (!l.trim().isEmpty()) ls.add(l.trim());
        Collections.sort(ls);
        for (String l : ls) emit(out, "step", step, "line", l);
        emit(out, "step", step, "exit", r.exit);
    }

    // console producer then console consumer, as the scenario's user
    private void saslOk(PrintStream out) {
        List<String> pargs = new ArrayList<>(List.of("--bootstrap-server", bootstrap, "--topic", topic(), "--sync",
                "--reader-property", "parse.key=true", "--reader-property", "key.separator=:"));
        if (clientConfig != null) pargs.addAll(List.of("--command-config", clientConfig));
        lines(out, "produce", toolWithInput("org.apache.kafka.tools.ConsoleProducer", "k:v\n", pargs.toArray(new String[0])));
        List<String> cargs = new ArrayList<>(List.of("--bootstrap-server", bootstrap, "--topic", topic(), "--partition", "0",
                "--offset", "earliest", "--max-messages", "1", "--timeout-ms", "10000",
                "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true"));
        if (clientConfig != null) cargs.addAll(List.of("--command-config", clientConfig));
        lines(out, "consume", tool("org.apache.kafka.tools.consumer.ConsoleConsumer", cargs.toArray(new String[0])));
    }

    // kafka-acls.sh --add, --list, --remove --force, --list (as admin)
    private void kafkaAcls(PrintStream out) {
        String acls = "org.apache.kafka.tools.AclCommand";
        String[] allow = {"--allow-principal", "User:alice", "--operation", "Read", "--topic", topic()};
        String[] deny = {"--deny-principal", "User:alice", "--operation", "Write", "--topic", prefix + "-",
                "--resource-pattern-type", "prefixed"};
        lines(out, "add-allow", tool(acls, secured(concat(new String[] {"--add"}, allow))));
        lines(out, "add-deny", tool(acls, secured(concat(new String[] {"--add"}, deny))));
        lines(out, "list", tool(acls, secured("--list")));
        lines(out, "list-topic", tool(acls, secured("--list", "--topic", topic())));
        lines(out, "remove-allow", tool(acls, secured(concat(new String[] {"--remove", "--force"}, allow))));
        lines(out, "remove-deny", tool(acls, secured(concat(new String[] {"--remove", "--force"}, deny))));
        lines(out, "list-after", tool(acls, secured("--list")));
    }

    // ---- kafka-transactions.sh (issue #14) ----

    private static final String TXNS = "org.apache.kafka.tools.TransactionsCommand";
    // columns whose values are per cluster or per run: producer ids are
    // allocated differently, times are the clock's
    private static final java.util.Set<String> VOLATILE = java.util.Set.of("ProducerId", "LastTimestamp",
            "CurrentTransactionStartTimeMs", "TransactionDurationMs", "Duration(min)", "Duration(s)", "StartTimestamp");

    // One observation per table row of a kafka-transactions.sh command:
    // {step, <column>: value} with the header's column names, volatile
    // columns replaced by "<set>" (or "-1" kept), rows kept only when keep
    // accepts them; then the exit status. Lines that are not the table
    // (messages) are printed as {step, line}.
    private void txnTable(PrintStream out, String step, Tool r, Predicate<Map<String, Object>> keep) {
        String[] header = null;
        for (String l : r.stdout) {
            String[] cols = l.trim().split("\\s+");
            if (header == null && cols.length > 1 && (cols[0].equals("TransactionalId") || cols[0].equals("CoordinatorId")
                    || cols[0].equals("ProducerId") || cols[0].equals("Topic"))) {
                header = cols;
                emit(out, "step", step, "header", String.join(" ", cols));
                continue;
            }
            if (header == null || cols.length != header.length) {
                emit(out, "step", step, "line", l.trim());
                continue;
            }
            Map<String, Object> row = new TreeMap<>();
            row.put("step", step);
            for (int i = 0; i < cols.length; i++) {
                String v = cols[i];
                if (VOLATILE.contains(header[i]) && !v.equals("-1") && !v.equals("None")) v = "<set>";
                row.put(header[i], v);
            }
            if (keep.test(row)) emit(out, row);
        }
        emit(out, "step", step, "exit", r.exit);
    }

    // A transaction left open on topic 0 partition 0 (never committed), seen
    // through every kafka-transactions.sh command, then aborted by the tool
    // (WriteTxnMarkers to the partition leader).
    private void transactionsTool(PrintStream out) throws Exception {
        String txnID = prefix + "-" + scenario + "-tx";
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnID);
        KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
        try {
            prod.initTransactions();
            prod.beginTransaction();
            prod.send(new ProducerRecord<>(topic(), 0, null, "h0".getBytes(StandardCharsets.UTF_8))).get(20, TimeUnit.SECONDS);
            Predicate<Map<String, Object>> ours = row -> txnID.equals(row.get("TransactionalId"));
            Predicate<Map<String, Object>> all = row -> true;
            txnTable(out, "list", tool(TXNS, secured("list")), ours);
            txnTable(out, "describe", tool(TXNS, secured("describe", "--transactional-id", txnID)), all);
            txnTable(out, "describe-missing", tool(TXNS, secured("describe", "--transactional-id", txnID + "-missing")), all);
            txnTable(out, "describe-producers", tool(TXNS, secured("describe-producers", "--topic", topic(), "--partition", "0")), all);
            txnTable(out, "find-hanging", tool(TXNS, secured("find-hanging", "--broker-id", "1")), row -> topic().equals(row.get("Topic")));
            txnTable(out, "find-hanging-topic", tool(TXNS, secured("find-hanging", "--topic", topic(), "--max-transaction-timeout", "0")), all);
            txnTable(out, "abort", tool(TXNS, secured("abort", "--topic", topic(), "--partition", "0", "--start-offset", "0")), all);
            txnTable(out, "describe-producers-after", tool(TXNS, secured("describe-producers", "--topic", topic(), "--partition", "0")), all);
            txnTable(out, "abort-again", tool(TXNS, secured("abort", "--topic", topic(), "--partition", "0", "--start-offset", "0")), all);
        } finally {
            prod.close(java.time.Duration.ZERO);
        }
        // the aborted record is not read_committed
        Tool r = tool("org.apache.kafka.tools.consumer.ConsoleConsumer", secured("--topic", topic(), "--partition", "0",
                "--offset", "earliest", "--timeout-ms", "4000", "--isolation-level", "read_committed",
                "--formatter-property", "print.offset=true"));
        lines(out, "consume-committed", new Tool(r.stdout, r.stderr, 0));
    }

    private static String[] concat(String[] a, String[] b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }

    // kafka-topics.sh --describe: one observation per printed line, its
    // "Key: value" fields as JSON keys (lower-cased).
    private void describe(PrintStream out, String topic) {
        Tool r = tool(TOPICS, "--bootstrap-server", bootstrap, "--describe", "--topic", topic);
        for (String line : r.stdout) {
            Map<String, Object> m = topicLine(line);
            if (m == null) emit(out, "text", line.trim()); // e.g. an error message
            else emit(out, m);
        }
        emit(out, "tool", "kafka-topics --describe", "exit", r.exit);
    }

    // One line of kafka-topics.sh --describe as its "Key: value" fields
    // (keys lower-cased), or null for any other line. The Configs field is
    // the set of the topic's non-default configs: the tool prints them in
    // the order the broker returned them, which is not defined, so they are
    // sorted (split at commas that start a new name=value, not inside
    // list values such as cleanup.policy=compact,delete).
    private static Map<String, Object> topicLine(String line) {
        if (!line.trim().startsWith("Topic: ")) return null;
        Map<String, Object> m = new TreeMap<>();
        for (String field : line.trim().split("\t")) {
            int colon = field.indexOf(": ");
            if (colon > 0) m.put(field.substring(0, colon).trim().toLowerCase(), field.substring(colon + 2).trim());
            else if (field.trim().endsWith(":")) m.put(field.trim().replace(":", "").toLowerCase(), "");
            else m.put("text", line.trim());
        }
        if (m.get("configs") instanceof String c && !c.isEmpty()) {
            List<String> parts = new ArrayList<>(List.of(c.split(",(?=[A-Za-z0-9._-]+=)")));
            Collections.sort(parts);
            m.put("configs", String.join(",", parts));
        }
        return m;
    }

    // kafka-get-offsets.sh: "topic:partition:offset" lines.
    private void offsets(PrintStream out, String topic, String time) {
        Tool r = tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", bootstrap, "--topic", topic, "--time", time);
        for (String line : r.stdout) {
            String[] f = line.split(":");
            if (f.length == 3) emit(out, "time", time, "topic", f[0], "partition", Long.parseLong(f[1]), "offset", f[2].isEmpty() ? "" : Long.parseLong(f[2]));
            else emit(out, "time", time, "text", line);
        }
        emit(out, "tool", "kafka-get-offsets --time " + time, "exit", r.exit);
    }

    // kafka-console-consumer.sh from the beginning of partition 0 (no group)
    private void consume(PrintStream out, String topic) {
        Tool r = tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bootstrap, "--topic", topic,
                "--partition", "0", "--offset", "earliest", "--timeout-ms", "2000");
        emit(out, "records", r.stdout.size());
        emit(out, "tool", "kafka-console-consumer", "exit", r.exit);
    }

    private static final String GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";

    private String group() {
        return prefix + "-" + scenario + "-g";
    }

    // commits offsets for partitions of topic() in group() through the Admin
    // API, as a group with no members (the group stays inactive)
    private void commit(Map<Integer, Long> offsets) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
        offsets.forEach((part, off) -> m.put(new TopicPartition(topic(), part), new OffsetAndMetadata(off)));
        try (Admin admin = Admin.create(p)) {
            admin.alterConsumerGroupOffsets(group(), m).all().get(20, TimeUnit.SECONDS);
        }
    }

    // kafka-consumer-groups.sh --reset-offsets on an inactive group, each
    // step followed by --describe; host/consumer-id/client-id are not printed
    private void resetOffsets(PrintStream out) throws Exception {
        long[] ts = new long[4];
        for (int i = 0; i < 4; i++) ts[i] = TS0 + 1000L * i;
        produce(topic(), ts, 0);
        produce(topic(), ts, 1);
        commit(Map.of(0, 4L, 1, 4L));
        groupDescribe(out, "committed");
        String[][] steps = {{"--to-earliest"}, {"--shift-by", "3"}, {"--shift-by", "-1"},
                {"--to-datetime", "2023-11-14T22:13:22.000Z"}, {"--to-latest"}, {"--to-offset", "1"}};
        for (String[] step : steps) {
            String name = String.join(" ", step);
            List<String> args = new ArrayList<>(List.of("--bootstrap-server", bootstrap, "--group", group(),
                    "--reset-offsets", "--topic", topic(), "--execute"));
            args.addAll(List.of(step));
            Tool r = tool(GROUPS, args.toArray(new String[0]));
            // the tool prints the partitions in hash-map order: sorted here
            Map<Long, Long> reset = new TreeMap<>();
            for (String line : r.stdout) {
                String[] f = line.trim().split("\\s+");
                if (f.length == 4 && f[1].equals(topic())) {
                    reset.put(Long.parseLong(f[2]), Long.parseLong(f[3]));
                } else if (!f[0].equals("GROUP")) {
                    emit(out, "step", name, "text", line.trim());
                }
            }
            reset.forEach((part, off) -> emit(out, "step", name, "partition", part, "new_offset", off));
            emit(out, "step", name, "exit", r.exit);
            groupDescribe(out, name);
        }
    }

    private void groupDescribe(PrintStream out, String step) {
        Tool r = tool(GROUPS, "--bootstrap-server", bootstrap, "--group", group(), "--describe");
        for (String line : r.stdout) {
            String[] f = line.trim().split("\\s+");
            if (f.length >= 6 && f[1].equals(topic())) {
                emit(out, "describe", step, "partition", Long.parseLong(f[2]), "committed", f[3], "log_end", f[4], "lag", f[5]);
            } else if (!f[0].equals("GROUP")) {
                emit(out, "describe", step, "text", line.trim());
            }
        }
        emit(out, "describe", step, "exit", r.exit);
    }


    // ---- issue #6: topics, configs, records, log dirs, features, versions ----

    private static final String TOPICS = "org.apache.kafka.tools.TopicCommand";
    private static final String CONFIGS = "org.apache.kafka.tools.ConfigCommand";

    // kafka-topics.sh with the given arguments: --describe lines as their
    // fields, any other line as text, then the exit status.
    private void topics(PrintStream out, String step, String... args) {
        Tool r = tool(TOPICS, withBootstrap(args));
        for (String line : r.stdout) {
            Map<String, Object> m = topicLine(line);
            if (m == null) m = new TreeMap<>(Map.of("text", line.trim()));
            m.put("step", step);
            emit(out, m);
        }
        emit(out, "step", step, "exit", r.exit);
    }

    private String[] withBootstrap(String... args) {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", bootstrap));
        all.addAll(List.of(args));
        return all.toArray(new String[0]);
    }

    private void topicsCreate(PrintStream out) throws Exception {
        String t = prefix + "-topics-create-new";
        topics(out, "create", "--create", "--topic", t, "--partitions", "3", "--replication-factor", "1");
        awaitTopic(t, 3);
        topics(out, "describe", "--describe", "--topic", t);
        topics(out, "create-existing", "--create", "--topic", t, "--partitions", "3");
        topics(out, "create-if-not-exists", "--create", "--topic", t, "--partitions", "3", "--if-not-exists");
        // without --partitions and --replication-factor: the broker's defaults
        String d = prefix + "-topics-create-default";
        topics(out, "create-defaults", "--create", "--topic", d);
        awaitTopic(d, 1);
        topics(out, "describe-defaults", "--describe", "--topic", d);
        topics(out, "create-invalid-name", "--create", "--topic", prefix + "-topics-create-bad!");
    }

    private void topicsCreateConfigs(PrintStream out) throws Exception {
        String t = prefix + "-topics-create-configs-new";
        topics(out, "create", "--create", "--topic", t, "--partitions", "2", "--config", "retention.ms=86400000",
                "--config", "cleanup.policy=compact", "--config", "max.message.bytes=2000000");
        awaitTopic(t, 2);
        topics(out, "describe", "--describe", "--topic", t);
        configs(out, "configs-describe", "--describe", "--entity-type", "topics", "--entity-name", t);
        topics(out, "create-unknown-config", "--create", "--topic", prefix + "-topics-create-configs-bad",
                "--config", "no.such.config=1");
    }

    private void topicsList(PrintStream out) throws Exception {
        awaitTopic(topic(1), 1);
        topics(out, "list", "--list", "--topic", prefix + "-topics-list-.*");
        topics(out, "list-one", "--list", "--topic", topic(1));
        topics(out, "list-none", "--list", "--topic", missing());
    }

    private void topicsAlterPartitions(PrintStream out) throws Exception {
        topics(out, "alter", "--alter", "--topic", topic(), "--partitions", "3");
        awaitTopic(topic(), 3);
        topics(out, "describe", "--describe", "--topic", topic());
        produce(topic(), new long[] {TS0}, 2);
        offsets(out, topic(), "-1");
        topics(out, "alter-fewer", "--alter", "--topic", topic(), "--partitions", "2");
        topics(out, "alter-same", "--alter", "--topic", topic(), "--partitions", "3");
        topics(out, "alter-missing", "--alter", "--topic", missing(), "--partitions", "2");
    }

    private void topicsDelete(PrintStream out) throws Exception {
        topics(out, "delete", "--delete", "--topic", topic(0));
        awaitGone(topic(0));
        topics(out, "list-after-delete", "--list", "--topic", prefix + "-topics-delete-.*");
        topics(out, "describe-deleted", "--describe", "--topic", topic(0));
        topics(out, "delete-missing", "--delete", "--topic", missing());
        topics(out, "delete-missing-if-exists", "--delete", "--topic", missing(), "--if-exists");
        topics(out, "delete-regex", "--delete", "--topic", prefix + "-topics-delete-.*");
        awaitGone(topic(1));
        topics(out, "list-after-delete-regex", "--list", "--topic", prefix + "-topics-delete-.*");
    }

    // kafka-configs.sh with the given arguments: each "  name=value
    // sensitive=.. synonyms={..}" line as {config, value, sensitive,
    // synonyms}, other lines as text, the "Caused by:" line of an error as
    // {error}, then the exit status.
    private void configs(PrintStream out, String step, String... args) {
        Tool r = tool(CONFIGS, withBootstrap(args));
        Pattern entry = Pattern.compile("^  ([^=]+)=(.*) sensitive=(true|false) synonyms=\\{(.*)\\}$");
        for (String line : r.stdout) {
            Matcher m = entry.matcher(line);
            if (m.matches()) {
                emit(out, "step", step, "config", m.group(1), "value", m.group(2), "sensitive", m.group(3), "synonyms", m.group(4));
            } else {
                emit(out, "step", step, "text", line.trim());
            }
        }
        for (String line : r.stderr) {
            if (line.startsWith("Caused by: ")) emit(out, "step", step, "error", line.substring("Caused by: ".length()));
        }
        emit(out, "step", step, "exit", r.exit);
    }

    private void configsTopicDescribe(PrintStream out) {
        configs(out, "describe", "--describe", "--entity-type", "topics", "--entity-name", topic());
        configs(out, "describe-all", "--describe", "--topic", topic(), "--all");
        configs(out, "describe-missing", "--describe", "--topic", missing());
    }

    private void configsTopicAlter(PrintStream out) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic());
        configs(out, "add", "--alter", "--entity-type", "topics", "--entity-name", topic(),
                "--add-config", "retention.ms=86400000,max.message.bytes=2000000");
        awaitConfig(res, "retention.ms", "86400000");
        configs(out, "describe-after-add", "--describe", "--entity-type", "topics", "--entity-name", topic());
        topics(out, "topics-describe-after-add", "--describe", "--topic", topic());
        configs(out, "delete", "--alter", "--topic", topic(), "--delete-config", "retention.ms");
        awaitConfig(res, "retention.ms", null);
        configs(out, "describe-after-delete", "--describe", "--topic", topic());
        configs(out, "add-list", "--alter", "--topic", topic(), "--add-config", "cleanup.policy=[compact,delete]");
        awaitConfig(res, "cleanup.policy", "compact,delete");
        configs(out, "describe-after-add-list", "--describe", "--topic", topic());
        configs(out, "unknown-config", "--alter", "--topic", topic(), "--add-config", "no.such.config=1");
        configs(out, "invalid-value", "--alter", "--topic", topic(), "--add-config", "retention.ms=abc");
        configs(out, "missing-topic", "--alter", "--topic", missing(), "--add-config", "retention.ms=1000");
        configs(out, "describe-after-errors", "--describe", "--topic", topic());
    }

    private void configsBrokerDescribe(PrintStream out) {
        configs(out, "broker-1", "--describe", "--entity-type", "brokers", "--entity-name", "1");
        configs(out, "broker-default", "--describe", "--entity-type", "brokers", "--entity-default");
        configs(out, "brokers", "--describe", "--entity-type", "brokers");
        configs(out, "broker-2", "--describe", "--entity-type", "brokers", "--entity-name", "2");
    }

    // max.connections (per broker) and max.connections.per.ip (cluster
    // default) are dynamic in Kafka and inherited by no topic config, so
    // other clients' scenarios cannot see them; each is removed again.
    private void configsBrokerAlter(PrintStream out) throws Exception {
        ConfigResource node = new ConfigResource(ConfigResource.Type.BROKER, "1");
        ConfigResource dflt = new ConfigResource(ConfigResource.Type.BROKER, "");
        configs(out, "add-broker-1", "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "max.connections=100000");
        awaitConfig(node, "max.connections", "100000");
        configs(out, "describe-broker-1", "--describe", "--entity-type", "brokers", "--entity-name", "1");
        configs(out, "delete-broker-1", "--alter", "--entity-type", "brokers", "--entity-name", "1", "--delete-config", "max.connections");
        awaitConfig(node, "max.connections", null);
        configs(out, "describe-broker-1-after-delete", "--describe", "--entity-type", "brokers", "--entity-name", "1");
        configs(out, "add-default", "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "max.connections.per.ip=100000");
        awaitConfig(dflt, "max.connections.per.ip", "100000");
        configs(out, "describe-default", "--describe", "--entity-type", "brokers", "--entity-default");
        configs(out, "delete-default", "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "max.connections.per.ip");
        awaitConfig(dflt, "max.connections.per.ip", null);
        configs(out, "describe-default-after-delete", "--describe", "--entity-type", "brokers", "--entity-default");
        configs(out, "invalid-value", "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "max.connections=abc");
        configs(out, "read-only", "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "broker.id=5");
    }

    // kafka-delete-records.sh: "partition: T-P\tlow_watermark: N" or
    // "partition: T-P\terror: ..." per partition, sorted (the tool prints
    // them in hash order).
    private void deleteRecordsTool(PrintStream out, String step, String json) throws Exception {
        Path file = Files.createTempFile("delete-records", ".json");
        try {
            Files.writeString(file, json);
            Tool r = tool("org.apache.kafka.tools.DeleteRecordsCommand", "--bootstrap-server", bootstrap,
                    "--offset-json-file", file.toString());
            List<Map<String, Object>> parts = new ArrayList<>();
            Pattern p = Pattern.compile("^partition: (\\S+)\\t(low_watermark|error): (.*)$");
            for (String line : r.stdout) {
                Matcher m = p.matcher(line);
                if (m.matches()) {
                    Map<String, Object> o = new TreeMap<>(Map.of("step", step, "partition", m.group(1)));
                    o.put(m.group(2), m.group(2).equals("error") ? m.group(3) : (Object) Long.parseLong(m.group(3)));
                    parts.add(o);
                } else {
                    emit(out, "step", step, "text", line.trim());
                }
            }
            parts.sort((a, b) -> String.valueOf(a.get("partition")).compareTo(String.valueOf(b.get("partition"))));
            for (Map<String, Object> o : parts) emit(out, o);
            emit(out, "step", step, "exit", r.exit);
        } finally {
            Files.deleteIfExists(file);
        }
    }

    private String offsetsJson(Object... topicPartitionOffset) {
        StringBuilder sb = new StringBuilder("{\"version\":1,\"partitions\":[");
        for (int i = 0; i + 2 < topicPartitionOffset.length; i += 3) {
            if (i > 0) sb.append(',');
            sb.append(String.format("{\"topic\":\"%s\",\"partition\":%d,\"offset\":%d}",
                    topicPartitionOffset[i], topicPartitionOffset[i + 1], topicPartitionOffset[i + 2]));
        }
        return sb.append("]}").toString();
    }

    private void deleteRecords(PrintStream out) throws Exception {
        long[] ts = new long[5];
        for (int i = 0; i < 5; i++) ts[i] = TS0 + 1000L * i;
        produce(topic(), ts, 0);
        produce(topic(), new long[] {TS0, TS0 + 1000}, 1);
        deleteRecordsTool(out, "delete", offsetsJson(topic(), 0, 3L, topic(), 1, -1L));
        offsets(out, topic(), "-2");
        offsets(out, topic(), "-1");
        Tool r = tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bootstrap, "--topic", topic(),
                "--partition", "0", "--offset", "earliest", "--max-messages", "2", "--timeout-ms", "10000",
                "--formatter-property", "print.offset=true");
        for (String line : r.stdout) emit(out, "step", "consume", "line", line);
        deleteRecordsTool(out, "delete-below-low-watermark", offsetsJson(topic(), 0, 1L));
        deleteRecordsTool(out, "delete-beyond-high-watermark", offsetsJson(topic(), 0, 10L));
        offsets(out, topic(), "-2");
    }

    // kafka-log-dirs.sh --describe: the text lines, then from the JSON the
    // broker, each log dir's error and its partitions of this scenario's
    // topic (sorted; sizes are exact, the records having fixed timestamps);
    // the log dir's path is not printed.
    private void logDirs(PrintStream out) throws Exception {
        produce(topic(), new long[] {TS0, TS0 + 1000, TS0 + 2000}, 0);
        for (String[] step : new String[][] {{"describe", "--topic-list", topic()}, {"describe-broker-1", "--broker-list", "1", "--topic-list", topic()}}) {
            List<String> args = new ArrayList<>(List.of("--bootstrap-server", bootstrap, "--describe"));
            args.addAll(List.of(step).subList(1, step.length));
            Tool r = tool("org.apache.kafka.tools.LogDirsCommand", args.toArray(new String[0]));
            for (String line : r.stdout) {
                if (!line.startsWith("{")) {
                    emit(out, "step", step[0], "text", line.trim());
                    continue;
                }
                JsonNode doc = new ObjectMapper().readTree(line);
                emit(out, "step", step[0], "version", doc.path("version").asInt());
                for (JsonNode b : doc.path("brokers")) {
                    emit(out, "step", step[0], "broker", b.path("broker").asInt(), "log_dirs", b.path("logDirs").size());
                    for (JsonNode d : b.path("logDirs")) {
                        emit(out, "step", step[0], "log_dir_error", d.path("error").isNull() ? "null" : d.path("error").asText(),
                                "partitions_total", d.path("partitions").size() > 0 ? "some" : "none");
                        List<JsonNode> ps = new ArrayList<>();
                        d.path("partitions").forEach(ps::add);
                        ps.sort((x, y) -> x.path("partition").asText().compareTo(y.path("partition").asText()));
                        for (JsonNode p : ps) {
                            if (!p.path("partition").asText().startsWith(topic() + "-")) continue;
                            emit(out, "step", step[0], "partition", p.path("partition").asText(), "size", p.path("size").asLong(),
                                    "offset_lag", p.path("offsetLag").asLong(), "is_future", String.valueOf(p.path("isFuture").asBoolean()));
                        }
                    }
                }
            }
            emit(out, "step", step[0], "exit", r.exit);
        }
    }

    // kafka-features.sh describe: one line per feature; the epoch (of the
    // cluster's metadata) is not printed.
    private void featuresDescribe(PrintStream out) {
        Pattern p = Pattern.compile("^Feature: (\\S+)\\s+SupportedMinVersion: (\\S+)\\s+SupportedMaxVersion: (\\S+)\\s+FinalizedVersionLevel: (\\S+)\\s+Epoch: (\\S+)$");
        for (String[] step : new String[][] {{"describe"}, {"describe-node-1", "--node-id", "1"}}) {
            List<String> args = new ArrayList<>(List.of("--bootstrap-server", bootstrap, "describe"));
            args.addAll(List.of(step).subList(1, step.length));
            Tool r = tool("org.apache.kafka.tools.FeatureCommand", args.toArray(new String[0]));
            for (String line : r.stdout) {
                Matcher m = p.matcher(line.trim());
                if (m.matches()) {
                    emit(out, "step", step[0], "feature", m.group(1), "supported_min", m.group(2), "supported_max", m.group(3), "finalized", m.group(4));
                } else {
                    emit(out, "step", step[0], "text", line.trim());
                }
            }
            emit(out, "step", step[0], "exit", r.exit);
        }
    }

    // kafka-features.sh upgrade/downgrade/disable: validate-only changes,
    // an upgrade to the finalized level (no change) and two refusals; the
    // tool prints one line per feature.
    private void featuresUpdate(PrintStream out) {
        String[][] steps = {
                {"upgrade-dry-run", "upgrade", "--feature", "group.version=1", "--dry-run"},
                {"downgrade-dry-run", "downgrade", "--feature", "group.version=0", "--dry-run"},
                {"disable-dry-run", "disable", "--feature", "group.version", "--dry-run"},
                {"upgrade-to-current", "upgrade", "--feature", "group.version=1"},
                {"upgrade-unsupported", "upgrade", "--feature", "group.version=9", "--dry-run"},
                {"upgrade-unknown", "upgrade", "--feature", "no.such.feature=1", "--dry-run"},
        };
        for (String[] step : steps) {
            List<String> args = new ArrayList<>(List.of("--bootstrap-server", bootstrap));
            args.addAll(List.of(step).subList(1, step.length));
            Tool r = tool("org.apache.kafka.tools.FeatureCommand", args.toArray(new String[0]));
            for (String line : r.stdout) emit(out, "step", step[0], "text", line.trim());
            emit(out, "step", step[0], "exit", r.exit);
        }
        Tool r = tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bootstrap, "describe");
        for (String line : r.stdout) {
            if (line.startsWith("Feature: group.version ")) {
                emit(out, "step", "describe", "text", line.replaceAll("\\s+Epoch: \\S+$", "").replaceAll("\\s+", " "));
            }
        }
    }

    // kafka-broker-api-versions.sh: the broker line (its address is
    // normalized by the runner) and one {api_key, name, versions} per API
    // the broker serves; "UNSUPPORTED" lines (APIs the tool knows and the
    // broker does not advertise) are left out, as api-versions does.
    private void brokerApiVersions(PrintStream out) {
        Tool r = tool("org.apache.kafka.tools.BrokerApiVersionsCommand", "--bootstrap-server", bootstrap);
        Pattern api = Pattern.compile("^\\t?(\\w+)\\((\\d+)\\): (.*?),?$");
        for (String line : r.stdout) {
            Matcher m = api.matcher(line);
            if (m.matches()) {
                if (!m.group(3).equals("UNSUPPORTED")) {
                    emit(out, "api_key", Integer.parseInt(m.group(2)), "name", m.group(1), "versions", m.group(3));
                }
            } else if (line.endsWith(" -> (")) {
                emit(out, "broker", line.substring(0, line.length() - " -> (".length()));
            } else if (!line.equals(")")) {
                emit(out, "text", line.trim());
            }
        }
        emit(out, "tool", "kafka-broker-api-versions", "exit", r.exit);
    }

    // The console producer writes keyed records (the key places them: of 3
    // partitions k5 and y go to 0, a to 1, b to 2) and records with headers
    // and a null value; console consumers read them back per partition
    // (lines as printed), and in a group whose offsets
    // kafka-consumer-groups.sh then describes.
    private void consoleProduceConsume(PrintStream out) throws Exception {
        String producer = "org.apache.kafka.tools.ConsoleProducer";
        String consumer = "org.apache.kafka.tools.consumer.ConsoleConsumer";
        // --sync: in this JVM the producer is never closed (the tool closes
        // it in a shutdown hook), so every record must be acknowledged
        // before the tool returns
        Tool p = toolWithInput(producer, "k5:v1\na:v2\nb:v3\ny:v4\n", "--bootstrap-server", bootstrap, "--topic", topic(), "--sync",
                "--reader-property", "parse.key=true", "--reader-property", "key.separator=:");
        for (String line : p.stdout) emit(out, "step", "produce-keys", "text", line);
        emit(out, "step", "produce-keys", "exit", p.exit);
        // NULL is the null marker: a null value (a null key would leave
        // the partition to the sticky partitioner)
        p = toolWithInput(producer, "h1:a,h2:b\tk5\tv5\nh1:x,h1:y\ty\tv6\nh3:z\tk5\tNULL\n", "--bootstrap-server", bootstrap,
                "--topic", topic(), "--sync",
                "--reader-property", "parse.key=true", "--reader-property", "parse.headers=true", "--reader-property", "null.marker=NULL");
        for (String line : p.stdout) emit(out, "step", "produce-headers", "text", line);
        emit(out, "step", "produce-headers", "exit", p.exit);
        int[] counts = {5, 1, 1};
        for (int part = 0; part < 3; part++) {
            Tool r = tool(consumer, "--bootstrap-server", bootstrap, "--topic", topic(), "--partition", String.valueOf(part),
                    "--offset", "earliest", "--max-messages", String.valueOf(counts[part]), "--timeout-ms", "10000",
                    "--formatter-property", "print.key=true", "--formatter-property", "print.partition=true",
                    "--formatter-property", "print.offset=true", "--formatter-property", "print.headers=true",
                    "--formatter-property", "null.literal=<null>");
            for (String line : r.stdout) emit(out, "step", "consume-partition-" + part, "line", line);
            emit(out, "step", "consume-partition-" + part, "exit", r.exit);
        }
        String group = prefix + "-" + scenario + "-g";
        Tool r = tool(consumer, "--bootstrap-server", bootstrap, "--topic", topic(), "--group", group, "--from-beginning",
                "--max-messages", "7", "--timeout-ms", "20000", "--formatter-property", "print.key=true", "--formatter-property", "print.value=true");
        List<String> read = new ArrayList<>(r.stdout);
        Collections.sort(read); // across partitions the order is not defined
        for (String line : read) emit(out, "step", "consume-group", "line", line);
        emit(out, "step", "consume-group", "exit", r.exit);
        Tool d = tool(GROUPS, "--bootstrap-server", bootstrap, "--group", group, "--describe");
        for (String line : d.stdout) {
            String[] f = line.trim().split("\\s+");
            if (f.length >= 6 && f[1].equals(topic())) {
                emit(out, "step", "describe-group", "partition", Long.parseLong(f[2]), "committed", f[3], "log_end", f[4], "lag", f[5]);
            } else if (!f[0].equals("GROUP")) {
                emit(out, "step", "describe-group", "text", line.trim());
            }
        }
        emit(out, "step", "describe-group", "exit", d.exit);
    }

    // ---- waits (not observed): the broker's metadata and config caches
    // follow an admin change a moment after the change is acknowledged ----

    private Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        return Admin.create(p);
    }

    private void await(String what, Predicate<Admin> done) throws Exception {
        long end = System.currentTimeMillis() + 15000;
        try (Admin admin = admin()) {
            while (!done.test(admin)) {
                if (System.currentTimeMillis() > end) throw new IllegalStateException("timed out waiting for " + what);
                Thread.sleep(200);
            }
        }
    }

    // partitions < 0: any count
    private void awaitTopic(String topic, int partitions) throws Exception {
        await("topic " + topic, a -> {
            try {
                var d = a.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
                return partitions < 0 || d.partitions().size() == partitions;
            } catch (Exception e) {
                return false;
            }
        });
    }

    private void awaitGone(String topic) throws Exception {
        await("topic " + topic + " to go", a -> {
            try {
                return !a.listTopics().names().get(10, TimeUnit.SECONDS).contains(topic);
            } catch (Exception e) {
                return false;
            }
        });
    }

    // value null: until the config is no longer set on the resource itself
    private void awaitConfig(ConfigResource res, String name, String value) throws Exception {
        ConfigEntry.ConfigSource own = switch (res.type()) {
            case TOPIC -> ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG;
            case BROKER -> res.name().isEmpty() ? ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG : ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG;
            default -> throw new IllegalArgumentException(res.toString());
        };
        await(res + " " + name + "=" + value, a -> {
            try {
                Config c = a.describeConfigs(List.of(res)).all().get(10, TimeUnit.SECONDS).get(res);
                ConfigEntry e = c.get(name);
                boolean set = e != null && e.source() == own;
                return value == null ? !set : set && value.equals(e.value());
            } catch (Exception e) {
                return false;
            }
        });
    }

    private record Tool(List<String> stdout, List<String> stderr, int exit) {}

    private static Tool tool(String cls, String... args) {
        return toolWithInput(cls, null, args);
    }

    // Runs a tool's main with stdout and stderr captured (stdin from
    // input when given). What the tool wrote to stderr is copied to ours
    // too, for the runner's log.
    private static Tool toolWithInput(String cls, String input, String... args) {
        PrintStream savedOut = System.out, savedErr = System.err;
        InputStream savedIn = System.in;
        ByteArrayOutputStream buf = new ByteArrayOutputStream(), errBuf = new ByteArrayOutputStream();
        int exit = 0;
        firstExit = null;
        try (PrintStream capture = new PrintStream(buf, true, StandardCharsets.UTF_8);
                PrintStream errCapture = new PrintStream(errBuf, true, StandardCharsets.UTF_8)) {
            System.setOut(capture);
            System.setErr(errCapture);
            if (input != null) System.setIn(new ByteArrayInputStream(input.getBytes(StandardCharsets.UTF_8)));
            Class.forName(cls).getMethod("main", String[].class).invoke(null, (Object) args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            if (e.getCause() instanceof ToolExit te) exit = te.code;
            else {
                e.getCause().printStackTrace(savedErr);
                exit = -1;
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        } finally {
            System.setOut(savedOut);
            System.setErr(savedErr);
            System.setIn(savedIn);
        }
        if (firstExit != null) exit = firstExit;
        String err = errBuf.toString(StandardCharsets.UTF_8);
        savedErr.print(err);
        return new Tool(lines(buf.toString(StandardCharsets.UTF_8)), lines(err), exit);
    }

    private static List<String> lines(String text) {
        List<String> lines = new ArrayList<>();
        for (String l : text.split("\n")) {
            if (!l.isBlank()) lines.add(l);
        }
        return lines;
    }

    private void produce(String topic, long[] ts) throws Exception {
        produce(topic, ts, 0);
    }

    private void produce(String topic, long[] ts, int partition) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < ts.length; i++) {
                prod.send(new ProducerRecord<>(topic, partition, ts[i], null, ("t" + i).getBytes(StandardCharsets.UTF_8))).get(20, TimeUnit.SECONDS);
            }
        }
    }

    private void emit(PrintStream out, Object... kv) {
        Map<String, Object> m = new TreeMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        emit(out, m);
    }

    private void emit(PrintStream out, Map<String, Object> m) {
        StringBuilder sb = new StringBuilder(scenario).append('\t').append('{');
        boolean first = true;
        for (Map.Entry<String, Object> e : new TreeMap<>(m).entrySet()) {
            if (!first) sb.append(',');
            first = false;
            str(sb, e.getKey());
            sb.append(':');
            Object v = e.getValue();
            if (v instanceof Number) sb.append(v);
            else str(sb, String.valueOf(v));
        }
        out.println(sb.append('}'));
    }

    private static void str(StringBuilder sb, String s) {
        sb.append('"');
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
            else if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
            else sb.append(ch);
        }
        sb.append('"');
    }
}
