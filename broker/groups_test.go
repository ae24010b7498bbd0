package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func testGroups() *groups {
	return newGroups(groupConfig{
		initialRebalanceDelay: 20 * time.Millisecond,
		minSessionTimeout:     10 * time.Millisecond,
		maxSessionTimeout:     time.Minute,
		maxSize:               1 << 30,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func protos(names ...string) []protocol {
	var ps []protocol
	for _, n := range names {
		ps = append(ps, protocol{name: n, metadata: []byte(n)})
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
			g := testGroups().newGroup("g")
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

type joined struct {
	res joinResult
	err error
}

func joinAsync(gs *groups, req joinRequest) chan joined {
	ch := make(chan joined, 1)
	go func() {
		res, err := gs.join(context.Background(), req)
		ch <- joined{res, err}
	}()
	return ch
}

func await[T any](t *testing.T, ch chan T) (v T) {
	t.Helper()
	select {
	case v = <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("timed out")
	}
	return v
}

func consumerJoin(memberID string) joinRequest {
	return joinRequest{
		group: "g", memberID: memberID, clientID: "c", protocolType: "consumer",
		protocols: protos("range"), sessionTimeout: 10 * time.Second, rebalanceTimeout: 10 * time.Second,
	}
}

func syncAsync(gs *groups, req syncRequest) chan syncResult {
	ch := make(chan syncResult, 1)
	go func() {
		res, _ := gs.sync(context.Background(), req)
		ch <- res
	}()
	return ch
}

// A full rebalance: two members join in the initial delay, the leader is
// the first joiner, followers' SyncGroup waits for the leader's.
func TestGroupJoinSyncHeartbeat(t *testing.T) {
	gs := testGroups()
	a := joinAsync(gs, consumerJoin(""))
	time.Sleep(5 * time.Millisecond)
	b := joinAsync(gs, consumerJoin(""))
	ra, rb := await(t, a).res, await(t, b).res
	if ra.err != nil || rb.err != nil || ra.generation != 1 || rb.generation != 1 {
		t.Fatalf("join: %+v %+v", ra, rb)
	}
	if ra.leader != ra.memberID || rb.leader != ra.memberID || len(ra.members) != 2 || len(rb.members) != 0 {
		t.Fatalf("leader: %+v %+v", ra, rb)
	}
	if *ra.protocol != "range" || *ra.protocolType != "consumer" {
		t.Fatalf("protocol: %v %v", *ra.protocol, *ra.protocolType)
	}

	fb := syncAsync(gs, syncRequest{group: "g", memberID: rb.memberID, generation: 1})
	time.Sleep(10 * time.Millisecond)
	select {
	case r := <-fb:
		t.Fatalf("follower synced before the leader: %+v", r)
	default:
	}
	la := await(t, syncAsync(gs, syncRequest{group: "g", memberID: ra.memberID, generation: 1,
		assignments: map[string][]byte{ra.memberID: []byte("A"), rb.memberID: []byte("B")}}))
	lb := await(t, fb)
	if string(la.assignment) != "A" || string(lb.assignment) != "B" || la.err != nil || lb.err != nil {
		t.Fatalf("sync: %+v %+v", la, lb)
	}
	if d, _ := gs.describe("g"); d.state != groupStable || d.protocol != "range" || string(d.members[1].assignment) != "B" {
		t.Fatalf("describe: %+v", d)
	}

	for _, tc := range []struct {
		member string
		gen    int32
		want   *kerr.Error
	}{
		{ra.memberID, 1, nil},
		{ra.memberID, 0, kerr.IllegalGeneration},
		{"nobody", 1, kerr.UnknownMemberID},
	} {
		if err := gs.heartbeat("g", tc.member, nil, tc.gen); err != tc.want {
			t.Errorf("heartbeat %s gen %d: %v, want %v", tc.member, tc.gen, err, tc.want)
		}
	}

	// A third member makes the others rejoin.
	c := joinAsync(gs, consumerJoin(""))
	time.Sleep(10 * time.Millisecond)
	if err := gs.heartbeat("g", ra.memberID, nil, 1); err != kerr.RebalanceInProgress {
		t.Fatalf("heartbeat during rebalance: %v", err)
	}
	if err := gs.commitAllowed("g", ra.memberID, nil, 1); err != nil {
		t.Fatalf("commit while preparing: %v", err)
	}
	a2 := joinAsync(gs, consumerJoin(ra.memberID))
	b2 := joinAsync(gs, consumerJoin(rb.memberID))
	r2 := []joinResult{await(t, a2).res, await(t, b2).res, await(t, c).res}
	for _, r := range r2 {
		if r.err != nil || r.generation != 2 || r.leader != ra.memberID {
			t.Fatalf("second generation: %+v", r)
		}
	}
	if err := gs.commitAllowed("g", ra.memberID, nil, 2); err != kerr.RebalanceInProgress {
		t.Fatalf("commit while completing: %v", err)
	}

	// Everyone leaves: the group is Empty and can be deleted.
	top, errs := gs.leave("g", []leaveMember{{memberID: ra.memberID}, {memberID: rb.memberID}, {memberID: r2[2].memberID}, {memberID: "x"}})
	if top != nil || errs[0] != nil || errs[3] != kerr.UnknownMemberID {
		t.Fatalf("leave: %v %v", top, errs)
	}
	if d, _ := gs.describe("g"); d.state != groupEmpty || len(d.members) != 0 {
		t.Fatalf("after leave: %+v", d)
	}
	if err := gs.deleteGroup("g"); err != nil || gs.exists("g") {
		t.Fatalf("delete: %v", err)
	}
}

func TestMemberIDRequired(t *testing.T) {
	gs := testGroups()
	req := consumerJoin("")
	req.requireKnownMemberID = true
	r := await(t, joinAsync(gs, req)).res
	if r.err != kerr.MemberIDRequired || r.memberID == "" {
		t.Fatalf("first join: %+v", r)
	}
	req.memberID = r.memberID
	r2 := await(t, joinAsync(gs, req)).res
	if r2.err != nil || r2.memberID != r.memberID || r2.generation != 1 {
		t.Fatalf("second join: %+v", r2)
	}
}

func TestStaticMemberReplacement(t *testing.T) {
	gs := testGroups()
	inst := "instance-1"
	req := consumerJoin("")
	req.instanceID = &inst
	r := await(t, joinAsync(gs, req)).res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if s := await(t, syncAsync(gs, syncRequest{group: "g", memberID: r.memberID, instanceID: &inst, generation: 1,
		assignments: map[string][]byte{r.memberID: []byte("mine")}})); s.err != nil {
		t.Fatal(s.err)
	}
	// The same instance restarts: a new member id, no rebalance, the
	// same assignment; the old id is fenced.
	r2 := await(t, joinAsync(gs, req)).res
	if r2.err != nil || r2.memberID == r.memberID || r2.generation != 1 || !r2.skipAssignment {
		t.Fatalf("rejoin: %+v", r2)
	}
	s := await(t, syncAsync(gs, syncRequest{group: "g", memberID: r2.memberID, instanceID: &inst, generation: 1}))
	if s.err != nil || string(s.assignment) != "mine" {
		t.Fatalf("sync after rejoin: %+v", s)
	}
	if err := gs.heartbeat("g", r.memberID, &inst, 1); err != kerr.FencedInstanceID {
		t.Fatalf("old member heartbeat: %v", err)
	}
	if err := gs.commitAllowed("g", r.memberID, &inst, 1); err != kerr.FencedInstanceID {
		t.Fatalf("old member commit: %v", err)
	}
	// Administrative removal by instance id.
	if _, errs := gs.leave("g", []leaveMember{{instanceID: &inst}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
}

func TestSessionExpiry(t *testing.T) {
	gs := testGroups()
	req := consumerJoin("")
	req.sessionTimeout = 50 * time.Millisecond
	r := await(t, joinAsync(gs, req)).res
	await(t, syncAsync(gs, syncRequest{group: "g", memberID: r.memberID, generation: 1}))
	time.Sleep(200 * time.Millisecond)
	if err := gs.heartbeat("g", r.memberID, nil, 1); err != kerr.UnknownMemberID {
		t.Fatalf("heartbeat after expiry: %v", err)
	}
	if d, _ := gs.describe("g"); d.state != groupEmpty {
		t.Fatalf("state %v", d.state)
	}
}

func TestCommitAllowed(t *testing.T) {
	gs := testGroups()
	if err := gs.commitAllowed("simple", "", nil, -1); err != nil || !gs.exists("simple") {
		t.Fatalf("simple commit: %v", err)
	}
	if err := gs.commitAllowed("unknown", "m", nil, 3); !errors.Is(err, kerr.GroupIDNotFound) || gs.exists("unknown") {
		t.Fatalf("unknown group: %v", err)
	}
	r := await(t, joinAsync(gs, consumerJoin(""))).res
	if err := gs.commitAllowed("g", "", nil, -1); err != kerr.UnknownMemberID {
		t.Fatalf("simple commit to an active group: %v", err)
	}
	if err := gs.commitAllowed("g", "other", nil, 1); err != kerr.UnknownMemberID {
		t.Fatalf("unknown member: %v", err)
	}
	if err := gs.commitAllowed("g", r.memberID, nil, 7); err != kerr.IllegalGeneration {
		t.Fatalf("wrong generation: %v", err)
	}
}

func TestJoinValidation(t *testing.T) {
	gs := testGroups()
	req := consumerJoin("")
	req.sessionTimeout = 2 * time.Minute
	if r := await(t, joinAsync(gs, req)).res; r.err != kerr.InvalidSessionTimeout {
		t.Fatalf("session timeout: %+v", r)
	}
	if r := await(t, joinAsync(gs, consumerJoin("ghost"))).res; r.err != kerr.UnknownMemberID {
		t.Fatalf("unknown member id: %+v", r)
	}
	await(t, joinAsync(gs, consumerJoin("")))
	other := consumerJoin("")
	other.protocols = protos("roundrobin")
	if r := await(t, joinAsync(gs, other)).res; r.err != kerr.InconsistentGroupProtocol {
		t.Fatalf("inconsistent protocol: %+v", r)
	}
	// A parked join ends with its context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := gs.join(ctx, consumerJoin("")); err == nil {
		t.Fatal("join outlived its context")
	}
}

// A member that does not rejoin within the rebalance timeout is removed, and
// the rebalance completes with those that did.
func TestRebalanceTimeoutKicksLaggards(t *testing.T) {
	gs := testGroups()
	join := func(id string) joinRequest {
		r := consumerJoin(id)
		r.rebalanceTimeout = 100 * time.Millisecond
		return r
	}
	a := joinAsync(gs, join(""))
	time.Sleep(5 * time.Millisecond)
	b := joinAsync(gs, join(""))
	ra, rb := await(t, a).res, await(t, b).res
	await(t, syncAsync(gs, syncRequest{group: "g", memberID: ra.memberID, generation: 1}))
	await(t, syncAsync(gs, syncRequest{group: "g", memberID: rb.memberID, generation: 1}))

	c := joinAsync(gs, join("")) // starts a rebalance
	a2 := joinAsync(gs, join(ra.memberID))
	// b never rejoins.
	start := time.Now()
	rc, ra2 := await(t, c).res, await(t, a2).res
	if took := time.Since(start); took < 80*time.Millisecond {
		t.Fatalf("rebalance completed after %v, before the rebalance timeout", took)
	}
	if rc.err != nil || ra2.err != nil || rc.generation != 2 || len(ra2.members)+len(rc.members) != 2 {
		t.Fatalf("after the timeout: %+v %+v", ra2, rc)
	}
	if err := gs.heartbeat("g", rb.memberID, nil, 1); err != kerr.UnknownMemberID {
		t.Fatalf("the laggard still belongs to the group: %v", err)
	}
}
