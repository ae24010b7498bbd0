package io.kafgres.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Shared helpers. Clients get only the settings a test is about: the point
 * of the suite is that stock defaults (idempotence on, acks=all, ...) work.
 * Every blocking call has a deadline, so a broker that never answers fails
 * the test instead of hanging it.
 */
final class Kit {
    static final Duration TIMEOUT = Duration.ofSeconds(30);

    private Kit() {}

    /** Broker address, from -Dkafgres.bootstrap. */
    static String bootstrap() {
        String b = System.getProperty("kafgres.bootstrap", "");
        return b.isBlank() ? "127.0.0.1:9092" : b;
    }

    /** A topic name no other run uses; "jv-" marks this suite's topics on a shared broker. */
    static String topic(String what) {
        return "jv-" + what + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        return Admin.create(p);
    }

    /** A producer with nothing but the address and serializers, plus extras given as key, value pairs. */
    static KafkaProducer<String, String> producer(String... extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        put(p, extra);
        return new KafkaProducer<>(p);
    }

    /** A consumer with the address and deserializers, plus extras given as key, value pairs. */
    static KafkaConsumer<String, String> consumer(String... extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        put(p, extra);
        return new KafkaConsumer<>(p);
    }

    private static void put(Properties p, String[] kv) {
        if (kv.length % 2 != 0) {
            throw new IllegalArgumentException("extras come in key, value pairs");
        }
        for (int i = 0; i < kv.length; i += 2) {
            p.put(kv[i], kv[i + 1]);
        }
    }

    static void createTopic(Admin admin, String name, int partitions) {
        createTopic(admin, name, partitions, Map.of());
    }

    static void createTopic(Admin admin, String name, int partitions, Map<String, String> configs) {
        NewTopic t = new NewTopic(name, partitions, (short) 1).configs(configs);
        get(admin.createTopics(List.of(t)).all());
        // a broker may answer CreateTopics before its metadata shows the
        // topic; clients then see UNKNOWN_TOPIC for a moment
        eventually("topic " + name + " in metadata", () -> {
            try {
                return admin.describeTopics(List.of(name)).allTopicNames().get(10, TimeUnit.SECONDS)
                        .get(name).partitions().size() == partitions;
            } catch (Exception e) {
                return false;
            }
        });
    }

    /** Best-effort cleanup on a shared broker; failures are not the test's business. */
    static void deleteTopics(Admin admin, Collection<String> names) {
        if (names.isEmpty()) {
            return;
        }
        try {
            admin.deleteTopics(names).all().get(10, TimeUnit.SECONDS);
        } catch (Exception ignored) {
            // the broker under test may not serve DeleteTopics yet
        }
    }

    static <T> T get(Future<T> f) {
        try {
            return f.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw new AssertionError("request failed: " + e.getCause(), e.getCause());
        } catch (TimeoutException e) {
            throw new AssertionError("no answer within " + TIMEOUT, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** Waits for f to fail and checks the cause's class; returns the cause. */
    static <E extends Throwable> E failsWith(Class<E> want, Future<?> f) {
        try {
            Object v = f.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            return fail("expected " + want.getSimpleName() + ", got success: " + v);
        } catch (ExecutionException e) {
            return assertInstanceOf(want, e.getCause(), "cause: " + e.getCause());
        } catch (TimeoutException e) {
            throw new AssertionError("no answer within " + TIMEOUT, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    static void eventually(String what, BooleanSupplier cond) {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out waiting for " + what);
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }

    /** Sends synchronously; every record of the list must be acknowledged. */
    static List<RecordMetadata> sendAll(KafkaProducer<String, String> p, List<ProducerRecord<String, String>> recs) {
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (ProducerRecord<String, String> r : recs) {
            fs.add(p.send(r));
        }
        p.flush();
        List<RecordMetadata> out = new ArrayList<>();
        for (Future<RecordMetadata> f : fs) {
            out.add(get(f));
        }
        return out;
    }

    /** Writes n records "v0".."v(n-1)" to one partition; returns their metadata. */
    static List<RecordMetadata> fill(String topic, int partition, int n) {
        List<ProducerRecord<String, String>> recs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            recs.add(new ProducerRecord<>(topic, partition, "k" + i, "v" + i));
        }
        try (KafkaProducer<String, String> p = producer()) {
            return sendAll(p, recs);
        }
    }

    /** Polls until exactly want records arrived (more is a failure), within TIMEOUT. */
    static List<ConsumerRecord<String, String>> pollExactly(KafkaConsumer<String, String> c, int want) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        while (got.size() < want && System.nanoTime() < deadline) {
            c.poll(Duration.ofMillis(200)).forEach(got::add);
        }
        // a little longer: anything past want is a duplicate or a stray
        if (got.size() == want) {
            c.poll(Duration.ofMillis(300)).forEach(got::add);
        }
        assertEquals(want, got.size(), "records consumed");
        return got;
    }

    /** Reads every record of the given partitions from the beginning up to their end offsets. */
    static List<ConsumerRecord<String, String>> readAll(Collection<TopicPartition> tps) {
        try (KafkaConsumer<String, String> c = consumer()) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, TIMEOUT);
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps, TIMEOUT);
            int want = 0;
            for (TopicPartition tp : tps) {
                want += (int) (end.get(tp) - begin.get(tp));
            }
            return pollExactly(c, want);
        }
    }

    static Set<TopicPartition> partitions(String topic, int n) {
        Set<TopicPartition> s = new java.util.LinkedHashSet<>();
        for (int i = 0; i < n; i++) {
            s.add(new TopicPartition(topic, i));
        }
        return s;
    }
}
