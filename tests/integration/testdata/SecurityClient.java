// Runs the cells of the security matrix (security_clients_test.go) with
// Kafka's own clients (KafkaProducer, KafkaConsumer, Admin), configured with
// sasl.jaas.config and PEM trust and key stores, and prints one line per
// cell: "RESULT<TAB>name<TAB>code<TAB>detail", code empty on success, else
// Errors.forException of the client's exception (SASL_AUTHENTICATION_FAILED,
// TOPIC_AUTHORIZATION_FAILED, ...): Kafka's own name for what it threw.
// SPEC is the same tab-separated file security_client.py reads.
// Run with the source launcher:
//   java -cp KAFKA_CLASSPATH SecurityClient.java SPEC

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class SecurityClient {
    static final int WAIT_MS = 12_000; // any one operation
    static final Map<String, String> addrs = new HashMap<>();
    static final Map<String, String> files = new HashMap<>();

    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Path.of(args[0]));
        for (String line : lines) {
            String[] f = line.split("\t", -1);
            if (f[0].equals("addr")) addrs.put(f[1], f[2]);
            else if (!f[0].equals("cell")) files.put(f[0], f[1]);
        }
        for (String line : lines) {
            String[] f = line.split("\t", -1);
            if (!f[0].equals("cell")) continue;
            String code = "", detail = "";
            try {
                run(f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]);
            } catch (Throwable e) {
                Throwable cause = e;
                while ((cause instanceof ExecutionException || cause.getClass() == KafkaException.class) && cause.getCause() != null) {
                    cause = cause.getCause();
                }
                code = cause instanceof Timeout || cause instanceof java.util.concurrent.TimeoutException ? "TIMEOUT" : Errors.forException(cause).name();
                detail = cause.getClass().getName() + ": " + cause.getMessage();
            }
            System.out.println("RESULT\t" + f[1] + "\t" + code + "\t" + detail.replaceAll("\\s+", " "));
            System.out.flush();
        }
        System.exit(0); // a stuck client thread must not keep the JVM up
    }

    static class Timeout extends Exception {
        Timeout(String m) { super(m); }
    }

    static Properties config(String name, String listener, String mech, String user, String password) {
        Properties p = new Properties();
        p.put("bootstrap.servers", addrs.get(listener));
        p.put("security.protocol", listener);
        p.put("client.id", name);
        p.put("request.timeout.ms", String.valueOf(WAIT_MS));
        p.put("default.api.timeout.ms", String.valueOf(WAIT_MS));
        p.put("reconnect.backoff.max.ms", "500");
        if (!mech.isEmpty()) {
            String module = mech.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                    : "org.apache.kafka.common.security.scram.ScramLoginModule";
            p.put("sasl.mechanism", mech);
            p.put("sasl.jaas.config", module + " required username=\"" + user + "\" password=\"" + password + "\";");
        }
        if (listener.contains("SSL")) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", files.get("ca"));
        }
        if (listener.equals("SSL")) {
            p.put("ssl.keystore.type", "PEM");
            p.put("ssl.keystore.location", files.get("keystore"));
        }
        return p;
    }

    static void run(String name, String listener, String mech, String user, String password, String op, String topic, String group) throws Exception {
        Properties p = config(name, listener, mech, user, password);
        switch (op) {
            case "login":
                try (Admin a = Admin.create(p)) {
                    a.describeCluster().clusterId().get(WAIT_MS, TimeUnit.MILLISECONDS);
                }
                break;
            case "roundtrip":
                produce(p, topic, name);
                fetch(p, topic);
                break;
            case "produce":
                produce(p, topic, name);
                break;
            case "fetch":
                fetch(p, topic);
                break;
            case "group":
                p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
                p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                    c.subscribe(List.of(topic));
                    pollOne(c);
                    c.commitSync(Duration.ofMillis(WAIT_MS));
                }
                break;
            case "create":
                try (Admin a = Admin.create(p)) {
                    a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
                }
                break;
            case "delete":
                try (Admin a = Admin.create(p)) {
                    a.deleteTopics(List.of(topic)).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
                }
                break;
            case "topic-configs":
            case "broker-configs":
                ConfigResource r = op.equals("topic-configs") ? new ConfigResource(ConfigResource.Type.TOPIC, topic)
                        : new ConfigResource(ConfigResource.Type.BROKER, "1");
                try (Admin a = Admin.create(p)) {
                    a.describeConfigs(List.of(r)).all().get(WAIT_MS, TimeUnit.MILLISECONDS);
                }
                break;
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    static void produce(Properties p, String topic, String name) throws Exception {
        p = (Properties) p.clone();
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(WAIT_MS));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(WAIT_MS));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        try (KafkaProducer<byte[], byte[]> pr = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            pr.send(new ProducerRecord<>(topic, ("v-" + name).getBytes())).get(WAIT_MS, TimeUnit.MILLISECONDS);
        }
    }

    static void fetch(Properties p, String topic) throws Exception {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            pollOne(c);
        }
    }

    static void pollOne(KafkaConsumer<byte[], byte[]> c) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (System.currentTimeMillis() < deadline) {
            if (!c.poll(Duration.ofMillis(500)).isEmpty()) return;
        }
        throw new Timeout("no record within " + WAIT_MS + " ms");
    }
}
