package broker

import (
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/storage/table"
)

// partitionLog is what the broker needs of the store of one partition's
// record batches, whichever engine keeps them (issue #15: segment files
// today, a Postgres table next; docs/architecture.md, "Table engine").
// The batches are Kafka v2 record batches byte for byte, so the format
// helpers and the values exchanged (segment.BatchHeader, AbortedTxn,
// ProducerSnapshotEntry, ...) are shared by every engine. The contract of
// each method is that of *segment.Log, which documents it; in short:
//
//   - offsets are assigned by the append calls, which callers serialise
//     (partition.mu); an append stamps the base offset and leader epoch
//     into the caller's batch;
//   - an append is visible to LogEndOffset at once but acknowledged only
//     once Sync has returned an end past it: DurableEnd is that end, and
//     the high watermark never passes it;
//   - SourceApplied and AppendSourced keep the exactly-once positions of
//     the SQL producer (sourced.go) with the batches, atomically with them;
//   - AppendMarker records an aborted transaction with its marker, and
//     AbortedTxns answers read_committed fetches from those records;
//   - the producer snapshot and the leader epoch checkpoint are stored
//     with the log, so that opening it replays only the batches after the
//     newest snapshot (producer_state.go);
//   - after Close, the calls that read or write batches fail with an error
//     wrapping segment.ErrClosed (a dropped partition).
//
// What only a log made of segment files can do is not here but in the
// optional interfaces below, which the broker asserts: segmentedLog
// (segment rolling), compactableLog (the cleaner) and archivable (the
// segment archiver).
type partitionLog interface {
	Append(batch []byte, leaderEpoch int32) (int64, error)
	AppendSourced(batches []segment.SourcedBatch, leaderEpoch int32) ([]int64, error)
	AppendMarker(batch []byte, leaderEpoch int32, aborted *segment.AbortedTxn) (int64, error)
	Sync() (durableEnd int64, err error)

	LogStartOffset() int64
	LogEndOffset() int64
	DurableEnd() int64
	SourceApplied() uint64
	// ForgetSourcesAbove drops the source positions above keep, durably:
	// the operator's way out of a log ahead of the WAL (source_guard.go).
	ForgetSourcesAbove(keep uint64) error
	// Size is the bytes of batches held, as DescribeLogDirs reports it.
	Size() int64

	Read(offset int64, maxBytes int, limit int64) ([]byte, error)
	ScanBatches(from int64, fn func(h segment.BatchHeader) error) error
	OffsetForTimestamp(ts int64, limit int64) (offset int64, timestamp int64, ok bool, err error)
	MaxTimestamp(limit int64) (offset int64, timestamp int64, ok bool, err error)
	AbortedTxns(fetchOffset, upper int64) ([]segment.AbortedTxn, error)

	// DeleteRecordsBefore and ApplyRetention move the log start offset;
	// ApplyRetention reports how many units of storage (segments) it
	// deleted whole.
	DeleteRecordsBefore(offset int64) (int64, error)
	ApplyRetention(r segment.Retention, now time.Time) (deleted int, err error)

	WriteProducerSnapshot(offset int64, entries []segment.ProducerSnapshotEntry) error
	LoadProducerSnapshot() (offset int64, entries []segment.ProducerSnapshotEntry, ok bool)
	WriteEpochCheckpoint(entries []segment.EpochEntry) error
	ReadEpochCheckpoint() (entries []segment.EpochEntry, ok bool, err error)

	Close() error
	// CloseWithProducerSnapshot is Close for a clean stop: it also
	// stores the producer snapshot as of the log end, which the segment
	// engine writes within the close's own fsyncs.
	CloseWithProducerSnapshot(entries []segment.ProducerSnapshotEntry) error
}

// segmentedLog is a log kept as segments rolled at segment.bytes and
// segment.ms. The broker snapshots a partition's producer state where a
// segment starts, as Kafka does when it rolls, so that retention leaves a
// snapshot at the new log start; a log that is not segmented is
// snapshotted only at a clean close and after a replay at open.
type segmentedLog interface {
	ActiveBase() int64
	Segments() int
	SetSegmentLimits(segmentBytes, segmentMs int64)
}

// compactableLog is a log the cleaner can compact (cleaner.go).
type compactableLog interface {
	CleanerCheckpoint() int64
	Cleanable(checkpoint, lso int64, now time.Time, minLagMs, maxLagMs int64) (segment.Cleanable, error)
	Clean(o segment.CleanOptions) (segment.CleanStats, error)
}

// The segment engine has every capability.
var (
	_ partitionLog   = (*segment.Log)(nil)
	_ segmentedLog   = (*segment.Log)(nil)
	_ compactableLog = (*segment.Log)(nil)
	_ archivable     = (*segment.Log)(nil)
)

// activeBase is the base offset of the segment appends go to, or -1 when
// the log is not segmented (no append ever starts a segment then).
func (p *partition) activeBase() int64 {
	if s, ok := p.log.(segmentedLog); ok {
		return s.ActiveBase()
	}
	return -1
}

// The table engine keeps a partition's log in Postgres (issue #15); it
// rolls leaves as segments roll and is compacted (table/clean.go); it is
// not yet archived.
var (
	_ partitionLog   = (*table.Log)(nil)
	_ segmentedLog   = (*table.Log)(nil)
	_ compactableLog = (*table.Log)(nil)
)
