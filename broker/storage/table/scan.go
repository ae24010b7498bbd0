package table

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// ScanBatches calls fn with the header of every batch whose last offset is
// at least from and at least the log start offset, in offset order: the
// committed ones (their first HeaderSize bytes only: a slice of a TOAST
// value stored EXTERNAL reads only its first chunk), then those appended
// and not yet committed, as segment.Log sees every batch appended. It
// stops at the first error fn returns and returns it.
func (l *Log) ScanBatches(from int64, fn func(h segment.BatchHeader) error) error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return segment.ErrClosed
	}
	from = max(from, l.start)
	durable := l.durable
	var queued []segment.BatchHeader
	for _, rs := range [][]row{l.inflight, l.pending} {
		for _, r := range rs {
			if r.h.BaseOffset >= durable {
				queued = append(queued, r.h)
			}
		}
	}
	l.mu.RUnlock()
	rows, err := l.opts.Pool.Query(l.ctx, `SELECT substring(batch FROM 1 FOR $5) FROM `+l.table+`
		WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3 AND base_offset < $4
		ORDER BY last_offset`, l.opts.TopicID, l.opts.Partition, from, durable, segment.HeaderSize)
	var fnErr error
	if err == nil {
		var b []byte
		_, err = pgx.ForEachRow(rows, []any{&b}, func() error {
			h, err := segment.ParseBatchHeader(b)
			if err != nil {
				return err
			}
			if fnErr = fn(h); fnErr != nil {
				return errStop
			}
			return nil
		})
	}
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("scan %s from %d: %w", l.name(), from, l.closedErr(err))
	}
	for _, h := range queued {
		if h.LastOffset() < from {
			continue
		}
		if err := fn(h); err != nil {
			return err
		}
	}
	return nil
}

// OffsetForTimestamp returns the offset and timestamp of the first record
// (by offset) whose timestamp is at least ts, among the records from the
// log start offset on in committed batches whose base offset is below
// limit. ok is false if there is none. The leaves' largest timestamps skip
// the leaves that cannot match; the batch's header column finds the
// batch, and only that batch is read to find the record.
func (l *Log) OffsetForTimestamp(ts int64, limit int64) (offset int64, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, 0, false, segment.ErrClosed
	}
	start, limit := l.start, min(limit, l.durable)
	leafFrom := int64(-1)
	for _, lf := range l.leaves {
		if lf.maxTs >= ts {
			leafFrom = lf.base
			break
		}
	}
	l.mu.RUnlock()
	if leafFrom < 0 {
		return 0, 0, false, nil
	}
	from := start
	for {
		var b []byte
		err := l.opts.Pool.QueryRow(l.ctx, `SELECT batch FROM `+l.table+`
			WHERE topic_id = $1 AND partition = $2 AND segment_base >= $3 AND last_offset >= $4 AND base_offset < $5
			  AND max_timestamp >= $6
			ORDER BY last_offset LIMIT 1`, l.opts.TopicID, l.opts.Partition, leafFrom, from, limit, ts).Scan(&b)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, 0, false, nil
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("offset for timestamp %d in %s: %w", ts, l.name(), l.closedErr(err))
		}
		h, err := segment.ParseBatchHeader(b)
		if err != nil {
			return 0, 0, false, fmt.Errorf("offset for timestamp %d in %s: %w", ts, l.name(), err)
		}
		offset, timestamp, found, err := segment.FindInBatch(l.opts.Decompress, b, h, start, func(t int64) bool { return t >= ts })
		if err != nil {
			return 0, 0, false, fmt.Errorf("offset for timestamp %d in %s: %w", ts, l.name(), err)
		}
		if found {
			return offset, timestamp, true, nil
		}
		// Only the records before the log start matched.
		from = h.LastOffset() + 1
	}
}

// MaxTimestamp returns the offset and timestamp of the first record with
// the largest timestamp among the records from the log start offset on in
// committed batches whose base offset is below limit (ListOffsets
// MAX_TIMESTAMP). ok is false if no such record carries a timestamp. The
// batch that straddles the log start counts only its records from the
// start on; the others are ranked by their header column.
func (l *Log) MaxTimestamp(limit int64) (offset int64, timestamp int64, ok bool, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, 0, false, segment.ErrClosed
	}
	start, limit := l.start, min(limit, l.durable)
	l.mu.RUnlock()
	fail := func(err error) (int64, int64, bool, error) {
		return 0, 0, false, fmt.Errorf("max timestamp in %s: %w", l.name(), l.closedErr(err))
	}
	var best []byte
	bestTs, bestIsFirst := int64(-1), false
	// The batch holding the log start, if it begins before it.
	var first []byte
	err = l.opts.Pool.QueryRow(l.ctx, `SELECT batch FROM `+l.table+`
		WHERE topic_id = $1 AND partition = $2 AND last_offset >= $3 AND base_offset < $3 AND base_offset < $4`,
		l.opts.TopicID, l.opts.Partition, start, limit).Scan(&first)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fail(err)
	default:
		h, err := segment.ParseBatchHeader(first)
		if err != nil {
			return fail(err)
		}
		if bestTs, err = segment.MaxFrom(l.opts.Decompress, first, h, start); err != nil {
			return fail(err)
		}
		best, bestIsFirst = first, true
	}
	var b []byte
	err = l.opts.Pool.QueryRow(l.ctx, `SELECT batch FROM `+l.table+`
		WHERE topic_id = $1 AND partition = $2 AND base_offset >= $3 AND base_offset < $4 AND max_timestamp > $5
		ORDER BY max_timestamp DESC, last_offset LIMIT 1`, l.opts.TopicID, l.opts.Partition, start, limit, bestTs).Scan(&b)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fail(err)
	default:
		best, bestIsFirst = b, false
	}
	if best == nil {
		return 0, 0, false, nil
	}
	h, err := segment.ParseBatchHeader(best)
	if err != nil {
		return fail(err)
	}
	if !bestIsFirst {
		bestTs = h.MaxTimestamp
	}
	if bestTs < 0 {
		return 0, 0, false, nil
	}
	offset, timestamp, found, err := segment.FindInBatch(l.opts.Decompress, best, h, start, func(t int64) bool { return t == bestTs })
	if err != nil {
		return fail(err)
	}
	if !found {
		// Not reached: bestTs came from these records.
		return max(h.BaseOffset, start), bestTs, true, nil
	}
	return offset, timestamp, true, nil
}
