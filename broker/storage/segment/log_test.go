package segment

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// writeBatches appends n batches of 3 records with ~valueSize-byte values.
func writeBatches(t *testing.T, l *Log, n, valueSize int) []appended {
	t.Helper()
	var batches [][]byte
	var recs [][]testRecord
	for i := range n {
		b, r := simpleBatch(i, 3, int64(1000+10*i), valueSize)
		batches = append(batches, b)
		recs = append(recs, r)
	}
	return appendAll(t, l, batches, recs)
}

func mustRead(t *testing.T, l *Log, offset int64, maxBytes int, limit int64) []byte {
	t.Helper()
	b, err := l.Read(offset, maxBytes, limit)
	if err != nil {
		t.Fatalf("Read(%d, %d, %d): %v", offset, maxBytes, limit, err)
	}
	return b
}

func TestAppendReadAcrossSegments(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir(), SegmentBytes: 1000})
	as := writeBatches(t, l, 50, 100)
	end := l.LogEndOffset()
	if end != 150 {
		t.Fatalf("end %d, want 150", end)
	}
	if l.LogStartOffset() != 0 {
		t.Fatalf("start %d, want 0", l.LogStartOffset())
	}
	if l.Segments() < 5 {
		t.Fatalf("only %d segments with SegmentBytes 1000", l.Segments())
	}

	for i, a := range as {
		for off := a.base; off <= a.last(); off++ {
			if got := mustRead(t, l, off, 1, end); !bytes.Equal(got, a.bytes) {
				t.Fatalf("Read(%d) = %d bytes, want batch %d (%d bytes)", off, len(got), i, len(a.bytes))
			}
		}
		// Everything from here, across segment boundaries.
		if got := mustRead(t, l, a.base+1, 1<<30, end); !bytes.Equal(got, concat(as[i:])) {
			t.Fatalf("Read(%d, all) mismatch", a.base+1)
		}
	}

	// maxBytes: whole batches only, first one even if too big.
	three := len(as[0].bytes) + len(as[1].bytes) + len(as[2].bytes)
	if got := mustRead(t, l, 0, three-1, end); !bytes.Equal(got, concat(as[:2])) {
		t.Fatalf("maxBytes %d: got %d bytes, want first two batches", three-1, len(got))
	}
	if got := mustRead(t, l, 0, three, end); !bytes.Equal(got, concat(as[:3])) {
		t.Fatalf("maxBytes %d: got %d bytes, want first three batches", three, len(got))
	}
	if got := mustRead(t, l, 0, 0, end); !bytes.Equal(got, as[0].bytes) {
		t.Fatalf("maxBytes 0: got %d bytes, want the first batch", len(got))
	}

	// limit: batches with base offset below it.
	for limit, want := range map[int64][]appended{0: nil, 1: as[:1], 3: as[:1], 4: as[:2], 6: as[:2], 7: as[:3], 9: as[:3]} {
		if got := mustRead(t, l, 0, 1<<30, limit); !bytes.Equal(got, concat(want)) {
			t.Fatalf("limit %d: got %d bytes, want %d batches", limit, len(got), len(want))
		}
	}
	// An offset in the middle of a batch that starts below the limit.
	if got := mustRead(t, l, 5, 1<<30, 4); !bytes.Equal(got, as[1].bytes) {
		t.Fatalf("Read(5, limit 4) = %d bytes, want batch 1", len(got))
	}

	if got := mustRead(t, l, end, 1<<30, end); len(got) != 0 {
		t.Fatalf("Read at end returned %d bytes", len(got))
	}
	for _, off := range []int64{-1, end + 1} {
		if _, err := l.Read(off, 100, end); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read(%d) err = %v, want ErrOffsetOutOfRange", off, err)
		}
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 2000, Fsync: true}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	as := writeBatches(t, l, 30, 100)
	end := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(as[0].bytes, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if _, err := l.Read(0, 1, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}

	l = openTest(t, opts)
	if l.LogEndOffset() != end || l.DurableEnd() != end {
		t.Fatalf("after reopen end %d durable %d, want %d", l.LogEndOffset(), l.DurableEnd(), end)
	}
	if got := mustRead(t, l, 0, 1<<30, end); !bytes.Equal(got, concat(as)) {
		t.Fatal("bytes differ after reopen")
	}
	more := writeBatches(t, l, 3, 50)
	if more[0].base != end {
		t.Fatalf("first append after reopen got %d, want %d", more[0].base, end)
	}
	if got := mustRead(t, l, 0, 1<<30, l.LogEndOffset()); !bytes.Equal(got, concat(append(as, more...))) {
		t.Fatal("bytes differ after appending to reopened log")
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func lastSegmentFile(t *testing.T, dir string) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(matches) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	return matches[len(matches)-1] // zero-padded names sort numerically
}

func TestTornTail(t *testing.T) {
	src := t.TempDir()
	l, err := Open(Options{Dir: src, SegmentBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	as := writeBatches(t, l, 12, 100)
	if l.Segments() < 2 {
		t.Fatalf("want several segments, got %d", l.Segments())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	last := as[len(as)-1]
	prev := as[:len(as)-1]
	logName := filepath.Base(lastSegmentFile(t, src))
	full, err := os.ReadFile(filepath.Join(src, logName))
	if err != nil {
		t.Fatal(err)
	}
	lastStart := len(full) - len(last.bytes)
	if !bytes.Equal(full[lastStart:], last.bytes) {
		t.Fatal("last batch is not at the end of the last segment")
	}

	check := func(t *testing.T, dir string, wantSize int) {
		t.Helper()
		l := openTest(t, Options{Dir: dir, SegmentBytes: 1500})
		if l.LogEndOffset() != last.base || l.DurableEnd() != last.base {
			t.Fatalf("end %d durable %d, want %d", l.LogEndOffset(), l.DurableEnd(), last.base)
		}
		if got := mustRead(t, l, 0, 1<<30, l.LogEndOffset()); !bytes.Equal(got, concat(prev)) {
			t.Fatal("earlier batches differ after recovery")
		}
		if fi, err := os.Stat(filepath.Join(dir, logName)); err != nil || fi.Size() != int64(wantSize) {
			t.Fatalf("segment not truncated to %d: %v %v", wantSize, fi.Size(), err)
		}
		// The log keeps working from the recovered end.
		b, _ := simpleBatch(99, 2, 5000, 10)
		if base, err := l.Append(b, 1); err != nil || base != last.base {
			t.Fatalf("Append after recovery: base %d err %v, want %d", base, err, last.base)
		}
		if got := mustRead(t, l, last.base, 1<<30, l.LogEndOffset()); !bytes.Equal(got, b) {
			t.Fatal("batch appended after recovery reads back differently")
		}
	}

	for cut := 1; cut < len(last.bytes); cut++ {
		dir := t.TempDir()
		copyDir(t, src, dir)
		if err := os.Truncate(filepath.Join(dir, logName), int64(lastStart+cut)); err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("cut%d", cut), func(t *testing.T) { check(t, dir, lastStart) })
	}

	// A flipped byte in the last batch's records fails its CRC.
	t.Run("crc", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, src, dir)
		b := bytes.Clone(full)
		b[len(b)-5] ^= 0x40
		if err := os.WriteFile(filepath.Join(dir, logName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, dir, lastStart)
	})

	// Garbage after an intact tail (say, a preallocated or half-written
	// region) is cut too.
	t.Run("trailing zeros", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, src, dir)
		b := append(bytes.Clone(full[:lastStart]), make([]byte, 100)...)
		if err := os.WriteFile(filepath.Join(dir, logName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, dir, lastStart)
	})
}

func TestCorruptMiddleOfActiveSegment(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	as := writeBatches(t, l, 5, 100)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := lastSegmentFile(t, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos := len(as[0].bytes) + len(as[1].bytes)
	b[pos+HeaderSize+3] ^= 1 // records of batch 2
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, Options{Dir: dir})
	if l.LogEndOffset() != as[2].base {
		t.Fatalf("end %d, want %d", l.LogEndOffset(), as[2].base)
	}
	if got := mustRead(t, l, 0, 1<<30, l.LogEndOffset()); !bytes.Equal(got, concat(as[:2])) {
		t.Fatal("intact batches differ")
	}
}

func TestWrongBaseOffsetTruncates(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	as := writeBatches(t, l, 3, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Append a copy of the first batch (base offset 0, valid CRC) by hand.
	f, err := os.OpenFile(lastSegmentFile(t, dir), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(as[0].bytes); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = openTest(t, Options{Dir: dir})
	if l.LogEndOffset() != 9 {
		t.Fatalf("end %d, want 9", l.LogEndOffset())
	}
}

// indexEntries parses an .index file and checks each entry points at the
// batch whose last offset it names, as Kafka's index does.
func checkIndexFile(t *testing.T, logPath string) int {
	t.Helper()
	base := mustParseBase(t, logPath)
	idx, err := os.ReadFile(logPath[:len(logPath)-len(extLog)] + extIndex)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx)%offsetEntrySize != 0 {
		t.Fatalf("index size %d", len(idx))
	}
	prevPos := int64(-1)
	for i := 0; i < len(idx); i += offsetEntrySize {
		rel := int64(binary.BigEndian.Uint32(idx[i:]))
		pos := int64(binary.BigEndian.Uint32(idx[i+4:]))
		if pos <= prevPos {
			t.Fatalf("index positions not increasing: %d after %d", pos, prevPos)
		}
		prevPos = pos
		h, err := ParseBatchHeader(data[pos:])
		if err != nil {
			t.Fatalf("index entry %d: %v", i/8, err)
		}
		if h.LastOffset() != base+rel {
			t.Fatalf("index entry %d: batch last offset %d, entry says %d", i/8, h.LastOffset(), base+rel)
		}
	}
	return len(idx) / offsetEntrySize
}

// checkTimeIndexFile checks that every entry of a sealed segment's time
// index is the running maximum timestamp at the batch it names, that
// timestamps increase, and that the last entry is the segment's maximum.
func checkTimeIndexFile(t *testing.T, logPath string) int {
	t.Helper()
	base := mustParseBase(t, logPath)
	tidx, err := os.ReadFile(logPath[:len(logPath)-len(extLog)] + extTimeIndex)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// Running maximum and the batch (by last offset) that first reached it.
	runningAt := map[int64]int64{}
	maxTs, maxOff := int64(-1), int64(-1)
	for pos := 0; pos < len(data); {
		h, err := ParseBatchHeader(data[pos:])
		if err != nil {
			t.Fatal(err)
		}
		if h.MaxTimestamp > maxTs {
			maxTs, maxOff = h.MaxTimestamp, h.LastOffset()
			runningAt[maxOff] = maxTs
		}
		pos += int(h.Length)
	}
	prev := int64(-1)
	n := len(tidx) / timeEntrySize
	for i := range n {
		ts := int64(binary.BigEndian.Uint64(tidx[i*timeEntrySize:]))
		off := base + int64(binary.BigEndian.Uint32(tidx[i*timeEntrySize+8:]))
		if ts <= prev {
			t.Fatalf("time index entry %d: %d after %d", i, ts, prev)
		}
		prev = ts
		if want, ok := runningAt[off]; !ok || want != ts {
			t.Fatalf("time index entry %d: (%d, %d), running max there is %d (%v)", i, ts, off, want, ok)
		}
	}
	if n == 0 || prev != maxTs {
		t.Fatalf("last time index entry %d, segment max %d", prev, maxTs)
	}
	return n
}

func mustParseBase(t *testing.T, path string) int64 {
	t.Helper()
	base, ext, ok := parseSegmentName(filepath.Base(path))
	if !ok || ext != extLog {
		t.Fatalf("bad segment name %s", path)
	}
	return base
}

func TestIndex(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 300 << 10}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	as := writeBatches(t, l, 2000, 100)
	end := l.LogEndOffset()

	// The active segment's in-memory index: a high offset is found from an
	// index entry near it, not from the start of the segment.
	views, _, _, err := l.snapshot(end - 10)
	if err != nil {
		t.Fatal(err)
	}
	v := views[len(views)-1]
	if v.idxN < 10 {
		t.Fatalf("active segment has only %d index entries", v.idxN)
	}
	target := as[len(as)-5]
	pos, err := v.offsetIndex().lookupPosition(target.base + 1 - v.seg.base)
	if err != nil {
		t.Fatal(err)
	}
	if pos == 0 || v.size-pos > 2*4096+int64(len(target.bytes))*5 {
		t.Fatalf("index lookup for %d gave position %d of %d", target.base+1, pos, v.size)
	}

	checkReads := func(l *Log) {
		t.Helper()
		for _, i := range []int{0, 1, 13, 500, 999, 1000, 1001, 1500, 1998, 1999} {
			a := as[i]
			if got := mustRead(t, l, a.base+2, 1, end); !bytes.Equal(got, a.bytes) {
				t.Fatalf("Read(%d) returned the wrong batch", a.base+2)
			}
		}
	}
	checkReads(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) < 2 {
		t.Fatalf("want a sealed segment, got %d segments", len(logs))
	}
	for _, p := range logs {
		if n := checkIndexFile(t, p); n < 10 {
			t.Fatalf("%s has only %d index entries", p, n)
		}
	}

	// Sealed segments are searched on disk.
	l = openTest(t, opts)
	checkReads(l)
	l.Close()

	// A missing index of a sealed segment is rebuilt identically.
	first := logs[0][:len(logs[0])-len(extLog)]
	want, _ := os.ReadFile(first + extIndex)
	wantT, _ := os.ReadFile(first + extTimeIndex)
	os.Remove(first + extIndex)
	if err := os.WriteFile(first+extTimeIndex, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	checkReads(l)
	got, _ := os.ReadFile(first + extIndex)
	gotT, _ := os.ReadFile(first + extTimeIndex)
	if !bytes.Equal(got, want) || !bytes.Equal(gotT, wantT) {
		t.Fatal("rebuilt sealed indexes differ from the ones written at roll")
	}
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func gunzip(codec int8, in []byte, fn func(io.Reader) error) error {
	if codec != 1 {
		return fmt.Errorf("codec %d", codec)
	}
	r, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		return err
	}
	return fn(r)
}

// timestampLog builds batches with out-of-order timestamps within and across
// batches and returns them with their records.
func timestampBatches() ([][]byte, [][]testRecord) {
	var batches [][]byte
	var recs [][]testRecord
	for i := range 120 {
		base := int64(10_000 + 100*i)
		if i%7 == 3 {
			base -= 450 // a batch from a slow producer
		}
		r := []testRecord{
			{ts: base + 30, value: bytes.Repeat([]byte{1}, 40)},
			{ts: base + 10, value: bytes.Repeat([]byte{2}, 40)},
			{ts: base + 70, value: bytes.Repeat([]byte{3}, 40)},
			{ts: base + 50, value: bytes.Repeat([]byte{4}, 40)},
			{ts: base + 70, value: bytes.Repeat([]byte{5}, 40)},
		}
		// Single-record batches too, so an off-by-one in offsets shows.
		r = r[:1+i%5]
		batches = append(batches, makeBatch(r, batchOpts{producerID: -1, producerEpoch: -1, baseSequence: -1}))
		recs = append(recs, r)
	}
	return batches, recs
}

func bruteOffsetForTimestamp(as []appended, ts, limit int64) (int64, int64, bool) {
	for _, a := range as {
		if a.base >= limit {
			break
		}
		for i, r := range a.recs {
			if r.ts >= ts {
				return a.base + int64(i), r.ts, true
			}
		}
	}
	return 0, 0, false
}

func bruteMaxTimestamp(as []appended, limit int64) (int64, int64, bool) {
	var off, best int64 = 0, -1
	for _, a := range as {
		if a.base >= limit {
			break
		}
		for i, r := range a.recs {
			if r.ts > best {
				off, best = a.base+int64(i), r.ts
			}
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	return off, best, true
}

func TestTimestamps(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 4000, IndexIntervalBytes: 500}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	batches, recs := timestampBatches()
	as := appendAll(t, l, batches, recs)
	end := l.LogEndOffset()
	if l.Segments() < 4 {
		t.Fatalf("want several segments, got %d", l.Segments())
	}

	check := func(t *testing.T, l *Log) {
		t.Helper()
		limits := []int64{0, 1, 5, 6, 42, 43, 300, 301, end - 5, end - 4, end}
		for _, limit := range limits {
			for ts := int64(9_000); ts <= 10_000+100*121; ts += 7 {
				wo, wt, wok := bruteOffsetForTimestamp(as, ts, limit)
				o, gt, ok, err := l.OffsetForTimestamp(ts, limit)
				if err != nil {
					t.Fatal(err)
				}
				if ok != wok || o != wo || gt != wt {
					t.Fatalf("OffsetForTimestamp(%d, limit %d) = %d %d %v, want %d %d %v", ts, limit, o, gt, ok, wo, wt, wok)
				}
			}
			wo, wt, wok := bruteMaxTimestamp(as, limit)
			o, gt, ok, err := l.MaxTimestamp(limit)
			if err != nil {
				t.Fatal(err)
			}
			if ok != wok || o != wo || gt != wt {
				t.Fatalf("MaxTimestamp(limit %d) = %d %d %v, want %d %d %v", limit, o, gt, ok, wo, wt, wok)
			}
		}
	}
	t.Run("live", func(t *testing.T) { check(t, l) })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, p := range logs[:len(logs)-1] {
		if n := checkTimeIndexFile(t, p); n < 3 {
			t.Fatalf("%s: only %d time index entries", p, n)
		}
	}
	t.Run("reopened", func(t *testing.T) { check(t, openTest(t, opts)) })
}

// The largest timestamp sits in batches above the limit, so MaxTimestamp
// must work out the maximum of a prefix of the active segment.
func TestMaxTimestampBelowLimitInActiveSegment(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir(), IndexIntervalBytes: 200})
	var batches [][]byte
	var recs [][]testRecord
	for i := range 40 {
		ts := int64(1000 + i*10)
		if i == 5 || i == 20 {
			ts = 5000 // an early peak, reached again later: the first one counts
		}
		b, r := simpleBatch(i, 2, ts, 50)
		batches = append(batches, b)
		recs = append(recs, r)
	}
	as := appendAll(t, l, batches, recs)
	for limit := int64(1); limit <= l.LogEndOffset(); limit++ {
		wo, wt, wok := bruteMaxTimestamp(as, limit)
		o, gt, ok, err := l.MaxTimestamp(limit)
		if err != nil {
			t.Fatal(err)
		}
		if ok != wok || o != wo || gt != wt {
			t.Fatalf("MaxTimestamp(limit %d) = %d %d %v, want %d %d %v", limit, o, gt, ok, wo, wt, wok)
		}
	}
	if _, _, ok, err := l.MaxTimestamp(0); ok || err != nil {
		t.Fatalf("MaxTimestamp(0) ok %v err %v", ok, err)
	}
}

func TestTimestampsCompressed(t *testing.T) {
	recs := []testRecord{{ts: 500}, {ts: 900}, {ts: 700}, {ts: 900}}
	plain, _ := simpleBatch(0, 2, 100, 5)
	compressed := makeBatch(recs, batchOpts{attributes: 1, compress: gzipBytes, producerID: -1})

	for _, tc := range []struct {
		name       string
		decompress func(int8, []byte, func(io.Reader) error) error
		wantOffset int64 // for ts 600
		wantTs     int64
		maxOffset  int64
	}{
		{"fallback", nil, 2, 900, 2},
		{"decompressed", gunzip, 3, 900, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openTest(t, Options{Dir: t.TempDir(), Decompress: tc.decompress})
			if _, err := l.Append(bytes.Clone(plain), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Append(bytes.Clone(compressed), 0); err != nil {
				t.Fatal(err)
			}
			o, ts, ok, err := l.OffsetForTimestamp(600, l.LogEndOffset())
			if err != nil || !ok || o != tc.wantOffset || ts != tc.wantTs {
				t.Fatalf("OffsetForTimestamp(600) = %d %d %v %v, want %d %d", o, ts, ok, err, tc.wantOffset, tc.wantTs)
			}
			o, ts, ok, err = l.MaxTimestamp(l.LogEndOffset())
			if err != nil || !ok || o != tc.maxOffset || ts != 900 {
				t.Fatalf("MaxTimestamp = %d %d %v %v, want %d 900", o, ts, ok, err, tc.maxOffset)
			}
		})
	}
}

func TestLogAppendTime(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir()})
	// The producer's own timestamps (one above the target) are overridden.
	b := makeBatch([]testRecord{{ts: 5}, {ts: 1}, {ts: 3000}}, batchOpts{attributes: attrLogAppendTime})
	// As a broker configured for LogAppendTime would set it; the field is
	// covered by the CRC.
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], 2000)
	b = recrc(b)
	if _, err := l.Append(b, 0); err != nil {
		t.Fatal(err)
	}
	o, ts, ok, err := l.OffsetForTimestamp(1500, 10)
	if err != nil || !ok || o != 0 || ts != 2000 {
		t.Fatalf("OffsetForTimestamp = %d %d %v %v, want 0 2000", o, ts, ok, err)
	}
}

func recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestScanBatches(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir(), SegmentBytes: 700})
	type prod struct {
		id    int64
		epoch int16
		seq   int32
		n     int
	}
	var want []prod
	for i := range 20 {
		p := prod{id: int64(1000 + i%3), epoch: int16(i % 2), seq: int32(i * 4), n: 1 + i%4}
		recs := make([]testRecord, p.n)
		for j := range recs {
			recs[j] = testRecord{ts: int64(i), value: bytes.Repeat([]byte{'x'}, 60)}
		}
		b := makeBatch(recs, batchOpts{producerID: p.id, producerEpoch: p.epoch, baseSequence: p.seq, attributes: attrTransactional})
		if _, err := l.Append(b, 3); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	if l.Segments() < 3 {
		t.Fatalf("want several segments, got %d", l.Segments())
	}
	var got []BatchHeader
	if err := l.ScanBatches(0, func(h BatchHeader) error { got = append(got, h); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("scanned %d batches, want %d", len(got), len(want))
	}
	next := int64(0)
	for i, h := range got {
		w := want[i]
		if h.ProducerID != w.id || h.ProducerEpoch != w.epoch || h.BaseSequence != w.seq ||
			h.NumRecords != int32(w.n) || h.BaseOffset != next || h.LeaderEpoch != 3 || !h.IsTransactional() {
			t.Fatalf("batch %d: %+v, want %+v at %d", i, h, w, next)
		}
		next = h.LastOffset() + 1
	}

	// From the middle of a batch: that batch is included.
	mid := got[10].BaseOffset + int64(got[10].LastOffsetDelta)
	var from []BatchHeader
	if err := l.ScanBatches(mid, func(h BatchHeader) error { from = append(from, h); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(from) != 10 || from[0] != got[10] {
		t.Fatalf("ScanBatches(%d) returned %d batches starting at %d", mid, len(from), from[0].BaseOffset)
	}

	stop := errors.New("stop")
	calls := 0
	if err := l.ScanBatches(0, func(BatchHeader) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("ScanBatches error: %v after %d calls", err, calls)
	}
}

func TestTopicID(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, TopicID: "AAAAAAAAAAAAAAAAAAAAAQ"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, err := os.ReadFile(filepath.Join(dir, "partition.metadata"))
	if err != nil || string(b) != "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n" {
		t.Fatalf("partition.metadata = %q, %v", b, err)
	}
	if id, err := ReadPartitionMetadata(vfs.OS, dir); err != nil || id != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Fatalf("ReadPartitionMetadata = %q, %v", id, err)
	}
	if _, err := Open(Options{Dir: dir, TopicID: "BBBBBBBBBBBBBBBBBBBBBQ"}); !errors.Is(err, ErrTopicIDMismatch) {
		t.Fatalf("Open with another topic id: %v", err)
	}
	openTest(t, Options{Dir: dir, TopicID: "AAAAAAAAAAAAAAAAAAAAAQ"})
	openTest(t, Options{Dir: dir})
}

func TestRollByBytes(t *testing.T) {
	dir := t.TempDir()
	b0, _ := simpleBatch(0, 1, 1, 100)
	size := int64(len(b0))
	l := openTest(t, Options{Dir: dir, SegmentBytes: 3 * size})
	for i := range 10 {
		b, _ := simpleBatch(i, 1, 1, 100)
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if l.Segments() != 4 {
		t.Fatalf("%d segments, want 4", l.Segments())
	}
	for _, base := range []int64{0, 3, 6, 9} {
		fi, err := os.Stat(segmentPath(dir, base, extLog))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 3*size {
			t.Fatalf("segment %d has %d bytes, more than %d", base, fi.Size(), 3*size)
		}
	}
	// A batch bigger than a segment still goes in, alone.
	big, _ := simpleBatch(0, 1, 1, int(4*size))
	if _, err := l.Append(big, 0); err != nil {
		t.Fatal(err)
	}
	if l.Segments() != 5 {
		t.Fatalf("%d segments, want 5", l.Segments())
	}
}

func TestRollByTime(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	opts := Options{Dir: t.TempDir(), SegmentMs: 1000, now: func() time.Time { return now }}
	l := openTest(t, opts)
	appendOne := func() {
		b, _ := simpleBatch(0, 1, now.UnixMilli(), 10)
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	appendOne()
	now = now.Add(500 * time.Millisecond)
	appendOne()
	if l.Segments() != 1 {
		t.Fatalf("%d segments after 500ms, want 1", l.Segments())
	}
	now = now.Add(600 * time.Millisecond)
	appendOne()
	if l.Segments() != 2 {
		t.Fatalf("%d segments after 1100ms, want 2", l.Segments())
	}
	// The new segment's age counts from its own first append.
	now = now.Add(900 * time.Millisecond)
	appendOne()
	if l.Segments() != 2 {
		t.Fatalf("%d segments, want 2", l.Segments())
	}
	now = now.Add(100 * time.Millisecond)
	appendOne()
	if l.Segments() != 3 {
		t.Fatalf("%d segments, want 3", l.Segments())
	}
}

func TestSync(t *testing.T) {
	for _, fsync := range []bool{true, false} {
		t.Run(fmt.Sprint("fsync=", fsync), func(t *testing.T) {
			l := openTest(t, Options{Dir: t.TempDir(), Fsync: fsync, SegmentBytes: 500})
			if d, err := l.Sync(); err != nil || d != 0 {
				t.Fatalf("Sync on empty log = %d, %v", d, err)
			}
			writeBatches(t, l, 5, 100)
			if l.DurableEnd() != 0 {
				t.Fatalf("durable %d before Sync", l.DurableEnd())
			}
			d, err := l.Sync()
			if err != nil || d != 15 || l.DurableEnd() != 15 {
				t.Fatalf("Sync = %d, %v; DurableEnd %d", d, err, l.DurableEnd())
			}
		})
	}
}

// An Append racing with Sync's fsync is not claimed durable by that Sync.
func TestSyncClaimsOnlyEarlierAppends(t *testing.T) {
	var l *Log
	var during int64
	opts := Options{Dir: t.TempDir(), Fsync: true, beforeFsync: func() {
		if during == 0 {
			b, _ := simpleBatch(9, 4, 1, 10)
			base, err := l.Append(b, 0)
			if err != nil {
				t.Error(err)
			}
			during = base
		}
	}}
	l = openTest(t, opts)
	writeBatches(t, l, 2, 10)
	d, err := l.Sync()
	if err != nil || d != 6 || during != 6 {
		t.Fatalf("Sync = %d, %v (append during sync at %d), want 6", d, err, during)
	}
	if d, err := l.Sync(); err != nil || d != 10 {
		t.Fatalf("second Sync = %d, %v, want 10", d, err)
	}
}

func TestConcurrentAppendSyncRead(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir(), Fsync: true, SegmentBytes: 20 << 10, IndexIntervalBytes: 1024})
	const n = 400
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range n {
			b, _ := simpleBatch(i, 1+i%5, int64(i), 100)
			if _, err := l.Append(b, 1); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		prev := int64(0)
		for {
			select {
			case <-done:
				return
			default:
			}
			d, err := l.Sync()
			if err != nil {
				t.Error(err)
				return
			}
			if d < prev || d > l.LogEndOffset() {
				t.Errorf("durable end %d after %d, log end %d", d, prev, l.LogEndOffset())
				return
			}
			prev = d
		}
	}()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				hw := l.DurableEnd()
				off := int64(0)
				for off < hw {
					b, err := l.Read(off, 4096, hw)
					if err != nil {
						t.Error(err)
						return
					}
					for len(b) > 0 {
						h, err := ParseBatchHeader(b)
						if err != nil {
							t.Error(err)
							return
						}
						if _, err := ValidateBatch(b[:h.Length]); err != nil || h.BaseOffset >= hw {
							t.Errorf("read batch at %d: %v (hw %d)", h.BaseOffset, err, hw)
							return
						}
						off = h.LastOffset() + 1
						b = b[h.Length:]
					}
				}
				if _, _, _, err := l.MaxTimestamp(hw); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if d, err := l.Sync(); err != nil || d != l.LogEndOffset() {
		t.Fatalf("final Sync = %d, %v; end %d", d, err, l.LogEndOffset())
	}
}

func TestStrayAndEmptyFiles(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 500}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	as := writeBatches(t, l, 8, 100)
	segs := l.Segments()
	end := l.LogEndOffset()
	l.Close()

	stray := segmentPath(dir, 12345, extIndex)
	os.WriteFile(stray, []byte("12345678"), 0o644)
	// A crash right after a roll leaves an empty last segment.
	empty := segmentPath(dir, end, extLog)
	os.WriteFile(empty, nil, 0o644)
	other := filepath.Join(dir, "leader-epoch-checkpoint")
	os.WriteFile(other, []byte("0\n"), 0o644)

	l = openTest(t, opts)
	if l.Segments() != segs || l.LogEndOffset() != end {
		t.Fatalf("%d segments end %d, want %d %d", l.Segments(), l.LogEndOffset(), segs, end)
	}
	for _, p := range []string{stray, empty} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s not removed: %v", p, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("foreign file removed: %v", err)
	}
	if got := mustRead(t, l, 0, 1<<30, end); !bytes.Equal(got, concat(as)) {
		t.Fatal("bytes differ")
	}
	more := writeBatches(t, l, 2, 100)
	if more[0].base != end {
		t.Fatalf("append after cleanup at %d, want %d", more[0].base, end)
	}
}

func TestEmptyLogKeepsStartOffset(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(segmentPath(dir, 500, extLog), nil, 0o644)
	os.WriteFile(segmentPath(dir, 700, extLog), nil, 0o644)
	l := openTest(t, Options{Dir: dir})
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 500 || l.Segments() != 1 {
		t.Fatalf("start %d end %d segments %d", l.LogStartOffset(), l.LogEndOffset(), l.Segments())
	}
	if _, err := l.Read(499, 1, 500); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below start: %v", err)
	}
	b, _ := simpleBatch(0, 2, 1, 1)
	if base, err := l.Append(b, 0); err != nil || base != 500 {
		t.Fatalf("Append = %d, %v", base, err)
	}
}

func TestValidateBatch(t *testing.T) {
	good, _ := simpleBatch(1, 3, 100, 10)
	if _, err := ValidateBatch(good); err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"short":        {good[:40], ErrCorruptBatch},
		"truncated":    {good[:len(good)-1], ErrCorruptBatch},
		"extra":        {append(bytes.Clone(good), 0), ErrCorruptBatch},
		"magic":        {mut(func(b []byte) []byte { b[offMagic] = 1; return b }), ErrUnsupportedMagic},
		"crc":          {mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrCorruptBatch},
		"count":        {mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offRecordCount:], 2); return recrc(b) }), ErrCorruptBatch},
		"delta":        {mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0xffffffff); return recrc(b) }), ErrCorruptBatch},
		"small length": {mut(func(b []byte) []byte { binary.BigEndian.PutUint32(b[offBatchLength:], 10); return b }), ErrCorruptBatch},
	} {
		if _, err := ValidateBatch(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// Stamped fields are outside the CRC.
	b := bytes.Clone(good)
	Stamp(b, 1<<40, 17)
	h, err := ValidateBatch(b)
	if err != nil || h.BaseOffset != 1<<40 || h.LeaderEpoch != 17 || h.LastOffset() != 1<<40+2 {
		t.Fatalf("stamped batch: %+v, %v", h, err)
	}
}

func TestAppendRejectsMalformed(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir()})
	good, _ := simpleBatch(1, 3, 100, 10)
	if _, err := l.Append(good[:len(good)-3], 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("Append of a truncated batch: %v", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("end moved to %d", l.LogEndOffset())
	}
}
