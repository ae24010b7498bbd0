// Package table stores a partition's record batches as rows of
// kafgres.log_batch, a partitioned Postgres table, so that the WAL, base
// backups and streaming replicas carry the log (issue #15;
// docs/architecture.md, "Table engine"). The batches are the bytes a
// segment file would hold; package segment's format helpers read them.
//
// This is the engine's start: appends, syncs (one Postgres transaction
// each), reads by offset, the offsets, the leaves rolled by size and
// dropped by DeleteRecords and retention. What the broker's partitionLog
// also asks (timestamps, aborted transactions, the exactly-once positions,
// producer state) is still to come, and the broker does not open it yet.
package table

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// Options configures a Log.
type Options struct {
	Pool      *pgxpool.Pool
	TopicID   int64
	Partition int32
	// SegmentBytes: an append starts a new leaf when the active one holds
	// batches and the batch would take it past this; default
	// segment.DefaultSegmentBytes.
	SegmentBytes int64
	// AsyncCommit commits with synchronous_commit = off (kafgres.fsync =
	// off): Sync returns before the WAL is flushed, so what it reports
	// survives a broker crash but not a Postgres crash.
	AsyncCommit bool
}

// maxReadBatches bounds the batches one Read returns, and so the rows its
// query looks at however small they are; a reader asks again for more.
const maxReadBatches = 4096

// Log is one partition's log in kafgres.log_batch. Append, Sync and the
// readers may be called concurrently; appends are serialised by the caller
// (the broker's partition lock), as for segment.Log.
type Log struct {
	opts   Options
	ctx    context.Context // the log's life: Close cancels what is in flight
	cancel context.CancelFunc
	parent string // the partition's table: kafgres.log_batch_<topic>_<partition>
	table  string // parent, schema-qualified and quoted for SQL text

	// syncMu makes Syncs one at a time, so that rows commit in offset
	// order and DurableEnd only moves forward.
	syncMu sync.Mutex
	// startMu makes moves of the log start (DeleteRecordsBefore,
	// ApplyRetention) one at a time, so that the start committed in
	// kafgres.log_state only moves forward.
	startMu sync.Mutex

	mu      sync.RWMutex
	start   int64 // log start offset
	end     int64 // next offset to assign
	durable int64 // end of what the last Sync committed
	leaves  []leaf
	pending []row
	err     error // a Sync failed: the log takes no more appends
	closed  bool
}

// leaf is one of the partition's leaf tables: the engine's segment.
type leaf struct {
	base  int64
	bytes int64 // of batches, committed or pending
	maxTs int64 // largest batch timestamp; -1: none
	// touched is when a batch was last appended to it, or when the log
	// was opened: its age for retention.ms when no batch has a timestamp
	// (a segment file's modification time in Kafka).
	touched time.Time
	isNew   bool // created by the next Sync, with its first rows
}

// row is a batch appended and not yet committed.
type row struct {
	leaf  int64
	isNew bool // the first row of a new leaf
	h     segment.BatchHeader
	batch []byte
}

func (l *Log) name() string { return fmt.Sprintf("%d-%d (table)", l.opts.TopicID, l.opts.Partition) }

// Open prepares the partition's tables (kafgres.log_prepare_partition) and
// reads its state: the log start offset, the leaves, and the log end from
// the last of them. Nothing needs recovering: a leaf and its rows commit
// together.
func Open(ctx context.Context, opts Options) (*Log, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = segment.DefaultSegmentBytes
	}
	parent := fmt.Sprintf("log_batch_%d_%d", opts.TopicID, opts.Partition)
	l := &Log{opts: opts, parent: parent, table: pgx.Identifier{"kafgres", parent}.Sanitize()}
	if _, err := opts.Pool.Exec(ctx, "SELECT kafgres.log_prepare_partition($1, $2)", opts.TopicID, opts.Partition); err != nil {
		return nil, fmt.Errorf("open %s: prepare its table: %w", l.name(), err)
	}
	if err := opts.Pool.QueryRow(ctx, "SELECT log_start_offset FROM kafgres.log_state WHERE topic_id = $1 AND partition = $2",
		opts.TopicID, opts.Partition).Scan(&l.start); err != nil {
		return nil, fmt.Errorf("open %s: read its log start offset: %w", l.name(), err)
	}
	// The leaves by name (<parent>_<base>), not by scanning rows.
	rows, err := opts.Pool.Query(ctx, `SELECT c.relname FROM pg_catalog.pg_inherits AS i
		JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass`, l.table)
	if err != nil {
		return nil, fmt.Errorf("open %s: list its leaves: %w", l.name(), err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("open %s: list its leaves: %w", l.name(), err)
	}
	for _, n := range names {
		base, err := strconv.ParseInt(strings.TrimPrefix(n, parent+"_"), 10, 64)
		if err != nil || !strings.HasPrefix(n, parent+"_") {
			return nil, fmt.Errorf("open %s: table %q under %s is not one of its leaves", l.name(), n, l.table)
		}
		l.leaves = append(l.leaves, leaf{base: base, maxTs: -1, touched: time.Now()})
	}
	slices.SortFunc(l.leaves, func(a, b leaf) int { return cmp.Compare(a.base, b.base) })
	l.end = l.start
	if len(l.leaves) > 0 {
		var last *int64
		err := opts.Pool.QueryRow(ctx, "SELECT max(last_offset) FROM "+l.table+
			" WHERE topic_id = $1 AND partition = $2 AND segment_base = $3",
			opts.TopicID, opts.Partition, l.leaves[len(l.leaves)-1].base).Scan(&last)
		if err != nil {
			return nil, fmt.Errorf("open %s: read its log end: %w", l.name(), err)
		}
		if last != nil {
			l.end = max(l.end, *last+1)
		}
		if err := l.loadSizes(ctx); err != nil {
			return nil, err
		}
	}
	l.durable = l.end
	// A crash may have come between moving the start and dropping the
	// leaves below it.
	if n := l.below(l.start); n > 0 {
		doomed := slices.Clone(l.leaves[:n])
		l.leaves = slices.Clone(l.leaves[n:])
		if err := l.dropLeaves(ctx, doomed); err != nil {
			return nil, fmt.Errorf("open %s: %w", l.name(), err)
		}
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

// loadSizes reads each leaf's bytes of batches and largest timestamp.
// octet_length of a TOAST value stored EXTERNAL is read from its pointer,
// so the batches are not.
func (l *Log) loadSizes(ctx context.Context) error {
	rows, err := l.opts.Pool.Query(ctx, "SELECT segment_base, sum(octet_length(batch))::bigint, max(max_timestamp) FROM "+l.table+
		" WHERE topic_id = $1 AND partition = $2 GROUP BY segment_base", l.opts.TopicID, l.opts.Partition)
	if err != nil {
		return fmt.Errorf("open %s: read its size: %w", l.name(), err)
	}
	type stats struct{ bytes, maxTs int64 }
	byBase := map[int64]stats{}
	var base, n, ts int64
	if _, err := pgx.ForEachRow(rows, []any{&base, &n, &ts}, func() error { byBase[base] = stats{n, ts}; return nil }); err != nil {
		return fmt.Errorf("open %s: read its size: %w", l.name(), err)
	}
	for i := range l.leaves {
		if st, ok := byBase[l.leaves[i].base]; ok {
			l.leaves[i].bytes, l.leaves[i].maxTs = st.bytes, st.maxTs
		}
	}
	return nil
}

// Append queues one v2 batch at the log end, stamping its base offset and
// leader epoch into it (as segment.Log does), and returns the base offset.
// Nothing is written before Sync; LogEndOffset counts it at once. The
// batch is copied, so the caller may reuse its memory.
func (l *Log) Append(batch []byte, leaderEpoch int32) (int64, error) {
	h, err := segment.AppendHeader(batch)
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", l.name(), err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, fmt.Errorf("append to %s: %w", l.name(), err)
	}
	base := l.end
	n := int64(len(batch))
	if len(l.leaves) == 0 || (l.leaves[len(l.leaves)-1].bytes > 0 && l.leaves[len(l.leaves)-1].bytes+n > l.opts.SegmentBytes) {
		l.leaves = append(l.leaves, leaf{base: base, maxTs: -1, isNew: true})
	}
	active := &l.leaves[len(l.leaves)-1]
	segment.Stamp(batch, base, leaderEpoch)
	b := append([]byte(nil), batch...)
	h.BaseOffset, h.LeaderEpoch = base, leaderEpoch
	l.pending = append(l.pending, row{leaf: active.base, isNew: active.isNew, h: h, batch: b})
	active.isNew = false
	active.bytes += n
	active.maxTs = max(active.maxTs, h.MaxTimestamp)
	active.touched = time.Now()
	l.end = h.LastOffset() + 1
	return base, nil
}

// Sync commits every batch appended before it started, in one Postgres
// transaction on a connection of the pool (creating the leaves they
// start), and returns the durable end offset. After a failure the log
// takes no more appends: what it queued is lost, unacknowledged, and the
// broker stops, as it does when an fsync fails.
func (l *Log) Sync() (int64, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return 0, fmt.Errorf("sync %s: %w", l.name(), err)
	}
	rows, end := l.pending, l.end
	l.pending = nil
	l.mu.Unlock()
	if len(rows) == 0 {
		return l.DurableEnd(), nil
	}
	if err := l.commit(rows); err != nil {
		l.mu.Lock()
		l.err = err
		closed := l.closed
		l.mu.Unlock()
		if closed || errors.Is(err, context.Canceled) {
			return 0, fmt.Errorf("sync %s: %w", l.name(), segment.ErrClosed)
		}
		return 0, fmt.Errorf("sync %s: %w", l.name(), err)
	}
	l.mu.Lock()
	l.durable = end
	l.mu.Unlock()
	return end, nil
}

// inTx runs fn in a transaction that commits as Options.AsyncCommit says,
// whatever the server's default.
func (l *Log) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, l.opts.Pool, func(tx pgx.Tx) error {
		sc := "on"
		if l.opts.AsyncCommit {
			sc = "off"
		}
		if _, err := tx.Exec(ctx, "SELECT pg_catalog.set_config('synchronous_commit', $1, true)", sc); err != nil {
			return err
		}
		return fn(tx)
	})
}

// commit writes rows in one transaction.
func (l *Log) commit(rows []row) error {
	return l.inTx(l.ctx, func(tx pgx.Tx) error {
		for _, r := range rows {
			if r.isNew {
				if _, err := tx.Exec(l.ctx, "SELECT kafgres.log_add_segment($1, $2, $3)", l.opts.TopicID, l.opts.Partition, r.leaf); err != nil {
					return fmt.Errorf("add the leaf at %d: %w", r.leaf, err)
				}
			}
		}
		_, err := tx.CopyFrom(l.ctx, pgx.Identifier{"kafgres", l.parent},
			[]string{"topic_id", "partition", "segment_base", "base_offset", "last_offset", "max_timestamp",
				"producer_id", "producer_epoch", "base_sequence", "attributes", "leader_epoch", "batch"},
			pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				r := rows[i]
				return []any{l.opts.TopicID, l.opts.Partition, r.leaf, r.h.BaseOffset, r.h.LastOffset(), r.h.MaxTimestamp,
					r.h.ProducerID, r.h.ProducerEpoch, r.h.BaseSequence, r.h.Attributes, r.h.LeaderEpoch, r.batch}, nil
			}))
		return err
	})
}

// Read returns whole batches starting with the one containing offset,
// taking only batches whose base offset is below limit (and committed: a
// limit past DurableEnd is cut there). The first batch is returned even if
// it is larger than maxBytes; after it, reading stops before maxBytes
// would be exceeded, or after maxReadBatches. An offset below the log
// start or past the log end is segment.ErrOffsetOutOfRange.
func (l *Log) Read(offset int64, maxBytes int, limit int64) ([]byte, error) {
	l.mu.RLock()
	closed, start, end, durable := l.closed, l.start, l.end, l.durable
	l.mu.RUnlock()
	switch {
	case closed:
		return nil, segment.ErrClosed
	case offset < start || offset > end:
		return nil, fmt.Errorf("read %s at %d (log %d to %d): %w", l.name(), offset, start, end, segment.ErrOffsetOutOfRange)
	}
	limit = min(limit, durable)
	if offset >= limit {
		return nil, nil
	}
	// The running size is of the batches before each row, so the first
	// row always qualifies; the window sees at most maxReadBatches rows.
	rows, err := l.opts.Pool.Query(l.ctx, `SELECT batch FROM (
		SELECT batch, last_offset, sum(octet_length(batch)) OVER (ORDER BY last_offset) - octet_length(batch) AS before
		  FROM (SELECT batch, last_offset FROM `+l.table+`
		         WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3 AND base_offset < $4
		         ORDER BY last_offset LIMIT $5) AS w) AS s
		WHERE before = 0 OR before + octet_length(batch) <= $6
		ORDER BY last_offset`,
		l.opts.TopicID, l.opts.Partition, offset, limit, maxReadBatches, maxBytes)
	var out []byte
	var b []byte
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&b}, func() error { out = append(out, b...); return nil })
	}
	if err != nil {
		return nil, fmt.Errorf("read %s at %d: %w", l.name(), offset, l.closedErr(err))
	}
	return out, nil
}

// LogStartOffset is the first offset that may be read.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// LogEndOffset is the next offset to assign.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// DurableEnd is the end (exclusive) of what the last successful Sync
// committed.
func (l *Log) DurableEnd() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durable
}

// ActiveBase is the base offset of the leaf appends go to (the log end
// while there is none).
func (l *Log) ActiveBase() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.leaves) == 0 {
		return l.end
	}
	return l.leaves[len(l.leaves)-1].base
}

// Segments is the number of leaves, counting one its first Sync will
// create.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.leaves)
}

// Size is the bytes of the batches held, committed or not.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, lf := range l.leaves {
		n += lf.bytes
	}
	return n
}

// Close commits what was appended, as segment.Log's Close fsyncs it, and
// ends the log: later calls fail with segment.ErrClosed.
func (l *Log) Close() error {
	_, err := l.Sync()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	if errors.Is(err, segment.ErrClosed) {
		err = nil
	}
	return err
}
