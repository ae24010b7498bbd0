// Package txn is Kafka's transaction coordinator: the state of every
// transactional id (TransactionMetadata in Kafka) and the transitions
// InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and
// EndTxn make, the timeout abort and the expiry of idle ids.
//
// Kafka keeps this state in the log of __transaction_state; here a Store
// keeps it (Postgres in the broker), and every transition is written
// before it is acted on or answered, in Kafka's order: the partitions a
// transaction spans before a producer writes to them, PrepareCommit or
// PrepareAbort before EndTxn is answered, then the markers, then
// CompleteCommit or CompleteAbort. The package knows nothing of the
// broker: the store, the marker writer, the producer id allocator and the
// clock are interfaces.
package txn

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"
)

// State is a transaction's state, named as Kafka names it (ListTransactions,
// DescribeTransactions, kafka-transactions.sh).
type State int8

const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	PrepareEpochFence
	Dead
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence", "Dead"}

func (s State) String() string {
	if int(s) < len(stateNames) && s >= 0 {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState is String's inverse; Kafka's ListTransactions filter matches
// names exactly.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// preparing: markers are (about to be) written; requests wait.
func (s State) preparing() bool { return s == PrepareCommit || s == PrepareAbort }

// Partition is a topic partition by the topic's internal id (kafgres's
// kafgres.topic.topic_id), which outlives renames and is what Postgres
// keys offsets by.
type Partition struct {
	TopicID   int64
	Partition int32
}

func comparePartitions(a, b Partition) int {
	if a.TopicID != b.TopicID {
		if a.TopicID < b.TopicID {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// Txn is the stored state of one transactional id: a row of
// kafgres.transaction.
type Txn struct {
	ID             string
	ProducerID     int64
	PrevProducerID int64 // the id before the last rotation, -1 none
	NextProducerID int64 // TV2: the id the producer moves to once this transaction completes (epoch exhausted), -1 none
	Epoch          int16 // -1 until the first InitProducerId is written
	LastEpoch      int16 // the epoch before the last bump, for retries; -1 none
	TimeoutMs      int32
	State          State
	Partitions     []Partition // sorted, no duplicates
	Groups         []string    // sorted: groups whose offsets the transaction commits
	StartMs        int64       // when the ongoing transaction started, -1 none
	UpdateMs       int64
	// Version is the transaction version (KIP-890) the current or last
	// transaction runs on: 2 bumps the epoch at every EndTxn.
	Version int16
}

func (t Txn) clone() Txn {
	t.Partitions = slices.Clone(t.Partitions)
	t.Groups = slices.Clone(t.Groups)
	return t
}

// Offset is a transactional offset commit, pending until its transaction
// completes (kafgres.transaction_offset).
type Offset struct {
	Group       string
	TopicID     int64
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
}

// PendingOffset is a stored Offset with its transaction.
type PendingOffset struct {
	TransactionalID string
	ProducerID      int64
	Offset
}

// Store keeps transactions durable. Every method is synchronous: it
// returns once the change is committed.
type Store interface {
	LoadTransactions(ctx context.Context) ([]Txn, error)
	LoadTxnOffsets(ctx context.Context) ([]PendingOffset, error)
	// SaveTransaction inserts or replaces t.
	SaveTransaction(ctx context.Context, t Txn) error
	// SaveTxnOffsets inserts or replaces pending offsets of transaction
	// id, by group and partition.
	SaveTxnOffsets(ctx context.Context, id string, producerID int64, offs []Offset) error
	// CompleteTransaction writes t, in state CompleteCommit or
	// CompleteAbort, and in the same database transaction moves the
	// transaction's pending offsets into the committed offsets (commit)
	// or deletes them (abort).
	CompleteTransaction(ctx context.Context, t Txn) error
	// DeleteTransaction removes an expired transactional id.
	DeleteTransaction(ctx context.Context, id string) error
}

// Marker is what a transaction's end writes to each of its partitions.
type Marker struct {
	ProducerID       int64
	Epoch            int16
	CoordinatorEpoch int32
	Commit           bool
}

// Markers writes transaction markers and returns once they are durable.
// Writing the same marker twice must be harmless (recovery repeats it).
type Markers interface {
	WriteMarkers(ctx context.Context, m Marker, parts []Partition) error
}

// ProducerIDs hands out producer ids never handed out before.
type ProducerIDs interface {
	NextProducerID(ctx context.Context) (int64, error)
}

// Clock is the coordinator's time source: timeouts and expiry are
// decided by it, so tests step time rather than wait.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// epochExhausted: Kafka never hands out math.MaxInt16 so that a fence can
// always bump once more.
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

func addPartitions(have []Partition, add []Partition) []Partition {
	out := slices.Clone(have)
	for _, p := range add {
		if i, found := slices.BinarySearchFunc(out, p, comparePartitions); !found {
			out = slices.Insert(out, i, p)
		}
	}
	return out
}

func containsAll(have []Partition, want []Partition) bool {
	for _, p := range want {
		if _, found := slices.BinarySearchFunc(have, p, comparePartitions); !found {
			return false
		}
	}
	return true
}

func addGroup(have []string, g string) []string {
	i, found := slices.BinarySearchFunc(have, g, strings.Compare)
	if found {
		return have
	}
	return slices.Insert(slices.Clone(have), i, g)
}
