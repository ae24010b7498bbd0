package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// The same records read from memory, from a stream in big reads and from
// a stream one byte at a time give the same answers.
func TestRecordReader(t *testing.T) {
	recs := []testRecord{
		{ts: 100, key: []byte("k"), value: []byte("v")},
		{ts: 90, key: nil, value: bytes.Repeat([]byte{7}, 3*recordReaderBuffer)}, // larger than the window
	}
	section := append(encodeRecords(recs[:2]), headerRecord(2, 30)...)
	type got struct {
		rec Record
		err error
	}
	read := func(r *RecordReader) ([]got, error) {
		var out []got
		for range 3 {
			rec, err := r.Next()
			out = append(out, got{rec, err})
			if err != nil {
				return out, err
			}
		}
		return out, r.End()
	}
	var mem RecordReader
	mem.ResetBytes(section)
	want, err := read(&mem)
	if err != nil {
		t.Fatal(err)
	}
	if want[1].rec.ValueLen != 3*recordReaderBuffer || want[1].rec.KeyLen != -1 || want[2].rec.Headers != 1 || want[0].rec.TimestampDelta != 0 || want[1].rec.TimestampDelta != -10 {
		t.Fatalf("records %+v", want)
	}
	for name, src := range map[string]io.Reader{
		"stream":     bytes.NewReader(section),
		"one byte":   iotest.OneByteReader(bytes.NewReader(section)),
		"half reads": iotest.HalfReader(bytes.NewReader(section)),
	} {
		var r RecordReader
		r.ResetReader(src)
		got, err := read(&r)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: %v %v, want %v", name, got, err, want)
		}
	}
}

// headerRecord encodes a record with offset delta i and one header.
func headerRecord(i int, tsDelta int64) []byte {
	body := []byte{0}
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, int64(i))
	body = binary.AppendVarint(body, -1)
	body = binary.AppendVarint(body, 1)
	body = append(body, 'v')
	body = binary.AppendVarint(body, 1)
	body = binary.AppendVarint(body, 2)
	body = append(body, "hk"...)
	body = binary.AppendVarint(body, -1)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

func TestRecordReaderRejects(t *testing.T) {
	one := encodeRecords([]testRecord{{ts: 1, key: []byte("key"), value: []byte("value")}})
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(one)) }
	for name, section := range map[string][]byte{
		"empty":             {},
		"length too long":   mut(func(b []byte) []byte { b[0] += 2; return b }),
		"length too short":  mut(func(b []byte) []byte { b[0] -= 2; return b }),
		"negative length":   mut(func(b []byte) []byte { b[0] = 1; return b }),
		"tiny length":       binary.AppendVarint(nil, 3),
		"cut short":         one[:len(one)-3],
		"key past the end":  append(binary.AppendVarint(nil, 6), 0, 0, 0, 100, 0, 0),
		"negative headers":  mut(func(b []byte) []byte { b[len(b)-1] = 1; return b }),
		"too many headers":  mut(func(b []byte) []byte { b[len(b)-1] = 20; return b }),
		"varint too long":   append(binary.AppendVarint(nil, 16), 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0, 0, 0, 0, 0),
		"header key absent": append(binary.AppendVarint(nil, 7), 0, 0, 0, 1, 1, 2, 1),
	} {
		for _, stream := range []bool{false, true} {
			var r RecordReader
			if stream {
				r.ResetReader(iotest.OneByteReader(bytes.NewReader(section)))
			} else {
				r.ResetBytes(section)
			}
			if _, err := r.Next(); !errors.Is(err, ErrInvalidRecord) {
				t.Errorf("%s (stream %v): %v", name, stream, err)
			}
		}
	}
	// Bytes after the declared records, and a stream's own failure.
	var r RecordReader
	r.ResetBytes(append(bytes.Clone(one), 0))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := r.End(); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("trailing byte: %v", err)
	}
	boom := errors.New("boom")
	r.ResetReader(io.MultiReader(bytes.NewReader(one[:5]), iotest.ErrReader(boom)))
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Errorf("stream failure: %v", err)
	}
}

// A compressed batch whose records inflate beyond what Decompress allows
// answers timestamp lookups from its header, as one that cannot be
// decompressed at all does.
func TestTimestampsOverDecompressLimit(t *testing.T) {
	recs := []testRecord{{ts: 500}, {ts: 900}, {ts: 700}, {ts: 900}}
	b := makeBatch(recs, batchOpts{attributes: 1, compress: gzipBytes, producerID: -1})
	tooLarge := func(codec int8, in []byte, fn func(io.Reader) error) error {
		return gunzip(codec, in, func(r io.Reader) error {
			return fn(io.MultiReader(io.LimitReader(r, 3), iotest.ErrReader(fmt.Errorf("%w: test", ErrRecordsTooLarge))))
		})
	}
	l := openTest(t, Options{Dir: t.TempDir(), Decompress: tooLarge})
	if _, err := l.Append(b, 0); err != nil {
		t.Fatal(err)
	}
	if o, ts, ok, err := l.OffsetForTimestamp(600, 4); err != nil || !ok || o != 0 || ts != 900 {
		t.Fatalf("OffsetForTimestamp = %d %d %v %v, want 0 900", o, ts, ok, err)
	}
	if _, err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if o, ts, ok, err := l.MaxTimestamp(4); err != nil || !ok || o != 2 || ts != 900 {
		t.Fatalf("MaxTimestamp = %d %d %v %v, want 2 900", o, ts, ok, err)
	}
}
