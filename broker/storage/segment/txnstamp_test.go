package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestSetTransactional: only the producer fields, the transactional bit and
// the CRC change; a control batch is refused.
func TestSetTransactional(t *testing.T) {
	recs := []testRecord{{ts: 5, value: []byte("a")}, {ts: 9, value: []byte("b")}}
	b := makeBatch(recs, batchOpts{producerID: -1, producerEpoch: -1, baseSequence: -1, attributes: 1, compress: gzipBytes})
	orig := bytes.Clone(b)
	if err := SetTransactional(b, 4242, 3, 17); err != nil {
		t.Fatal(err)
	}
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatalf("CRC no longer valid: %v", err)
	}
	if !h.IsTransactional() || h.IsControl() || h.Compression() != 1 || h.ProducerID != 4242 || h.ProducerEpoch != 3 || h.BaseSequence != 17 {
		t.Fatalf("header %+v", h)
	}
	want := bytes.Clone(orig)
	binary.BigEndian.PutUint16(want[offAttributes:], uint16(1|attrTransactional))
	binary.BigEndian.PutUint64(want[offProducerID:], 4242)
	binary.BigEndian.PutUint16(want[offProducerEpoch:], 3)
	binary.BigEndian.PutUint32(want[offBaseSequence:], 17)
	if !bytes.Equal(b, recrc(want)) {
		t.Fatal("batch differs beyond the producer fields, attributes and CRC")
	}

	ctrl := makeBatch(recs, batchOpts{producerID: 1, attributes: attrControl | attrTransactional})
	if err := SetTransactional(ctrl, 1, 0, 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("control batch: %v", err)
	}
}
