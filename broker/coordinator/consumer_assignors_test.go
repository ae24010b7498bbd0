package coordinator

import (
	"fmt"
	"testing"
)

func subscriber(id string, topics ...string) *consumerMember {
	return &consumerMember{id: id, topics: topics}
}

func counts(out map[string]tpSet) map[string]int {
	c := map[string]int{}
	for id, s := range out {
		c[id] = len(s)
	}
	return c
}

// Every partition of a subscribed topic is assigned exactly once.
func checkExactlyOnce(t *testing.T, topics []Topic, out map[string]tpSet) {
	t.Helper()
	seen := map[TopicPartition]string{}
	for id, s := range out {
		for p := range s {
			if other, dup := seen[p]; dup {
				t.Fatalf("%v assigned to %s and %s", p, other, id)
			}
			seen[p] = id
		}
	}
	want := 0
	for _, tm := range topics {
		want += int(tm.Partitions)
	}
	if len(seen) != want {
		t.Fatalf("%d partitions assigned, want %d", len(seen), want)
	}
}

func TestRangeAssignor(t *testing.T) {
	topics := []Topic{{Name: "a", ID: [16]byte{1}, Partitions: 3}, {Name: "b", ID: [16]byte{2}, Partitions: 3}}
	members := map[string]*consumerMember{"m1": subscriber("m1", "a", "b"), "m2": subscriber("m2", "a", "b")}
	out := assign("range", topics, members, nil)
	checkExactlyOnce(t, topics, out)
	// Per topic, the first member (by id) takes the extra partition.
	for _, topic := range topics {
		for p := int32(0); p < 3; p++ {
			want := "m1"
			if p == 2 {
				want = "m2"
			}
			if !out[want].has(TopicPartition{topic.ID, p}) {
				t.Fatalf("%s-%d not with %s: %v", topic.Name, p, want, counts(out))
			}
		}
	}
}

func TestUniformAssignorBalancedAndSticky(t *testing.T) {
	topics := []Topic{{Name: "a", ID: [16]byte{1}, Partitions: 7}}
	members := map[string]*consumerMember{"m1": subscriber("m1", "a")}
	first := assign("uniform", topics, members, nil)
	checkExactlyOnce(t, topics, first)
	for n := 2; n <= 4; n++ {
		id := fmt.Sprintf("m%d", n)
		members[id] = subscriber(id, "a")
		next := assign("uniform", topics, members, first)
		checkExactlyOnce(t, topics, next)
		lo, hi := 1<<30, 0
		for _, c := range counts(next) {
			lo, hi = min(lo, c), max(hi, c)
		}
		if hi-lo > 1 {
			t.Fatalf("%d members: counts %v not balanced", n, counts(next))
		}
		// Sticky: a member keeps partitions it had unless they had to move.
		moved := 0
		for id, s := range first {
			for p := range s {
				if !next[id].has(p) {
					moved++
				}
			}
		}
		if moved > 7/n+1 {
			t.Fatalf("%d members: %d partitions moved, more than needed", n, moved)
		}
		first = next
	}
}

func TestAssignorsRespectSubscriptions(t *testing.T) {
	topics := []Topic{{Name: "a", ID: [16]byte{1}, Partitions: 2}, {Name: "b", ID: [16]byte{2}, Partitions: 2}}
	members := map[string]*consumerMember{"m1": subscriber("m1", "a"), "m2": subscriber("m2", "b")}
	for _, name := range []string{"range", "uniform"} {
		out := assign(name, topics, members, nil)
		checkExactlyOnce(t, topics, out)
		for p := range out["m1"] {
			if p.TopicID != ([16]byte{1}) {
				t.Fatalf("%s: m1 got a partition of b", name)
			}
		}
	}
}
