// The "java-tools" conformance client: Kafka's own command-line tools
// (what kafka-topics.sh, kafka-get-offsets.sh and kafka-console-consumer.sh
// run), called in one JVM through their main methods, with their stdout
// parsed into observations (tests/conformance/PROTOCOL.md).
//
// Only what the tools print is observed. Records a scenario needs are
// produced with kafka-clients first; that setup is not observed.

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
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

    /** Thrown instead of exiting the JVM when a tool calls Exit.exit. */
    private static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code) {
            super("exit " + code);
            this.code = code;
        }
    }

    private ToolsClient(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
    }

    public static void main(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
        ToolsClient c = new ToolsClient(opts.get("--bootstrap"), opts.getOrDefault("--prefix", "c-java-tools"));
        // the tools end with Exit.exit; keep the JVM for the next scenario
        Exit.setExitProcedure((code, msg) -> {
            throw new ToolExit(code);
        });
        Exit.setHaltProcedure((code, msg) -> {
            throw new ToolExit(code);
        });
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
        return prefix + "-" + scenario + "-0";
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
            default -> emit(out, "skip", "no Kafka command-line tool observes this scenario");
        }
    }

    // kafka-topics.sh --describe: one observation per printed line, its
    // "Key: value" fields as JSON keys (lower-cased).
    private void describe(PrintStream out, String topic) {
        Tool r = tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--describe", "--topic", topic);
        for (String line : r.stdout) {
            Map<String, Object> m = new TreeMap<>();
            if (!line.trim().startsWith("Topic: ")) {
                emit(out, "text", line.trim()); // e.g. an error message
                continue;
            }
            for (String field : line.trim().split("\t")) {
                int colon = field.indexOf(": ");
                if (colon > 0) m.put(field.substring(0, colon).trim().toLowerCase(), field.substring(colon + 2).trim());
                else if (field.trim().endsWith(":")) m.put(field.trim().replace(":", "").toLowerCase(), "");
                else m.put("text", line.trim());
            }
            emit(out, m);
        }
        emit(out, "tool", "kafka-topics --describe", "exit", r.exit);
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
            for (String line : r.stdout) {
                String[] f = line.trim().split("\\s+");
                if (f.length == 4 && f[1].equals(topic())) {
                    emit(out, "step", name, "partition", Long.parseLong(f[2]), "new_offset", Long.parseLong(f[3]));
                } else if (!f[0].equals("GROUP")) {
                    emit(out, "step", name, "text", line.trim());
                }
            }
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

    private record Tool(List<String> stdout, int exit) {}

    // Runs a tool's main with stdout captured; stderr stays ours (logged by
    // the runner, never diffed).
    private static Tool tool(String cls, String... args) {
        PrintStream saved = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int exit = 0;
        try (PrintStream capture = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            System.setOut(capture);
            Class.forName(cls).getMethod("main", String[].class).invoke(null, (Object) args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            if (e.getCause() instanceof ToolExit te) exit = te.code;
            else {
                e.getCause().printStackTrace();
                exit = -1;
            }
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        } finally {
            System.setOut(saved);
        }
        List<String> lines = new ArrayList<>();
        for (String l : buf.toString(StandardCharsets.UTF_8).split("\n")) {
            if (!l.isBlank()) lines.add(l);
        }
        return new Tool(lines, exit);
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
