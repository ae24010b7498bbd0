package table

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// The producer snapshots and leader epochs the segment engine keeps in
// small files beside its segments are rows here: kafgres.log_producer_snapshot
// (Kafka's snapshot bytes, segment.EncodeProducerSnapshot) and two arrays of
// kafgres.log_state.

// snapshot is a producer snapshot waiting for the Sync that commits the
// batches it describes.
type snapshot struct {
	offset int64
	data   []byte
}

// closedWriteTimeout bounds the writes a closed log still does (the
// producer snapshot of a clean shutdown), whose life no longer does.
const closedWriteTimeout = 30 * time.Second

// WriteProducerSnapshot stores the snapshot of the producer state as of
// offset, replacing one at the same offset. A snapshot at or below the
// durable end is committed at once; one past it goes into the next Sync's
// transaction, so that no committed snapshot describes batches that are
// not. It works on a closed log too (the broker's clean shutdown).
func (l *Log) WriteProducerSnapshot(offset int64, entries []segment.ProducerSnapshotEntry) error {
	sn := snapshot{offset: offset, data: segment.EncodeProducerSnapshot(entries)}
	l.mu.Lock()
	closed := l.closed
	if !closed && offset > l.durable {
		l.snaps = append(l.snaps, sn)
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	ctx := l.ctx
	if closed {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), closedWriteTimeout)
		defer cancel()
	}
	err := pgx.BeginFunc(ctx, l.opts.Pool, func(tx pgx.Tx) error { return writeSnapshot(ctx, tx, l.opts, sn) })
	if err != nil {
		return fmt.Errorf("write producer snapshot of %s at %d: %w", l.name(), offset, l.closedErr(err))
	}
	return nil
}

// writeSnapshot upserts sn in tx.
func writeSnapshot(ctx context.Context, tx pgx.Tx, opts Options, sn snapshot) error {
	_, err := tx.Exec(ctx, `INSERT INTO kafgres.log_producer_snapshot (topic_id, partition, snapshot_offset, snapshot)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (topic_id, partition, snapshot_offset) DO UPDATE SET snapshot = EXCLUDED.snapshot`,
		opts.TopicID, opts.Partition, sn.offset, sn.data)
	if err != nil {
		return fmt.Errorf("write producer snapshot at %d: %w", sn.offset, err)
	}
	return nil
}

// LoadProducerSnapshot reads the newest producer snapshot between the log
// start and end offsets. One that does not decode is deleted (Kafka's
// loadFromSnapshot) and the next older one tried; ok is false when none is
// left, and the caller rebuilds from the log start.
func (l *Log) LoadProducerSnapshot() (offset int64, entries []segment.ProducerSnapshotEntry, ok bool) {
	l.mu.RLock()
	start, end := l.start, l.end
	l.mu.RUnlock()
	rows, err := l.opts.Pool.Query(l.ctx, `SELECT snapshot_offset, snapshot FROM kafgres.log_producer_snapshot
		WHERE topic_id = $1 AND partition = $2 AND snapshot_offset BETWEEN $3 AND $4
		ORDER BY snapshot_offset DESC`, l.opts.TopicID, l.opts.Partition, start, end)
	var bad []int64
	var off int64
	var data []byte
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&off, &data}, func() error {
			e, derr := segment.DecodeProducerSnapshot(data)
			if derr != nil {
				slog.Warn("deleting unreadable producer snapshot", "log", l.name(), "offset", off, "error", derr)
				bad = append(bad, off)
				return nil
			}
			offset, entries, ok = off, e, true
			return errStop
		})
	}
	if err != nil && err != errStop {
		slog.Warn("ignoring producer snapshots", "log", l.name(), "error", err)
		return 0, nil, false
	}
	if len(bad) > 0 {
		if _, err := l.opts.Pool.Exec(l.ctx, `DELETE FROM kafgres.log_producer_snapshot
			WHERE topic_id = $1 AND partition = $2 AND snapshot_offset = ANY($3)`, l.opts.TopicID, l.opts.Partition, bad); err != nil {
			slog.Warn("could not delete unreadable producer snapshots", "log", l.name(), "error", err)
		}
	}
	return offset, entries, ok
}

// WriteEpochCheckpoint replaces the log's leader epoch entries, committed
// before it returns.
func (l *Log) WriteEpochCheckpoint(entries []segment.EpochEntry) error {
	epochs := make([]int32, len(entries))
	starts := make([]int64, len(entries))
	for i, e := range entries {
		epochs[i], starts[i] = e.Epoch, e.StartOffset
	}
	err := l.inTx(l.ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(l.ctx, `UPDATE kafgres.log_state SET leader_epochs = $3, leader_epoch_starts = $4
			WHERE topic_id = $1 AND partition = $2`, l.opts.TopicID, l.opts.Partition, epochs, starts)
		return err
	})
	if err != nil {
		return fmt.Errorf("write leader epochs of %s: %w", l.name(), l.closedErr(err))
	}
	return nil
}

// ReadEpochCheckpoint reads the log's leader epoch entries; ok is false
// when none were ever written. Entries that do not grow in epoch and start
// offset are an error, as in a checkpoint file.
func (l *Log) ReadEpochCheckpoint() (entries []segment.EpochEntry, ok bool, err error) {
	var epochs []int32
	var starts []int64
	if err := l.opts.Pool.QueryRow(l.ctx, `SELECT leader_epochs, leader_epoch_starts FROM kafgres.log_state
		WHERE topic_id = $1 AND partition = $2`, l.opts.TopicID, l.opts.Partition).Scan(&epochs, &starts); err != nil {
		return nil, false, fmt.Errorf("read leader epochs of %s: %w", l.name(), l.closedErr(err))
	}
	if epochs == nil {
		return nil, false, nil
	}
	if len(epochs) != len(starts) {
		return nil, false, fmt.Errorf("read leader epochs of %s: %d epochs, %d start offsets", l.name(), len(epochs), len(starts))
	}
	for i := range epochs {
		e := segment.EpochEntry{Epoch: epochs[i], StartOffset: starts[i]}
		if e.Epoch < 0 || e.StartOffset < 0 || (i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset < entries[i-1].StartOffset)) {
			return nil, false, fmt.Errorf("read leader epochs of %s: entry %+v out of order", l.name(), e)
		}
		entries = append(entries, e)
	}
	return entries, true, nil
}
