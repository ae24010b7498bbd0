package segment

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
)

type testRecord struct {
	ts    int64
	key   []byte
	value []byte
}

type batchOpts struct {
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	attributes    int16
	// compress, if set, replaces the record section (and attributes must
	// carry the codec).
	compress func([]byte) []byte
}

func encodeRecords(recs []testRecord) []byte {
	var out []byte
	base := recs[0].ts
	for i, r := range recs {
		body := []byte{0}
		body = binary.AppendVarint(body, r.ts-base)
		body = binary.AppendVarint(body, int64(i))
		for _, b := range [][]byte{r.key, r.value} {
			if b == nil {
				body = binary.AppendVarint(body, -1)
			} else {
				body = binary.AppendVarint(body, int64(len(b)))
				body = append(body, b...)
			}
		}
		body = binary.AppendVarint(body, 0) // no headers
		out = binary.AppendVarint(out, int64(len(body)))
		out = append(out, body...)
	}
	return out
}

// makeBatch encodes a v2 batch the way a producer would: base offset 0,
// leader epoch -1, correct CRC-32C.
func makeBatch(recs []testRecord, o batchOpts) []byte {
	records := encodeRecords(recs)
	if o.compress != nil {
		records = o.compress(records)
	}
	maxTs := recs[0].ts
	for _, r := range recs {
		maxTs = max(maxTs, r.ts)
	}
	be := binary.BigEndian
	b := make([]byte, HeaderSize, HeaderSize+len(records))
	be.PutUint64(b[offBaseOffset:], 0)
	be.PutUint32(b[offBatchLength:], uint32(HeaderSize-logOverhead+len(records)))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(o.attributes))
	be.PutUint32(b[offLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[offBaseTimestamp:], uint64(recs[0].ts))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[offProducerID:], uint64(o.producerID))
	be.PutUint16(b[offProducerEpoch:], uint16(o.producerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(o.baseSequence))
	be.PutUint32(b[offRecordCount:], uint32(len(recs)))
	b = append(b, records...)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// simpleBatch makes n records with timestamps ts, ts+1, ... and values of
// valueSize bytes derived from seed.
func simpleBatch(seed int, n int, ts int64, valueSize int) ([]byte, []testRecord) {
	recs := make([]testRecord, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte(seed + i)}, valueSize)
		recs[i] = testRecord{ts: ts + int64(i), key: []byte{byte(seed)}, value: v}
	}
	return makeBatch(recs, batchOpts{producerID: -1, producerEpoch: -1, baseSequence: -1}), recs
}

// appended is what the test expects to read back for one batch.
type appended struct {
	base  int64
	bytes []byte // as stamped
	recs  []testRecord
}

func (a appended) last() int64 { return a.base + int64(len(a.recs)) - 1 }

func openTest(t *testing.T, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func appendAll(t *testing.T, l *Log, batches [][]byte, recs [][]testRecord) []appended {
	t.Helper()
	var out []appended
	for i, b := range batches {
		want := l.LogEndOffset()
		base, err := l.Append(b, 7)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if base != want {
			t.Fatalf("Append %d: base %d, want %d", i, base, want)
		}
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatalf("stamped batch %d invalid: %v", i, err)
		}
		if h.BaseOffset != base || h.LeaderEpoch != 7 {
			t.Fatalf("batch %d stamped with base %d epoch %d, want %d 7", i, h.BaseOffset, h.LeaderEpoch, base)
		}
		out = append(out, appended{base: base, bytes: bytes.Clone(b), recs: recs[i]})
	}
	return out
}

func concat(as []appended) []byte {
	var out []byte
	for _, a := range as {
		out = append(out, a.bytes...)
	}
	return out
}

// batchBytes returns the length of the valid batches at the start of the
// segment file at path, failing the test if anything but zeros (the space
// written ahead of an active segment) follows them.
func batchBytes(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for int(n)+HeaderSize <= len(b) {
		h, err := ParseBatchHeader(b[n:])
		if err != nil || int64(len(b)) < n+int64(h.Length) {
			break
		}
		if _, err := ValidateBatch(b[n : n+int64(h.Length)]); err != nil {
			t.Fatalf("%s at %d: %v", path, n, err)
		}
		n += int64(h.Length)
	}
	for i, c := range b[n:] {
		if c != 0 {
			t.Fatalf("%s: byte %d after the batches (which end at %d) is %#x, not zero", path, n+int64(i), n, c)
		}
	}
	return n
}
