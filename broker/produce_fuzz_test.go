package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/kafgres/kafgres/broker/storage/segment"
)

// seedTime is the clock of the batch seeds and of the fuzzed validation,
// so that a run is deterministic.
const seedTime = 1_700_000_000_000

// seedBatches are batches as producers send them: each codec, keys, null
// keys, headers, several records, idempotent.
func seedBatches() [][]byte {
	var records []byte
	for i := 0; i < 5; i++ {
		r := kmsg.Record{TimestampDelta64: int64(i * 10), OffsetDelta: int32(i), Value: []byte("value value value")}
		if i%2 == 0 {
			r.Key = []byte{'k', byte('0' + i)}
		}
		if i == 3 {
			r.Headers = []kmsg.Header{{Key: "trace", Value: []byte("abc")}, {Key: "empty"}}
		}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		records = r.AppendTo(records)
	}
	var out [][]byte
	for _, c := range []struct {
		codec    int16
		compress func([]byte) []byte
		pid      int64
	}{
		{codecNone, nil, -1},
		{codecNone, nil, 7},
		{codecGzip, gzipData, -1},
		{codecSnappy, func(b []byte) []byte { return s2.EncodeSnappy(nil, b) }, -1},
		{codecSnappy, func(b []byte) []byte { return xerialData(b, 40) }, 7},
		{codecLZ4, lz4Data, -1},
		{codecZstd, func(b []byte) []byte { return zstdData(b) }, -1},
	} {
		section := records
		if c.compress != nil {
			section = c.compress(records)
		}
		b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: c.codec, LastOffsetDelta: 4,
			FirstTimestamp: seedTime, MaxTimestamp: seedTime + 40, ProducerID: c.pid, ProducerEpoch: -1, FirstSequence: -1,
			NumRecords: 5, Records: section}
		if c.pid >= 0 {
			b.ProducerEpoch, b.FirstSequence = 0, 0
		}
		raw := b.AppendTo(nil)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
		binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
		out = append(out, raw)
	}
	return out
}

// FuzzValidateBatch: produce validation takes any bytes a client puts in a
// partition's records. It answers with a Kafka error (never an internal
// one, never a panic), bounded in time and memory by its limits, and what
// it accepts is exactly one well-formed batch whose records are what the
// header declares.
func FuzzValidateBatch(f *testing.F) {
	for _, b := range seedBatches() {
		f.Add(uint8(12), false, b)
		f.Add(uint8(6), true, b)
	}
	f.Add(uint8(12), false, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(3), true, []byte{})

	dec := newDecoders(32 << 20)
	f.Fuzz(func(t *testing.T, version uint8, compacted bool, records []byte) {
		v := batchValidation{
			version: min(max(int16(version), 3), 13),
			tp:      "fuzz-0",
			settings: kconfig.TopicSettings{MaxMessageBytes: 1 << 20, TimestampBeforeMaxMs: 3600_000, TimestampAfterMaxMs: 3600_000,
				CleanupPolicy: map[bool]string{true: "compact", false: "delete"}[compacted]},
			now:      seedTime,
			limit:    1 << 20,
			decoders: dec,
		}
		h, err := v.validate(context.Background(), records)
		if err != nil {
			var ke *kerr.Error
			if !errors.As(err, &ke) || ke == kerr.UnknownServerError || ke == kerr.RequestTimedOut {
				t.Fatalf("not a client error: %v", err)
			}
			return
		}
		if _, err := segment.ValidateBatch(records); err != nil {
			t.Fatalf("accepted a batch the log would refuse: %v", err)
		}
		if h.NumRecords <= 0 || int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 || h.BaseOffset != 0 || h.IsControl() {
			t.Fatalf("accepted header %+v", h)
		}
		if h.Compression() == codecNone {
			var r segment.RecordReader
			r.ResetBytes(records[segment.HeaderSize:])
			for i := int32(0); i < h.NumRecords; i++ {
				if rec, err := r.Next(); err != nil || rec.OffsetDelta != i {
					t.Fatalf("accepted record %d: %+v %v", i, rec, err)
				}
			}
			if err := r.End(); err != nil {
				t.Fatalf("accepted records with a tail: %v", err)
			}
		}
		if dec.mem.inUse() != 0 {
			t.Fatalf("%d bytes of decompression memory kept", dec.mem.inUse())
		}
	})
}

// The seeds are what producers send: every one is accepted.
func TestValidateSeedBatches(t *testing.T) {
	dec := newDecoders(32 << 20)
	for i, b := range seedBatches() {
		v := batchValidation{version: 12, tp: "t-0", now: seedTime, limit: 1 << 20, decoders: dec,
			settings: kconfig.TopicSettings{MaxMessageBytes: 1 << 20, TimestampBeforeMaxMs: 1000, TimestampAfterMaxMs: 1000, CleanupPolicy: "delete"}}
		if _, err := v.validate(context.Background(), b); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
		// A decompression limit below what the records inflate to refuses it.
		v.limit = 100
		if _, err := v.validate(context.Background(), b); b[22]&7 != codecNone && !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("seed %d over the limit: %v", i, err)
		}
	}
}

// BenchmarkValidateBatch: the cost of validating a producer's 1 MiB batch
// of 1 KiB records per codec (records/s and MB/s of records).
func BenchmarkValidateBatch(b *testing.B) {
	value := make([]byte, 1000)
	for i := range value {
		value[i] = byte('a' + i%7*(i%3)) // compressible, as real payloads are
	}
	var records []byte
	const n = 1000
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Key: []byte("key"), Value: value}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the length, as zero, took one byte
		records = r.AppendTo(records)
	}
	for _, c := range []struct {
		name     string
		codec    int16
		compress func([]byte) []byte
	}{
		{"none", codecNone, nil},
		{"gzip", codecGzip, gzipData},
		{"snappy", codecSnappy, func(b []byte) []byte { return s2.EncodeSnappy(nil, b) }},
		{"lz4", codecLZ4, lz4Data},
		{"zstd", codecZstd, func(b []byte) []byte { return zstdData(b) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			section := records
			if c.compress != nil {
				section = c.compress(records)
			}
			rb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: c.codec, LastOffsetDelta: n - 1,
				FirstTimestamp: seedTime, MaxTimestamp: seedTime, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
				NumRecords: n, Records: section}
			raw := rb.AppendTo(nil)
			binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
			binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
			v := batchValidation{version: 12, tp: "t-0", now: seedTime, limit: 100 << 20, decoders: newDecoders(100 << 20),
				settings: kconfig.TopicSettings{MaxMessageBytes: 2 << 20, TimestampBeforeMaxMs: 1000, TimestampAfterMaxMs: 1000, CleanupPolicy: "delete"}}
			b.SetBytes(int64(len(records)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := v.validate(context.Background(), raw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
