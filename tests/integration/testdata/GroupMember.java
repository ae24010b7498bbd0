// A consumer-group member for the integration tests (groups_clients_test.go):
// Kafka's KafkaConsumer with group.protocol=classic (the default) or consumer
// (KIP-848; the session and heartbeat settings are the broker's then, so
// they are set for classic only). Same output as
// group_member.py: "assigned <n>" on assignment changes, "rec <p> <o>" per
// record, then a synchronous commit per batch; on SIGTERM it closes (leaving
// the group). Run with the source launcher:
//   java -cp KAFKA_CLASSPATH GroupMember.java BOOTSTRAP GROUP TOPIC [PROTOCOL]

import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupMember {
    static volatile boolean running = true;

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        String protocol = args.length > 3 ? args[3] : "classic";
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            running = false;
            c.wakeup();
            try {
                main.join(20000);
            } catch (InterruptedException e) {
            }
        }));
        c.subscribe(List.of(args[2]));
        int last = -1;
        try {
            while (running) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                int n = c.assignment().size();
                if (n != last) {
                    System.out.println("assigned " + n);
                    System.out.flush();
                    last = n;
                }
                if (rs.isEmpty()) continue;
                StringBuilder sb = new StringBuilder();
                for (ConsumerRecord<byte[], byte[]> r : rs) sb.append("rec ").append(r.partition()).append(' ').append(r.offset()).append('\n');
                System.out.print(sb);
                System.out.flush();
                try {
                    c.commitSync();
                } catch (org.apache.kafka.common.KafkaException e) {
                    System.err.println("commit failed: " + e);
                }
            }
        } catch (org.apache.kafka.common.errors.WakeupException e) {
            // shutting down
        } finally {
            c.close();
        }
    }
}
