package integration

import (
	"context"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestGroupAdminAPIs: FindCoordinator with batched keys, ListGroups with
// state and type filters, and OffsetFetch for several groups at once.
func TestGroupAdminAPIs(t *testing.T) {
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	c.CreateTopic(t, "ga", 2)
	produceAll(t, c.Addr, "ga", 4)
	consumeAsGroup(t, c.Addr, "ga-1", "ga", 4) // commits, then leaves: Empty
	consumeAsGroup(t, c.Addr, "ga-2", "ga", 4)
	r := newRaw(t, c.Addr)
	ctx := context.Background()

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"ga-1", "ga-2", "never-seen"}
	fcr, err := fc.RequestWith(ctx, r.cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(fcr.Coordinators) != 3 {
		t.Fatalf("FindCoordinator answered %d keys, want 3", len(fcr.Coordinators))
	}
	for _, co := range fcr.Coordinators {
		if co.ErrorCode != 0 || co.NodeID != 1 {
			t.Fatalf("coordinator for %s: node %d error %d", co.Key, co.NodeID, co.ErrorCode)
		}
	}

	list := func(states, types []string) []string {
		t.Helper()
		req := kmsg.NewPtrListGroupsRequest()
		req.StatesFilter, req.TypesFilter = states, types
		resp, err := req.RequestWith(ctx, r.cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("ListGroups: %v %d", err, resp.ErrorCode)
		}
		var names []string
		for _, g := range resp.Groups {
			names = append(names, g.Group)
		}
		sort.Strings(names)
		return names
	}
	if got := list([]string{"Empty"}, []string{"classic"}); len(got) != 2 || got[0] != "ga-1" || got[1] != "ga-2" {
		t.Fatalf("Empty classic groups: %v", got)
	}
	if got := list([]string{"Stable"}, nil); len(got) != 0 {
		t.Fatalf("Stable groups: %v, want none", got)
	}
	if got := list(nil, []string{"consumer"}); len(got) != 0 {
		t.Fatalf("consumer-protocol groups: %v, want none", got)
	}

	of := kmsg.NewPtrOffsetFetchRequest()
	for _, g := range []string{"ga-1", "ga-2", "nobody"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rg.Topics = nil // everything the group committed
		of.Groups = append(of.Groups, rg)
	}
	ofr, err := of.RequestWith(ctx, r.cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(ofr.Groups) != 3 {
		t.Fatalf("OffsetFetch answered %d groups, want 3", len(ofr.Groups))
	}
	for _, g := range ofr.Groups {
		var sum int64
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				sum += p.Offset
			}
		}
		want := int64(4)
		if g.Group == "nobody" {
			want = 0
		}
		if g.ErrorCode != 0 || sum != want {
			t.Fatalf("group %s: error %d, committed sum %d, want %d", g.Group, g.ErrorCode, sum, want)
		}
	}
}
