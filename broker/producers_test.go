package broker

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

func hdr(pid int64, epoch int16, seq int32, n int32) segment.BatchHeader {
	return segment.BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: n - 1, NumRecords: n}
}

func TestProducerWindow(t *testing.T) {
	w := producerWindow{}
	off := int64(0)
	add := func(h segment.BatchHeader) {
		t.Helper()
		dup, err := w.check(h)
		if dup != nil || err != nil {
			t.Fatalf("check %+v: dup=%v err=%v", h, dup, err)
		}
		w.record(h, off)
		off += int64(h.LastOffsetDelta) + 1
	}
	add(hdr(7, 0, 0, 2)) // offsets 0-1, seq 0-1
	add(hdr(7, 0, 2, 3)) // offsets 2-4, seq 2-4
	for i := int32(5); i < 10; i++ {
		add(hdr(7, 0, i, 1))
	}
	// Only the last five batches are remembered.
	if dup, _ := w.check(hdr(7, 0, 9, 1)); dup == nil || dup.firstOffset != 9 {
		t.Fatalf("recent duplicate not found: %+v", dup)
	}
	if _, err := w.check(hdr(7, 0, 0, 2)); err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("old batch outside the window: %v", err)
	}
	if _, err := w.check(hdr(7, 0, 11, 1)); err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("gap: %v", err)
	}
	if _, err := w.check(hdr(7, 1, 3, 1)); err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("new epoch must start at 0: %v", err)
	}
	add(hdr(7, 1, 0, 1))
	if _, err := w.check(hdr(7, 0, 10, 1)); err != kerr.InvalidProducerEpoch {
		t.Fatalf("stale epoch: %v", err)
	}
	if dup, err := w.check(hdr(8, 0, 1234, 1)); dup != nil || err != nil {
		t.Fatal("unknown producers may start anywhere")
	}
	if dup, err := w.check(hdr(-1, -1, -1, 1)); dup != nil || err != nil {
		t.Fatal("non-idempotent batches are not checked")
	}
}

func TestSequenceWraps(t *testing.T) {
	w := producerWindow{}
	w.record(hdr(1, 0, math.MaxInt32-1, 2), 0) // seq MaxInt32-1 .. MaxInt32
	if dup, err := w.check(hdr(1, 0, 0, 1)); dup != nil || err != nil {
		t.Fatalf("sequence must wrap to 0: %v", err)
	}
	w.record(hdr(1, 0, math.MaxInt32, 3), 2) // wraps: last seq is 1
	if dup, err := w.check(hdr(1, 0, 2, 1)); dup != nil || err != nil {
		t.Fatalf("after a wrapping batch: %v", err)
	}
}
