package broker

// In-process tests of the internal topics (internal_topics.go): when they
// appear, how they are described, and what the APIs answer on them, as
// the reference Kafka 4.4 answers.

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/topicname"
)

func findCoordinator(c *testClient, keyType int8, key string) *kmsg.FindCoordinatorResponse {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 4
	req.CoordinatorType, req.CoordinatorKeys = keyType, []string{key}
	return c.do(req).(*kmsg.FindCoordinatorResponse)
}

// allTopics is Metadata for every topic, by name.
func (tb *testBroker) allTopics(c *testClient) map[string]kmsg.MetadataResponseTopic {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil
	resp := c.do(tb.latest(req)).(*kmsg.MetadataResponse)
	out := map[string]kmsg.MetadataResponseTopic{}
	for _, mt := range resp.Topics {
		out[*mt.Topic] = mt
	}
	return out
}

// TestInProcessInternalTopicsOnFirstUse: a fresh cluster lists no internal
// topic; one named is UNKNOWN_TOPIC_OR_PARTITION but flagged internal (in
// Metadata and DescribeTopicPartitions). The first group coordinator
// lookup creates __consumer_offsets, the first transaction coordinator
// lookup __transaction_state: 50 partitions each, internal, with ids that
// survive a restart.
func TestInProcessInternalTopicsOnFirstUse(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "user", 1, nil)
	if all := tb.allTopics(c); len(all) != 1 || all["user"].IsInternal {
		t.Fatalf("fresh cluster lists %v, want only user, not internal", all)
	}
	md := tb.metadata(c, consumerOffsetsTopic, transactionStateTopic)
	for _, mt := range md.Topics {
		if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code || !mt.IsInternal {
			t.Fatalf("named %s before use: error %d internal %v, want UNKNOWN_TOPIC_OR_PARTITION, internal", *mt.Topic, mt.ErrorCode, mt.IsInternal)
		}
	}
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, n := range []string{consumerOffsetsTopic, "user"} {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = n
		dtp.Topics = append(dtp.Topics, rt)
	}
	dresp := c.do(dtp).(*kmsg.DescribeTopicPartitionsResponse)
	if d := dresp.Topics[0]; *d.Topic != consumerOffsetsTopic || d.ErrorCode != kerr.UnknownTopicOrPartition.Code || !d.IsInternal {
		t.Fatalf("DescribeTopicPartitions before use: %s error %d internal %v", *d.Topic, d.ErrorCode, d.IsInternal)
	}
	if d := dresp.Topics[1]; d.IsInternal {
		t.Fatal("user topic described as internal")
	}

	if fc := findCoordinator(c, 0, "g"); fc.Coordinators[0].ErrorCode != 0 || fc.Coordinators[0].NodeID != 1 {
		t.Fatalf("FindCoordinator(group): %+v", fc.Coordinators[0])
	}
	all := tb.allTopics(c)
	co, ok := all[consumerOffsetsTopic]
	if !ok || !co.IsInternal || len(co.Partitions) != 50 || co.TopicID == [16]byte{} {
		t.Fatalf("after a group lookup: %s present %v, internal %v, %d partitions, id %x; want internal, 50, an id",
			consumerOffsetsTopic, ok, co.IsInternal, len(co.Partitions), co.TopicID)
	}
	if _, ok := all[transactionStateTopic]; ok {
		t.Fatalf("%s exists before any transaction coordinator lookup", transactionStateTopic)
	}

	findCoordinator(c, 1, "txn")
	all = tb.allTopics(c)
	ts, ok := all[transactionStateTopic]
	if !ok || !ts.IsInternal || len(ts.Partitions) != 50 {
		t.Fatalf("after a transaction lookup: %s present %v, internal %v, %d partitions", transactionStateTopic, ok, ts.IsInternal, len(ts.Partitions))
	}
	// Asking again changes nothing.
	findCoordinator(c, 0, "g2")
	tb.transactionsUsed(t.Context())
	if again := tb.allTopics(c); again[consumerOffsetsTopic].TopicID != co.TopicID || again[transactionStateTopic].TopicID != ts.TopicID {
		t.Fatal("a second lookup changed the internal topics' ids")
	}

	dresp = c.do(kmsg.NewPtrDescribeTopicPartitionsRequest()).(*kmsg.DescribeTopicPartitionsResponse)
	for _, d := range dresp.Topics {
		if want := *d.Topic != "user"; d.IsInternal != want {
			t.Fatalf("DescribeTopicPartitions: %s internal %v, want %v", *d.Topic, d.IsInternal, want)
		}
	}

	tb2 := tb.restartAfterCrash(t)
	c2 := tb2.dial(t)
	if after := tb2.allTopics(c2); after[consumerOffsetsTopic].TopicID != co.TopicID || !after[transactionStateTopic].IsInternal {
		t.Fatal("the internal topics did not survive a restart as they were")
	}
}

// TestInProcessInternalTopicConfigs: DescribeConfigs shows the overrides
// Kafka's coordinators create the topics with.
func TestInProcessInternalTopicConfigs(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	findCoordinator(c, 0, "g")
	findCoordinator(c, 1, "t")
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, n := range []string{consumerOffsetsTopic, transactionStateTopic} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, n
		req.Resources = append(req.Resources, rr)
	}
	resp := c.do(tb.latest(req)).(*kmsg.DescribeConfigsResponse)
	for _, res := range resp.Resources {
		if res.ErrorCode != 0 {
			t.Fatalf("%s: error %d", res.ResourceName, res.ErrorCode)
		}
		dynamic := map[string]string{}
		for _, cfg := range res.Configs {
			if cfg.Source == kmsg.ConfigSourceDynamicTopicConfig {
				dynamic[cfg.Name] = *cfg.Value
			}
		}
		want := internalTopicSpecs[res.ResourceName].configs
		if len(dynamic) != len(want) {
			t.Errorf("%s: topic overrides %v, want %v", res.ResourceName, dynamic, want)
		}
		for k, v := range want {
			if dynamic[k] != v {
				t.Errorf("%s: %s=%q, want %q (DYNAMIC_TOPIC_CONFIG)", res.ResourceName, k, dynamic[k], v)
			}
		}
	}
}

// TestInProcessInternalTopicAnswers: what each API answers on an internal
// topic, as the reference Kafka 4.4 does: produce and DeleteRecords are
// INVALID_TOPIC_EXCEPTION, ListOffsets and Fetch answer from the (empty)
// log, CreateTopics is TOPIC_ALREADY_EXISTS, CreatePartitions and
// DeleteTopics succeed, and the next group lookup creates the topic again.
func TestInProcessInternalTopicAnswers(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	findCoordinator(c, 0, "g")

	if got := c.produceAt(12, consumerOffsetsTopic, producerBatch(-1, -1, -1, 1, "v")); got.ErrorCode != kerr.InvalidTopicException.Code || got.ErrorMessage != nil {
		t.Fatalf("produce: error %d message %v, want INVALID_TOPIC_EXCEPTION without message", got.ErrorCode, got.ErrorMessage)
	}
	for _, ts := range []int64{-2, -1} {
		if lo := tb.listOffset(c, consumerOffsetsTopic, ts); lo.ErrorCode != 0 || lo.Offset != 0 {
			t.Fatalf("ListOffsets %d: error %d offset %d, want 0", ts, lo.ErrorCode, lo.Offset)
		}
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxBytes, fetch.SessionEpoch = 12, -1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = consumerOffsetsTopic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if p := c.do(fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.HighWatermark != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch: error %d high watermark %d, %d bytes; want an empty partition", p.ErrorCode, p.HighWatermark, len(p.RecordBatches))
	}

	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = consumerOffsetsTopic
	for _, part := range []int32{0, 50} {
		drp := kmsg.NewDeleteRecordsRequestTopicPartition()
		drp.Partition, drp.Offset = part, 0
		drt.Partitions = append(drt.Partitions, drp)
	}
	dr.Topics = append(dr.Topics, drt)
	drr := c.do(tb.latest(dr)).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions
	if drr[0].ErrorCode != kerr.InvalidTopicException.Code || drr[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DeleteRecords: errors %d, %d; want INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION", drr[0].ErrorCode, drr[1].ErrorCode)
	}

	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = consumerOffsetsTopic, 3, 1
	ct.Topics = append(ct.Topics, ctt)
	if r := c.do(tb.latest(ct)).(*kmsg.CreateTopicsResponse).Topics[0]; r.ErrorCode != kerr.TopicAlreadyExists.Code {
		t.Fatalf("CreateTopics: error %d, want TOPIC_ALREADY_EXISTS", r.ErrorCode)
	}

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = consumerOffsetsTopic, 60
	cp.Topics = append(cp.Topics, cpt)
	if r := c.do(tb.latest(cp)).(*kmsg.CreatePartitionsResponse).Topics[0]; r.ErrorCode != 0 {
		t.Fatalf("CreatePartitions: error %d", r.ErrorCode)
	}
	if n := len(tb.allTopics(c)[consumerOffsetsTopic].Partitions); n != 60 {
		t.Fatalf("%d partitions after CreatePartitions, want 60", n)
	}

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr(consumerOffsetsTopic)
	dt.Topics, dt.TopicNames = append(dt.Topics, dtt), []string{consumerOffsetsTopic}
	if r := c.do(tb.latest(dt)).(*kmsg.DeleteTopicsResponse).Topics[0]; r.ErrorCode != 0 {
		t.Fatalf("DeleteTopics: error %d", r.ErrorCode)
	}
	if _, ok := tb.allTopics(c)[consumerOffsetsTopic]; ok {
		t.Fatal("still listed after DeleteTopics")
	}
	findCoordinator(c, 0, "g")
	if n := len(tb.allTopics(c)[consumerOffsetsTopic].Partitions); n != 50 {
		t.Fatalf("recreated by the next group lookup with %d partitions, want 50", n)
	}
}

// TestInProcessMetadataAutoCreatesInternalTopic: Metadata naming an
// internal topic with auto-creation creates it as its coordinator would
// (50 partitions, compacted), not with num.partitions.
func TestInProcessMetadataAutoCreatesInternalTopic(t *testing.T) {
	tb := startTestBroker(t, func(cfg *Config) { cfg.AutoCreateTopics = true })
	c := tb.dial(t)
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(transactionStateTopic)
	req.Topics = append(req.Topics, rt)
	mt := c.do(tb.latest(req)).(*kmsg.MetadataResponse).Topics[0]
	if mt.ErrorCode != 0 || !mt.IsInternal || len(mt.Partitions) != 50 {
		t.Fatalf("auto-created %s: error %d internal %v, %d partitions; want internal with 50", transactionStateTopic, mt.ErrorCode, mt.IsInternal, len(mt.Partitions))
	}
	if got := tb.topicSettings(tb.catalog.topicByName(transactionStateTopic)).CleanupPolicy; got != "compact" {
		t.Fatalf("cleanup.policy %q, want compact", got)
	}
}

// TestInternalAppendRefused: Kafka lets only the admin client id append to
// internal topics, and answers the earlier checks first.
func TestInternalAppendRefused(t *testing.T) {
	co := &topic{name: consumerOffsetsTopic, parts: []*partition{{}}}
	user := &topic{name: "user", parts: []*partition{{}}}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 12, -1
	rp := kmsg.NewProduceRequestTopicPartition()
	if !internalAppendRefused(req, co, true, rp, "producer-1") {
		t.Error("a client may append to __consumer_offsets")
	}
	if internalAppendRefused(req, co, true, rp, adminClientID) {
		t.Error("the admin client may not append to __consumer_offsets")
	}
	if internalAppendRefused(req, user, true, rp, "producer-1") {
		t.Error("a user topic refused")
	}
	if internalAppendRefused(req, co, false, rp, "producer-1") {
		t.Error("unauthorized answered INVALID_TOPIC_EXCEPTION before TOPIC_AUTHORIZATION_FAILED")
	}
	rp.Partition = 1
	if internalAppendRefused(req, co, true, rp, "producer-1") {
		t.Error("unknown partition answered INVALID_TOPIC_EXCEPTION before UNKNOWN_TOPIC_OR_PARTITION")
	}
	for _, name := range []string{consumerOffsetsTopic, transactionStateTopic, shareGroupStateTopic} {
		if !topicname.Internal(name) {
			t.Errorf("%s not internal", name)
		}
	}
	if topicname.Internal("__consumer.offsets") || topicname.Internal("_consumer_offsets") {
		t.Error("a near name is internal")
	}
}
