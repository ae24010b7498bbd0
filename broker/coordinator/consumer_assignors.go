package coordinator

// Server-side assignors of the consumer group protocol (KIP-848), by the
// names Kafka gives them in group.consumer.assignors: "uniform" (default)
// and "range". Both are deterministic: members in member id order,
// partitions in topic name and partition order.

import (
	"slices"
	"sort"
)

// The served assignors' names, the default first (Kafka's
// group.consumer.assignors).
const (
	UniformAssignor = "uniform"
	RangeAssignor   = "range"
)

// ServerAssignors are the names a ConsumerGroupHeartbeat may ask for, in
// the order Kafka lists them.
func ServerAssignors() []string { return []string{UniformAssignor, RangeAssignor} }

// IsServerAssignor says whether name is one of ServerAssignors.
func IsServerAssignor(name string) bool { return slices.Contains(ServerAssignors(), name) }

// assign computes the target assignment of every member (an empty set for
// a member with nothing). prev is the previous target, which uniform keeps
// where it can.
func assign(name string, topics []Topic, members map[string]*consumerMember, prev map[string]tpSet) map[string]tpSet {
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	topics = slices.Clone(topics)
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })

	out := make(map[string]tpSet, len(ids))
	for _, id := range ids {
		out[id] = tpSet{}
	}
	if name == RangeAssignor {
		assignRange(topics, ids, members, out)
	} else {
		assignUniform(topics, ids, members, prev, out)
	}
	return out
}

// assignRange is Kafka's RangeAssignor: per topic, the subscribed members
// in id order take contiguous ranges, the first ones one partition more
// when the count does not divide.
func assignRange(topics []Topic, ids []string, members map[string]*consumerMember, out map[string]tpSet) {
	for _, t := range topics {
		var subs []string
		for _, id := range ids {
			if members[id].subscribes(t.Name) {
				subs = append(subs, id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := int32(len(subs))
		per, extra := t.Partitions/n, t.Partitions%n
		p := int32(0)
		for i, id := range subs {
			count := per
			if int32(i) < extra {
				count++
			}
			for ; count > 0; count-- {
				out[id][TopicPartition{t.ID, p}] = struct{}{}
				p++
			}
		}
	}
}

// assignUniform is a sticky, balanced assignment in the spirit of Kafka's
// UniformAssignor: every member keeps what it had in the previous target
// where it still subscribes; new partitions go to the least loaded
// subscribed member; then partitions move, last first, from a member to a
// subscribed one with at least two fewer until no such move is left. With
// identical subscriptions the counts differ by at most one.
func assignUniform(topics []Topic, ids []string, members map[string]*consumerMember, prev map[string]tpSet, out map[string]tpSet) {
	type part struct {
		TopicPartition
		topic string
	}
	var all []part
	for _, t := range topics {
		for p := int32(0); p < t.Partitions; p++ {
			all = append(all, part{TopicPartition{t.ID, p}, t.Name})
		}
	}
	owner := map[TopicPartition]string{}
	for _, p := range all {
		for _, id := range ids {
			if prev[id].has(p.TopicPartition) && members[id].subscribes(p.topic) {
				owner[p.TopicPartition] = id
				out[id][p.TopicPartition] = struct{}{}
				break
			}
		}
	}
	leastLoaded := func(topic string, except string) string {
		best := ""
		for _, id := range ids {
			if id == except || !members[id].subscribes(topic) {
				continue
			}
			if best == "" || len(out[id]) < len(out[best]) {
				best = id
			}
		}
		return best
	}
	for _, p := range all {
		if _, ok := owner[p.TopicPartition]; ok {
			continue
		}
		if id := leastLoaded(p.topic, ""); id != "" {
			owner[p.TopicPartition] = id
			out[id][p.TopicPartition] = struct{}{}
		}
	}
	// Balance. Each move lowers the sum of squared counts, so this ends.
	for moved := true; moved; {
		moved = false
		for i := len(all) - 1; i >= 0; i-- {
			p := all[i]
			from, ok := owner[p.TopicPartition]
			if !ok {
				continue
			}
			to := leastLoaded(p.topic, from)
			if to != "" && len(out[to])+1 < len(out[from]) {
				delete(out[from], p.TopicPartition)
				out[to][p.TopicPartition] = struct{}{}
				owner[p.TopicPartition] = to
				moved = true
			}
		}
	}
}
