package integration

// KIP-848 consumer groups: raw ConsumerGroupHeartbeat/Describe requests
// (deterministic: each step is one request and its answer) and franz-go's
// server-side-balancer consumer.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// hb848 is a raw KIP-848 member.
type hb848 struct {
	t     *testing.T
	cl    *kgo.Client
	group string
	id    string
	epoch int32
	owned map[[16]byte][]int32
}

func newHB848(t *testing.T, cl *kgo.Client, group, id string) *hb848 {
	return &hb848{t: t, cl: cl, group: group, id: id}
}

func (m *hb848) send(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	req.Group, req.MemberID = m.group, m.id
	resp, err := req.RequestWith(context.Background(), m.cl)
	if err != nil {
		m.t.Fatalf("heartbeat: %v", err)
	}
	return resp
}

// join sends the first heartbeat with a topic list or a regex.
func (m *hb848) join(topics []string, regex, assignor string) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.MemberEpoch = 0
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = topics
	if regex != "" {
		req.SubscribedTopicRegex = &regex
	}
	if assignor != "" {
		req.ServerAssignor = &assignor
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return m.apply(m.send(req))
}

// beat heartbeats reporting what the member owns (it revokes at once).
func (m *hb848) beat() *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.MemberEpoch = m.epoch
	req.RebalanceTimeoutMillis = -1
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for id, ps := range m.owned {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = id, ps
		req.Topics = append(req.Topics, rt)
	}
	return m.apply(m.send(req))
}

func (m *hb848) leave() *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.MemberEpoch = -1
	req.RebalanceTimeoutMillis = -1
	return m.send(req)
}

func (m *hb848) apply(resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	m.t.Helper()
	if resp.ErrorCode != 0 {
		return resp
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.owned = map[[16]byte][]int32{}
		for _, at := range resp.Assignment.Topics {
			ps := slices.Clone(at.Partitions)
			slices.Sort(ps)
			m.owned[at.TopicID] = ps
		}
	}
	return resp
}

// parts lists what the member owns of one topic.
func (m *hb848) parts(id [16]byte) []int32 { return m.owned[id] }

func must848(t *testing.T, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	t.Helper()
	if resp.ErrorCode != 0 {
		msg := ""
		if resp.ErrorMessage != nil {
			msg = *resp.ErrorMessage
		}
		t.Fatalf("heartbeat error %v: %s", kerr.ErrorForCode(resp.ErrorCode), msg)
	}
}

func topicID(t *testing.T, cl *kgo.Client, name string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &name
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata %s: %v %+v", name, err, resp)
	}
	return resp.Topics[0].TopicID
}

func describe848(t *testing.T, cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0]
}

func TestKIP848RawHeartbeats(t *testing.T) {
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	c.CreateTopic(t, "k848", 4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id := topicID(t, cl, "k848")

	a := newHB848(t, cl, "g848", "member-a")
	must848(t, a.join([]string{"k848"}, "", ""))
	if a.epoch != 1 || !slices.Equal(a.parts(id), []int32{0, 1, 2, 3}) {
		t.Fatalf("first member: epoch %d owns %v, want epoch 1 and all partitions", a.epoch, a.parts(id))
	}
	d := describe848(t, cl, "g848")
	if d.ErrorCode != 0 || d.State != "Stable" || d.Epoch != 1 || d.AssignmentEpoch != 1 || d.AssignorName != "uniform" || len(d.Members) != 1 {
		t.Fatalf("describe after one join: %+v", d)
	}

	// A second member: it gets nothing until member-a revokes.
	b := newHB848(t, cl, "g848", "member-b")
	must848(t, b.join([]string{"k848"}, "", ""))
	if b.epoch != 2 || len(b.parts(id)) != 0 {
		t.Fatalf("second member before revocation: epoch %d owns %v", b.epoch, b.parts(id))
	}
	if d := describe848(t, cl, "g848"); d.State != "Reconciling" {
		t.Fatalf("state during rebalance %q, want Reconciling", d.State)
	}
	// member-a is told to revoke 2 and 3, and keeps epoch 1 until it does.
	resp := a.send(&kmsg.ConsumerGroupHeartbeatRequest{MemberEpoch: 1, RebalanceTimeoutMillis: -1})
	must848(t, resp)
	if resp.MemberEpoch != 1 || resp.Assignment == nil || !slices.Equal(resp.Assignment.Topics[0].Partitions, []int32{0, 1}) {
		t.Fatalf("revocation: %+v", resp)
	}
	a.apply(resp)
	// member-b still waits: a has not said it revoked (owned was null).
	must848(t, b.beat())
	if len(b.parts(id)) != 0 {
		t.Fatalf("b got %v before a revoked", b.parts(id))
	}
	// a confirms by reporting {0,1}; it moves to epoch 2.
	must848(t, a.beat())
	if a.epoch != 2 || !slices.Equal(a.parts(id), []int32{0, 1}) {
		t.Fatalf("a after revoking: epoch %d owns %v", a.epoch, a.parts(id))
	}
	must848(t, b.beat())
	if !slices.Equal(b.parts(id), []int32{2, 3}) {
		t.Fatalf("b after a revoked: %v", b.parts(id))
	}
	d = describe848(t, cl, "g848")
	if d.State != "Stable" || d.Epoch != 2 || len(d.Members) != 2 {
		t.Fatalf("describe after rebalance: %+v", d)
	}
	for _, m := range d.Members {
		if len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "k848" || len(m.Assignment.TopicPartitions[0].Partitions) != 2 || m.MemberEpoch != 2 {
			t.Fatalf("described member %+v", m)
		}
	}

	// Errors: a stale or future epoch, an unknown member, an unknown group.
	if r := a.send(&kmsg.ConsumerGroupHeartbeatRequest{MemberEpoch: 7, RebalanceTimeoutMillis: -1}); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("future epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := newHB848(t, cl, "g848", "ghost").send(&kmsg.ConsumerGroupHeartbeatRequest{MemberEpoch: 2, RebalanceTimeoutMillis: -1}); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := newHB848(t, cl, "nope848", "x").send(&kmsg.ConsumerGroupHeartbeatRequest{MemberEpoch: 1, RebalanceTimeoutMillis: -1}); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("unknown group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := newHB848(t, cl, "g848", "bad").send(&kmsg.ConsumerGroupHeartbeatRequest{MemberEpoch: 0, RebalanceTimeoutMillis: 1000, Topics: []kmsg.ConsumerGroupHeartbeatRequestTopic{}}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("join without subscription: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if d := describe848(t, cl, "nope848"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe unknown: %v", kerr.ErrorForCode(d.ErrorCode))
	}

	// Offsets: a member commits with its epoch; a stale one is refused.
	commit := func(member string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = "g848", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = "k848", id // v10 names topics by id
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("member-a", 2); code != 0 {
		t.Fatalf("commit at current epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commit("member-a", 3); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit at future epoch: %v", kerr.ErrorForCode(code))
	}
	if code := commit("ghost", 2); code != kerr.UnknownMemberID.Code {
		t.Fatalf("commit by unknown member: %v", kerr.ErrorForCode(code))
	}
	if code := commit("", -1); code != kerr.UnknownMemberID.Code {
		t.Fatalf("admin commit to a group with members: %v", kerr.ErrorForCode(code))
	}

	// ListGroups shows the type; DescribeGroups refuses a consumer group;
	// a classic JoinGroup cannot take the id.
	lreq := kmsg.NewPtrListGroupsRequest()
	lresp, err := lreq.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range lresp.Groups {
		if g.Group == "g848" {
			found = g.GroupType == "consumer" && g.ProtocolType == "consumer" && g.GroupState == "Stable"
		}
	}
	if !found {
		t.Fatalf("ListGroups: %+v", lresp.Groups)
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{"g848"}
	dresp, err := dreq.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if g := dresp.Groups[0]; g.ErrorCode != kerr.GroupIDNotFound.Code || g.State != "Dead" {
		t.Fatalf("DescribeGroups of a consumer group: %+v", g)
	}
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Group, jreq.ProtocolType, jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = "g848", "consumer", 10000, 10000
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0}}}
	jresp, err := jreq.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if jresp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join of a consumer group: %v", kerr.ErrorForCode(jresp.ErrorCode))
	}

	// Leaving: b's partitions go to a; the group can be deleted once empty.
	if r := b.leave(); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	must848(t, a.beat())
	if a.epoch != 3 || !slices.Equal(a.parts(id), []int32{0, 1, 2, 3}) {
		t.Fatalf("a after b left: epoch %d owns %v", a.epoch, a.parts(id))
	}
	delReq := kmsg.NewPtrDeleteGroupsRequest()
	delReq.Groups = []string{"g848"}
	if r, err := delReq.RequestWith(context.Background(), cl); err != nil || r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete non-empty: %v %+v", err, r)
	}
	a.leave()
	if d := describe848(t, cl, "g848"); d.State != "Empty" {
		t.Fatalf("state after everyone left: %q", d.State)
	}
	if r, err := delReq.RequestWith(context.Background(), cl); err != nil || r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete empty: %v %+v", err, r)
	}
}

func TestKIP848AssignorsAndRegex(t *testing.T) {
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	c.CreateTopic(t, "ra", 3)
	c.CreateTopic(t, "rb", 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ra, rb := topicID(t, cl, "ra"), topicID(t, cl, "rb")

	// range: per topic, members in id order take contiguous ranges.
	m1, m2 := newHB848(t, cl, "grange", "m1"), newHB848(t, cl, "grange", "m2")
	must848(t, m1.join([]string{"ra", "rb"}, "", "range"))
	must848(t, m2.join([]string{"ra", "rb"}, "", "range"))
	for i := 0; i < 3; i++ {
		must848(t, m1.beat())
		must848(t, m2.beat())
	}
	if !slices.Equal(m1.parts(ra), []int32{0, 1}) || !slices.Equal(m1.parts(rb), []int32{0, 1}) ||
		!slices.Equal(m2.parts(ra), []int32{2}) || !slices.Equal(m2.parts(rb), []int32{2}) {
		t.Fatalf("range: m1 %v %v, m2 %v %v", m1.parts(ra), m1.parts(rb), m2.parts(ra), m2.parts(rb))
	}
	if d := describe848(t, cl, "grange"); d.AssignorName != "range" || d.State != "Stable" {
		t.Fatalf("range describe: %+v", d)
	}

	// uniform: 6 partitions over 2 members, 3 each, across topics.
	u1, u2 := newHB848(t, cl, "guni", "u1"), newHB848(t, cl, "guni", "u2")
	must848(t, u1.join([]string{"ra", "rb"}, "", ""))
	must848(t, u2.join([]string{"ra", "rb"}, "", ""))
	for i := 0; i < 3; i++ {
		must848(t, u1.beat())
		must848(t, u2.beat())
	}
	if n1, n2 := len(u1.parts(ra))+len(u1.parts(rb)), len(u2.parts(ra))+len(u2.parts(rb)); n1 != 3 || n2 != 3 {
		t.Fatalf("uniform: %v %v / %v %v", u1.parts(ra), u1.parts(rb), u2.parts(ra), u2.parts(rb))
	}

	// A regex subscription picks up a topic created after the join.
	x := newHB848(t, cl, "gregex", "x1")
	must848(t, x.join(nil, "re\\..*", ""))
	if len(x.owned) != 0 || x.epoch != 1 {
		t.Fatalf("regex before topic exists: epoch %d owns %v", x.epoch, x.owned)
	}
	c.CreateTopic(t, "re.late", 2)
	late := topicID(t, cl, "re.late")
	harness.Eventually(t, 10*time.Second, func() error {
		must848(t, x.beat())
		if len(x.parts(late)) != 2 {
			return fmt.Errorf("regex after topic creation: epoch %d owns %v", x.epoch, x.parts(late))
		}
		return nil
	})
	if !slices.Equal(x.parts(late), []int32{0, 1}) || x.epoch != 2 {
		t.Fatalf("regex after topic creation: epoch %d owns %v", x.epoch, x.parts(late))
	}
	if r := newHB848(t, cl, "gregex", "x2").join(nil, "(", ""); r.ErrorCode != kerr.InvalidRegularExpression.Code {
		t.Fatalf("bad regex: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// franz-go's KIP-848 consumer (ServerSideBalancer): two members share a
// topic, one leaves, and every record is read exactly once.
func TestKIP848FranzGo(t *testing.T) {
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	c.CreateTopic(t, "kf848", 4)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("kf848"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	var mu sync.Mutex
	seen := map[string]int{}
	consume := func(ctx context.Context, cl *kgo.Client) {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)]++
				mu.Unlock()
			})
			if len(fs.Records()) > 0 {
				cl.CommitUncommittedOffsets(context.Background())
			}
		}
	}
	newMember := func() (*kgo.Client, context.CancelFunc, chan struct{}) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ConsumerGroup("gf848"), kgo.ConsumeTopics("kf848"),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); consume(ctx, cl) }()
		return cl, cancel, done
	}
	waitAll := func(n int) {
		t.Helper()
		err := harness.Poll(60*time.Second, func() error {
			mu.Lock()
			got := len(seen)
			mu.Unlock()
			if got < n {
				return fmt.Errorf("read %d distinct records, want %d", got, n)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, c.LogTail())
		}
	}

	cl1, cancel1, done1 := newMember()
	defer cl1.Close()
	produce(0, 100)
	waitAll(100)
	cl2, cancel2, done2 := newMember()
	// Wait until the second member owns something, then produce more.
	harness.Eventually(t, 30*time.Second, func() error {
		if d := describe848(t, prod, "gf848"); len(d.Members) != 2 || d.State != "Stable" {
			return fmt.Errorf("group never stable with 2 members: %+v", d)
		}
		return nil
	})
	produce(100, 100)
	waitAll(200)
	cancel2()
	<-done2
	cl2.Close() // leaves with epoch -1
	produce(200, 100)
	waitAll(300)
	cancel1()
	<-done1

	mu.Lock()
	defer mu.Unlock()
	for v, n := range seen {
		if n != 1 {
			t.Errorf("record %s read %d times", v, n)
		}
	}
}
