package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// record is one record on its way into a topic.
type record struct {
	topic     string
	partition int32 // -1: choose from the key
	key       []byte
	value     []byte
	headers   []kmsg.Header
}

var errMessage = errors.New("malformed kafgres message")

// parseMessage decodes the content kafgres_produce writes (docs/producing.md,
// "Message format").
func parseMessage(b []byte) (record, error) {
	r := reader{b: b}
	if v := r.u8(); v != 1 {
		return record{}, fmt.Errorf("%w: version %d", errMessage, v)
	}
	rec := record{topic: string(r.str16())}
	rec.partition = int32(r.u32())
	rec.key = r.bytes32()
	rec.value = r.bytes32()
	n := int(r.u16())
	for i := 0; i < n && r.err == nil; i++ {
		k := string(r.str16())
		rec.headers = append(rec.headers, kmsg.Header{Key: k, Value: r.bytes32()})
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errMessage, len(r.b))
	}
	return rec, r.err
}

// reader consumes big-endian fields, remembering the first shortfall.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = fmt.Errorf("%w: truncated", errMessage)
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) str16() []byte { return r.take(int(r.u16())) }

// bytes32 reads an int32 length (-1 = NULL) and that many bytes.
func (r *reader) bytes32() []byte {
	n := int32(r.u32())
	if r.err != nil || n == -1 {
		return nil
	}
	if b := r.take(int(n)); b != nil {
		return b
	}
	return nil
}

// recordBatchOverhead is the v2 batch header, base offset through record
// count.
const recordBatchOverhead = 61

// batchSize is the size of a batch holding rec alone: what max.message.bytes
// limits, as for a Kafka producer sending the record on its own (and as
// kafgres_produce counts kafgres.max_message_bytes).
func batchSize(rec record) int {
	body := 3 // attributes, timestamp delta 0, offset delta 0
	body += bytesLen(rec.key) + bytesLen(rec.value) + varintLen(len(rec.headers))
	for _, h := range rec.headers {
		body += varintLen(len(h.Key)) + len(h.Key) + bytesLen(h.Value)
	}
	return recordBatchOverhead + varintLen(body) + body
}

// varintLen is the length of v as a zigzag varint, Kafka's and Go's.
func varintLen(v int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], int64(v))
}

// bytesLen is the encoded size of a varint-length-prefixed field; nil is
// length -1 with no bytes.
func bytesLen(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(len(b)) + len(b)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeBatch builds an uncompressed v2 batch (no producer id, CreateTime)
// of records with their timestamps (ms, one per record); the broker assigns
// its offsets.
func encodeBatch(recs []record, timestamps []int64) []byte {
	base, maxTS := timestamps[0], timestamps[0]
	var body []byte
	for i, rc := range recs {
		maxTS = max(maxTS, timestamps[i])
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: timestamps[i] - base, Key: rc.key, Value: rc.value, Headers: rc.headers}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a zero Length encodes in one byte
		body = r.AppendTo(body)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       base,
		MaxTimestamp:         maxTS,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              body,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}
