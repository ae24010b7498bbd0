package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

func newAdmin(t *testing.T, addr string) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl), cl
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAdminTopicLifecycle: CreateTopics (validate-only, errors), growing a
// topic with CreatePartitions, and DeleteTopics removing the topic from
// Postgres and its log from disk.
func TestAdminTopicLifecycle(t *testing.T) {
	c := harness.Start(t, "kafgres.auto_create_topics = off")
	adm, _ := newAdmin(t, c.Addr)
	ctx := ctxT(t)

	v, err := adm.ValidateCreateTopics(ctx, 3, -1, nil, "life")
	if err != nil || v["life"].Err != nil || v["life"].NumPartitions != 3 {
		t.Fatalf("validate-only create: %v %+v", err, v["life"])
	}
	if ts, _ := adm.ListTopics(ctx); ts.Has("life") {
		t.Fatal("validate-only create created the topic")
	}
	r, err := adm.CreateTopics(ctx, 3, 1, nil, "life", "bad/name", "x.y")
	if err != nil {
		t.Fatal(err)
	}
	if r["life"].Err != nil || r["life"].ID == (kadm.TopicID{}) {
		t.Fatalf("create life: %+v", r["life"])
	}
	if !errorsIs(r["bad/name"].Err, kerr.InvalidTopicException) {
		t.Fatalf("create bad/name: %v", r["bad/name"].Err)
	}
	again, _ := adm.CreateTopics(ctx, 1, 1, nil, "life", "x_y")
	if !errorsIs(again["life"].Err, kerr.TopicAlreadyExists) {
		t.Fatalf("create life again: %v", again["life"].Err)
	}
	if !errorsIs(again["x_y"].Err, kerr.InvalidTopicException) || again["x_y"].ErrMessage != "Topic 'x_y' collides with existing topic: x.y" {
		t.Fatalf("create colliding x_y: %v %v", again["x_y"].Err, again["x_y"].ErrMessage)
	}
	rf, _ := adm.CreateTopics(ctx, 1, 3, nil, "rf3")
	if !errorsIs(rf["rf3"].Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("replication factor 3: %v", rf["rf3"].Err)
	}
	var parts int
	if err := c.Conn(t).QueryRow(ctx, `SELECT partitions FROM kafgres.topic WHERE name = 'life'`).Scan(&parts); err != nil || parts != 3 {
		t.Fatalf("kafgres.topic row for life: %d, %v", parts, err)
	}

	grow, err := adm.UpdatePartitions(ctx, 5, "life")
	if err != nil || grow["life"].Err != nil {
		t.Fatalf("grow to 5: %v %v", err, grow["life"].Err)
	}
	shrink, _ := adm.UpdatePartitions(ctx, 2, "life")
	if !errorsIs(shrink["life"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrink to 2: %v", shrink["life"].Err)
	}
	td, err := adm.ListTopics(ctx, "life")
	if err != nil || len(td["life"].Partitions) != 5 {
		t.Fatalf("life after growing: %v %d partitions", err, len(td["life"].Partitions))
	}
	// the new partition takes records at once
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "life", Partition: 4, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to new partition 4: %v", err)
	}

	dir := filepath.Join(c.DataDir(), "life-4")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("log of life-4: %v", err)
	}
	del, err := adm.DeleteTopics(ctx, "life", "nope")
	if err != nil || del["life"].Err != nil || !errorsIs(del["nope"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: %v life=%v nope=%v", err, del["life"].Err, del["nope"].Err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("log of deleted topic still there: %v", err)
	}
	// a new client: kgo answers metadata requests from a cache of a few
	// seconds
	fresh, _ := newAdmin(t, c.Addr)
	if ts, _ := fresh.ListTopics(ctx); ts.Has("life") {
		t.Fatalf("deleted topic still listed:\n%s", c.LogTail())
	}
}

// TestDeleteRecords: the low watermark moves, reads below it are out of
// range, and the new log start survives a broker kill.
func TestDeleteRecords(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "dr", 1)
	produceAll(t, c.Addr, "dr", 100)
	adm, _ := newAdmin(t, c.Addr)
	ctx := ctxT(t)

	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 40})
	res, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup("dr", 0); r.Err != nil || r.LowWatermark != 40 {
		t.Fatalf("delete records: %+v", r)
	}
	offs = kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 200})
	res, _ = adm.DeleteRecords(ctx, offs)
	if r, _ := res.Lookup("dr", 0); !errorsIs(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past the high watermark: %+v", r)
	}

	check := func(when string) {
		t.Helper()
		starts, err := adm.ListStartOffsets(ctx, "dr")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := starts.Lookup("dr", 0); o.Offset != 40 {
			t.Fatalf("%s: log start offset %d, want 40", when, o.Offset)
		}
		first := firstOffset(t, c.Addr, "dr")
		if first != 40 {
			t.Fatalf("%s: first consumed offset %d, want 40", when, first)
		}
	}
	check("after DeleteRecords")
	old := c.KillBroker(t)
	c.WaitBroker(t, old, 30*time.Second)
	check("after a broker kill")

	conn := c.Conn(t)
	harness.Eventually(t, 10*time.Second, func() error {
		var start int64
		if err := conn.QueryRow(ctx, `SELECT log_start_offset FROM kafgres_partition_offsets('dr')`).Scan(&start); err != nil {
			t.Fatal(err)
		}
		if start != 40 {
			return fmt.Errorf("kafgres.partition.log_start_offset = %d, want 40", start)
		}
		return nil
	})
}

// firstOffset consumes from the earliest offset and returns the first
// record's offset.
func firstOffset(t *testing.T, addr, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record from %s: %v", topic, err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0].Offset
		}
	}
}

// TestOffsetForLeaderEpoch: every broker start is a new leader epoch; the
// end offset of the previous one is where the new one began.
func TestOffsetForLeaderEpoch(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "ofle", 1)
	produceAll(t, c.Addr, "ofle", 10)
	_, cl := newAdmin(t, c.Addr)
	ctx := ctxT(t)
	epoch := func() int32 {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		name := "ofle"
		rt.Topic = &name
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].LeaderEpoch
	}
	e0 := epoch()
	old := c.KillBroker(t)
	c.WaitBroker(t, old, 30*time.Second)
	cl.ForceMetadataRefresh()
	produceAll(t, c.Addr, "ofle", 5)
	e1 := epoch()
	if e1 <= e0 {
		t.Fatalf("leader epoch %d after restart, was %d", e1, e0)
	}
	ask := func(current, leaderEpoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "ofle"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := ask(e1, e0); p.ErrorCode != 0 || p.LeaderEpoch != e0 || p.EndOffset != 10 {
		t.Fatalf("epoch %d: %+v, want end offset 10", e0, p)
	}
	if p := ask(e1, e1); p.ErrorCode != 0 || p.LeaderEpoch != e1 || p.EndOffset != 15 {
		t.Fatalf("current epoch %d: %+v, want end offset 15", e1, p)
	}
	if p := ask(e1, e1+1); p.LeaderEpoch != -1 || p.EndOffset != -1 {
		t.Fatalf("future epoch: %+v, want undefined", p)
	}
	if p := ask(e0, e0); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("stale current epoch: error %d, want FENCED_LEADER_EPOCH", p.ErrorCode)
	}
}

// TestClusterAdminAPIs: the single-node answers of DescribeCluster,
// ElectLeaders, reassignments, DescribeLogDirs, DescribeProducers,
// DescribeTopicPartitions paging, client quotas and UpdateFeatures.
func TestClusterAdminAPIs(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "ca", 3)
	produceAll(t, c.Addr, "ca", 50)
	adm, cl := newAdmin(t, c.Addr)
	ctx := ctxT(t)

	cluster, err := adm.BrokerMetadata(ctx)
	if err != nil || cluster.Controller != 1 || len(cluster.Brokers) != 1 || cluster.Cluster == "" {
		t.Fatalf("cluster: %v %+v", err, cluster)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dcr, err := dc.RequestWith(ctx, cl)
	if err != nil || dcr.ClusterID != cluster.Cluster || dcr.ControllerID != 1 || len(dcr.Brokers) != 1 {
		t.Fatalf("DescribeCluster: %v %+v", err, dcr)
	}

	el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"ca": {0: {}, 7: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if !errorsIs(el["ca"][0].Err, kerr.ElectionNotNeeded) || !errorsIs(el["ca"][7].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("elect leaders: %+v", el)
	}
	ls, err := adm.ListPartitionReassignments(ctx, nil)
	if err != nil || len(ls) != 0 {
		t.Fatalf("list reassignments: %v %v", err, ls)
	}
	ar, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{"ca": {0: {1}, 1: {2}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := ar["ca"][0]; r.Err != nil {
		t.Fatalf("reassign to [1]: %v", r.Err)
	}
	if r := ar["ca"][1]; !errorsIs(r.Err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("reassign to [2]: %v", r.Err)
	}

	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{"ca": {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil || d.Dir != c.DataDir() {
			t.Errorf("log dir %q: %v (want %s)", d.Dir, d.Err, c.DataDir())
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) { size += p.Size })
	})
	if size < 50*10 {
		t.Fatalf("log dir sizes sum to %d bytes for 50 records", size)
	}

	prods, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"ca": {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var active int
	prods.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID < 0 || p.LastSequence < 0 || p.LastTimestamp <= 0 {
			t.Errorf("producer %+v", p)
		}
		active++
	})
	if active == 0 {
		t.Fatal("DescribeProducers: no producer after an idempotent produce")
	}

	// DescribeTopicPartitions pages by partition
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "ca"}}
	dtp.ResponsePartitionLimit = 2
	dtr, err := dtp.RequestWith(ctx, cl)
	if err != nil || len(dtr.Topics) != 1 || len(dtr.Topics[0].Partitions) != 2 || dtr.NextCursor == nil || dtr.NextCursor.Partition != 2 {
		t.Fatalf("DescribeTopicPartitions page 1: %v %+v", err, dtr)
	}
	dtp.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "ca", Partition: 2}
	dtr, err = dtp.RequestWith(ctx, cl)
	if err != nil || len(dtr.Topics[0].Partitions) != 1 || dtr.Topics[0].Partitions[0].Partition != 2 || dtr.NextCursor != nil {
		t.Fatalf("DescribeTopicPartitions page 2: %v %+v", err, dtr)
	}

	// quotas are stored, and survive a broker restart
	alice := "alice"
	_, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &alice}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	old := c.KillBroker(t)
	c.WaitBroker(t, old, 30*time.Second)
	q, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeExact, MatchName: &alice}})
	if err != nil || len(q) != 1 || q[0].Values[0].Key != "producer_byte_rate" || q[0].Values[0].Value != 1024 {
		t.Fatalf("quotas after restart: %v %+v", err, q)
	}

	// group.version 0 turns the consumer group protocol off
	setGroupVersion := func(level int16) {
		t.Helper()
		req := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = "group.version", level, 2
		if level > 0 {
			u.UpgradeType = 1
		}
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("UpdateFeatures group.version=%d: %v %+v", level, err, resp)
		}
	}
	heartbeat := func() int16 {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = "g848", "m-1234567890123456789", 0
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames = 30000, []string{"ca"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 && resp.ErrorMessage != nil {
			t.Logf("heartbeat: %s", *resp.ErrorMessage)
		}
		return resp.ErrorCode
	}
	setGroupVersion(0)
	if code := heartbeat(); code != kerr.UnsupportedVersion.Code {
		t.Fatalf("heartbeat with group.version 0: error %d", code)
	}
	setGroupVersion(1)
	if code := heartbeat(); code != 0 {
		t.Fatalf("heartbeat with group.version 1: error %d", code)
	}
}

// TestConnectionLimits: max.connections.per.ip, altered at runtime, turns
// away new connections from an address at its limit, and lifting it lets
// them in again.
func TestConnectionLimits(t *testing.T) {
	c := harness.Start(t)
	adm, _ := newAdmin(t, c.Addr)
	ctx := ctxT(t)
	setLimit := func(op kadm.IncrementalOp, value string) {
		t.Helper()
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "max.connections.per.ip", Value: &value}})
		if err != nil || rs[0].Err != nil {
			t.Fatalf("%v max.connections.per.ip: %v %+v", op, err, rs)
		}
	}
	// answered reports whether a new connection gets an ApiVersions answer
	answered := func() bool {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(rctx, cl)
		return err == nil
	}
	if !answered() {
		t.Fatal("no answer without a limit")
	}
	setLimit(kadm.SetConfig, "1") // the admin client's connection is the one
	if answered() {
		t.Fatal("a second connection from 127.0.0.1 was served with max.connections.per.ip=1")
	}
	setLimit(kadm.DeleteConfig, "")
	if !answered() {
		t.Fatal("no answer after the limit was removed")
	}
}
