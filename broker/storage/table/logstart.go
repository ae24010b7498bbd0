package table

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// The log start offset and retention, with segment.Log's rules
// (segment/logstart.go): the new start is committed in kafgres.log_state
// before readers see it and before any leaf goes, then the leaves wholly
// below it are dropped whole (kafgres.log_drop_segment), never a row
// deleted. A crash between the two leaves leaves below the start, which
// Open drops. Unlike a segment log, the table log may be left with no
// leaf at all: the next append starts one at the log end, so the active
// leaf needs no roll before it can go.

// DeleteRecordsBefore advances the log start offset to offset (Kafka's
// DeleteRecords) and returns the new log start offset. An offset at or
// below the current start changes nothing; one past the log end fails
// with segment.ErrOffsetOutOfRange (Kafka's limit is the high watermark,
// which callers enforce). An error after the start was committed leaves it
// advanced.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	l.mu.RLock()
	start, end, err := l.start, l.end, l.usable()
	l.mu.RUnlock()
	if err != nil {
		return 0, fmt.Errorf("delete records in %s: %w", l.name(), err)
	}
	if offset <= start {
		return start, nil
	}
	if offset > end {
		return start, fmt.Errorf("delete records in %s before %d: %w: log is [%d, %d)",
			l.name(), offset, segment.ErrOffsetOutOfRange, start, end)
	}
	if _, err := l.advanceStart(offset); err != nil {
		return offset, fmt.Errorf("delete records in %s before %d: %w", l.name(), offset, err)
	}
	return offset, nil
}

// ApplyRetention drops the oldest leaves that breach r at now, with
// segment.Log's (Kafka's) rules, and returns how many:
//
//   - by size: while Size minus the oldest remaining leaf is at least
//     r.Bytes, that leaf goes;
//   - by time: then, oldest first, leaves whose largest timestamp (when
//     none has one: the last append to it) is more than r.Ms before now
//     go, stopping at the first that is not.
//
// Only leaves that end at or below DurableEnd qualify, and never an empty
// last leaf. The log start offset moves to the base of the first leaf
// kept, or to the log end when none is.
func (l *Log) ApplyRetention(r segment.Retention, now time.Time) (deleted int, err error) {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	l.mu.RLock()
	if err := l.usable(); err != nil {
		l.mu.RUnlock()
		return 0, fmt.Errorf("apply retention to %s: %w", l.name(), err)
	}
	n := l.retentionBreached(r, now)
	start := l.end
	if n < len(l.leaves) {
		start = l.leaves[n].base
	}
	start = max(start, l.start)
	l.mu.RUnlock()
	if n == 0 {
		return 0, nil
	}
	deleted, err = l.advanceStart(start)
	if err != nil {
		return deleted, fmt.Errorf("apply retention to %s: %w", l.name(), err)
	}
	return deleted, nil
}

// retentionBreached returns how many leading leaves r drops at now.
// Callers hold mu.
func (l *Log) retentionBreached(r segment.Retention, now time.Time) int {
	deletable := func(i int) bool {
		return l.leafEnd(i) <= l.durable && !(i == len(l.leaves)-1 && l.leaves[i].bytes == 0)
	}
	n := 0
	if r.Bytes >= 0 {
		var size int64
		for _, lf := range l.leaves {
			size += lf.bytes
		}
		if diff := size - r.Bytes; diff >= 0 {
			for n < len(l.leaves) && deletable(n) && diff-l.leaves[n].bytes >= 0 {
				diff -= l.leaves[n].bytes
				n++
			}
		}
	}
	if r.Ms >= 0 {
		for n < len(l.leaves) && deletable(n) {
			ts := l.leaves[n].maxTs
			if ts < 0 {
				ts = l.leaves[n].touched.UnixMilli()
			}
			if now.UnixMilli()-ts <= r.Ms {
				break
			}
			n++
		}
	}
	return n
}

// leafEnd is the end (exclusive) of leaf i's offsets: the next leaf's base,
// or the log end for the last one. Callers hold mu.
func (l *Log) leafEnd(i int) int64 {
	if i+1 < len(l.leaves) {
		return l.leaves[i+1].base
	}
	return l.end
}

// below is how many leading leaves end at or below start. Callers hold mu
// (or own the log).
func (l *Log) below(start int64) int {
	n := 0
	for n < len(l.leaves) && l.leafEnd(n) <= start {
		n++
	}
	return n
}

// advanceStart commits start (above the current start, at most the log
// end) as the log start offset, then drops the leaves wholly below it and
// returns how many. Callers hold startMu.
func (l *Log) advanceStart(start int64) (int, error) {
	err := l.inTx(l.ctx, func(tx pgx.Tx) error {
		// The source positions of the batches about to go are kept, so
		// that SourceApplied survives them; so are the snapshots from the
		// new start on (LoadProducerSnapshot takes none below it).
		_, err := tx.Exec(l.ctx, `UPDATE kafgres.log_state SET log_start_offset = $3,
			source_applied = GREATEST(source_applied, (SELECT max(source_lsn) FROM `+l.table+`
				WHERE topic_id = $1 AND partition = $2 AND last_offset < $3))
			WHERE topic_id = $1 AND partition = $2 AND log_start_offset < $3`, l.opts.TopicID, l.opts.Partition, start)
		if err != nil {
			return err
		}
		_, err = tx.Exec(l.ctx, `DELETE FROM kafgres.log_producer_snapshot
			WHERE topic_id = $1 AND partition = $2 AND snapshot_offset < $3`, l.opts.TopicID, l.opts.Partition, start)
		return err
	})
	if err != nil {
		return 0, l.closedErr(fmt.Errorf("commit log start offset %d: %w", start, err))
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, segment.ErrClosed
	}
	l.start = max(l.start, start)
	// Taken out under mu, so that no append goes to a leaf being dropped:
	// the next one starts a leaf of its own. Never a leaf holding batches
	// not yet committed (a start past the durable end, which callers
	// should not ask for): its Sync would find no table.
	n := l.below(min(l.start, l.durable))
	doomed := slices.Clone(l.leaves[:n])
	l.leaves = slices.Clone(l.leaves[n:])
	l.mu.Unlock()
	return len(doomed), l.closedErr(l.dropLeaves(l.ctx, doomed))
}

// dropLeaves drops the tables of leaves no longer in the log.
func (l *Log) dropLeaves(ctx context.Context, doomed []leaf) error {
	for _, lf := range doomed {
		if _, err := l.opts.Pool.Exec(ctx, "SELECT kafgres.log_drop_segment($1, $2, $3)", l.opts.TopicID, l.opts.Partition, lf.base); err != nil {
			return fmt.Errorf("drop the leaf at %d: %w", lf.base, err)
		}
	}
	return nil
}

// usable reports why the log cannot be used, if it cannot. Callers hold mu.
func (l *Log) usable() error {
	switch {
	case l.closed:
		return segment.ErrClosed
	case l.err != nil:
		return fmt.Errorf("log failed earlier: %w", l.err)
	}
	return nil
}

// closedErr is err, or segment.ErrClosed when it came from Close
// cancelling the query or from the partition's tables being gone with its
// topic: until the broker's catalog learns of the drop, a reader of the
// log must see what it sees after, an unknown partition, not a storage
// failure.
func (l *Log) closedErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(l.ctx.Err(), context.Canceled) {
		return segment.ErrClosed
	}
	var pgErr *pgconn.PgError // 42P01: undefined_table
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" && l.dropped() {
		return segment.ErrClosed
	}
	return err
}
