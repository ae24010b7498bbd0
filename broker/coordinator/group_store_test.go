package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// memStore is a Store in memory; fail makes the next writes fail.
type memStore struct {
	records map[string][]byte
	fail    bool
}

func (s *memStore) SaveGroup(_ context.Context, group string, value []byte) error {
	if s.fail {
		return errors.New("store down")
	}
	s.records[group] = value
	return nil
}

func (s *memStore) DeleteGroup(_ context.Context, group string) error {
	if s.fail {
		return errors.New("store down")
	}
	delete(s.records, group)
	return nil
}

// stableTwo forms group "g" with two members through one rebalance and
// returns their member ids (the leader first).
func stableTwo(t *testing.T, gs *Groups, clk *fakeClock) (string, string) {
	t.Helper()
	a := joinAsync(gs, consumerJoin(""))
	b := joinAsync(gs, consumerJoin(""))
	ra, _ := advanceUntil(t, clk, a)
	rb := received(t, b)
	fb := syncAsync(gs, SyncRequest{Group: "g", MemberID: rb.MemberID, Generation: ra.Generation})
	la := received(t, syncAsync(gs, SyncRequest{Group: "g", MemberID: ra.MemberID, Generation: ra.Generation,
		Assignments: map[string][]byte{ra.MemberID: []byte("A"), rb.MemberID: []byte("B")}}))
	if lb := received(t, fb); la.Err != nil || lb.Err != nil {
		t.Fatalf("sync: %+v %+v", la, lb)
	}
	return ra.MemberID, rb.MemberID
}

// A restarted coordinator restores the group as stored when its rebalance
// completed: members keep their ids, generation and assignments, and the
// next rebalance continues the generation rather than starting over.
func TestStoredGroupSurvivesRestart(t *testing.T) {
	st := &memStore{records: map[string][]byte{}}
	gs, clk := storedGroups(st)
	a, b := stableTwo(t, gs, clk)
	if st.records["g"] == nil {
		t.Fatal("no record stored when the rebalance completed")
	}

	gs2, _ := storedGroups(st)
	if err := gs2.Restore("g", st.records["g"]); err != nil {
		t.Fatal(err)
	}
	d, ok := gs2.Describe("g")
	if !ok || d.State != "Stable" || len(d.Members) != 2 || d.Members[0].MemberID != a || string(d.Members[1].Assignment) != "B" {
		t.Fatalf("restored: %+v", d)
	}
	if err := gs2.Heartbeat("g", b, nil, 1); err != nil {
		t.Fatalf("heartbeat of a restored member: %v", err)
	}
	if err := gs2.CommitAllowed("g", a, nil, 1); err != nil {
		t.Fatalf("commit of a restored member: %v", err)
	}
	if r := received(t, syncAsync(gs2, SyncRequest{Group: "g", MemberID: b, Generation: 1})); r.Err != nil || string(r.Assignment) != "B" {
		t.Fatalf("sync of a restored member: %+v", r)
	}

	// A newcomer's rebalance makes generation 2, not 1 again.
	c := joinAsync(gs2, consumerJoin(""))
	ja := joinAsync(gs2, consumerJoin(a))
	jb := joinAsync(gs2, consumerJoin(b))
	for _, ch := range []chan JoinResult{c, ja, jb} {
		if r := received(t, ch); r.Err != nil || r.Generation != 2 {
			t.Fatalf("rebalance after the restart: %+v", r)
		}
	}

	// A restored member that does not come back expires.
	gs3, clk3 := storedGroups(st)
	if err := gs3.Restore("g", st.records["g"]); err != nil {
		t.Fatal(err)
	}
	clk3.Advance(11 * time.Second)
	if d, _ := gs3.Describe("g"); d.State == "Stable" {
		t.Fatalf("members that never came back still Stable after their session timeout: %+v", d)
	}
}

// No member learns an assignment the store did not take: the SyncGroups
// are answered COORDINATOR_NOT_AVAILABLE and the group rebalances.
func TestStoredGroupSyncFailsWithoutStore(t *testing.T) {
	st := &memStore{records: map[string][]byte{}}
	gs, clk := storedGroups(st)
	a := joinAsync(gs, consumerJoin(""))
	ra, _ := advanceUntil(t, clk, a)
	st.fail = true
	r := received(t, syncAsync(gs, SyncRequest{Group: "g", MemberID: ra.MemberID, Generation: ra.Generation,
		Assignments: map[string][]byte{ra.MemberID: []byte("A")}}))
	if r.Err != kerr.CoordinatorNotAvailable || r.Assignment != nil {
		t.Fatalf("sync with the store down: %+v", r)
	}
	if d, _ := gs.Describe("g"); d.State != "PreparingRebalance" {
		t.Fatalf("after a failed store: %s", d.State)
	}
	if st.records["g"] != nil {
		t.Fatal("a record was stored")
	}
}

// An Empty group is stored with its generation; DeleteGroups removes the
// record.
func TestStoredGroupEmptyAndDeleted(t *testing.T) {
	st := &memStore{records: map[string][]byte{}}
	gs, clk := storedGroups(st)
	a, b := stableTwo(t, gs, clk)
	if top, _ := gs.Leave("g", []LeaveMember{{MemberID: a}, {MemberID: b}}); top != nil {
		t.Fatal(top)
	}
	gs2, _ := storedGroups(st)
	if err := gs2.Restore("g", st.records["g"]); err != nil {
		t.Fatal(err)
	}
	if d, _ := gs2.Describe("g"); d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("restored empty group: %+v", d)
	}
	if g := gs2.lookup("g", false); g == nil || g.generation != 2 {
		t.Fatalf("restored empty group's generation: %+v", g)
	} else {
		g.mu.Unlock()
	}
	st.fail = true
	if err := gs2.Delete("g"); err != kerr.CoordinatorNotAvailable {
		t.Fatalf("delete with the store down: %v", err)
	}
	st.fail = false
	if err := gs2.Delete("g"); err != nil || st.records["g"] != nil {
		t.Fatalf("delete: %v, record left: %v", err, st.records["g"] != nil)
	}
}
