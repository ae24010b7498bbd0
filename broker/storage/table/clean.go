package table

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// Compaction of a table topic (cleanup.policy=compact; issue #15): the
// decisions are the segment cleaner's (segment.Compactor: offset map,
// transactions, batch filter and rebuild); what differs is the storage.
// The cleaner reads the sealed leaves' rows by pages on the pool (no
// transaction held open, no lock: produce and fetch go on), then writes
// its changes in bounded transactions, each one UPDATEing the rows whose
// batch shrank (same offsets, producer fields and leader epoch) and
// DELETEing the rows whose batch goes, as Kafka drops a batch left with
// nothing to keep. The last batch of each leaf is kept (empty if need be)
// as the last batch of each cleaned segment is, so a leaf is never left
// without rows and Open still finds the log end. The new cleaner
// checkpoint (kafgres.log_state.cleaner_checkpoint) is committed after the
// last change. A crash (broker or Postgres) in between loses nothing:
// every transaction is a consistent log, and the next clean starts again
// from the old checkpoint, which is idempotent for what was done.

// cleanPageRows is how many rows one read of the cleaner fetches.
const cleanPageRows = 256

// cleanTxRows and cleanTxBytes bound one transaction of a clean's changes.
const (
	cleanTxRows  = 512
	cleanTxBytes = 8 << 20
)

// CleanerCheckpoint is the first offset not yet cleaned, or the log start
// offset when none was recorded.
func (l *Log) CleanerCheckpoint() int64 {
	var cp *int64
	err := l.opts.Pool.QueryRow(l.ctx, `SELECT cleaner_checkpoint FROM kafgres.log_state
		WHERE topic_id = $1 AND partition = $2`, l.opts.TopicID, l.opts.Partition).Scan(&cp)
	if err != nil || cp == nil || *cp < 0 {
		return l.LogStartOffset()
	}
	return *cp
}

// Cleanable measures the log for the cleaner, as segment.Log.Cleanable
// does with leaves for segments: the active (last) leaf and what is not
// yet committed are never cleanable.
func (l *Log) Cleanable(checkpoint, lso int64, now time.Time, minLagMs, maxLagMs int64) (segment.Cleanable, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return segment.Cleanable{}, segment.ErrClosed
	}
	start, end := l.start, l.end
	active := l.end
	if len(l.leaves) > 0 {
		active = l.leaves[len(l.leaves)-1].base
	}
	type span struct{ base, end, bytes, maxTs int64 }
	spans := make([]span, len(l.leaves))
	for i, lf := range l.leaves {
		spans[i] = span{lf.base, l.leafEnd(i), lf.bytes, lf.maxTs}
	}
	upper := min(active, lso, l.durable)
	l.mu.RUnlock()

	c := segment.Cleanable{FirstDirty: checkpoint}
	if c.FirstDirty < start || c.FirstDirty > end {
		c.FirstDirty = start
	}
	c.FirstUncleanable = upper
	nowMs := now.UnixMilli()
	var sealed []span
	if len(spans) > 0 {
		sealed = spans[:len(spans)-1]
	}
	if minLagMs > 0 {
		for _, s := range sealed {
			if s.end <= c.FirstDirty {
				continue
			}
			if s.maxTs > nowMs-minLagMs {
				c.FirstUncleanable = min(c.FirstUncleanable, s.base)
				break
			}
		}
	}
	c.FirstUncleanable = max(c.FirstUncleanable, c.FirstDirty)
	for _, s := range spans {
		switch {
		case s.end <= c.FirstDirty:
			c.CleanBytes += s.bytes
		case s.base < c.FirstUncleanable:
			c.CleanableBytes += s.bytes
		}
	}
	if maxLagMs > 0 && maxLagMs < math.MaxInt64 {
		for _, s := range sealed {
			if s.end <= c.FirstDirty || s.bytes == 0 {
				continue
			}
			var ts int64
			err := l.opts.Pool.QueryRow(l.ctx, "SELECT max_timestamp FROM "+l.table+
				" WHERE topic_id = $1 AND partition = $2 AND segment_base = $3 ORDER BY last_offset LIMIT 1",
				l.opts.TopicID, l.opts.Partition, s.base).Scan(&ts)
			if errors.Is(err, pgx.ErrNoRows) {
				break
			}
			if err != nil {
				return c, fmt.Errorf("measure %s for cleaning: %w", l.name(), l.closedErr(err))
			}
			if delay := nowMs - ts - maxLagMs; ts >= 0 && delay > 0 {
				c.MaxCompactionDelayMs = delay
			}
			break
		}
	}
	return c, nil
}

// cleanChange is what a clean does to one row: new batch bytes, or nil to
// delete it.
type cleanChange struct {
	leaf, last int64 // segment_base and last_offset: the row's key
	old        int   // its bytes before
	out        []byte
	h          segment.BatchHeader // of out
}

// Clean compacts the log once (segment.Log.Clean's contract) and records
// the new cleaner checkpoint.
func (l *Log) Clean(o segment.CleanOptions) (segment.CleanStats, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return segment.CleanStats{}, segment.ErrClosed
	}
	start, end, durable := l.start, l.end, l.durable
	leaves := slices.Clone(l.leaves)
	l.mu.RUnlock()
	active := end
	if len(leaves) > 0 {
		active = leaves[len(leaves)-1].base
	}
	upper := min(o.UpperBound, active, durable)
	firstDirty := o.FirstDirty
	if firstDirty < start || firstDirty > end {
		firstDirty = start
	}
	if firstDirty >= upper {
		return segment.CleanStats{FirstDirty: firstDirty, End: firstDirty, UpperBound: upper, ActiveSegmentBase: active}, nil
	}
	aborted, err := l.cleanerAborted(start, upper)
	if err != nil {
		return segment.CleanStats{}, err
	}
	k := segment.NewCompactor(o, firstDirty, upper, aborted, l.opts.Decompress)
	err = l.cleanRows(o, firstDirty, upper, func(_ int64, h segment.BatchHeader, b []byte) (bool, error) {
		return k.MapBatch(h, b)
	})
	if err != nil {
		return k.Stats(), err
	}
	endOffset := k.Mapped()
	// Whole leaves below the mapped end are cleaned, as whole segments are.
	next := func(base int64) int64 {
		for i, lf := range leaves {
			if lf.base == base && i+1 < len(leaves) {
				return leaves[i+1].base
			}
		}
		return upper
	}
	filterEnd := start
	for i, lf := range leaves {
		if lf.base < endOffset && i+1 < len(leaves) {
			filterEnd = leaves[i+1].base
		}
	}
	filterEnd = min(filterEnd, upper)
	var changes []cleanChange
	var pending int
	flush := func() error {
		if len(changes) == 0 {
			return nil
		}
		if err := l.applyClean(changes); err != nil {
			return err
		}
		changes, pending = changes[:0], 0
		return nil
	}
	err = l.cleanRows(o, start, filterEnd, func(leafBase int64, h segment.BatchHeader, b []byte) (bool, error) {
		out, err := k.FilterBatch(h, b, next(leafBase))
		if err != nil {
			return true, err
		}
		if out != nil && len(out) == len(b) && string(out) == string(b) {
			return false, nil
		}
		ch := cleanChange{leaf: leafBase, last: h.LastOffset(), old: len(b), out: out}
		if out != nil {
			if ch.h, err = segment.ParseBatchHeader(out); err != nil {
				return true, err
			}
			if o.Throttle != nil {
				o.Throttle(len(out))
			}
		}
		changes = append(changes, ch)
		pending += len(out)
		if len(changes) >= cleanTxRows || pending >= cleanTxBytes {
			return false, flush()
		}
		return false, nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return k.Stats(), err
	}
	st := k.Stats()
	st.ActiveSegmentBase = active
	err = l.inTx(l.ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(l.ctx, `UPDATE kafgres.log_state SET cleaner_checkpoint = $3
			WHERE topic_id = $1 AND partition = $2`, l.opts.TopicID, l.opts.Partition, st.End)
		return err
	})
	if err != nil {
		return st, fmt.Errorf("clean %s: write cleaner checkpoint: %w", l.name(), l.closedErr(err))
	}
	return st, nil
}

// cleanerAborted lists the aborted transactions with data below upper and
// their marker at or after from, by first offset.
func (l *Log) cleanerAborted(from, upper int64) ([]segment.AbortedTxn, error) {
	rows, err := l.opts.Pool.Query(l.ctx, `SELECT producer_id, txn_first_offset, last_offset, txn_last_stable_offset FROM `+l.table+`
		WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3 AND txn_first_offset IS NOT NULL AND txn_first_offset < $4
		ORDER BY txn_first_offset`, l.opts.TopicID, l.opts.Partition, from, upper)
	var out []segment.AbortedTxn
	var a segment.AbortedTxn
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&a.ProducerID, &a.FirstOffset, &a.LastOffset, &a.LastStableOffset}, func() error {
			out = append(out, a)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("clean %s: aborted transactions: %w", l.name(), l.closedErr(err))
	}
	return out, nil
}

// cleanRows calls fn with every committed batch whose last offset is in
// [from, to), in offset order, a page of rows at a time, checking
// o.Aborted and counting the bytes read against o.Throttle.
func (l *Log) cleanRows(o segment.CleanOptions, from, to int64, fn func(leaf int64, h segment.BatchHeader, b []byte) (stop bool, err error)) error {
	for from < to {
		rows, err := l.opts.Pool.Query(l.ctx, `SELECT segment_base, batch FROM `+l.table+`
			WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3 AND base_offset < $4
			ORDER BY last_offset LIMIT $5`, l.opts.TopicID, l.opts.Partition, from, to, cleanPageRows)
		if err != nil {
			return fmt.Errorf("clean %s: read from %d: %w", l.name(), from, l.closedErr(err))
		}
		type page struct {
			leaf int64
			b    []byte
		}
		var got []page
		var leafBase int64
		var b []byte
		if _, err := pgx.ForEachRow(rows, []any{&leafBase, &b}, func() error {
			got = append(got, page{leafBase, b})
			return nil
		}); err != nil {
			return fmt.Errorf("clean %s: read from %d: %w", l.name(), from, l.closedErr(err))
		}
		if len(got) == 0 {
			return nil
		}
		for _, p := range got {
			if o.Aborted != nil && o.Aborted() {
				return segment.ErrCleanAborted
			}
			h, err := segment.ValidateStoredBatch(p.b)
			if err != nil {
				return fmt.Errorf("clean %s: row in leaf %d: %w", l.name(), p.leaf, err)
			}
			if o.Throttle != nil {
				o.Throttle(len(p.b))
			}
			if stop, err := fn(p.leaf, h, p.b); err != nil || stop {
				return err
			}
			from = h.LastOffset() + 1
		}
		if len(got) < cleanPageRows {
			return nil
		}
	}
	return nil
}

// applyClean commits changes in one transaction and then counts them in
// the leaves' sizes. startMu keeps retention from dropping a leaf
// meanwhile; a row already gone (its leaf dropped before) is no change.
func (l *Log) applyClean(changes []cleanChange) error {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	err := l.inTx(l.ctx, func(tx pgx.Tx) error {
		var b pgx.Batch
		for _, c := range changes {
			if c.out == nil {
				b.Queue("DELETE FROM "+l.table+" WHERE topic_id = $1 AND partition = $2 AND segment_base = $3 AND last_offset = $4",
					l.opts.TopicID, l.opts.Partition, c.leaf, c.last)
				continue
			}
			b.Queue("UPDATE "+l.table+" SET batch = $5, max_timestamp = $6, attributes = $7"+
				" WHERE topic_id = $1 AND partition = $2 AND segment_base = $3 AND last_offset = $4",
				l.opts.TopicID, l.opts.Partition, c.leaf, c.last, c.out, c.h.MaxTimestamp, c.h.Attributes)
		}
		return tx.SendBatch(l.ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("clean %s: write %d rows: %w", l.name(), len(changes), l.closedErr(err))
	}
	l.mu.Lock()
	for _, c := range changes {
		if i := slices.IndexFunc(l.leaves, func(lf leaf) bool { return lf.base == c.leaf }); i >= 0 {
			l.leaves[i].bytes -= int64(c.old - len(c.out))
		}
	}
	l.mu.Unlock()
	return nil
}
