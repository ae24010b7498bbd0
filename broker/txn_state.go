package broker

import (
	"math"
	"slices"
	"sync/atomic"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// A partition's transactions, as Kafka's ProducerStateManager keeps them:
// which producers have a transaction open here (from its first data batch
// to its marker), and the transactions already decided whose marker is not
// yet below the high watermark. Together they give the last stable offset
// (LSO): the first offset of the oldest of them, clamped to the log start
// offset as Kafka's maybeIncrementFirstUnstableOffset does, or the high
// watermark when there is none below it. read_committed consumers are served
// only below it.

// txnSpan is an unstable transaction: from its first offset to end, its
// marker's offset + 1 (math.MaxInt64 while it is open). A decided one stays
// unstable until released is set as well: the markers of one transaction
// are released on all its partitions by one store (writeTxnMarkers), so a
// read_committed consumer that has seen any of its records finds the rest
// at every later fetch, never a part of it (docs/producing.md). nil is
// released: a marker found in the log when the partition opened.
type txnSpan struct {
	first, end int64
	released   *atomic.Bool
}

// stable says whether the span no longer holds the LSO back at high
// watermark hw.
func (s txnSpan) stable(hw int64) bool {
	return s.end <= hw && (s.released == nil || s.released.Load())
}

// partitionTxns is the transaction state of one partition, under its mu.
type partitionTxns struct {
	open    map[int64]int64 // producer id -> first offset of its open transaction
	decided []txnSpan       // ended, the marker perhaps not below the high watermark
}

// began records a transaction opened by producer pid at first.
func (p *partition) txnBegan(pid, first int64) {
	if p.txns.open == nil {
		p.txns.open = map[int64]int64{}
	}
	p.txns.open[pid] = first
}

// txnEnded records the marker at offset ending pid's transaction, if open;
// it stays unstable until released.
func (p *partition) txnEnded(pid, offset int64, released *atomic.Bool) {
	first, ok := p.txns.open[pid]
	if !ok {
		return
	}
	delete(p.txns.open, pid)
	p.txns.decided = append(p.txns.decided, txnSpan{first: first, end: offset + 1, released: released})
}

// abortedLSO is the last stable offset written to the transaction index for
// pid's transaction aborted by a marker at offset: the first offset of the
// oldest transaction of another producer still open, else offset + 1
// (Kafka's ProducerStateManager.lastStableOffset).
func (p *partition) abortedLSO(pid, offset int64) int64 {
	lso := offset + 1
	for other, first := range p.txns.open {
		if other != pid {
			lso = min(lso, first)
		}
	}
	return lso
}

// refreshUnstable publishes the unstable transactions for lastStableOffset,
// dropping the decided ones whose marker the high watermark has passed
// (the watermark only grows, so they stay stable). Callers hold mu.
func (p *partition) refreshUnstable() {
	hw := p.hw.Load()
	p.txns.decided = slices.DeleteFunc(p.txns.decided, func(s txnSpan) bool { return s.stable(hw) })
	if len(p.txns.open) == 0 && len(p.txns.decided) == 0 {
		p.unstable.Store(nil)
		return
	}
	spans := slices.Clone(p.txns.decided)
	for _, first := range p.txns.open {
		spans = append(spans, txnSpan{first: first, end: math.MaxInt64})
	}
	p.unstable.Store(&spans)
}

// lastStableOffset is the partition's LSO. It takes no lock: the high
// watermark is read on both sides of the unstable set, so that the two
// belong together (a transaction begun after the set was taken starts at or
// above the watermark read before it, and one dropped from the set was
// released and ended below the watermark read after it).
func (p *partition) lastStableOffset() int64 {
	for {
		hw := p.hw.Load()
		spans := p.unstable.Load()
		if hw != p.hw.Load() {
			continue
		}
		if spans == nil {
			return hw
		}
		lso := hw
		for _, s := range *spans {
			if !s.stable(hw) && s.first < lso {
				lso = s.first
			}
		}
		if lso < hw {
			lso = min(max(lso, p.log.LogStartOffset()), hw)
		}
		return lso
	}
}

// applyMarker updates the producer and transaction state for the marker m
// found at offset with timestamp ts, whose transaction is stable once
// released is set (nil: at once). Callers hold mu and refresh the unstable
// set.
func (p *partition) applyMarker(m segment.Marker, offset, ts int64, released *atomic.Bool) {
	p.producers.marker(m, ts)
	p.txnEnded(m.ProducerID, offset, released)
}

// applyBatch updates the producer and transaction state for the data batch
// h appended at base. Callers hold mu and refresh the unstable set.
func (p *partition) applyBatch(h segment.BatchHeader, base int64) {
	if p.producers.record(h, base) {
		p.txnBegan(h.ProducerID, base)
	}
}
