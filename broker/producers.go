package broker

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// windowSize is how many recent batches per producer are remembered for
// duplicate detection; it matches the client limit of 5 in-flight requests.
const windowSize = 5

type batchMeta struct {
	firstSeq, lastSeq int32
	firstOffset       int64
}

type producerEntry struct {
	epoch         int16
	batches       []batchMeta // oldest first, at most windowSize
	lastTimestamp int64       // max timestamp of the last batch or marker (DescribeProducers)

	// Transactions (Kafka's ProducerStateEntry): the coordinator epoch of
	// the last marker (-1 before any), the first offset of the producer's
	// open transaction in this partition (-1 when none), and whether a
	// marker set the epoch, so that the next batch must start at sequence 0.
	coordinatorEpoch int32
	txnFirst         int64
	fromZero         bool
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, coordinatorEpoch: -1, txnFirst: -1}
}

// setEpoch moves the entry to epoch, forgetting the batches of the old one
// (Kafka's maybeUpdateProducerEpoch).
func (e *producerEntry) setEpoch(epoch int16) {
	if e.epoch != epoch {
		e.epoch, e.batches, e.fromZero = epoch, nil, false
	}
}

// producerWindow is one partition's idempotent-producer state, following
// Kafka's ProducerStateManager: the epoch and the last few batches of every
// producer id seen, and its open transaction. It is rebuilt from batch
// headers (and the records of markers) when the log opens.
type producerWindow map[int64]*producerEntry

func lastSeq(h segment.BatchHeader) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

func inSequence(last, next int32) bool {
	return next == last+1 || (last == math.MaxInt32 && next == 0)
}

// check returns the earlier batch this one duplicates, or an error for a
// batch Kafka would refuse: a stale epoch, a sequence that leaves a gap (or,
// after a marker bumped the epoch, one other than 0), or a
// non-transactional batch while the producer's transaction is open
// (INVALID_TXN_STATE). A producer id we have no state for may start at any
// sequence, as in Kafka (its earlier batches may have been removed by
// retention).
func (w producerWindow) check(h segment.BatchHeader) (*batchMeta, error) {
	if h.ProducerID < 0 {
		return nil, nil
	}
	e := w[h.ProducerID]
	if e == nil {
		return nil, nil
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, kerr.InvalidProducerEpoch
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return nil, kerr.OutOfOrderSequenceNumber
		}
	default:
		last := lastSeq(h)
		for i := range e.batches {
			if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
				return b, nil
			}
		}
		n := len(e.batches)
		if (n > 0 && !inSequence(e.batches[n-1].lastSeq, h.BaseSequence)) || (n == 0 && e.fromZero && h.BaseSequence != 0) {
			return nil, kerr.OutOfOrderSequenceNumber
		}
	}
	if e.txnFirst >= 0 && !h.IsTransactional() {
		return nil, kerr.InvalidTxnState
	}
	return nil, nil
}

// record remembers an appended data batch and reports whether it began a
// transaction.
func (w producerWindow) record(h segment.BatchHeader, baseOffset int64) (began bool) {
	if h.ProducerID < 0 {
		return false
	}
	e := w[h.ProducerID]
	if e == nil {
		e = newProducerEntry(h.ProducerEpoch)
		w[h.ProducerID] = e
	}
	e.setEpoch(h.ProducerEpoch)
	if len(e.batches) == windowSize {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:windowSize-1]
	}
	e.batches = append(e.batches, batchMeta{firstSeq: h.BaseSequence, lastSeq: lastSeq(h), firstOffset: baseOffset})
	e.lastTimestamp = h.MaxTimestamp
	if h.IsTransactional() && e.txnFirst < 0 {
		e.txnFirst = baseOffset
		return true
	}
	return false
}

// checkMarker refuses a marker Kafka's ProducerAppendInfo would: one from an
// older producer epoch than the partition has seen (PRODUCER_FENCED, as the
// transaction coordinator reports it) or from an older coordinator epoch
// (TRANSACTION_COORDINATOR_FENCED).
func (w producerWindow) checkMarker(m segment.Marker) error {
	e := w[m.ProducerID]
	switch {
	case e == nil:
		return nil
	case m.ProducerEpoch < e.epoch:
		return kerr.ProducerFenced
	case m.CoordinatorEpoch < e.coordinatorEpoch:
		return kerr.TransactionCoordinatorFenced
	}
	return nil
}

// marker applies an appended marker with timestamp ts and returns the first
// offset of the transaction it ended, or -1 if none was open. A marker at a
// new epoch (transaction version 2 bumps it at every commit or abort)
// forgets the sequence window: the next batch starts at sequence 0.
func (w producerWindow) marker(m segment.Marker, ts int64) (first int64) {
	e := w[m.ProducerID]
	if e == nil {
		e = newProducerEntry(m.ProducerEpoch)
		e.fromZero = true
		w[m.ProducerID] = e
	}
	if e.epoch != m.ProducerEpoch {
		e.setEpoch(m.ProducerEpoch)
		e.fromZero = true
	}
	e.coordinatorEpoch, e.lastTimestamp = m.CoordinatorEpoch, ts
	first, e.txnFirst = e.txnFirst, -1
	return first
}

// nextSequence is the base sequence of producer pid's next batch at epoch:
// one past its last, or 0 for a producer or epoch not seen here.
func (w producerWindow) nextSequence(pid int64, epoch int16) int32 {
	e := w[pid]
	if e == nil || e.epoch != epoch || len(e.batches) == 0 {
		return 0
	}
	return nextSeq(e.batches[len(e.batches)-1].lastSeq)
}

// nextSeq is the sequence after last, wrapping as Kafka's sequences do.
func nextSeq(last int32) int32 {
	if last == math.MaxInt32 {
		return 0
	}
	return last + 1
}
