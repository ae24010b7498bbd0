package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Control batches end transactions. Kafka writes a COMMIT or ABORT marker
// into every partition a transaction touched: a v2 batch with the
// transactional and control attributes, the transaction's producer id and
// epoch, no sequence, and one record whose key is the control record key
// (int16 version 0, int16 type: 0 ABORT, 1 COMMIT) and whose value is the
// end transaction marker (int16 version 0, int32 coordinator epoch).
// Clients check both: Sarama fails on a marker without its value.

// Control record types (Kafka's ControlRecordType).
const (
	controlAbort  = 0
	controlCommit = 1
)

// Marker is one transaction marker: what a control batch says.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool // false: ABORT
}

// markerRecordSize is the size of a marker record's body (after its length
// prefix): attributes, timestamp delta 0, offset delta 0, key length 4, the
// 4-byte key, value length 6, the 6-byte value, no headers.
const markerRecordSize = 1 + 1 + 1 + 1 + 4 + 1 + 6 + 1

// MarkerBatchSize is the size of a marker batch.
const MarkerBatchSize = HeaderSize + 1 + markerRecordSize

// NewMarkerBatch builds the control batch for m with timestamp now (unix
// milliseconds), as Kafka's MemoryRecords.withEndTransactionMarker does. Its
// base offset and leader epoch are 0 until Append stamps them.
func NewMarkerBatch(m Marker, now int64) []byte {
	be := binary.BigEndian
	b := make([]byte, HeaderSize, MarkerBatchSize)
	be.PutUint32(b[offBatchLength:], uint32(MarkerBatchSize-logOverhead))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	be.PutUint32(b[offLastOffsetDelta:], 0)
	be.PutUint64(b[offBaseTimestamp:], uint64(now))
	be.PutUint64(b[offMaxTimestamp:], uint64(now))
	be.PutUint64(b[offProducerID:], uint64(m.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(m.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], 0xffffffff) // no sequence
	be.PutUint32(b[offRecordCount:], 1)

	b = binary.AppendVarint(b, markerRecordSize)
	b = append(b, 0)              // record attributes
	b = binary.AppendVarint(b, 0) // timestamp delta
	b = binary.AppendVarint(b, 0) // offset delta
	b = binary.AppendVarint(b, 4) // key length
	b = be.AppendUint16(b, 0)     // key version
	typ := uint16(controlAbort)
	if m.Commit {
		typ = controlCommit
	}
	b = be.AppendUint16(b, typ)
	b = binary.AppendVarint(b, 6) // value length
	b = be.AppendUint16(b, 0)     // value version
	b = be.AppendUint32(b, uint32(m.CoordinatorEpoch))
	b = binary.AppendVarint(b, 0) // headers
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// ParseMarker reads the transaction marker of the whole control batch b.
// Like Kafka's EndTransactionMarker it accepts newer versions of the key
// and value as long as they begin with the fields of version 0.
func ParseMarker(b []byte) (Marker, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return Marker{}, err
	}
	if !h.IsControl() || int(h.Length) > len(b) || h.NumRecords < 1 || h.Compression() != 0 {
		return Marker{}, fmt.Errorf("%w: not an uncompressed control batch", ErrCorruptBatch)
	}
	m := Marker{ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch}
	rec := b[HeaderSize:h.Length]
	fail := func(what string) (Marker, error) {
		return Marker{}, fmt.Errorf("%w: control batch at offset %d: %s", ErrInvalidRecord, h.BaseOffset, what)
	}
	next := func() (int64, bool) {
		v, n := binary.Varint(rec)
		if n <= 0 {
			return 0, false
		}
		rec = rec[n:]
		return v, true
	}
	if _, ok := next(); !ok { // record length
		return fail("record length")
	}
	if len(rec) < 1 {
		return fail("record attributes")
	}
	rec = rec[1:]
	for _, what := range []string{"timestamp delta", "offset delta"} {
		if _, ok := next(); !ok {
			return fail(what)
		}
	}
	klen, ok := next()
	if !ok || klen < 4 || klen > int64(len(rec)) {
		return fail("control record key")
	}
	key := rec[:klen]
	rec = rec[klen:]
	if int16(binary.BigEndian.Uint16(key)) < 0 {
		return fail("control record key version")
	}
	switch binary.BigEndian.Uint16(key[2:]) {
	case controlAbort:
	case controlCommit:
		m.Commit = true
	default:
		return fail("control record type is no transaction marker")
	}
	vlen, ok := next()
	if !ok || vlen < 6 || vlen > int64(len(rec)) {
		return fail("end transaction marker value")
	}
	if int16(binary.BigEndian.Uint16(rec)) < 0 {
		return fail("end transaction marker version")
	}
	m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(rec[2:]))
	return m, nil
}
