package integration

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// Groups wait group.initial.rebalance.delay.ms (Kafka's 3 s) before their
// first generation; every wait below allows for it.
const groupWait = 45 * time.Second

// groupConsumer is one franz-go group member polling in the background and
// recording what it owns and what it reads.
type groupConsumer struct {
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	owned map[int32]bool
	read  []readRecord
}

type readRecord struct {
	by        string
	partition int32
	offset    int64
	value     string
	owned     bool // the reader owned the partition when it got the record
}

func startGroupConsumer(t *testing.T, addr, group, topic, name string, balancer kgo.GroupBalancer) *groupConsumer {
	t.Helper()
	gc := &groupConsumer{name: name, owned: map[int32]bool{}, done: make(chan struct{})}
	track := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			gc.mu.Lock()
			defer gc.mu.Unlock()
			for _, p := range m[topic] {
				if add {
					gc.owned[p] = true
				} else {
					delete(gc.owned, p)
				}
			}
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(balancer),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.OnPartitionsAssigned(track(true)),
		kgo.OnPartitionsRevoked(track(false)),
		kgo.OnPartitionsLost(track(false)),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gc.cl, gc.cancel = cl, cancel
	go func() {
		defer close(gc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			gc.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				gc.read = append(gc.read, readRecord{by: name, partition: r.Partition, offset: r.Offset, value: string(r.Value), owned: gc.owned[r.Partition]})
			})
			gc.mu.Unlock()
		}
	}()
	t.Cleanup(gc.stop)
	return gc
}

// stop leaves the group (franz-go sends LeaveGroup on Close).
func (gc *groupConsumer) stop() {
	gc.cancel()
	<-gc.done
	gc.cl.Close()
}

func (gc *groupConsumer) partitions() []int32 {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	var ps []int32
	for p := range gc.owned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// records returns what gc read whose value starts with prefix.
func (gc *groupConsumer) records(prefix string) []readRecord {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	var out []readRecord
	for _, r := range gc.read {
		if strings.HasPrefix(r.value, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// waitAssignment waits until the consumers own disjoint, non-empty sets
// of partitions covering 0..n-1.
func waitAssignment(t *testing.T, n int32, cs ...*groupConsumer) {
	t.Helper()
	harness.Eventually(t, groupWait, func() error {
		seen := map[int32]int{}
		ok := true
		var desc []string
		for _, c := range cs {
			ps := c.partitions()
			desc = append(desc, fmt.Sprintf("%s=%v", c.name, ps))
			ok = ok && len(ps) > 0
			for _, p := range ps {
				seen[p]++
			}
		}
		for p := int32(0); p < n; p++ {
			ok = ok && seen[p] == 1
		}
		if !ok || len(seen) != int(n) {
			return fmt.Errorf("assignment did not settle: %s", strings.Join(desc, " "))
		}
		return nil
	})
}

// produceBatch writes perPartition records "<prefix>-p-i" to each partition.
func produceBatch(t *testing.T, addr, topic, prefix string, partitions int32, perPartition int) map[string]int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]int32{}
	var rs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			v := fmt.Sprintf("%s-%d-%d", prefix, p, i)
			want[v] = p
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", prefix, err)
	}
	return want
}

// expectOnce waits until every record in want was read exactly once across
// cs, each by a member that owned its partition at the time.
func expectOnce(t *testing.T, prefix string, want map[string]int32, cs ...*groupConsumer) {
	t.Helper()
	harness.Eventually(t, groupWait, func() error {
		var all []readRecord
		for _, c := range cs {
			all = append(all, c.records(prefix)...)
		}
		count := map[string]int{}
		for _, r := range all {
			if _, ok := want[r.value]; !ok {
				t.Fatalf("%s read unexpected record %q", r.by, r.value)
			}
			if !r.owned {
				t.Fatalf("%s read %q from partition %d it did not own", r.by, r.value, r.partition)
			}
			if count[r.value]++; count[r.value] > 1 {
				t.Fatalf("%q read twice in one generation window", r.value)
			}
		}
		if len(count) != len(want) {
			return fmt.Errorf("%s: read %d of %d records", prefix, len(count), len(want))
		}
		return nil
	})
}

// TestConsumerGroupBalancers: a member alone consumes all three
// partitions; a second joins and the partitions split; the first leaves
// and the second gets everything. In each window every record produced is
// read exactly once, by its partition's owner.
func TestConsumerGroupBalancers(t *testing.T) {
	c := harness.Start(t)
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"roundrobin", kgo.RoundRobinBalancer()},
		{"sticky", kgo.StickyBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			topic, group := "grp-"+tc.name, "g-"+tc.name
			c.CreateTopic(t, topic, 3)

			a := startGroupConsumer(t, c.Addr, group, topic, "a", tc.balancer)
			waitAssignment(t, 3, a)
			expectOnce(t, "one", produceBatch(t, c.Addr, topic, "one", 3, 20), a)

			b := startGroupConsumer(t, c.Addr, group, topic, "b", tc.balancer)
			waitAssignment(t, 3, a, b)
			expectOnce(t, "two", produceBatch(t, c.Addr, topic, "two", 3, 20), a, b)

			a.stop()
			waitAssignment(t, 3, b)
			expectOnce(t, "three", produceBatch(t, c.Addr, topic, "three", 3, 20), b)
		})
	}
}

// TestKcatBalancedConsumer reads with librdkafka's classic group consumer.
func TestKcatBalancedConsumer(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "kcatgroup", 1)
	produceBatch(t, c.Addr, "kcatgroup", "v", 1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", "-b", c.Addr, "-G", "kcat-g", "kcatgroup",
		"-e", "-q", "-o", "beginning", "-c", "3", "-f", "%p:%o %k -> %s\n").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -G: %v\n%s\n%s", err, out, c.LogTail())
	}
	want := "0:0  -> v-0-0\n0:1  -> v-0-1\n0:2  -> v-0-2\n"
	if string(out) != want {
		t.Fatalf("kcat -G read:\n%s\nwant:\n%s", out, want)
	}
}

// raw sends one request through cl, failing the test on transport errors.
func raw[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := rawAsync[R](cl, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// rawAsync is raw for goroutines, which must not call t.Fatal.
func rawAsync[R kmsg.Response](cl *kgo.Client, req kmsg.Request) (R, error) {
	ctx, cancel := context.WithTimeout(context.Background(), groupWait)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		var zero R
		return zero, fmt.Errorf("%T: %w", req, err)
	}
	return resp.(R), nil
}

func newMemberClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func joinReq(group, memberID string, instanceID *string, sessionMs int32) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.InstanceID = group, memberID, instanceID
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = sessionMs, 20000
	req.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte{0, 1}
	req.Protocols = append(req.Protocols, p)
	return req
}

func syncReq(group, memberID string, instanceID *string, gen int32, assign map[string]string) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = group, memberID, instanceID, gen
	// mandatory from v5, as in joinReq: Kafka answers INCONSISTENT_GROUP_PROTOCOL without them
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return req
}

// describeGroup is group as DescribeGroups shows it.
func describeGroup(t *testing.T, cl *kgo.Client, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp := raw[*kmsg.DescribeGroupsResponse](t, cl, req)
	if len(resp.Groups) != 1 {
		t.Fatalf("DescribeGroups %s: %d groups", group, len(resp.Groups))
	}
	return resp.Groups[0]
}

func heartbeat(t *testing.T, cl *kgo.Client, group, memberID string, instanceID *string, gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID, req.Generation = group, memberID, instanceID, gen
	return raw[*kmsg.HeartbeatResponse](t, cl, req).ErrorCode
}

// TestStaticMembership: a static member that restarts (rejoins with its
// instance id and no member id) keeps its assignment, the other member
// sees no rebalance, and the old member id is fenced.
func TestStaticMembership(t *testing.T) {
	c := harness.Start(t)
	const group = "static"
	i1, i2 := "instance-1", "instance-2"
	cl1, cl2 := newMemberClient(t, c.Addr), newMemberClient(t, c.Addr)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{group}
	if r := raw[*kmsg.FindCoordinatorResponse](t, cl1, fc); len(r.Coordinators) != 1 || r.Coordinators[0].NodeID != 1 || r.Coordinators[0].ErrorCode != 0 {
		t.Fatalf("FindCoordinator: %+v", r)
	}

	var j1, j2 *kmsg.JoinGroupResponse
	var err1, err2 error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		j1, err1 = rawAsync[*kmsg.JoinGroupResponse](cl1, joinReq(group, "", &i1, 10000))
	}()
	// instance-1 joins first and leads: its join is parked in the
	// group (PreparingRebalance) before instance-2's is sent
	harness.Eventually(t, groupWait, func() error {
		d := describeGroup(t, cl2, group)
		for _, m := range d.Members {
			if m.InstanceID != nil && *m.InstanceID == i1 {
				return nil
			}
		}
		return fmt.Errorf("%s has not joined: group %s, %d members", i1, d.State, len(d.Members))
	})
	go func() {
		defer wg.Done()
		j2, err2 = rawAsync[*kmsg.JoinGroupResponse](cl2, joinReq(group, "", &i2, 10000))
	}()
	wg.Wait()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if j1.ErrorCode != 0 || j2.ErrorCode != 0 || j1.Generation != 1 || j2.Generation != 1 || j1.LeaderID != j1.MemberID || len(j1.Members) != 2 {
		t.Fatalf("join: %+v / %+v", j1, j2)
	}
	assign := map[string]string{j1.MemberID: "A", j2.MemberID: "B"}
	var s1, s2 *kmsg.SyncGroupResponse
	wg.Add(2)
	go func() {
		defer wg.Done()
		s2, err2 = rawAsync[*kmsg.SyncGroupResponse](cl2, syncReq(group, j2.MemberID, &i2, 1, nil))
	}()
	go func() {
		defer wg.Done()
		s1, err1 = rawAsync[*kmsg.SyncGroupResponse](cl1, syncReq(group, j1.MemberID, &i1, 1, assign))
	}()
	wg.Wait()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if string(s1.MemberAssignment) != "A" || string(s2.MemberAssignment) != "B" {
		t.Fatalf("sync: %q %q", s1.MemberAssignment, s2.MemberAssignment)
	}

	// instance-1 restarts with a new client.
	cl1b := newMemberClient(t, c.Addr)
	j1b := raw[*kmsg.JoinGroupResponse](t, cl1b, joinReq(group, "", &i1, 10000))
	if j1b.ErrorCode != 0 || j1b.MemberID == j1.MemberID || j1b.Generation != 1 || !j1b.SkipAssignment {
		t.Fatalf("static rejoin: %+v", j1b)
	}
	s1b := raw[*kmsg.SyncGroupResponse](t, cl1b, syncReq(group, j1b.MemberID, &i1, 1, nil))
	if s1b.ErrorCode != 0 || string(s1b.MemberAssignment) != "A" {
		t.Fatalf("sync after static rejoin: %+v", s1b)
	}
	if code := heartbeat(t, cl2, group, j2.MemberID, &i2, 1); code != 0 {
		t.Fatalf("other member saw %v", kerr.ErrorForCode(code))
	}
	if code := heartbeat(t, cl1, group, j1.MemberID, &i1, 1); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old member id: %v, want FENCED_INSTANCE_ID", kerr.ErrorForCode(code))
	}
	if code := heartbeat(t, cl1b, group, j1b.MemberID, &i1, 1); code != 0 {
		t.Fatalf("new member id: %v", kerr.ErrorForCode(code))
	}
}

// TestMemberIDRequiredAndSessionExpiry: a v4+ JoinGroup without a member
// id gets MEMBER_ID_REQUIRED and an id; the member that then stops
// heartbeating is removed after its session timeout.
func TestMemberIDRequiredAndSessionExpiry(t *testing.T) {
	c := harness.Start(t)
	const group = "expiry"
	cl := newMemberClient(t, c.Addr)
	first := raw[*kmsg.JoinGroupResponse](t, cl, joinReq(group, "", nil, 6000))
	if first.ErrorCode != kerr.MemberIDRequired.Code || first.MemberID == "" {
		t.Fatalf("first join: %+v", first)
	}
	j := raw[*kmsg.JoinGroupResponse](t, cl, joinReq(group, first.MemberID, nil, 6000))
	if j.ErrorCode != 0 || j.MemberID != first.MemberID || j.Generation != 1 || j.LeaderID != j.MemberID {
		t.Fatalf("second join: %+v", j)
	}
	s := raw[*kmsg.SyncGroupResponse](t, cl, syncReq(group, j.MemberID, nil, 1, map[string]string{j.MemberID: "x"}))
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "x" {
		t.Fatalf("sync: %+v", s)
	}
	if code := heartbeat(t, cl, group, j.MemberID, nil, 1); code != 0 {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(code))
	}
	bad := joinReq(group, "", nil, 5999)
	if r := raw[*kmsg.JoinGroupResponse](t, cl, bad); r.ErrorCode != kerr.InvalidSessionTimeout.Code {
		t.Fatalf("session timeout below the minimum: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	adm := kadm.NewClient(cl)
	harness.Eventually(t, 20*time.Second, func() error {
		gs, err := adm.DescribeGroups(context.Background(), group)
		if err != nil {
			t.Fatal(err)
		}
		if g := gs[group]; g.State != "Empty" || len(g.Members) != 0 {
			return fmt.Errorf("member not expired: %+v", g)
		}
		return nil
	})
	if code := heartbeat(t, cl, group, j.MemberID, nil, 1); code != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after expiry: %v", kerr.ErrorForCode(code))
	}
}

// TestGroupAdmin: DescribeGroups, ListGroups and DeleteGroups through kadm.
func TestGroupAdmin(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "admin-topic", 2)
	gc := startGroupConsumer(t, c.Addr, "admin-g", "admin-topic", "member-1", kgo.RangeBalancer())
	waitAssignment(t, 2, gc)
	adm := kadm.NewClient(newMemberClient(t, c.Addr))
	ctx := context.Background()

	dg, err := adm.DescribeGroups(ctx, "admin-g", "no-such-group")
	if err != nil {
		t.Fatal(err)
	}
	g := dg["admin-g"]
	if g.Err != nil || g.State != "Stable" || g.ProtocolType != "consumer" || g.Protocol != "range" || len(g.Members) != 1 {
		t.Fatalf("describe: %+v", g)
	}
	m := g.Members[0]
	if m.ClientID != "member-1" || !strings.HasPrefix(m.MemberID, "member-1-") || m.ClientHost != "/127.0.0.1" {
		t.Fatalf("member: %+v", m)
	}
	ca, ok := m.Assigned.AsConsumer()
	if !ok || len(ca.Topics) != 1 || ca.Topics[0].Topic != "admin-topic" || len(ca.Topics[0].Partitions) != 2 {
		t.Fatalf("assignment: %+v", m.Assigned)
	}
	if ng := dg["no-such-group"]; ng.State != "Dead" || !errorsIs(ng.Err, kerr.GroupIDNotFound) {
		t.Fatalf("unknown group: %+v", ng)
	}

	lg, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := lg["admin-g"]; !ok || l.State != "Stable" || l.ProtocolType != "consumer" {
		t.Fatalf("list: %+v", lg)
	}
	if lg, _ := adm.ListGroups(ctx, "Empty"); len(lg) != 0 {
		t.Fatalf("states filter: %+v", lg)
	}

	dr, err := adm.DeleteGroups(ctx, "admin-g", "no-such-group")
	if err != nil {
		t.Fatal(err)
	}
	if !errorsIs(dr["admin-g"].Err, kerr.NonEmptyGroup) || !errorsIs(dr["no-such-group"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("delete while active: %+v", dr)
	}

	gc.stop() // leaves the group: Empty
	lg, err = adm.ListGroups(ctx, "empty")
	if err != nil {
		t.Fatal(err)
	}
	if names := lg.Groups(); !slices.Equal(names, []string{"admin-g"}) {
		t.Fatalf("empty groups: %v", names)
	}
	dr, err = adm.DeleteGroups(ctx, "admin-g")
	if err != nil || dr["admin-g"].Err != nil {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	lg, _ = adm.ListGroups(ctx)
	if names := lg.Groups(); len(names) != 0 {
		sort.Strings(names)
		t.Fatalf("groups after delete: %v", names)
	}
	if dr, _ := adm.DeleteGroups(ctx, "admin-g"); !errorsIs(dr["admin-g"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("second delete: %+v", dr)
	}
}

func errorsIs(err error, want *kerr.Error) bool {
	ke, ok := err.(*kerr.Error)
	return ok && ke == want
}

// TestGroupSurvivesBrokerRestart: a group's members, generation and
// assignments outlive a kill -9 of the broker, as they outlive a Kafka
// coordinator failover: the member heartbeats on at its generation and gets
// its assignment again, and the next rebalance continues the generation.
// Were the group forgotten, a cooperative member that rejoined with the
// partitions it owned before the restart would claim them at a generation
// higher than their current owner's, and take them back at its stale
// position (KIP-792): records processed twice.
func TestGroupSurvivesBrokerRestart(t *testing.T) {
	c := harness.Start(t)
	const group = "survives"
	cl := newMemberClient(t, c.Addr)
	first := raw[*kmsg.JoinGroupResponse](t, cl, joinReq(group, "", nil, 30000))
	j := raw[*kmsg.JoinGroupResponse](t, cl, joinReq(group, first.MemberID, nil, 30000))
	if j.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	if s := raw[*kmsg.SyncGroupResponse](t, cl, syncReq(group, j.MemberID, nil, j.Generation, map[string]string{j.MemberID: "mine"})); s.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(s.ErrorCode))
	}

	c.WaitBroker(t, c.KillBroker(t), 30*time.Second)
	cl2 := newMemberClient(t, c.Addr)
	if code := heartbeat(t, cl2, group, j.MemberID, nil, j.Generation); code != 0 {
		t.Fatalf("heartbeat after the restart: %v", kerr.ErrorForCode(code))
	}
	d := describeGroup(t, cl2, group)
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != j.MemberID || string(d.Members[0].MemberAssignment) != "mine" {
		t.Fatalf("group after the restart: %+v", d)
	}
	if s := raw[*kmsg.SyncGroupResponse](t, cl2, syncReq(group, j.MemberID, nil, j.Generation, nil)); s.ErrorCode != 0 || string(s.MemberAssignment) != "mine" {
		t.Fatalf("sync after the restart: %v %q", kerr.ErrorForCode(s.ErrorCode), s.MemberAssignment)
	}

	// A newcomer: the member rejoins, and both are in the next generation.
	other := newMemberClient(t, c.Addr)
	o1 := raw[*kmsg.JoinGroupResponse](t, other, joinReq(group, "", nil, 30000))
	type joined struct {
		r   *kmsg.JoinGroupResponse
		err error
	}
	ch := make(chan joined, 1)
	go func() {
		r, err := rawAsync[*kmsg.JoinGroupResponse](other, joinReq(group, o1.MemberID, nil, 30000))
		ch <- joined{r, err}
	}()
	harness.Eventually(t, 10*time.Second, func() error {
		if code := heartbeat(t, cl2, group, j.MemberID, nil, j.Generation); code != kerr.RebalanceInProgress.Code {
			return fmt.Errorf("heartbeat while a member joins: %v", kerr.ErrorForCode(code))
		}
		return nil
	})
	again := raw[*kmsg.JoinGroupResponse](t, cl2, joinReq(group, j.MemberID, nil, 30000))
	n := <-ch
	if n.err != nil {
		t.Fatal(n.err)
	}
	if again.ErrorCode != 0 || n.r.ErrorCode != 0 || again.Generation != j.Generation+1 || n.r.Generation != j.Generation+1 {
		t.Fatalf("rebalance after the restart: generations %d and %d (errors %v, %v), want %d",
			again.Generation, n.r.Generation, kerr.ErrorForCode(again.ErrorCode), kerr.ErrorForCode(n.r.ErrorCode), j.Generation+1)
	}
}
