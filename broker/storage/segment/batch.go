package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
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

	// ErrInvalidRecord: a record of a batch is malformed, or the batch
	// holds more or fewer records than it declares (Kafka's
	// InvalidRecordException).
	ErrInvalidRecord = errors.New("invalid record")
	// ErrRecordsTooLarge: a compressed batch inflates beyond the limit its
	// reader was given.
	ErrRecordsTooLarge = errors.New("decompressed records over the limit")
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

// HasLogAppendTime reports the timestamp-type attribute bit.
func (h BatchHeader) HasLogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// CRCValid reports whether b, the whole batch h was parsed from, carries a
// correct CRC-32C.
func (h BatchHeader) CRCValid(b []byte) bool {
	return len(b) >= HeaderSize && crc32.Checksum(b[offAttributes:], castagnoli) == h.CRC
}

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

// ValidateStoredBatch is ValidateBatch for a batch read back from the log,
// as Kafka's recovery checks one (RecordBatch.ensureValid): the log cleaner
// keeps a batch's offset range when it removes records, so a stored batch
// may hold fewer records than its offsets span.
func ValidateStoredBatch(b []byte) (BatchHeader, error) {
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
	if h.LastOffsetDelta < 0 || h.NumRecords < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 {
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

// Stamp writes the broker-assigned fields, the base offset and the leader
// epoch. Both lie outside the CRC, so the batch stays valid.
func Stamp(b []byte, baseOffset int64, leaderEpoch int32) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
}

// findRecord returns the offset and timestamp of the first record in batch
// for which match returns true, reading the batch's (decompressed) records
// from r; h is its header.
func findRecord(h BatchHeader, r *RecordReader, match func(offset, ts int64) bool) (offset, ts int64, ok bool, err error) {
	for i := int32(0); i < h.NumRecords; i++ {
		rec, err := r.Next()
		if err != nil {
			return 0, 0, false, fmt.Errorf("%w: record %d of batch at offset %d: %w", ErrCorruptBatch, i, h.BaseOffset, err)
		}
		ts := h.BaseTimestamp + rec.TimestampDelta
		if h.Attributes&attrLogAppendTime != 0 {
			// With LogAppendTime every record carries the batch's timestamp,
			// whatever the producer put in the deltas.
			ts = h.MaxTimestamp
		}
		if match(h.BaseOffset+int64(rec.OffsetDelta), ts) {
			return h.BaseOffset + int64(rec.OffsetDelta), ts, true, nil
		}
	}
	return 0, 0, false, nil
}

// Record is what a RecordReader learns of one record of a v2 batch; keys,
// values and headers are skipped, not kept.
type Record struct {
	Size           int32 // bytes of the record after its length prefix
	TimestampDelta int64
	OffsetDelta    int32
	KeyLen         int32 // negative: null key
	ValueLen       int32 // negative: null value
	Headers        int32
}

// recordReaderBuffer is the window a RecordReader keeps over a stream: a
// record larger than it is skipped through, never held.
const recordReaderBuffer = 16 << 10

// RecordReader reads the records section of a v2 batch one record at a
// time, from memory (an uncompressed batch) or from a decompressing stream,
// checking each record's structure as Kafka's DefaultRecord.readFrom does.
// Over a stream it holds only a small window, so a batch that inflates to
// gigabytes costs time, never memory. The zero value is ready for
// ResetBytes; one reader may be reused for many batches.
type RecordReader struct {
	src   io.Reader // nil when buf is the whole section
	buf   []byte    // bytes read and not consumed
	back  []byte    // storage behind buf when reading from src
	err   error     // src's error (io.EOF at its end), returned once buf is drained
	stall int       // consecutive empty reads, to catch a reader that never progresses
}

// ResetBytes makes r read the records in b.
func (r *RecordReader) ResetBytes(b []byte) {
	r.src, r.buf, r.err, r.stall = nil, b, io.EOF, 0
}

// ResetReader makes r read the records from src.
func (r *RecordReader) ResetReader(src io.Reader) {
	if r.back == nil {
		r.back = make([]byte, recordReaderBuffer)
	}
	r.src, r.buf, r.err, r.stall = src, r.back[:0], nil, 0
}

// fill tries to have at least n (≤ recordReaderBuffer) bytes buffered; it
// stops early at the end of the input or on an error, left in r.err.
func (r *RecordReader) fill(n int) {
	for len(r.buf) < n && r.err == nil {
		m := copy(r.back, r.buf)
		k, err := r.src.Read(r.back[m:])
		r.buf = r.back[:m+k]
		switch {
		case err != nil:
			r.err = err
		case k == 0:
			if r.stall++; r.stall > 100 {
				r.err = io.ErrNoProgress
			}
		default:
			r.stall = 0
		}
	}
}

// srcErr is the error for input that ended too early: the source's own
// failure, or a record cut short.
func (r *RecordReader) srcErr(what string) error {
	if r.err != nil && r.err != io.EOF {
		return r.err
	}
	return fmt.Errorf("%w: %s cut short", ErrInvalidRecord, what)
}

// varint reads a zig-zag varint of at most maxLen bytes out of the *left
// bytes that remain of the current record (left < 0: no record bound).
func (r *RecordReader) varint(maxLen int, left *int64, what string) (int64, error) {
	if len(r.buf) < binary.MaxVarintLen64 && r.src != nil {
		r.fill(binary.MaxVarintLen64)
	}
	v, n := binary.Varint(r.buf)
	switch {
	case n == 0:
		return 0, r.srcErr(what)
	case n < 0 || n > maxLen:
		return 0, fmt.Errorf("%w: %s is not a valid varint", ErrInvalidRecord, what)
	case *left >= 0 && int64(n) > *left:
		return 0, fmt.Errorf("%w: %s runs past the end of the record", ErrInvalidRecord, what)
	}
	r.buf = r.buf[n:]
	if *left >= 0 {
		*left -= int64(n)
	}
	return v, nil
}

// varint32 is varint for Kafka's int32 varints (at most 5 bytes).
func (r *RecordReader) varint32(left *int64, what string) (int32, error) {
	v, err := r.varint(5, left, what)
	if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		err = fmt.Errorf("%w: %s %d out of range", ErrInvalidRecord, what, v)
	}
	return int32(v), err
}

// skip consumes n bytes of the current record.
func (r *RecordReader) skip(n int64, left *int64, what string) error {
	if n > *left {
		return fmt.Errorf("%w: %s of %d bytes runs past the end of the record", ErrInvalidRecord, what, n)
	}
	*left -= n
	for n > 0 {
		if len(r.buf) == 0 {
			if r.src == nil {
				return r.srcErr(what)
			}
			r.fill(1)
			if len(r.buf) == 0 {
				return r.srcErr(what)
			}
		}
		k := min(n, int64(len(r.buf)))
		r.buf = r.buf[k:]
		n -= k
	}
	return nil
}

// Next reads one record. Errors wrap ErrInvalidRecord for a malformed
// record, or are the stream's own (a decompression failure,
// ErrRecordsTooLarge).
func (r *RecordReader) Next() (Record, error) {
	var rec Record
	unbounded := int64(-1)
	size, err := r.varint32(&unbounded, "record length")
	if err != nil {
		return rec, err
	}
	// A record is at least attributes, timestamp and offset deltas, key
	// and value lengths and a header count: six bytes.
	if size < 6 {
		return rec, fmt.Errorf("%w: record length %d", ErrInvalidRecord, size)
	}
	rec.Size = size
	left := int64(size)
	if err := r.skip(1, &left, "record attributes"); err != nil {
		return rec, err
	}
	if rec.TimestampDelta, err = r.varint(binary.MaxVarintLen64, &left, "timestamp delta"); err != nil {
		return rec, err
	}
	if rec.OffsetDelta, err = r.varint32(&left, "offset delta"); err != nil {
		return rec, err
	}
	if rec.KeyLen, err = r.varint32(&left, "key length"); err != nil {
		return rec, err
	}
	if rec.KeyLen > 0 {
		if err := r.skip(int64(rec.KeyLen), &left, "key"); err != nil {
			return rec, err
		}
	}
	if rec.ValueLen, err = r.varint32(&left, "value length"); err != nil {
		return rec, err
	}
	if rec.ValueLen > 0 {
		if err := r.skip(int64(rec.ValueLen), &left, "value"); err != nil {
			return rec, err
		}
	}
	if rec.Headers, err = r.varint32(&left, "header count"); err != nil {
		return rec, err
	}
	// Each header takes at least its two length bytes.
	if rec.Headers < 0 || int64(rec.Headers) > left/2 {
		return rec, fmt.Errorf("%w: header count %d", ErrInvalidRecord, rec.Headers)
	}
	for i := int32(0); i < rec.Headers; i++ {
		klen, err := r.varint32(&left, "header key length")
		if err != nil {
			return rec, err
		}
		if klen < 0 {
			return rec, fmt.Errorf("%w: header key length %d", ErrInvalidRecord, klen)
		}
		if err := r.skip(int64(klen), &left, "header key"); err != nil {
			return rec, err
		}
		vlen, err := r.varint32(&left, "header value length")
		if err != nil {
			return rec, err
		}
		if vlen > 0 {
			if err := r.skip(int64(vlen), &left, "header value"); err != nil {
				return rec, err
			}
		}
	}
	if left != 0 {
		return rec, fmt.Errorf("%w: record length %d, but its fields take %d bytes", ErrInvalidRecord, size, int64(size)-left)
	}
	return rec, nil
}

// End checks that nothing follows the records read so far, reading a
// stream to its end so that its trailer (a gzip checksum, say) is checked.
func (r *RecordReader) End() error {
	if len(r.buf) == 0 && r.src != nil {
		r.fill(1)
	}
	if len(r.buf) > 0 {
		return fmt.Errorf("%w: bytes remain after the declared records", ErrInvalidRecord)
	}
	if r.err != nil && r.err != io.EOF {
		return r.err
	}
	return nil
}
