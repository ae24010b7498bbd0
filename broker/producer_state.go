package broker

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// How a partition's producer state (producers.go, txn_state.go) and leader
// epoch cache outlive the process without a scan of the whole log at every
// start, as Kafka's ProducerStateManager and LeaderEpochFileCache do:
//
//   - a producer snapshot (segment/producer_snapshot.go) is written when an
//     append starts a new segment, for its base offset, and on a clean
//     close, for the log end; the open loads the newest one within the log
//     and replays only the batches after it (Kafka's
//     UnifiedLog.rebuildProducerState), then writes one at the log end if it
//     replayed anything, so that the next crash replays less;
//   - the leader epochs are read from leader-epoch-checkpoint, cut to the
//     recovered log, and written back with this incarnation's epoch;
//   - producers idle longer than producer.id.expiration.ms with no open
//     transaction are forgotten (Kafka's removeExpiredProducers), by a
//     periodic chore and when the state is loaded.
//
// Transactions need nothing more in the snapshot than each producer's
// current transaction first offset: after a restart the high watermark is
// the recovered log end, so every decided transaction is stable, and only
// the open ones hold the last stable offset back.

// snapshotEntries is w as producer snapshot entries: one per remembered
// batch, oldest first, or one without a batch for a producer that has none.
func (w producerWindow) snapshotEntries() []segment.ProducerSnapshotEntry {
	out := make([]segment.ProducerSnapshotEntry, 0, len(w))
	for _, pid := range slices.Sorted(maps.Keys(w)) {
		e := w[pid]
		base := segment.ProducerSnapshotEntry{
			ProducerID: pid, Epoch: e.epoch, LastSequence: -1, LastOffset: -1,
			Timestamp: e.lastTimestamp, CoordinatorEpoch: e.coordinatorEpoch, CurrentTxnFirstOffset: e.txnFirst,
		}
		if len(e.batches) == 0 {
			out = append(out, base)
			continue
		}
		for _, b := range e.batches {
			se := base
			se.OffsetDelta = seqDelta(b.firstSeq, b.lastSeq)
			se.LastSequence, se.LastOffset = b.lastSeq, b.firstOffset+int64(se.OffsetDelta)
			out = append(out, se)
		}
	}
	return out
}

// windowFromSnapshot rebuilds a producer window from snapshot entries; the
// last entry of a producer id gives its epoch, timestamp, coordinator epoch
// and transaction.
func windowFromSnapshot(entries []segment.ProducerSnapshotEntry) producerWindow {
	w := producerWindow{}
	for _, se := range entries {
		e := w[se.ProducerID]
		if e == nil || e.epoch != se.Epoch {
			e = newProducerEntry(se.Epoch)
			w[se.ProducerID] = e
		}
		e.lastTimestamp, e.coordinatorEpoch, e.txnFirst = se.Timestamp, se.CoordinatorEpoch, max(se.CurrentTxnFirstOffset, -1)
		if se.LastOffset < 0 {
			continue
		}
		if len(e.batches) == windowSize {
			e.batches = slices.Delete(e.batches, 0, 1)
		}
		delta := max(se.OffsetDelta, 0)
		e.batches = append(e.batches, batchMeta{
			firstSeq: decrementSeq(se.LastSequence, delta), lastSeq: se.LastSequence, firstOffset: se.LastOffset - int64(delta),
		})
	}
	for _, e := range w {
		// Only a marker leaves a producer without batches, and after one
		// the next batch starts at sequence 0 (Kafka: last sequence -1).
		e.fromZero = len(e.batches) == 0
	}
	return w
}

// seqDelta is how many sequences past first last is, with Kafka's wrap.
func seqDelta(first, last int32) int32 {
	d := int64(last) - int64(first)
	if d < 0 {
		d += math.MaxInt32 + 1
	}
	return int32(d)
}

// decrementSeq is Kafka's DefaultRecordBatch.decrementSequence.
func decrementSeq(seq, by int32) int32 {
	if seq < by {
		return math.MaxInt32 - (by - seq) + 1
	}
	return seq - by
}

// expire forgets the producers without an open transaction whose last batch
// or marker is at least expiration before now (Kafka's isProducerExpired)
// and returns how many.
func (w producerWindow) expire(now time.Time, expiration time.Duration) int {
	n := 0
	limit := now.UnixMilli() - expiration.Milliseconds()
	for pid, e := range w {
		if e.txnFirst < 0 && e.lastTimestamp <= limit {
			delete(w, pid)
			n++
		}
	}
	return n
}

// expireProducers applies producer.id.expiration.ms to the partition.
func (p *partition) expireProducers(now time.Time, expiration time.Duration) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.producers.expire(now, expiration)
}

// expireProducers is the producer.id.expiration.check.interval.ms chore.
func (b *Broker) expireProducers(now time.Time) {
	for _, t := range b.catalog.topics() {
		for _, p := range t.parts {
			if n := p.expireProducers(now, b.cfg.ProducerIDExpiration); n > 0 {
				b.log.Debug("expired idle producers", "topic", t.name, "partition", p.index, "producers", n)
			}
		}
	}
}

// writeSnapshot writes the producer state, which must be the state as of
// offset, to the partition's snapshot at offset. Callers hold mu (or own the
// partition). A failure costs only a longer replay at the next open.
func (p *partition) writeSnapshot(offset int64) {
	if err := p.log.WriteProducerSnapshot(offset, p.producers.snapshotEntries()); err != nil {
		p.logger.Warn("write producer snapshot", "offset", offset, "err", err)
	}
}

// snapshotIfRolled writes a snapshot at base when the append that put a
// batch there started the active segment (activeBefore was the active
// segment's base before it); never for a log without segments, whose
// activeBase is -1. Callers hold mu and have applied exactly the batches
// below base.
func (p *partition) snapshotIfRolled(activeBefore, base int64) bool {
	if base == activeBefore || p.activeBase() != base {
		return false
	}
	p.writeSnapshot(base)
	return true
}

// loadState rebuilds the producer and transaction state and the leader
// epochs of a partition whose log was just opened, and returns how many
// batch headers it read.
func (p *partition) loadState(expiration time.Duration, now time.Time) (scanned int, err error) {
	l := p.log
	start, end := l.LogStartOffset(), l.LogEndOffset()
	from := start
	if off, entries, ok := l.LoadProducerSnapshot(); ok {
		p.producers, from = windowFromSnapshot(entries), off
		for pid, e := range p.producers {
			if e.txnFirst >= 0 {
				p.txnBegan(pid, e.txnFirst)
			}
		}
	}
	epochs, ok, err := l.ReadEpochCheckpoint()
	if err != nil {
		p.logger.Warn("ignoring leader epoch checkpoint", "err", err)
	}
	scanFrom := from
	if ok {
		p.epochs = epochsFromCheckpoint(epochs, end)
	} else {
		// Without the checkpoint, the epochs come from every batch.
		scanFrom = start
	}
	applied := 0
	err = l.ScanBatches(scanFrom, func(h segment.BatchHeader) error {
		scanned++
		if n := len(p.epochs); n == 0 || h.LeaderEpoch > p.epochs[n-1].epoch {
			p.epochs = append(p.epochs, epochStart{epoch: h.LeaderEpoch, start: h.BaseOffset})
		}
		if h.LastOffset() < from {
			return nil
		}
		applied++
		switch {
		case h.ProducerID < 0:
		case !h.IsControl():
			p.applyBatch(h, h.BaseOffset)
		default:
			// Markers are rare and tiny: read the record for its type and
			// coordinator epoch. A control batch that is no marker changes
			// nothing, as in Kafka.
			data, err := l.Read(h.BaseOffset, 1, h.BaseOffset+1)
			if err != nil {
				return err
			}
			if m, err := segment.ParseMarker(data); err == nil {
				p.applyMarker(m, h.BaseOffset, h.MaxTimestamp, nil)
			}
		}
		return nil
	})
	if err != nil {
		return scanned, err
	}
	p.producers.expire(now, expiration)
	p.refreshUnstable()
	p.epochs = truncateEpochsFromStart(p.epochs, start)
	held := checkpointEntries(p.epochs)
	p.epochs = assignEpoch(p.epochs, epochStart{epoch: p.epoch, start: end})
	// This incarnation's epoch starts at the log end, where no batch is
	// yet, and an open drops an entry there (epochsFromCheckpoint); so
	// until a batch carries it, the checkpoint need not hold it. It is
	// written now only if it does not hold what the log does, and
	// otherwise before the first batch of the new epoch (saveEpochs): a
	// start of 10,000 idle partitions writes none (performance.md, "10,000
	// partitions").
	if !ok || !slices.Equal(held, epochs) {
		if err := l.WriteEpochCheckpoint(checkpointEntries(p.epochs)); err != nil {
			return scanned, fmt.Errorf("write leader epoch checkpoint: %w", err)
		}
	} else {
		p.epochsUnsaved = !slices.Equal(checkpointEntries(p.epochs), epochs)
	}
	if applied > 0 {
		p.writeSnapshot(end)
	}
	return scanned, nil
}

// saveEpochs writes the leader epoch checkpoint if it does not yet hold
// the last epoch; callers hold mu and are about to append a batch.
func (p *partition) saveEpochs() error {
	if !p.epochsUnsaved {
		return nil
	}
	if err := p.log.WriteEpochCheckpoint(checkpointEntries(p.epochs)); err != nil {
		return fmt.Errorf("write leader epoch checkpoint of %s-%d: %w", p.topic.name, p.index, err)
	}
	p.epochsUnsaved = false
	return nil
}

// epochsFromCheckpoint is the checkpoint's epochs without those starting at
// or past the recovered log end (Kafka's truncateFromEnd).
func epochsFromCheckpoint(entries []segment.EpochEntry, end int64) []epochStart {
	var out []epochStart
	for _, e := range entries {
		if e.StartOffset < end {
			out = append(out, epochStart{epoch: e.Epoch, start: e.StartOffset})
		}
	}
	return out
}

// truncateEpochsFromStart drops the epochs that end at or below the log
// start offset and moves the start of the one holding it there (Kafka's
// LeaderEpochFileCache.truncateFromStart).
func truncateEpochsFromStart(epochs []epochStart, start int64) []epochStart {
	i := 0
	for i < len(epochs) && epochs[i].start <= start {
		i++
	}
	if i == 0 {
		return epochs
	}
	out := append([]epochStart{{epoch: epochs[i-1].epoch, start: start}}, epochs[i:]...)
	return out
}

// assignEpoch appends e as the newest epoch, first removing the entries it
// supersedes, at the same or a later start offset (Kafka's
// LeaderEpochFileCache.assign); an epoch not above the newest changes
// nothing.
func assignEpoch(epochs []epochStart, e epochStart) []epochStart {
	if n := len(epochs); n > 0 && e.epoch <= epochs[n-1].epoch {
		return epochs
	}
	for len(epochs) > 0 && epochs[len(epochs)-1].start >= e.start {
		epochs = epochs[:len(epochs)-1]
	}
	return append(epochs, e)
}

func checkpointEntries(epochs []epochStart) []segment.EpochEntry {
	out := make([]segment.EpochEntry, len(epochs))
	for i, e := range epochs {
		out[i] = segment.EpochEntry{Epoch: e.epoch, StartOffset: e.start}
	}
	return out
}
