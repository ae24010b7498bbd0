package io.kafgres.it;

import static io.kafgres.it.Kit.failsWith;
import static io.kafgres.it.Kit.get;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UpdateFeaturesOptions;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.errors.InvalidUpdateVersionException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.junit.jupiter.api.Test;

/** The stock Admin client against a single-node cluster whose only broker is node 1. */
class AdminTest extends TopicFixture {
    private static final int NODE = 1;



    private static TopicDescription describe(String topic) {
        return get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
    }

    private static Config topicConfig(String topic) {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        return get(admin.describeConfigs(List.of(r)).all()).get(r);
    }

    private static void assertEntry(Config c, String name, String value, ConfigEntry.ConfigSource source) {
        ConfigEntry e = c.get(name);
        assertNotNull(e, "config " + name + " missing");
        assertEquals(value, e.value(), name);
        assertEquals(source, e.source(), name + " source");
        assertEquals(source == ConfigEntry.ConfigSource.DEFAULT_CONFIG, e.isDefault(), name + " isDefault");
    }

    // ---- topics ----

    @Test
    void createTopicReportsPartitionsConfigsAndId() {
        String t = newName("create");
        NewTopic nt = new NewTopic(t, 3, (short) 1).configs(Map.of("retention.ms", "3600000"));
        CreateTopicsResult res = admin.createTopics(List.of(nt));
        get(res.all());
        assertEquals(3, get(res.numPartitions(t)));
        assertEquals(1, get(res.replicationFactor(t)));
        Uuid id = get(res.topicId(t));
        assertNotEquals(Uuid.ZERO_UUID, id);
        Config cfg = get(res.config(t));
        assertEntry(cfg, "retention.ms", "3600000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        assertEntry(cfg, "cleanup.policy", "delete", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
        Kit.eventually("topic in metadata", () -> {
            try {
                return describe(t).topicId().equals(id);
            } catch (AssertionError e) {
                return false;
            }
        });
    }

    @Test
    void createTopicValidateOnlyCreatesNothing() {
        String t = newName("validate");
        CreateTopicsResult res = admin.createTopics(List.of(new NewTopic(t, 5, (short) 1)),
                new CreateTopicsOptions().validateOnly(true));
        get(res.all());
        assertEquals(5, get(res.numPartitions(t)));
        assertFalse(get(admin.listTopics().names()).contains(t), "validateOnly created the topic");
        failsWith(UnknownTopicOrPartitionException.class, admin.describeTopics(List.of(t)).allTopicNames());
    }

    @Test
    void createTopicRejectsBadRequests() {
        String t = newTopic("exists", 1, Map.of());
        failsWith(TopicExistsException.class, admin.createTopics(List.of(new NewTopic(t, 1, (short) 1))).all());

        String bad = newName("badconf");
        failsWith(InvalidConfigurationException.class, admin.createTopics(List.of(
                new NewTopic(bad, 1, (short) 1).configs(Map.of("retention.ms", "not-a-number")))).all());
        failsWith(InvalidConfigurationException.class, admin.createTopics(List.of(
                new NewTopic(bad, 1, (short) 1).configs(Map.of("cleanup.policy", "sometimes")))).all());
        failsWith(InvalidPartitionsException.class, admin.createTopics(List.of(new NewTopic(bad, 0, (short) 1))).all());
        failsWith(InvalidReplicationFactorException.class, admin.createTopics(List.of(new NewTopic(bad, 1, (short) 3))).all());
        assertFalse(get(admin.listTopics().names()).contains(bad), "a rejected topic was created");
    }

    @Test
    void listAndDescribeTopics() {
        String t = newTopic("describe", 3, Map.of());
        assertTrue(get(admin.listTopics().names()).contains(t));
        TopicDescription d = describe(t);
        assertEquals(t, d.name());
        assertFalse(d.isInternal());
        assertNotEquals(Uuid.ZERO_UUID, d.topicId());
        assertEquals(3, d.partitions().size());
        for (int i = 0; i < 3; i++) {
            TopicPartitionInfo p = d.partitions().get(i);
            assertEquals(i, p.partition());
            assertEquals(NODE, p.leader().id());
            assertEquals(List.of(NODE), p.replicas().stream().map(Node::id).toList());
            assertEquals(List.of(NODE), p.isr().stream().map(Node::id).toList());
        }
        // the same topic looked up by its id
        Map<Uuid, TopicDescription> byId = get(admin.describeTopics(TopicCollection.ofTopicIds(List.of(d.topicId()))).allTopicIds());
        assertEquals(t, byId.get(d.topicId()).name());
        // listings carry the id too
        assertEquals(d.topicId(), get(admin.listTopics().namesToListings()).get(t).topicId());
    }

    /** DescribeTopicPartitions pages through a topic with a cursor when asked for few partitions per response. */
    @Test
    void describeTopicsPagesThroughPartitions() {
        String a = newTopic("pagea", 5, Map.of());
        String b = newTopic("pageb", 3, Map.of());
        Map<String, TopicDescription> ds = get(admin.describeTopics(List.of(a, b),
                new DescribeTopicsOptions().partitionSizeLimitPerResponse(2)).allTopicNames());
        assertEquals(List.of(0, 1, 2, 3, 4), ds.get(a).partitions().stream().map(TopicPartitionInfo::partition).toList());
        assertEquals(List.of(0, 1, 2), ds.get(b).partitions().stream().map(TopicPartitionInfo::partition).toList());
    }

    @Test
    void createPartitionsGrowsButNeverShrinks() {
        String t = newTopic("grow", 2, Map.of());
        get(admin.createPartitions(Map.of(t, NewPartitions.increaseTo(4))).all());
        Kit.eventually("4 partitions", () -> describe(t).partitions().size() == 4);
        assertEquals(NODE, describe(t).partitions().get(3).leader().id());
        // the new partitions take records
        assertEquals(0, Kit.fill(t, 3, 1).get(0).offset());
        failsWith(InvalidPartitionsException.class, admin.createPartitions(Map.of(t, NewPartitions.increaseTo(2))).all());
        failsWith(InvalidPartitionsException.class, admin.createPartitions(Map.of(t, NewPartitions.increaseTo(4))).all());
        failsWith(UnknownTopicOrPartitionException.class,
                admin.createPartitions(Map.of(newName("nosuch"), NewPartitions.increaseTo(4))).all());
        assertEquals(4, describe(t).partitions().size());
    }

    @Test
    void deleteTopicsRemovesThem() {
        String t = newTopic("delete", 2, Map.of());
        Kit.fill(t, 0, 3);
        Uuid oldId = describe(t).topicId();
        get(admin.deleteTopics(List.of(t)).all());
        Kit.eventually("topic gone from metadata", () -> !get(admin.listTopics().names()).contains(t));
        failsWith(UnknownTopicOrPartitionException.class, admin.describeTopics(List.of(t)).allTopicNames());
        failsWith(UnknownTopicOrPartitionException.class, admin.deleteTopics(List.of(t)).all());
        // the name is free again, for a new topic that starts empty
        Kit.eventually("name reusable", () -> {
            try {
                admin.createTopics(List.of(new NewTopic(t, 1, (short) 1))).all().get();
                return true;
            } catch (Exception e) {
                return false;
            }
        });
        Kit.eventually("new topic in metadata", () -> {
            try {
                return !describe(t).topicId().equals(oldId);
            } catch (AssertionError e) {
                return false;
            }
        });
        assertEquals(0, Kit.fill(t, 0, 1).get(0).offset());
    }

    // ---- configs ----

    @Test
    void describeTopicConfigsShowsValuesAndSources() {
        String t = newTopic("configs", 1, Map.of("retention.ms", "3600000", "max.message.bytes", "50000"));
        Config c = topicConfig(t);
        assertEntry(c, "retention.ms", "3600000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        assertEntry(c, "max.message.bytes", "50000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        assertEntry(c, "cleanup.policy", "delete", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
        assertEntry(c, "retention.bytes", "-1", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
        assertEntry(c, "segment.bytes", "1073741824", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
        assertEntry(c, "message.timestamp.type", "CreateTime", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
        // unknown topics have no configs
        failsWith(UnknownTopicOrPartitionException.class, admin.describeConfigs(List.of(
                new ConfigResource(ConfigResource.Type.TOPIC, newName("noconf")))).all());
    }

    @Test
    void describeBrokerConfigs() {
        ConfigResource r = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(NODE));
        Config c = get(admin.describeConfigs(List.of(r)).all()).get(r);
        assertEntry(c, "message.max.bytes", "1048588", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
        assertEntry(c, "log.retention.hours", "168", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
        assertEquals("1", c.get("node.id").value());
        assertEquals("true", c.get("auto.create.topics.enable").value());
        assertTrue(c.entries().size() > 50, "a broker has many configs, got " + c.entries().size());
    }

    @Test
    void incrementalAlterConfigsSetAndDelete() throws Exception {
        String t = newTopic("alter", 1, Map.of());
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, t);
        get(admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "3000"), AlterConfigOp.OpType.SET)))).all());
        Kit.eventually("altered configs visible", () -> "7200000".equals(topicConfig(t).get("retention.ms").value()));
        Config c = topicConfig(t);
        assertEntry(c, "retention.ms", "7200000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
        assertEntry(c, "max.message.bytes", "3000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);

        // the new limit is enforced
        try (KafkaProducer<String, String> p = Kit.producer()) {
            failsWith(RecordTooLargeException.class, p.send(new ProducerRecord<>(t, "k", "z".repeat(6000))));
        }

        get(admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all());
        Kit.eventually("deleted config back to default", () -> "604800000".equals(topicConfig(t).get("retention.ms").value()));
        c = topicConfig(t);
        assertEntry(c, "retention.ms", "604800000", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
        assertEntry(c, "max.message.bytes", "3000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);

        failsWith(InvalidConfigurationException.class, admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all());
        assertEquals("3000", topicConfig(t).get("max.message.bytes").value());
    }

    // ---- offsets and records ----

    @Test
    void deleteRecordsReturnsLowWatermark() {
        String t = newTopic("delrec", 2, Map.of());
        TopicPartition p0 = new TopicPartition(t, 0);
        TopicPartition p1 = new TopicPartition(t, 1);
        Kit.fill(t, 0, 10);
        Kit.fill(t, 1, 5);
        var res = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(6), p1, RecordsToDelete.beforeOffset(-1)));
        assertEquals(6, get(res.lowWatermarks().get(p0)).lowWatermark());
        assertEquals(5, get(res.lowWatermarks().get(p1)).lowWatermark(), "-1 means up to the high watermark");
        Map<TopicPartition, ListOffsetsResultInfo> earliest = get(admin.listOffsets(Map.of(p0, OffsetSpec.earliest(), p1, OffsetSpec.earliest())).all());
        assertEquals(6, earliest.get(p0).offset());
        assertEquals(5, earliest.get(p1).offset());
        // never backwards, never past the end
        assertEquals(6, get(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(2))).lowWatermarks().get(p0)).lowWatermark());
        failsWith(OffsetOutOfRangeException.class, admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(11))).lowWatermarks().get(p0));
    }

    @Test
    void listOffsetsEarliestLatestTimestampAndMax() {
        String t = newTopic("listoff", 1, Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        long t0 = System.currentTimeMillis() - 60_000;
        long[] ts = {t0, t0 + 3000, t0 + 1000, t0 + 2000}; // the newest record is not the last
        try (KafkaProducer<String, String> p = Kit.producer()) {
            for (int i = 0; i < ts.length; i++) {
                get(p.send(new ProducerRecord<>(t, 0, ts[i], "k", "v" + i)));
            }
        }
        assertEquals(0, offset(tp, OffsetSpec.earliest()).offset());
        assertEquals(4, offset(tp, OffsetSpec.latest()).offset());
        ListOffsetsResultInfo at = offset(tp, OffsetSpec.forTimestamp(t0 + 1500));
        assertEquals(1, at.offset(), "first offset whose timestamp is at or after the target");
        assertEquals(t0 + 3000, at.timestamp());
        ListOffsetsResultInfo exact = offset(tp, OffsetSpec.forTimestamp(t0));
        assertEquals(0, exact.offset());
        assertEquals(t0, exact.timestamp());
        ListOffsetsResultInfo max = offset(tp, OffsetSpec.maxTimestamp());
        assertEquals(1, max.offset(), "the record with the largest timestamp");
        assertEquals(t0 + 3000, max.timestamp());
        ListOffsetsResultInfo none = offset(tp, OffsetSpec.forTimestamp(t0 + 100_000));
        assertEquals(-1, none.offset(), "no record that late");
    }

    private static ListOffsetsResultInfo offset(TopicPartition tp, OffsetSpec spec) {
        return get(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp));
    }

    // ---- cluster ----

    @Test
    void describeClusterHasOneNode() {
        DescribeClusterResult c = admin.describeCluster();
        Collection<Node> nodes = get(c.nodes());
        assertEquals(1, nodes.size());
        Node n = nodes.iterator().next();
        assertEquals(NODE, n.id());
        String[] hp = Kit.bootstrap().split(":");
        assertEquals(Integer.parseInt(hp[hp.length - 1]), n.port(), "the advertised port is the one we dialled");
        assertEquals(NODE, get(c.controller()).id());
        String id = get(c.clusterId());
        assertNotNull(id);
        assertFalse(id.isEmpty());
        assertEquals(id, get(admin.describeCluster().clusterId()), "the cluster id is stable");
    }

    @Test
    void describeLogDirsAndReplicaLogDirs() {
        String t = newTopic("logdirs", 2, Map.of());
        TopicPartition p0 = new TopicPartition(t, 0);
        TopicPartition p1 = new TopicPartition(t, 1);
        Kit.fill(t, 0, 20);
        Map<String, LogDirDescription> dirs = get(admin.describeLogDirs(List.of(NODE)).allDescriptions()).get(NODE);
        assertNotNull(dirs);
        assertFalse(dirs.isEmpty());
        String dirOfP0 = null;
        for (var e : dirs.entrySet()) {
            LogDirDescription d = e.getValue();
            assertNull(d.error(), "log dir " + e.getKey());
            assertTrue(d.totalBytes().isPresent() && d.totalBytes().getAsLong() > 0, "total bytes of " + e.getKey());
            assertTrue(d.usableBytes().isPresent(), "usable bytes of " + e.getKey());
            ReplicaInfo r0 = d.replicaInfos().get(p0);
            if (r0 != null) {
                dirOfP0 = e.getKey();
                assertTrue(r0.size() > 20 * 4, "partition 0 holds 20 records, size " + r0.size());
                assertFalse(r0.isFuture());
                ReplicaInfo r1 = d.replicaInfos().get(p1);
                assertNotNull(r1, "partition 1 is in the same dir");
                assertEquals(0, r1.size(), "partition 1 is empty");
            }
        }
        assertNotNull(dirOfP0, "no log dir lists " + p0);

        TopicPartitionReplica rep = new TopicPartitionReplica(t, 0, NODE);
        ReplicaLogDirInfo info = get(admin.describeReplicaLogDirs(List.of(rep)).all()).get(rep);
        assertEquals(dirOfP0, info.getCurrentReplicaLogDir());
        assertNull(info.getFutureReplicaLogDir());
    }

    @Test
    void describeFeatures() {
        FeatureMetadata f = get(admin.describeFeatures().featureMetadata());
        // group.version is the feature both brokers finalize; Kafka's
        // KRaft-only features (metadata.version, ...) kafgres does not have
        for (String name : List.of("group.version")) {
            FinalizedVersionRange fin = f.finalizedFeatures().get(name);
            SupportedVersionRange sup = f.supportedFeatures().get(name);
            assertNotNull(fin, name + " finalized");
            assertNotNull(sup, name + " supported");
            assertTrue(fin.maxVersionLevel() >= 1, name + " level " + fin.maxVersionLevel());
            assertTrue(fin.maxVersionLevel() <= sup.maxVersion() && fin.maxVersionLevel() >= sup.minVersion(),
                    name + ": finalized " + fin + " outside supported " + sup);
        }
        assertTrue(f.finalizedFeaturesEpoch().isPresent(), "finalized features epoch");
    }

    /** Only validateOnly: the suite must not change a shared broker's features. */
    @Test
    void updateFeaturesValidateOnly() {
        UpdateFeaturesOptions dry = new UpdateFeaturesOptions().validateOnly(true);
        short level = get(admin.describeFeatures().featureMetadata()).finalizedFeatures().get("group.version").maxVersionLevel();
        get(admin.updateFeatures(Map.of("group.version", new FeatureUpdate(level, FeatureUpdate.UpgradeType.UPGRADE)), dry).all());
        get(admin.updateFeatures(Map.of("group.version", new FeatureUpdate((short) 0, FeatureUpdate.UpgradeType.SAFE_DOWNGRADE)), dry).all());
        failsWith(InvalidUpdateVersionException.class, admin.updateFeatures(
                Map.of("group.version", new FeatureUpdate((short) 99, FeatureUpdate.UpgradeType.UPGRADE)), dry).all());
        failsWith(InvalidUpdateVersionException.class, admin.updateFeatures(
                Map.of("jv.no.such.feature", new FeatureUpdate((short) 1, FeatureUpdate.UpgradeType.UPGRADE)), dry).all());
        assertEquals(level, get(admin.describeFeatures().featureMetadata()).finalizedFeatures().get("group.version").maxVersionLevel(),
                "validateOnly changed group.version");
    }

    @Test
    void describeProducersAfterIdempotentWrites() {
        String t = newTopic("producers", 1, Map.of());
        TopicPartition tp = new TopicPartition(t, 0);
        long lastTs = System.currentTimeMillis() - 1000;
        try (KafkaProducer<String, String> p = Kit.producer()) {
            for (int i = 0; i < 5; i++) {
                get(p.send(new ProducerRecord<>(t, 0, lastTs - 4 + i, "k", "v" + i)));
            }
        }
        List<ProducerState> ps = get(admin.describeProducers(List.of(tp)).partitionResult(tp)).activeProducers();
        assertEquals(1, ps.size(), "one idempotent producer wrote: " + ps);
        ProducerState s = ps.get(0);
        assertTrue(s.producerId() >= 0, "producer id " + s.producerId());
        assertTrue(s.producerEpoch() >= 0, "epoch " + s.producerEpoch());
        assertEquals(4, s.lastSequence(), "five records, sequences 0..4");
        assertEquals(lastTs, s.lastTimestamp());
        assertTrue(s.currentTransactionStartOffset().isEmpty(), "no transaction");

        try (KafkaProducer<String, String> p = Kit.producer()) {
            get(p.send(new ProducerRecord<>(t, 0, "k", "w")));
        }
        List<ProducerState> two = get(admin.describeProducers(List.of(tp)).partitionResult(tp)).activeProducers();
        assertEquals(2, two.size(), "a second producer: " + two);
        assertNotEquals(two.get(0).producerId(), two.get(1).producerId());
        for (ProducerState x : two) {
            if (x.producerId() != s.producerId()) {
                assertEquals(0, x.lastSequence());
            }
        }
    }

    /** With one replica the preferred leader already leads: nothing to elect. */
    @Test
    void electPreferredLeadersIsNotNeeded() {
        String t = newTopic("elect", 2, Map.of());
        Set<TopicPartition> tps = Kit.partitions(t, 2);
        Map<TopicPartition, Optional<Throwable>> res = get(admin.electLeaders(ElectionType.PREFERRED, tps).partitions());
        assertEquals(tps, res.keySet());
        for (var e : res.entrySet()) {
            assertTrue(e.getValue().isPresent(), e.getKey() + ": expected ElectionNotNeeded");
            assertTrue(e.getValue().get() instanceof ElectionNotNeededException, e.getKey() + ": " + e.getValue().get());
        }
        TopicPartition missing = new TopicPartition(t, 9);
        Optional<Throwable> err = get(admin.electLeaders(ElectionType.PREFERRED, Set.of(missing)).partitions()).get(missing);
        assertTrue(err.isPresent() && err.get() instanceof UnknownTopicOrPartitionException, "unknown partition: " + err);
    }

    @Test
    void partitionReassignments() {
        String t = newTopic("reassign", 2, Map.of());
        TopicPartition p0 = new TopicPartition(t, 0);
        assertEquals(Map.of(), get(admin.listPartitionReassignments().reassignments()));
        Map<TopicPartition, PartitionReassignment> mine = get(admin.listPartitionReassignments(Kit.partitions(t, 2)).reassignments());
        assertEquals(Map.of(), mine);
        // moving a replica to where it already is completes at once
        get(admin.alterPartitionReassignments(Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(NODE))))).all());
        assertEquals(Map.of(), get(admin.listPartitionReassignments(Set.of(p0)).reassignments()));
        assertEquals(List.of(NODE), describe(t).partitions().get(0).replicas().stream().map(Node::id).toList());
    }

    // ---- quotas ----

    @Test
    void clientQuotasRoundTrip() {
        String user = Kit.topic("user");
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
        // validateOnly stores nothing; an unknown quota is refused
        get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 1.0)))), new AlterClientQuotasOptions().validateOnly(true)).all());
        assertEquals(Map.of(), get(admin.describeClientQuotas(filter).entities()));
        failsWith(InvalidRequestException.class, admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("jv_no_such_rate", 1.0))))).all());

        get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 1024000.0),
                new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0))))).all());
        Kit.eventually("quotas visible", () -> !get(admin.describeClientQuotas(filter).entities()).isEmpty());
        Map<ClientQuotaEntity, Map<String, Double>> got = get(admin.describeClientQuotas(filter).entities());
        assertEquals(Map.of(entity, Map.of("producer_byte_rate", 1024000.0, "consumer_byte_rate", 2048.0)), got);

        // a null value removes one quota
        get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all());
        Kit.eventually("one quota removed", () -> get(admin.describeClientQuotas(filter).entities()).getOrDefault(entity, Map.of()).size() == 1);
        assertEquals(Map.of(entity, Map.of("consumer_byte_rate", 2048.0)), get(admin.describeClientQuotas(filter).entities()));

        get(admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                new ClientQuotaAlteration.Op("consumer_byte_rate", null))))).all());
        Kit.eventually("all quotas removed", () -> get(admin.describeClientQuotas(filter).entities()).isEmpty());
    }
}
