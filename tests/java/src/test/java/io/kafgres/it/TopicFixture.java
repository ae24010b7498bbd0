package io.kafgres.it;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.admin.Admin;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * What every test class shares: one Admin client, and the topics the class
 * named, deleted after its last test. Test classes run one after another,
 * so the static state belongs to one class at a time.
 */
abstract class TopicFixture {
    static Admin admin;
    private static final List<String> topics = Collections.synchronizedList(new ArrayList<>());

    @BeforeAll
    static void openAdmin() {
        admin = Kit.admin();
    }

    @AfterAll
    static void dropTopics() {
        Kit.deleteTopics(admin, topics);
        topics.clear();
        admin.close();
    }

    /** A fresh topic name, deleted after the class. */
    static String newName(String what) {
        String t = Kit.topic(what);
        topics.add(t);
        return t;
    }

    static String newTopic(String what, int partitions) {
        return newTopic(what, partitions, Map.of());
    }

    static String newTopic(String what, int partitions, Map<String, String> configs) {
        String t = newName(what);
        Kit.createTopic(admin, t, partitions, configs);
        return t;
    }
}
