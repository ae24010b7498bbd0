package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// latest sets req to the highest version the broker serves.
func (tb *testBroker) latest(req kmsg.Request) kmsg.Request {
	a, ok := tb.apis.lookup(req.Key())
	if !ok {
		tb.t.Fatalf("%s is not served", kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(a.max)
	return req
}

func (tb *testBroker) createTopic(t *testing.T, c *testClient, name string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	for k, v := range configs {
		rc := kmsg.NewCreateTopicsRequestTopicConfig()
		rc.Name, rc.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, rc)
	}
	req.Topics = append(req.Topics, rt)
	resp := c.do(tb.latest(req)).(*kmsg.CreateTopicsResponse)
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

func (tb *testBroker) metadata(c *testClient, topics ...string) *kmsg.MetadataResponse {
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return c.do(tb.latest(req)).(*kmsg.MetadataResponse)
}

func (tb *testBroker) produce(t *testing.T, c *testClient, topic string, partition int32, batch []byte) int64 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// v12: topics by name (v13 names them by id).
	req.SetVersion(12)
	resp := c.do(req).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, partition, err)
	}
	return p.BaseOffset
}

// TestInProcessTopicLifecycle: create, describe, produce, fetch, list
// offsets, commit and fetch offsets, delete — the handlers end to end on
// the in-memory store.
func TestInProcessTopicLifecycle(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "orders", 3, map[string]string{"retention.ms": "3600000"})

	md := tb.metadata(c, "orders")
	if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 3 || md.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata: %+v", md.Topics)
	}
	id := md.Topics[0].TopicID

	batch := seedBatches()[0]
	if off := tb.produce(t, c, "orders", 1, batch); off != 0 {
		t.Fatalf("first base offset %d", off)
	}
	if off := tb.produce(t, c, "orders", 1, batch); off != 5 {
		t.Fatalf("second base offset %d, want 5", off)
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 100, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "orders", id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1, 5, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fr := c.do(tb.latest(fetch)).(*kmsg.FetchResponse)
	part := fr.Topics[0].Partitions[0]
	if part.ErrorCode != 0 || part.HighWatermark != 10 {
		t.Fatalf("fetch: error %d, high watermark %d", part.ErrorCode, part.HighWatermark)
	}
	var batches kmsg.RecordBatch
	if err := batches.ReadFrom(part.RecordBatches); err != nil || batches.FirstOffset != 5 || batches.NumRecords != 5 {
		t.Fatalf("fetched batch: first offset %d, %d records, %v", batches.FirstOffset, batches.NumRecords, err)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "orders"
	for p := int32(0); p < 3; p++ {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = p, -1, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	lr := c.do(tb.latest(lo)).(*kmsg.ListOffsetsResponse)
	for _, p := range lr.Topics[0].Partitions {
		want := int64(0)
		if p.Partition == 1 {
			want = 10
		}
		if p.ErrorCode != 0 || p.Offset != want {
			t.Fatalf("list offsets of partition %d: error %d, offset %d, want %d", p.Partition, p.ErrorCode, p.Offset, want)
		}
	}

	// The mirror writes log ends behind the log.
	topicID := tb.catalog.topicByName("orders").id
	eventually(t, 10*time.Second, "the mirror writing partition 1's high watermark 10", func() bool {
		e, ok := tb.meta.LogEnd(topicID, 1)
		return ok && e.HighWatermark == 10
	})

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation, commit.MemberID = "g", -1, ""
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "orders"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.Metadata, cp.LeaderEpoch = 1, 7, kmsg.StringPtr("m"), -1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	commit.SetVersion(8) // by name
	cr := c.do(commit).(*kmsg.OffsetCommitResponse)
	if code := cr.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("offset commit: %v", kerr.ErrorForCode(code))
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "g"
	ot := kmsg.NewOffsetFetchRequestTopic()
	ot.Topic, ot.Partitions = "orders", []int32{1}
	of.Topics = append(of.Topics, ot)
	of.SetVersion(7)
	ofr := c.do(of).(*kmsg.OffsetFetchResponse)
	got := ofr.Topics[0].Partitions[0]
	if got.ErrorCode != 0 || got.Offset != 7 || got.Metadata == nil || *got.Metadata != "m" {
		t.Fatalf("offset fetch: %+v", got)
	}

	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("orders")
	del.Topics = append(del.Topics, dt)
	del.TopicNames = []string{"orders"}
	dr := c.do(tb.latest(del)).(*kmsg.DeleteTopicsResponse)
	if code := dr.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("delete topic: %v", kerr.ErrorForCode(code))
	}
	md = tb.metadata(c, "orders")
	if md.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("metadata after delete: error %d", md.Topics[0].ErrorCode)
	}
	if dropped, _ := tb.meta.DroppedTopics(t.Context(), []int64{topicID}); len(dropped) != 1 {
		t.Fatalf("dropped topics: %v", dropped)
	}
}

// TestInProcessConfigs: a topic's override is described as such, an
// incremental alter changes it (validate-only does not), and a bad value
// gets Kafka's error.
func TestInProcessConfigs(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "cfg", 1, map[string]string{"cleanup.policy": "compact"})

	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
		req.Resources = append(req.Resources, r)
		resp := c.do(tb.latest(req)).(*kmsg.DescribeConfigsResponse)
		if code := resp.Resources[0].ErrorCode; code != 0 {
			t.Fatalf("describe configs: %v", kerr.ErrorForCode(code))
		}
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, cfg := range resp.Resources[0].Configs {
			out[cfg.Name] = cfg
		}
		return out
	}
	got := describe()
	if e := got["cleanup.policy"]; e.Value == nil || *e.Value != "compact" || e.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("cleanup.policy: %+v", e)
	}

	alter := func(value string, validateOnly bool) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validateOnly
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Op, rc.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(value)
		r.Configs = append(r.Configs, rc)
		req.Resources = append(req.Resources, r)
		resp := c.do(tb.latest(req)).(*kmsg.IncrementalAlterConfigsResponse)
		return resp.Resources[0].ErrorCode
	}
	if code := alter("1000", true); code != 0 {
		t.Fatalf("validate-only alter: %v", kerr.ErrorForCode(code))
	}
	if e := describe()["retention.ms"]; e.Source == kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatal("a validate-only alter changed retention.ms")
	}
	if code := alter("1000", false); code != 0 {
		t.Fatalf("alter: %v", kerr.ErrorForCode(code))
	}
	if e := describe()["retention.ms"]; e.Value == nil || *e.Value != "1000" || e.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms after alter: %+v", e)
	}
	if code := alter("soon", false); code != kerr.InvalidConfig.Code {
		t.Fatalf("alter to a bad value: error %d, want INVALID_CONFIG", code)
	}
}

// TestInProcessProducerIDs: InitProducerId hands out distinct ids.
func TestInProcessProducerIDs(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	seen := map[int64]bool{}
	for i := 0; i < 3; i++ {
		resp := c.do(tb.latest(kmsg.NewPtrInitProducerIDRequest())).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 || resp.ProducerID < 0 || seen[resp.ProducerID] {
			t.Fatalf("init producer id: error %d, id %d (seen %v)", resp.ErrorCode, resp.ProducerID, seen)
		}
		seen[resp.ProducerID] = true
	}
}

// TestInProcessConsumerHeartbeatAssignor: a KIP-848 member may name any
// assignor the coordinator serves, and an unknown one is refused with
// Kafka's error and its list of the served names.
func TestInProcessConsumerHeartbeatAssignor(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	join := func(group, assignor string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = group, "m-"+group, 0
		req.RebalanceTimeoutMillis = 30000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		req.ServerAssignor = kmsg.StringPtr(assignor)
		return c.do(tb.latest(req)).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	for _, name := range []string{"uniform", "range"} {
		if resp := join("g-"+name, name); resp.ErrorCode != 0 {
			t.Fatalf("assignor %s: error %d (%v)", name, resp.ErrorCode, resp.ErrorMessage)
		}
	}
	resp := join("g-sticky", "sticky")
	if resp.ErrorCode != kerr.UnsupportedAssignor.Code {
		t.Fatalf("assignor sticky: error %d, want UNSUPPORTED_ASSIGNOR", resp.ErrorCode)
	}
	const want = "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
	if resp.ErrorMessage == nil || *resp.ErrorMessage != want {
		t.Fatalf("assignor sticky: message %v, want %q", resp.ErrorMessage, want)
	}
}
