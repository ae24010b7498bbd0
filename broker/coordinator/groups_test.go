package coordinator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

const testInitialDelay = 20 * time.Millisecond

func testGroups() (*Groups, *fakeClock) { return storedGroups(nil) }

// storedGroups is a coordinator on a fake clock that stores its groups in
// st (nil: nowhere).
func storedGroups(st Store) (*Groups, *fakeClock) {
	clk := &fakeClock{}
	return New(Config{
		InitialRebalanceDelay: testInitialDelay,
		MinSessionTimeout:     10 * time.Millisecond,
		MaxSessionTimeout:     time.Minute,
		MaxSize:               1 << 30,
		Clock:                 clk,
		Store:                 st,
	}, slog.New(slog.NewTextHandler(io.Discard, nil))), clk
}

func protos(names ...string) []Protocol {
	var ps []Protocol
	for _, n := range names {
		ps = append(ps, Protocol{Name: n, Metadata: []byte(n)})
	}
	return ps
}

func TestSelectProtocol(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members [][]string
		want    string
	}{
		{"only common protocol", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}, {"roundrobin"}}, "roundrobin"},
		{"most votes", [][]string{{"range", "roundrobin"}, {"roundrobin", "range"}, {"roundrobin", "range"}}, "roundrobin"},
		{"first preference wins a tie by the leader's order", [][]string{{"sticky", "range"}, {"range", "sticky"}}, "sticky"},
		{"single member", [][]string{{"cooperative-sticky", "range"}}, "cooperative-sticky"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs, _ := testGroups()
			g := gs.newGroup("g")
			for i, ps := range tc.members {
				id := string(rune('a' + i))
				g.members[id] = &member{id: id, protocols: protos(ps...)}
				g.order = append(g.order, id)
			}
			g.leader = "a"
			if got := g.selectProtocol(); got != tc.want {
				t.Fatalf("selected %q, want %q", got, tc.want)
			}
		})
	}
}

// joinAsync enters req into its group, in order with the test's other
// calls, and returns the channel its answer comes on.
func joinAsync(gs *Groups, req JoinRequest) chan JoinResult {
	return parked(gs.join(req))
}

func syncAsync(gs *Groups, req SyncRequest) chan SyncResult {
	return parked(gs.sync(req))
}

// parked turns an immediate answer into one already in its channel.
func parked[T any](res T, wait chan T) chan T {
	if wait != nil {
		return wait
	}
	ch := make(chan T, 1)
	ch <- res
	return ch
}

// received is the answer in ch, which must have come already.
func received[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	default:
	}
	t.Fatal("no answer yet")
	var none T
	return none
}

// notYet fails the test if ch has an answer.
func notYet[T any](t *testing.T, ch chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s: answered early: %+v", what, v)
	default:
	}
}

// advanceUntil moves the clock a millisecond at a time until ch has an
// answer; it returns the answer and how far the clock moved.
func advanceUntil[T any](t *testing.T, clk *fakeClock, ch chan T) (T, time.Duration) {
	t.Helper()
	start := clk.Now()
	for clk.Now()-start <= time.Minute {
		select {
		case v := <-ch:
			return v, clk.Now() - start
		default:
		}
		clk.Advance(time.Millisecond)
	}
	t.Fatal("no answer within a minute of fake time")
	var none T
	return none, 0
}

func consumerJoin(memberID string) JoinRequest {
	return JoinRequest{
		Group: "g", MemberID: memberID, ClientID: "c", ProtocolType: "consumer",
		Protocols: protos("range"), SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
	}
}

// A full rebalance: two members join in the initial delay, the leader is
// the first joiner, followers' SyncGroup waits for the leader's.
func TestGroupJoinSyncHeartbeat(t *testing.T) {
	gs, clk := testGroups()
	a := joinAsync(gs, consumerJoin(""))
	b := joinAsync(gs, consumerJoin(""))
	notYet(t, a, "join during the initial delay")
	ra, took := advanceUntil(t, clk, a)
	rb := received(t, b)
	if took < testInitialDelay {
		t.Fatalf("join phase ended after %v, within the initial rebalance delay", took)
	}
	if ra.Err != nil || rb.Err != nil || ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("join: %+v %+v", ra, rb)
	}
	if ra.Leader != ra.MemberID || rb.Leader != ra.MemberID || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("leader: %+v %+v", ra, rb)
	}
	if *ra.Protocol != "range" || *ra.ProtocolType != "consumer" {
		t.Fatalf("protocol: %v %v", *ra.Protocol, *ra.ProtocolType)
	}

	fb := syncAsync(gs, SyncRequest{Group: "g", MemberID: rb.MemberID, Generation: 1})
	notYet(t, fb, "follower sync before the leader's")
	la := received(t, syncAsync(gs, SyncRequest{Group: "g", MemberID: ra.MemberID, Generation: 1,
		Assignments: map[string][]byte{ra.MemberID: []byte("A"), rb.MemberID: []byte("B")}}))
	lb := received(t, fb)
	if string(la.Assignment) != "A" || string(lb.Assignment) != "B" || la.Err != nil || lb.Err != nil {
		t.Fatalf("sync: %+v %+v", la, lb)
	}
	if d, _ := gs.Describe("g"); d.State != "Stable" || d.Protocol != "range" || string(d.Members[1].Assignment) != "B" {
		t.Fatalf("describe: %+v", d)
	}

	for _, tc := range []struct {
		member string
		gen    int32
		want   *kerr.Error
	}{
		{ra.MemberID, 1, nil},
		{ra.MemberID, 0, kerr.IllegalGeneration},
		{"nobody", 1, kerr.UnknownMemberID},
	} {
		if err := gs.Heartbeat("g", tc.member, nil, tc.gen); err != tc.want {
			t.Errorf("heartbeat %s gen %d: %v, want %v", tc.member, tc.gen, err, tc.want)
		}
	}

	// A third member makes the others rejoin.
	c := joinAsync(gs, consumerJoin(""))
	if err := gs.Heartbeat("g", ra.MemberID, nil, 1); err != kerr.RebalanceInProgress {
		t.Fatalf("heartbeat during rebalance: %v", err)
	}
	if err := gs.CommitAllowed("g", ra.MemberID, nil, 1); err != nil {
		t.Fatalf("commit while preparing: %v", err)
	}
	a2 := joinAsync(gs, consumerJoin(ra.MemberID))
	b2 := joinAsync(gs, consumerJoin(rb.MemberID))
	r2 := []JoinResult{received(t, a2), received(t, b2), received(t, c)}
	for _, r := range r2 {
		if r.Err != nil || r.Generation != 2 || r.Leader != ra.MemberID {
			t.Fatalf("second generation: %+v", r)
		}
	}
	if err := gs.CommitAllowed("g", ra.MemberID, nil, 2); err != kerr.RebalanceInProgress {
		t.Fatalf("commit while completing: %v", err)
	}

	// Everyone leaves: the group is Empty and can be deleted.
	top, errs := gs.Leave("g", []LeaveMember{{MemberID: ra.MemberID}, {MemberID: rb.MemberID}, {MemberID: r2[2].MemberID}, {MemberID: "x"}})
	if top != nil || errs[0] != nil || errs[3] != kerr.UnknownMemberID {
		t.Fatalf("leave: %v %v", top, errs)
	}
	if d, _ := gs.Describe("g"); d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("after leave: %+v", d)
	}
	if err := gs.Delete("g"); err != nil || gs.Exists("g") {
		t.Fatalf("delete: %v", err)
	}
}

func TestMemberIDRequired(t *testing.T) {
	gs, clk := testGroups()
	req := consumerJoin("")
	req.RequireKnownMemberID = true
	r := received(t, joinAsync(gs, req))
	if r.Err != kerr.MemberIDRequired || r.MemberID == "" {
		t.Fatalf("first join: %+v", r)
	}
	req.MemberID = r.MemberID
	r2, _ := advanceUntil(t, clk, joinAsync(gs, req))
	if r2.Err != nil || r2.MemberID != r.MemberID || r2.Generation != 1 {
		t.Fatalf("second join: %+v", r2)
	}
}

func TestStaticMemberReplacement(t *testing.T) {
	gs, clk := testGroups()
	inst := "instance-1"
	req := consumerJoin("")
	req.InstanceID = &inst
	r, _ := advanceUntil(t, clk, joinAsync(gs, req))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if s := received(t, syncAsync(gs, SyncRequest{Group: "g", MemberID: r.MemberID, InstanceID: &inst, Generation: 1,
		Assignments: map[string][]byte{r.MemberID: []byte("mine")}})); s.Err != nil {
		t.Fatal(s.Err)
	}
	// The same instance restarts: a new member id, no rebalance, the
	// same assignment; the old id is fenced.
	r2 := received(t, joinAsync(gs, req))
	if r2.Err != nil || r2.MemberID == r.MemberID || r2.Generation != 1 || !r2.SkipAssignment {
		t.Fatalf("rejoin: %+v", r2)
	}
	s := received(t, syncAsync(gs, SyncRequest{Group: "g", MemberID: r2.MemberID, InstanceID: &inst, Generation: 1}))
	if s.Err != nil || string(s.Assignment) != "mine" {
		t.Fatalf("sync after rejoin: %+v", s)
	}
	if err := gs.Heartbeat("g", r.MemberID, &inst, 1); err != kerr.FencedInstanceID {
		t.Fatalf("old member heartbeat: %v", err)
	}
	if err := gs.CommitAllowed("g", r.MemberID, &inst, 1); err != kerr.FencedInstanceID {
		t.Fatalf("old member commit: %v", err)
	}
	// Administrative removal by instance id.
	if _, errs := gs.Leave("g", []LeaveMember{{InstanceID: &inst}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
}

func TestSessionExpiry(t *testing.T) {
	gs, clk := testGroups()
	req := consumerJoin("")
	req.SessionTimeout = 50 * time.Millisecond
	r, _ := advanceUntil(t, clk, joinAsync(gs, req))
	received(t, syncAsync(gs, SyncRequest{Group: "g", MemberID: r.MemberID, Generation: 1}))
	clk.Advance(req.SessionTimeout - time.Millisecond)
	if d, _ := gs.Describe("g"); d.State != "Stable" {
		t.Fatalf("state %v before the session timeout", d.State)
	}
	clk.Advance(time.Millisecond)
	if err := gs.Heartbeat("g", r.MemberID, nil, 1); err != kerr.UnknownMemberID {
		t.Fatalf("heartbeat after expiry: %v", err)
	}
	if d, _ := gs.Describe("g"); d.State != "Empty" {
		t.Fatalf("state %v", d.State)
	}
}

func TestCommitAllowed(t *testing.T) {
	gs, clk := testGroups()
	if err := gs.CommitAllowed("simple", "", nil, -1); err != nil || !gs.Exists("simple") {
		t.Fatalf("simple commit: %v", err)
	}
	if err := gs.CommitAllowed("unknown", "m", nil, 3); !errors.Is(err, kerr.GroupIDNotFound) || gs.Exists("unknown") {
		t.Fatalf("unknown group: %v", err)
	}
	r, _ := advanceUntil(t, clk, joinAsync(gs, consumerJoin("")))
	if err := gs.CommitAllowed("g", "", nil, -1); err != kerr.UnknownMemberID {
		t.Fatalf("simple commit to an active group: %v", err)
	}
	if err := gs.CommitAllowed("g", "other", nil, 1); err != kerr.UnknownMemberID {
		t.Fatalf("unknown member: %v", err)
	}
	if err := gs.CommitAllowed("g", r.MemberID, nil, 7); err != kerr.IllegalGeneration {
		t.Fatalf("wrong generation: %v", err)
	}

	// Transactional commits: one without member and generation is taken
	// from an active group too, and a member's while the group waits for
	// its assignment; a member's still needs the generation.
	if err := gs.TxnCommitAllowed("g", "", nil, -1); err != nil {
		t.Fatalf("transactional commit without member to an active group: %v", err)
	}
	if err := gs.TxnCommitAllowed("g", r.MemberID, nil, 7); err != kerr.IllegalGeneration {
		t.Fatalf("transactional commit at a wrong generation: %v", err)
	}
	b := joinAsync(gs, consumerJoin(""))
	a := joinAsync(gs, consumerJoin(r.MemberID))
	ra, rb := received(t, a), received(t, b)
	if ra.Err != nil || rb.Err != nil {
		t.Fatalf("rejoin: %+v %+v", ra, rb)
	}
	if err := gs.CommitAllowed("g", r.MemberID, nil, ra.Generation); err != kerr.RebalanceInProgress {
		t.Fatalf("commit while the group waits for its assignment: %v", err)
	}
	if err := gs.TxnCommitAllowed("g", r.MemberID, nil, ra.Generation); err != nil {
		t.Fatalf("transactional commit while the group waits for its assignment: %v", err)
	}
}

func TestJoinValidation(t *testing.T) {
	gs, clk := testGroups()
	req := consumerJoin("")
	req.SessionTimeout = 2 * time.Minute
	if r := received(t, joinAsync(gs, req)); r.Err != kerr.InvalidSessionTimeout {
		t.Fatalf("session timeout: %+v", r)
	}
	if r := received(t, joinAsync(gs, consumerJoin("ghost"))); r.Err != kerr.UnknownMemberID {
		t.Fatalf("unknown member id: %+v", r)
	}
	advanceUntil(t, clk, joinAsync(gs, consumerJoin("")))
	other := consumerJoin("")
	other.Protocols = protos("roundrobin")
	if r := received(t, joinAsync(gs, other)); r.Err != kerr.InconsistentGroupProtocol {
		t.Fatalf("inconsistent protocol: %+v", r)
	}
	// A parked join ends with its context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := gs.Join(ctx, consumerJoin("")); err == nil {
		t.Fatal("join outlived its context")
	}
}

// A member that does not rejoin within the rebalance timeout is removed, and
// the rebalance completes with those that did.
func TestRebalanceTimeoutKicksLaggards(t *testing.T) {
	gs, clk := testGroups()
	const rebalanceTimeout = 100 * time.Millisecond
	join := func(id string) JoinRequest {
		r := consumerJoin(id)
		r.RebalanceTimeout = rebalanceTimeout
		return r
	}
	a := joinAsync(gs, join(""))
	b := joinAsync(gs, join(""))
	ra, _ := advanceUntil(t, clk, a)
	rb := received(t, b)
	received(t, syncAsync(gs, SyncRequest{Group: "g", MemberID: ra.MemberID, Generation: 1}))
	received(t, syncAsync(gs, SyncRequest{Group: "g", MemberID: rb.MemberID, Generation: 1}))

	c := joinAsync(gs, join("")) // starts a rebalance
	a2 := joinAsync(gs, join(ra.MemberID))
	// b never rejoins.
	rc, took := advanceUntil(t, clk, c)
	ra2 := received(t, a2)
	if took < rebalanceTimeout {
		t.Fatalf("rebalance completed after %v, before the rebalance timeout", took)
	}
	if rc.Err != nil || ra2.Err != nil || rc.Generation != 2 || len(ra2.Members)+len(rc.Members) != 2 {
		t.Fatalf("after the timeout: %+v %+v", ra2, rc)
	}
	if err := gs.Heartbeat("g", rb.MemberID, nil, 1); err != kerr.UnknownMemberID {
		t.Fatalf("the laggard still belongs to the group: %v", err)
	}
}
