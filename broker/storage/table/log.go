// Package table stores a partition's record batches as rows of
// kafgres.log_batch, a partitioned Postgres table, so that the WAL, base
// backups and streaming replicas carry the log (issue #15;
// docs/architecture.md, "Table engine"). The batches are the bytes a
// segment file would hold; package segment's format helpers read them.
//
// A Log has every call of the broker's partitionLog: appends (plain,
// sourced, markers) committed by Sync (one Postgres transaction each),
// reads by offset, headers and timestamp, the aborted transactions, the
// leaves rolled by size and age and dropped by DeleteRecords and
// retention, and the producer snapshots and leader epochs kept in tables
// beside the batches.
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
	"github.com/jackc/pgx/v5/pgtype"
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
	// SegmentMs: an append also starts a new leaf when the active one
	// holds batches and was started this long ago (segment.ms); default
	// segment.DefaultSegmentMs.
	SegmentMs int64
	// Decompress reads compressed batches for the timestamp lookups
	// (segment.Options.Decompress); nil: a compressed batch answers with
	// its header.
	Decompress segment.Decompressor
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
	// inflight are the rows the running Sync is committing: no longer
	// pending, not yet durable; ScanBatches still sees them.
	inflight []row
	// snaps are producer snapshots past the durable end, committed by the
	// next Sync with the batches they describe.
	snaps   []snapshot
	applied uint64 // largest source of a sourced batch in the log, 0: none
	err     error  // a Sync failed: the log takes no more appends
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
	// created is when the leaf was started (or the log opened): its age
	// for segment.ms.
	created time.Time
}

// row is a batch appended and not yet committed.
type row struct {
	leaf  int64
	isNew bool // the first row of a new leaf
	h     segment.BatchHeader
	batch []byte
	// source is a sourced batch's position (its transaction's LSN), 0
	// for others.
	source uint64
	// aborted is an ABORT marker's transaction index entry.
	aborted *segment.AbortedTxn
}

func (l *Log) name() string { return fmt.Sprintf("%d-%d (table)", l.opts.TopicID, l.opts.Partition) }

// Open prepares the partition's tables (kafgres.log_prepare_partition) and
// reads its state: the log start offset, the leaves, and the log end from
// the last of them. Nothing needs recovering: a leaf and its rows commit
// together.
func Open(ctx context.Context, opts Options) (*Log, error) {
	opts.SegmentBytes, opts.SegmentMs = segmentLimits(opts.SegmentBytes, opts.SegmentMs)
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
		l.leaves = append(l.leaves, leaf{base: base, maxTs: -1, touched: time.Now(), created: time.Now()})
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
	if err := l.loadApplied(ctx); err != nil {
		return nil, err
	}
	// A snapshot past the end describes batches a failed Sync lost; the
	// offsets will be given to other batches.
	if _, err := opts.Pool.Exec(ctx, `DELETE FROM kafgres.log_producer_snapshot
		WHERE topic_id = $1 AND partition = $2 AND snapshot_offset > $3`, opts.TopicID, opts.Partition, l.end); err != nil {
		return nil, fmt.Errorf("open %s: drop producer snapshots past its end: %w", l.name(), err)
	}
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
	return l.appendLocked(batch, h, leaderEpoch).h.BaseOffset, nil
}

// appendLocked queues batch (header h) at the log end, starting a leaf
// when the active one is full or old, and returns its row. Callers hold
// mu and have checked usable.
func (l *Log) appendLocked(batch []byte, h segment.BatchHeader, leaderEpoch int32) *row {
	base := l.end
	n := int64(len(batch))
	now := time.Now()
	if len(l.leaves) == 0 {
		l.leaves = append(l.leaves, leaf{base: base, maxTs: -1, isNew: true, created: now})
	} else if last := l.leaves[len(l.leaves)-1]; last.bytes > 0 &&
		(last.bytes+n > l.opts.SegmentBytes || now.Sub(last.created) >= time.Duration(l.opts.SegmentMs)*time.Millisecond) {
		l.leaves = append(l.leaves, leaf{base: base, maxTs: -1, isNew: true, created: now})
	}
	active := &l.leaves[len(l.leaves)-1]
	segment.Stamp(batch, base, leaderEpoch)
	b := append([]byte(nil), batch...)
	h.BaseOffset, h.LeaderEpoch = base, leaderEpoch
	l.pending = append(l.pending, row{leaf: active.base, isNew: active.isNew, h: h, batch: b})
	active.isNew = false
	active.bytes += n
	active.maxTs = max(active.maxTs, h.MaxTimestamp)
	active.touched = now
	l.end = h.LastOffset() + 1
	return &l.pending[len(l.pending)-1]
}

// SetSegmentLimits changes the roll limits (segment.bytes, segment.ms) of
// the open log; values <= 0 mean the defaults. They apply from the next
// append on.
func (l *Log) SetSegmentLimits(segmentBytes, segmentMs int64) {
	segmentBytes, segmentMs = segmentLimits(segmentBytes, segmentMs)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts.SegmentBytes, l.opts.SegmentMs = segmentBytes, segmentMs
}

// segmentLimits puts the defaults in place of values <= 0.
func segmentLimits(segmentBytes, segmentMs int64) (int64, int64) {
	if segmentBytes <= 0 {
		segmentBytes = segment.DefaultSegmentBytes
	}
	if segmentMs <= 0 {
		segmentMs = segment.DefaultSegmentMs
	}
	return segmentBytes, segmentMs
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
	rows, end, snaps := l.pending, l.end, l.snaps
	l.pending, l.inflight, l.snaps = nil, rows, nil
	l.mu.Unlock()
	if len(rows) == 0 && len(snaps) == 0 {
		return l.DurableEnd(), nil
	}
	if err := l.commit(rows, snaps); err != nil {
		// Whether the partition is gone is settled before the log is
		// marked failed, so that no append in between is refused as on a
		// failed log, which would stop the broker.
		l.mu.RLock()
		closed := l.closed
		l.mu.RUnlock()
		gone := closed || errors.Is(err, context.Canceled) || l.dropped()
		l.mu.Lock()
		l.inflight = nil
		if gone {
			// Gone for good: every later call answers as on a closed log
			// (the broker's "unknown partition").
			l.closed = true
		} else {
			l.err = err
		}
		l.mu.Unlock()
		if gone {
			return 0, fmt.Errorf("sync %s: %w", l.name(), segment.ErrClosed)
		}
		return 0, fmt.Errorf("sync %s: %w", l.name(), err)
	}
	l.mu.Lock()
	l.durable, l.inflight = end, nil
	l.mu.Unlock()
	return end, nil
}

// dropped reports whether the partition is gone from the catalog (its
// topic dropped, and its tables with it): a Sync that failed for that
// failed as on a closed log, not as a storage failure that stops the
// broker.
func (l *Log) dropped() bool {
	ctx, cancel := context.WithTimeout(context.Background(), closedWriteTimeout)
	defer cancel()
	var exists bool
	err := l.opts.Pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM kafgres.log_state WHERE topic_id = $1 AND partition = $2)",
		l.opts.TopicID, l.opts.Partition).Scan(&exists)
	return err == nil && !exists
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

// commit writes rows and the producer snapshots that describe them in one
// transaction.
func (l *Log) commit(rows []row, snaps []snapshot) error {
	return l.inTx(l.ctx, func(tx pgx.Tx) error {
		for _, r := range rows {
			if r.isNew {
				if _, err := tx.Exec(l.ctx, "SELECT kafgres.log_add_segment($1, $2, $3)", l.opts.TopicID, l.opts.Partition, r.leaf); err != nil {
					return fmt.Errorf("add the leaf at %d: %w", r.leaf, err)
				}
			}
		}
		if len(rows) > 0 {
			// source_lsn is a pg_lsn, whose binary form is a bigint's.
			tx.Conn().TypeMap().RegisterType(&pgtype.Type{Name: "pg_lsn", OID: pgLSNOID, Codec: pgtype.Int8Codec{}})
			_, err := tx.CopyFrom(l.ctx, pgx.Identifier{"kafgres", l.parent},
				[]string{"topic_id", "partition", "segment_base", "base_offset", "last_offset", "max_timestamp",
					"producer_id", "producer_epoch", "base_sequence", "attributes", "leader_epoch",
					"source_lsn", "txn_first_offset", "txn_last_stable_offset", "batch"},
				pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
					r := rows[i]
					var source, first, lso *int64
					if r.source != 0 {
						source = new(int64(r.source))
					}
					if r.aborted != nil {
						first, lso = &r.aborted.FirstOffset, &r.aborted.LastStableOffset
					}
					return []any{l.opts.TopicID, l.opts.Partition, r.leaf, r.h.BaseOffset, r.h.LastOffset(), r.h.MaxTimestamp,
						r.h.ProducerID, r.h.ProducerEpoch, r.h.BaseSequence, r.h.Attributes, r.h.LeaderEpoch,
						source, first, lso, r.batch}, nil
				}))
			if err != nil {
				return err
			}
		}
		for _, sn := range snaps {
			if err := writeSnapshot(l.ctx, tx, l.opts, sn); err != nil {
				return err
			}
		}
		return nil
	})
}

// pgLSNOID is the type oid of pg_lsn.
const pgLSNOID = 3220

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

// CloseWithProducerSnapshot closes the log and stores the producer
// snapshot as of its end, as the broker's clean shutdown does.
func (l *Log) CloseWithProducerSnapshot(entries []segment.ProducerSnapshotEntry) error {
	if err := l.Close(); err != nil {
		return err
	}
	if err := l.WriteProducerSnapshot(l.LogEndOffset(), entries); err != nil {
		return fmt.Errorf("producer snapshot at close: %w", err)
	}
	return nil
}

// SetupConn prepares a new connection of the pool the logs use (the
// pool's AfterConnect): it gives the session a replication origin of its
// own (kafgres.log_session_origin), by which the output plugin drops the
// log's rows before decoding them. Without a free origin the rows are
// decoded and ignored: slower, not wrong.
func SetupConn(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "SELECT kafgres.log_session_origin()"); err != nil {
		return fmt.Errorf("table engine connection: set its replication origin: %w", err)
	}
	return nil
}
