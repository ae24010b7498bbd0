package producer

import (
	"context"
	"fmt"
	"sort"

	"github.com/kafgres/kafgres/decoder"
)

// Placement: a replay skips, per partition, the transactions that
// partition already has (producer.go), so it must put every record where
// the first attempt put it. The partition is therefore a function of what
// the WAL says and nothing else:
//
//   - an explicit partition is itself;
//   - a key goes to murmur2(key) mod the partition count, as Kafka's
//     clients place it;
//   - a NULL key goes to a partition chosen from the transaction's commit
//     position (its end LSN), so all NULL-key records of one transaction
//     and topic land together, as a Kafka client's sticky partitioner keeps
//     a batch together, and transactions spread over the partitions.
//
// The partition count is the one in force for the topic at the
// transaction's end LSN. Partitions can be added at any time
// (CreatePartitions, kafgres_create_partitions), so the count a
// transaction was placed by is written down (an Epoch, in Postgres) before
// anything placed by it is appended, and a transaction the topic may
// already hold part of is placed by the count written down for it.

// Epoch says that from source position From on the topic's records were
// placed among Partitions partitions.
type Epoch struct {
	From       uint64
	Partitions int32
}

// Epochs keeps each topic's epochs durably (kafgres.partition_epoch).
type Epochs interface {
	// Load returns a topic's epochs in order of From.
	Load(ctx context.Context, topicID int64) ([]Epoch, error)
	// Save makes e the topic's last epoch, forgetting any from e.From on,
	// and returns once that is durable.
	Save(ctx context.Context, topicID int64, e Epoch) error
}

// placement holds the epochs learned so far; the producer is their only
// writer, so they stay valid for its life.
type placement struct {
	log    Log
	epochs Epochs
	known  map[int64][]Epoch
}

func newPlacement(log Log, epochs Epochs) *placement {
	return &placement{log: log, epochs: epochs, known: map[int64][]Epoch{}}
}

// groupPlacement places the records of one group of transactions; each
// topic is looked up once per group, before anything of the group is
// appended.
type groupPlacement struct {
	*placement
	topics map[string]*topicState
}

type topicState struct {
	info TopicInfo
	ok   bool
	// high is the highest source position any partition of the topic
	// has: a transaction ending beyond it has nothing in the topic yet.
	high uint64
}

func (p *placement) group() *groupPlacement {
	return &groupPlacement{placement: p, topics: map[string]*topicState{}}
}

// place returns the partition for rec of the transaction ending at end, or
// why it cannot be appended at all; err is for failures that may pass.
func (g *groupPlacement) place(ctx context.Context, end decoder.LSN, rec record) (tp topicPartition, why string, err error) {
	ts, err := g.topic(ctx, rec.topic)
	if err != nil {
		return tp, "", err
	}
	tp.topic = rec.topic
	switch {
	case !ts.ok:
		return tp, fmt.Sprintf("topic %q does not exist; not appended", rec.topic), nil
	case ts.info.Internal:
		return tp, fmt.Sprintf("topic %q is one of Kafka's internal topics, which producers may not write to; not appended", rec.topic), nil
	case rec.partition >= ts.info.Partitions:
		return tp, fmt.Sprintf("partition %d of topic %q does not exist (it has %d); not appended", rec.partition, rec.topic, ts.info.Partitions), nil
	case rec.partition >= 0:
		tp.partition = rec.partition
		return tp, "", nil
	}
	n, err := g.count(ctx, ts, uint64(end))
	if err != nil {
		return tp, "", err
	}
	if rec.key != nil {
		tp.partition = keyPartition(rec.key, n)
	} else {
		tp.partition = nullKeyPartition(end, n)
	}
	return tp, "", nil
}

func (g *groupPlacement) topic(ctx context.Context, name string) (*topicState, error) {
	if ts := g.topics[name]; ts != nil {
		return ts, nil
	}
	info, ok, err := g.log.Topic(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("look up topic %q: %w", name, err)
	}
	ts := &topicState{info: info, ok: ok}
	for p := int32(0); ok && p < info.Partitions; p++ {
		applied, err := g.log.SourceApplied(name, p)
		if err != nil {
			return nil, err
		}
		ts.high = max(ts.high, applied)
	}
	g.topics[name] = ts
	return ts, nil
}

// count is the partition count to place a transaction ending at end by.
func (g *groupPlacement) count(ctx context.Context, ts *topicState, end uint64) (int32, error) {
	id := ts.info.ID
	eps, ok := g.known[id]
	if !ok {
		var err error
		if eps, err = g.epochs.Load(ctx, id); err != nil {
			return 0, fmt.Errorf("load partition epochs of topic %d: %w", id, err)
		}
		g.known[id] = eps
	}
	i := sort.Search(len(eps), func(i int) bool { return eps[i].From > end }) // epochs after end start at i
	if end <= ts.high {
		// Part of the transaction may be in the topic already, placed by
		// the epoch in force at end.
		if i > 0 {
			return eps[i-1].Partitions, nil
		}
		// Appended before epochs were kept (kafgres 0.3 and earlier): the
		// count now is the best there is.
		return ts.info.Partitions, nil
	}
	// Nothing of the transaction is in the topic: place it by the count
	// now. Epochs after end were written for attempts of which nothing
	// was appended either, and are dropped.
	n := ts.info.Partitions
	if i > 0 && eps[i-1].Partitions == n && i == len(eps) {
		return n, nil
	}
	e := Epoch{From: end, Partitions: n}
	if err := g.epochs.Save(ctx, id, e); err != nil {
		return 0, fmt.Errorf("save partition epoch of topic %d: %w", id, err)
	}
	g.known[id] = append(eps[:i:i], e)
	return n, nil
}

// nullKeyPartition spreads transactions over the partitions by their end
// LSN (a 64-bit mix, so that neighbouring positions land far apart).
func nullKeyPartition(end decoder.LSN, n int32) int32 {
	x := uint64(end)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int32(x % uint64(n))
}
