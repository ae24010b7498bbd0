package table

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// AppendSourced appends batches in order, each tagged with its source
// position (the SQL producer's WAL LSN), and returns their base offsets.
// The position goes into the batch's own row (source_lsn), so it becomes
// durable in the same transaction as the batch: the log never holds a
// sourced batch whose source it does not know, nor the reverse, and
// nothing needs recovering (segment.Log needs its source-index ordering
// and recovery for that). A source lower than SourceApplied is rejected
// with segment.ErrSourceOrder, as are sources of 0 or out of order within
// batches; then no batch is appended.
func (l *Log) AppendSourced(batches []segment.SourcedBatch, leaderEpoch int32) ([]int64, error) {
	hs := make([]segment.BatchHeader, len(batches))
	for i, b := range batches {
		h, err := segment.AppendHeader(b.Batch)
		if err != nil {
			return nil, fmt.Errorf("append to %s: batch %d: %w", l.name(), i, err)
		}
		if b.Source == 0 {
			return nil, fmt.Errorf("append to %s: %w: batch %d has source 0", l.name(), segment.ErrSourceOrder, i)
		}
		if i > 0 && b.Source < batches[i-1].Source {
			return nil, fmt.Errorf("append to %s: %w: batch %d has source %d after %d",
				l.name(), segment.ErrSourceOrder, i, b.Source, batches[i-1].Source)
		}
		hs[i] = h
	}
	if len(batches) == 0 {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return nil, fmt.Errorf("append to %s: %w", l.name(), err)
	}
	if batches[0].Source < l.applied {
		return nil, fmt.Errorf("append to %s: %w: source %d, log has %d",
			l.name(), segment.ErrSourceOrder, batches[0].Source, l.applied)
	}
	bases := make([]int64, len(batches))
	for i, b := range batches {
		r := l.appendLocked(b.Batch, hs[i], leaderEpoch)
		r.source = b.Source
		bases[i] = r.h.BaseOffset
		l.applied = b.Source
	}
	return bases, nil
}

// SourceApplied is the highest source of a sourced batch in the log, 0 if
// none. Like LogEndOffset it counts batches not yet committed by Sync.
func (l *Log) SourceApplied() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.applied
}

// loadApplied reads SourceApplied at open: the largest source_lsn of the
// newest leaf that has one, or the one log_state kept for leaves dropped
// since (advanceStart), so that retention does not make the log forget
// what it applied.
func (l *Log) loadApplied(ctx context.Context) error {
	var kept int64
	if err := l.opts.Pool.QueryRow(ctx, `SELECT COALESCE((source_applied - '0/0')::bigint, 0) FROM kafgres.log_state
		WHERE topic_id = $1 AND partition = $2`, l.opts.TopicID, l.opts.Partition).Scan(&kept); err != nil {
		return fmt.Errorf("open %s: read its source position: %w", l.name(), err)
	}
	l.applied = uint64(kept)
	for i := len(l.leaves) - 1; i >= 0; i-- {
		var lsn *int64
		if err := l.opts.Pool.QueryRow(ctx, "SELECT (max(source_lsn) - '0/0')::bigint FROM "+l.table+
			" WHERE topic_id = $1 AND partition = $2 AND segment_base = $3", l.opts.TopicID, l.opts.Partition, l.leaves[i].base).Scan(&lsn); err != nil {
			return fmt.Errorf("open %s: read its source position: %w", l.name(), err)
		}
		if lsn != nil {
			l.applied = max(l.applied, uint64(*lsn))
			break
		}
	}
	return nil
}

// AppendMarker appends the control batch of a transaction marker, as
// Append does, with aborted (nil for a COMMIT, or an ABORT ending a
// transaction with no data here) as its transaction index entry, stored in
// the marker's own row. aborted.LastOffset must be the offset the marker
// gets: the log end offset.
func (l *Log) AppendMarker(batch []byte, leaderEpoch int32, aborted *segment.AbortedTxn) (int64, error) {
	h, err := segment.AppendHeader(batch)
	if err != nil {
		return 0, fmt.Errorf("append marker to %s: %w", l.name(), err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, fmt.Errorf("append marker to %s: %w", l.name(), err)
	}
	if aborted != nil && aborted.LastOffset != l.end {
		return 0, fmt.Errorf("append marker to %s: aborted transaction ends at %d, marker would be at %d", l.name(), aborted.LastOffset, l.end)
	}
	r := l.appendLocked(batch, h, leaderEpoch)
	if aborted != nil {
		a := *aborted
		r.aborted = &a
	}
	return r.h.BaseOffset, nil
}

// errStop ends a row loop early.
var errStop = errors.New("stop")

// AbortedTxns returns the aborted transactions a read_committed reader of
// the records in [fetchOffset, upper) must know, with segment.Log's
// (Kafka's) rule: the entries from the leaf holding fetchOffset on, those
// with LastOffset >= fetchOffset and FirstOffset < upper, stopping after
// the first entry whose LastStableOffset reaches upper. Only committed
// markers are seen; upper is at most the high watermark, which never
// passes the durable end.
func (l *Log) AbortedTxns(fetchOffset, upper int64) ([]segment.AbortedTxn, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil, segment.ErrClosed
	}
	from := fetchOffset
	for _, lf := range l.leaves {
		if lf.base > fetchOffset {
			break
		}
		from = lf.base
	}
	l.mu.RUnlock()
	rows, err := l.opts.Pool.Query(l.ctx, `SELECT producer_id, txn_first_offset, last_offset, txn_last_stable_offset FROM `+l.table+`
		WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3 AND txn_first_offset IS NOT NULL
		ORDER BY last_offset`, l.opts.TopicID, l.opts.Partition, from)
	var out []segment.AbortedTxn
	var a segment.AbortedTxn
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&a.ProducerID, &a.FirstOffset, &a.LastOffset, &a.LastStableOffset}, func() error {
			if a.LastOffset >= fetchOffset && a.FirstOffset < upper {
				out = append(out, a)
			}
			if a.LastStableOffset >= upper {
				return errStop
			}
			return nil
		})
	}
	if err != nil && !errors.Is(err, errStop) {
		return nil, fmt.Errorf("aborted transactions of %s from %d: %w", l.name(), fetchOffset, l.closedErr(err))
	}
	return out, nil
}

// ForgetSourcesAbove drops the source positions above keep — the rows'
// source_lsn, and the position log_state kept for dropped leaves when it is
// above keep — in one transaction, so that SourceApplied falls to the last
// position kept and sources from there on can be appended again: the
// contract of segment.Log.ForgetSourcesAbove, the way out when the log's
// positions belong to another history of the source (broker/source_guard.go).
// Batches appended and not yet synced lose theirs too; the batches stay.
func (l *Log) ForgetSourcesAbove(keep uint64) error {
	l.syncMu.Lock() // no Sync commits rows meanwhile
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return fmt.Errorf("forget source positions of %s: %w", l.name(), segment.ErrClosed)
	case l.err != nil:
		return fmt.Errorf("forget source positions of %s: log failed earlier: %w", l.name(), l.err)
	case l.applied <= keep:
		return nil
	}
	lsn := fmt.Sprintf("%X/%X", keep>>32, uint32(keep))
	err := l.inTx(l.ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(l.ctx, "UPDATE "+l.table+` SET source_lsn = NULL
			WHERE topic_id = $1 AND partition = $2 AND source_lsn > $3::pg_lsn`, l.opts.TopicID, l.opts.Partition, lsn); err != nil {
			return err
		}
		_, err := tx.Exec(l.ctx, `UPDATE kafgres.log_state SET source_applied = NULL
			WHERE topic_id = $1 AND partition = $2 AND source_applied > $3::pg_lsn`, l.opts.TopicID, l.opts.Partition, lsn)
		return err
	})
	if err != nil {
		return fmt.Errorf("forget source positions above %s of %s: %w", lsn, l.name(), err)
	}
	if err := l.loadApplied(l.ctx); err != nil {
		return err
	}
	for i := range l.pending {
		if l.pending[i].source > keep {
			l.pending[i].source = 0
		}
		l.applied = max(l.applied, l.pending[i].source)
	}
	return nil
}
