package producer

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/decoder"
)

// record is one record on its way into a topic.
type record struct {
	topic     string
	partition int32 // -1: choose from the key
	key       []byte
	value     []byte
	headers   []kmsg.Header
}

// kmsgHeader is a decoded header as a record header.
func kmsgHeader(h decoder.Header) kmsg.Header { return kmsg.Header{Key: h.Key, Value: h.Value} }

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
