package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Exported errors. Callers test for them with errors.Is; the returned errors
// wrap them with detail.
var (
	ErrOffsetOutOfRange = errors.New("offset out of range")
	ErrCorruptBatch     = errors.New("corrupt record batch")
	ErrUnsupportedMagic = errors.New("unsupported record batch magic")
	ErrTopicIDMismatch  = errors.New("partition directory belongs to a different topic id")
	ErrClosed           = errors.New("log closed")
	ErrSourceOrder      = errors.New("source position goes backwards")
)

// Byte offsets of the fixed fields of a v2 record batch.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// logOverhead is the baseOffset and batchLength prefix that batchLength
	// does not count.
	logOverhead = 12
)

// HeaderSize is the size of the fixed part of a v2 batch; records follow it.
const HeaderSize = 61

// Attribute bits of a v2 batch.
const (
	attrCompressionMask = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
	attrDeleteHorizon   = 0x40

	// attrKnown are the bits Kafka keeps when it rewrites the attributes.
	attrKnown = attrCompressionMask | attrLogAppendTime | attrTransactional | attrControl | attrDeleteHorizon
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader is the parsed fixed part of a v2 batch.
type BatchHeader struct {
	BaseOffset      int64
	Length          int32 // total bytes including the 12-byte offset/length prefix
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

// LastOffset is the offset of the last record the batch covers.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Compression returns the codec id from the attributes (0 = none).
func (h BatchHeader) Compression() int8 { return int8(h.Attributes & attrCompressionMask) }

// IsTransactional reports the transactional attribute bit.
func (h BatchHeader) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports the control attribute bit.
func (h BatchHeader) IsControl() bool { return h.Attributes&attrControl != 0 }

// ParseBatchHeader parses the fixed header of a v2 batch. It needs at least
// HeaderSize bytes but not the whole batch, so it can be used on headers read
// alone from disk.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < HeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: %d bytes, need at least %d for the header", ErrCorruptBatch, len(b), HeaderSize)
	}
	be := binary.BigEndian
	h := BatchHeader{
		BaseOffset:      int64(be.Uint64(b[offBaseOffset:])),
		Length:          int32(be.Uint32(b[offBatchLength:])),
		LeaderEpoch:     int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:           int8(b[offMagic]),
		CRC:             be.Uint32(b[offCRC:]),
		Attributes:      int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(be.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:   int64(be.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:    int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:      int32(be.Uint32(b[offRecordCount:])),
	}
	if h.Magic != 2 {
		return BatchHeader{}, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, h.Magic)
	}
	// batchLength counts everything after itself; anything shorter than the
	// rest of the header cannot be a batch, and a huge value must not
	// overflow when the prefix is added.
	batchLength := h.Length
	if batchLength < HeaderSize-logOverhead || batchLength > 1<<31-1-logOverhead {
		return BatchHeader{}, fmt.Errorf("%w: batch length %d", ErrCorruptBatch, batchLength)
	}
	h.Length = batchLength + logOverhead
	return h, nil
}

// ValidateBatch checks that b is exactly one well-formed v2 batch with a
// correct CRC.
func ValidateBatch(b []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return BatchHeader{}, err
	}
	if int(h.Length) != len(b) {
		return BatchHeader{}, fmt.Errorf("%w: header says %d bytes, got %d", ErrCorruptBatch, h.Length, len(b))
	}
	if crc := crc32.Checksum(b[offAttributes:], castagnoli); crc != h.CRC {
		return BatchHeader{}, fmt.Errorf("%w: crc %08x, header says %08x", ErrCorruptBatch, crc, h.CRC)
	}
	if h.LastOffsetDelta < 0 {
		return BatchHeader{}, fmt.Errorf("%w: last offset delta %d", ErrCorruptBatch, h.LastOffsetDelta)
	}
	if h.NumRecords < 0 || (h.NumRecords > 0 && int64(h.NumRecords) != int64(h.LastOffsetDelta)+1) {
		return BatchHeader{}, fmt.Errorf("%w: %d records with last offset delta %d", ErrCorruptBatch, h.NumRecords, h.LastOffsetDelta)
	}
	return h, nil
}

// SetLogAppendTime marks a v2 batch as carrying LogAppendTime ts, as Kafka's
// DefaultRecordBatch.setMaxTimestamp(LOG_APPEND_TIME, ts) does for topics
// with message.timestamp.type=LogAppendTime: the timestamp-type attribute bit
// is set, the MaxTimestamp field becomes ts and the CRC is recomputed. The
// first timestamp and the records are untouched; readers take ts as every
// record's timestamp. Like Kafka, it rebuilds the attributes from the bits
// it knows (compression, timestamp type, transactional, control, delete
// horizon), clearing the unused ones, and leaves a batch that already says
// exactly this alone.
func SetLogAppendTime(batch []byte, ts int64) error {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return fmt.Errorf("set log append time: %w", err)
	}
	if int(h.Length) != len(batch) {
		return fmt.Errorf("set log append time: %w: header says %d bytes, got %d", ErrCorruptBatch, h.Length, len(batch))
	}
	if h.Attributes&attrLogAppendTime != 0 && h.MaxTimestamp == ts {
		return nil
	}
	be := binary.BigEndian
	be.PutUint16(batch[offAttributes:], uint16(h.Attributes&attrKnown|attrLogAppendTime))
	be.PutUint64(batch[offMaxTimestamp:], uint64(ts))
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
	return nil
}

// stamp writes the broker-assigned fields. Both lie outside the CRC, so the
// batch stays valid.
func stamp(b []byte, baseOffset int64, leaderEpoch int32) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
}

// findRecord returns the offset and timestamp of the first record in batch
// for which match returns true. records is the (decompressed) record section
// of the batch, h its header.
func findRecord(h BatchHeader, records []byte, match func(offset, ts int64) bool) (offset, ts int64, ok bool, err error) {
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := binary.Varint(records)
		if n <= 0 || length < 0 || int64(len(records)-n) < length {
			return 0, 0, false, fmt.Errorf("%w: record %d of batch at offset %d: bad length", ErrCorruptBatch, i, h.BaseOffset)
		}
		body := records[n : n+int(length)]
		records = records[n+int(length):]
		if len(body) < 1 {
			return 0, 0, false, fmt.Errorf("%w: record %d of batch at offset %d: empty", ErrCorruptBatch, i, h.BaseOffset)
		}
		body = body[1:] // record attributes, unused
		tsDelta, n := binary.Varint(body)
		if n <= 0 {
			return 0, 0, false, fmt.Errorf("%w: record %d of batch at offset %d: bad timestamp delta", ErrCorruptBatch, i, h.BaseOffset)
		}
		offDelta, m := binary.Varint(body[n:])
		if m <= 0 {
			return 0, 0, false, fmt.Errorf("%w: record %d of batch at offset %d: bad offset delta", ErrCorruptBatch, i, h.BaseOffset)
		}
		ts := h.BaseTimestamp + tsDelta
		if h.Attributes&attrLogAppendTime != 0 {
			// With LogAppendTime every record carries the batch's timestamp,
			// whatever the producer put in the deltas.
			ts = h.MaxTimestamp
		}
		if match(h.BaseOffset+offDelta, ts) {
			return h.BaseOffset + offDelta, ts, true, nil
		}
	}
	return 0, 0, false, nil
}
