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
	lastTimestamp int64       // max timestamp of the last batch (DescribeProducers)
}

// producerWindow is one partition's idempotent-producer state, following
// Kafka's ProducerStateManager: the epoch and the last few batches of every
// producer id seen. It is rebuilt from batch headers when the log opens.
type producerWindow map[int64]*producerEntry

func lastSeq(h segment.BatchHeader) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

func inSequence(last, next int32) bool {
	return next == last+1 || (last == math.MaxInt32 && next == 0)
}

// check returns the earlier batch this one duplicates, or an error for a
// batch Kafka would refuse: a stale epoch, or a sequence that leaves a gap.
// A producer id we have no state for may start at any sequence, as in Kafka
// (its earlier batches may have been removed by retention).
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
		return nil, nil
	}
	last := lastSeq(h)
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
			return b, nil
		}
	}
	if n := len(e.batches); n > 0 && !inSequence(e.batches[n-1].lastSeq, h.BaseSequence) {
		return nil, kerr.OutOfOrderSequenceNumber
	}
	return nil, nil
}

// record remembers an appended batch.
func (w producerWindow) record(h segment.BatchHeader, baseOffset int64) {
	if h.ProducerID < 0 {
		return
	}
	e := w[h.ProducerID]
	if e == nil || h.ProducerEpoch > e.epoch {
		e = &producerEntry{epoch: h.ProducerEpoch}
		w[h.ProducerID] = e
	}
	if len(e.batches) == windowSize {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:windowSize-1]
	}
	e.batches = append(e.batches, batchMeta{firstSeq: h.BaseSequence, lastSeq: lastSeq(h), firstOffset: baseOffset})
	e.lastTimestamp = h.MaxTimestamp
}
