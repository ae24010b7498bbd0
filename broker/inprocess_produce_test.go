package broker

// In-process Produce tests: idempotent sequences and the validation of the
// batches a client sends, with batches built by hand as no client library
// would build them.

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rec is one record of a hand-built batch.
type rec struct {
	offsetDelta int32
	tsDelta     int64
	key, value  []byte
}

func encodeRecs(recs []rec) []byte {
	var out []byte
	for _, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.tsDelta, OffsetDelta: r.offsetDelta, Key: r.key, Value: r.value}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // a zero length encodes in one byte
		out = kr.AppendTo(out)
	}
	return out
}

// batchSpec describes a hand-built v2 batch; zero fields take a
// producer's usual values.
type batchSpec struct {
	baseOffset      int64
	attributes      int16
	lastOffsetDelta int32
	numRecords      int32
	firstTimestamp  int64
	maxTimestamp    int64
	producerID      int64
	producerEpoch   int16 // with a producer id; -1 without one
	baseSequence    int32
	records         []byte // the records section as sent (compressed or not)
}

func plainSpec(recs []rec) batchSpec {
	now := time.Now().UnixMilli()
	return batchSpec{lastOffsetDelta: int32(len(recs) - 1), numRecords: int32(len(recs)),
		firstTimestamp: now, maxTimestamp: now, producerID: -1, baseSequence: -1, records: encodeRecs(recs)}
}

func (s batchSpec) build() []byte {
	b := kmsg.RecordBatch{
		FirstOffset: s.baseOffset, PartitionLeaderEpoch: -1, Magic: 2, Attributes: s.attributes,
		LastOffsetDelta: s.lastOffsetDelta, FirstTimestamp: s.firstTimestamp, MaxTimestamp: s.maxTimestamp,
		ProducerID: s.producerID, ProducerEpoch: -1, FirstSequence: s.baseSequence,
		NumRecords: s.numRecords, Records: s.records,
	}
	if s.producerID >= 0 {
		b.ProducerEpoch = s.producerEpoch
	}
	return recrc(b.AppendTo(nil))
}

// recrc fixes a v2 batch's length and CRC after it was built or edited.
func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// producerBatch is an uncompressed batch of n records holding value, as
// the producer pid (-1: not idempotent) sends it.
func producerBatch(pid int64, epoch int16, seq int32, n int, value string) []byte {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{offsetDelta: int32(i), value: []byte(value)}
	}
	s := plainSpec(recs)
	s.producerID, s.producerEpoch, s.baseSequence = pid, epoch, seq
	return s.build()
}

// produceAt sends records, as they are, to partition 0 of topic with
// acks=all in a Produce request of the given version (12 and below name
// topics; 13 would need their ids).
func (c *testClient) produceAt(version int16, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// listOffset asks for partition 0's offset at ts (-1 latest, -2 earliest,
// -3 max timestamp, else the first record at or after ts).
func (tb *testBroker) listOffset(c *testClient, topic string, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.do(tb.latest(req)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

func wantProduce(t *testing.T, what string, got kmsg.ProduceResponseTopicPartition, wantErr *kerr.Error, wantOff int64) {
	t.Helper()
	var code int16
	if wantErr != nil {
		code = wantErr.Code
	}
	if got.ErrorCode != code || (wantErr == nil && got.BaseOffset != wantOff) {
		t.Fatalf("%s: got (%v, offset %d), want (%v, offset %d)", what, kerr.ErrorForCode(got.ErrorCode), got.BaseOffset, wantErr, wantOff)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestInProcessIdempotentSequenceWindow: an idempotent producer's batches
// follow Kafka's sequence rules (a retried batch is acknowledged with its
// first offset and not stored twice, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER,
// a stale epoch INVALID_PRODUCER_EPOCH, a new epoch starts at sequence 0),
// and the rules hold across a crash of the broker: its producer state is
// rebuilt from the log.
func TestInProcessIdempotentSequenceWindow(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "seq", 1, nil)
	ip := c.do(tb.latest(kmsg.NewPtrInitProducerIDRequest())).(*kmsg.InitProducerIDResponse)
	if ip.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ip.ErrorCode))
	}
	pid := ip.ProducerID

	wantProduce(t, "first batch", c.produceAt(12, "seq", producerBatch(pid, 0, 0, 3, "a")), nil, 0)
	wantProduce(t, "retried first batch", c.produceAt(12, "seq", producerBatch(pid, 0, 0, 3, "a")), nil, 0)
	wantProduce(t, "second batch", c.produceAt(12, "seq", producerBatch(pid, 0, 3, 2, "b")), nil, 3)
	if end := tb.listOffset(c, "seq", -1).Offset; end != 5 {
		t.Fatalf("log end %d after a duplicate, want 5", end)
	}
	wantProduce(t, "sequence gap", c.produceAt(12, "seq", producerBatch(pid, 0, 9, 1, "gap")), kerr.OutOfOrderSequenceNumber, -1)

	tb = tb.restartAfterCrash(t)
	c = tb.dial(t)
	wantProduce(t, "retry after restart", c.produceAt(12, "seq", producerBatch(pid, 0, 3, 2, "b")), nil, 3)
	wantProduce(t, "next after restart", c.produceAt(12, "seq", producerBatch(pid, 0, 5, 1, "c")), nil, 5)

	wantProduce(t, "epoch bump", c.produceAt(12, "seq", producerBatch(pid, 1, 0, 1, "epoch1")), nil, 6)
	wantProduce(t, "stale epoch", c.produceAt(12, "seq", producerBatch(pid, 0, 6, 1, "stale")), kerr.InvalidProducerEpoch, -1)
	wantProduce(t, "epoch bump with non-zero sequence", c.produceAt(12, "seq", producerBatch(pid, 2, 5, 1, "bump-not-zero")), kerr.OutOfOrderSequenceNumber, -1)
	if end := tb.listOffset(c, "seq", -1).Offset; end != 7 {
		t.Fatalf("log end %d, want 7", end)
	}
}

// TestInProcessProduceValidation: the errors Kafka gives for bad batches
// (a bad CRC, two batches in one partition's records, a batch over
// max.message.bytes, an unknown topic), and a valid batch still goes in
// after them.
func TestInProcessProduceValidation(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "val", 1, nil)

	bad := producerBatch(-1, -1, -1, 1, "x")
	bad[len(bad)-1] ^= 0xff
	wantProduce(t, "bad crc", c.produceAt(12, "val", bad), kerr.CorruptMessage, -1)

	two := append(producerBatch(-1, -1, -1, 1, "x"), producerBatch(-1, -1, -1, 1, "y")...)
	wantProduce(t, "two batches", c.produceAt(12, "val", two), kerr.InvalidRecord, -1)

	big := producerBatch(-1, -1, -1, 1, string(make([]byte, 1100000)))
	wantProduce(t, "too large", c.produceAt(12, "val", big), kerr.MessageTooLarge, -1)

	wantProduce(t, "unknown topic", c.produceAt(12, "nope", producerBatch(-1, -1, -1, 1, "x")), kerr.UnknownTopicOrPartition, -1)

	wantProduce(t, "valid after errors", c.produceAt(12, "val", producerBatch(-1, -1, -1, 1, "ok")), nil, 0)
}

// TestInProcessProduceBatchValidation (issue #10, finding 8): batches Kafka
// refuses are refused with Kafka's error codes, naming the offending
// record where Kafka does, and none of them reaches the log; what real
// producers send, compressed or not, still goes in.
func TestInProcessProduceBatchValidation(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "val", 1, nil)
	tb.createTopic(t, c, "compacted", 1, map[string]string{"cleanup.policy": "compact"})
	tb.createTopic(t, c, "compactdel", 1, map[string]string{"cleanup.policy": "compact,delete"})
	two := []rec{{offsetDelta: 0, key: []byte("k"), value: []byte("a")}, {offsetDelta: 1, key: []byte("k"), value: []byte("b")}}

	edit := func(s batchSpec, f func(*batchSpec)) []byte { f(&s); return s.build() }
	raw := func(f func([]byte) []byte) []byte { return recrc(f(plainSpec(two).build())) }
	zstdRecords := zstdData(encodeRecs(two))
	now := time.Now().UnixMilli()

	cases := []struct {
		name    string
		version int16 // of the Produce request
		topic   string
		batch   []byte
		want    *kerr.Error
		record  int32 // index of the record an error names, -1 for none
	}{
		{"no batch", 12, "val", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, kerr.InvalidRecord, -1},
		{"magic 1", 12, "val", raw(func(b []byte) []byte { b[16] = 1; return b }), kerr.InvalidRecord, -1},
		{"base offset 5", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.baseOffset = 5 }), kerr.InvalidRecord, -1},
		{"codec 5", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.attributes = 5 }), kerr.CorruptMessage, -1},
		{"codec 7", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.attributes = 7 }), kerr.CorruptMessage, -1},
		{"control bit", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.attributes = 0x20 }), kerr.InvalidRecord, -1},
		{"count above records", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.numRecords, s.lastOffsetDelta = 3, 2 }), kerr.InvalidRecord, -1},
		{"count below records", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.numRecords, s.lastOffsetDelta = 1, 0 }), kerr.InvalidRecord, -1},
		{"count zero", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.numRecords, s.lastOffsetDelta = 0, -1 }), kerr.InvalidRecord, -1},
		{"count against offsets", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.lastOffsetDelta = 4 }), kerr.InvalidRecord, -1},
		{"offset deltas not consecutive", 12, "val", edit(plainSpec(two), func(s *batchSpec) {
			s.records = encodeRecs([]rec{{offsetDelta: 0, value: []byte("a")}, {offsetDelta: 3, value: []byte("b")}})
		}), kerr.InvalidRecord, -1},
		{"record length too long", 12, "val", raw(func(b []byte) []byte { b[61] += 2; return b }), kerr.InvalidRecord, -1},
		{"record length too short", 12, "val", raw(func(b []byte) []byte { b[61] -= 2; return b }), kerr.InvalidRecord, -1},
		{"trailing bytes in the records", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.records = append(s.records, 0, 0) }), kerr.InvalidRecord, -1},
		{"negative header count", 12, "val", raw(func(b []byte) []byte { b[len(b)-1] = 1; return b }), kerr.InvalidRecord, -1},
		{"producer id without sequence", 12, "val", edit(plainSpec(two), func(s *batchSpec) { s.producerID = 1 }), kerr.InvalidRecord, -1},
		{"gzip that does not decode", 12, "val", edit(plainSpec(two), func(s *batchSpec) {
			s.attributes = 1
			s.records = gzipData(s.records)
			// the first deflate block's header (after gzip's 10) with the
			// reserved block type 11: no decoder gets past it
			s.records[10] |= 0x06
		}), kerr.CorruptMessage, -1},
		{"gzip holding fewer records than declared", 12, "val", edit(plainSpec(two), func(s *batchSpec) {
			s.attributes, s.numRecords, s.lastOffsetDelta = 1, 3, 2
			s.records = gzipData(s.records)
		}), kerr.InvalidRecord, -1},
		{"zstd before produce v7", 6, "val", edit(plainSpec(two), func(s *batchSpec) { s.attributes, s.records = 4, zstdRecords }), kerr.UnsupportedCompressionType, -1},
		{"record two hours ahead", 12, "val", edit(plainSpec(two), func(s *batchSpec) {
			s.records = encodeRecs([]rec{{offsetDelta: 0, value: []byte("a")}, {offsetDelta: 1, tsDelta: 2 * 3600 * 1000, value: []byte("b")}})
		}), kerr.InvalidTimestamp, 1},
		{"null key on a compacted topic", 12, "compacted", edit(plainSpec(two), func(s *batchSpec) {
			s.records = encodeRecs([]rec{{offsetDelta: 0, key: []byte("k"), value: []byte("a")}, {offsetDelta: 1, value: []byte("b")}})
		}), kerr.InvalidRecord, 1},
		// Kafka's LogConfig.compact: the policy includes compact.
		{"null key on a compact,delete topic", 12, "compactdel", edit(plainSpec(two), func(s *batchSpec) {
			s.records = encodeRecs([]rec{{offsetDelta: 0, value: []byte("a")}, {offsetDelta: 1, key: []byte("k"), value: []byte("b")}})
		}), kerr.InvalidRecord, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tb.dial(t)
			p := c.produceAt(tc.version, tc.topic, tc.batch)
			if p.ErrorCode != tc.want.Code {
				t.Fatalf("got %v (%s), want %v", kerr.ErrorForCode(p.ErrorCode), deref(p.ErrorMessage), tc.want)
			}
			t.Logf("%v: %s", tc.want, deref(p.ErrorMessage))
			if tc.record >= 0 && (len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != tc.record) {
				t.Fatalf("record errors %+v, want record %d", p.ErrorRecords, tc.record)
			}
		})
	}
	for _, topic := range []string{"val", "compacted", "compactdel"} {
		if p := tb.listOffset(c, topic, -1); p.ErrorCode != 0 || p.Offset != 0 {
			t.Fatalf("%s: log end %d (%v) after refused batches, want 0", topic, p.Offset, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	gz := plainSpec(two)
	gz.attributes, gz.records = 1, gzipData(gz.records)
	zs := plainSpec(two)
	zs.attributes, zs.records = 4, zstdRecords
	zs.firstTimestamp, zs.maxTimestamp = now, now
	for i, b := range [][]byte{plainSpec(two).build(), gz.build(), zs.build()} {
		if p := c.produceAt(12, "val", b); p.ErrorCode != 0 || p.BaseOffset != int64(2*i) {
			t.Fatalf("valid batch %d: %v (%s) offset %d", i, kerr.ErrorForCode(p.ErrorCode), deref(p.ErrorMessage), p.BaseOffset)
		}
	}
}
