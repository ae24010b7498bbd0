package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readRec is a record as a consumer sees it.
type readRec struct {
	offset int64
	key    string
	value  []byte // nil: tombstone
}

// readLog returns every record and every batch header of l from its start.
func readLog(t *testing.T, l *Log) ([]readRec, []BatchHeader) {
	t.Helper()
	data, err := l.Read(l.LogStartOffset(), 1<<30, l.LogEndOffset())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	var recs []readRec
	var hs []BatchHeader
	for len(data) > 0 {
		h, err := ParseBatchHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		b := data[:h.Length]
		data = data[h.Length:]
		if _, err := ValidateStoredBatch(b); err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		hs = append(hs, h)
		section := b[HeaderSize:]
		if h.Compression() != 0 {
			r, err := gzipReader(section)
			if err != nil {
				t.Fatal(err)
			}
			section = r
		}
		rs, err := parseCleanRecords(section, h.NumRecords)
		if err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		if h.IsControl() {
			continue
		}
		for _, r := range rs {
			recs = append(recs, readRec{offset: h.BaseOffset + int64(r.offsetDelta), key: string(r.key), value: r.value})
		}
	}
	return recs, hs
}

func gzipReader(in []byte) ([]byte, error) {
	var out []byte
	err := gunzip(1, in, func(r io.Reader) error {
		var err error
		out, err = io.ReadAll(r)
		return err
	})
	return out, err
}

func gzipCompress(codec int8, b []byte) ([]byte, error) {
	if codec != 1 {
		return nil, fmt.Errorf("codec %d", codec)
	}
	return gzipBytes(b), nil
}

// keyedBatch is one batch of records key=value (value "" is a tombstone).
func keyedBatch(compress bool, kv ...string) []byte {
	var recs []testRecord
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		r := testRecord{ts: 1000, key: []byte(k)}
		if v != "" {
			r.value = []byte(v)
		}
		recs = append(recs, r)
	}
	o := batchOpts{producerID: -1, producerEpoch: -1, baseSequence: -1}
	if compress {
		o.attributes, o.compress = 1, gzipBytes
	}
	return makeBatch(recs, o)
}

func cleanLog(t *testing.T, l *Log, now time.Time, deleteRetentionMs int64) CleanStats {
	t.Helper()
	st, err := l.Clean(CleanOptions{
		FirstDirty: l.CleanerCheckpoint(), UpperBound: l.LogEndOffset(), Now: now,
		DeleteRetentionMs: deleteRetentionMs, Compress: gzipCompress,
	})
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	return st
}

// latestBelow is what a clean up to upper must leave: per key the last
// record below upper, and everything from upper on.
func latestBelow(all []readRec, upper int64) map[int64]readRec {
	last := map[string]int64{}
	for _, r := range all {
		if r.offset < upper {
			last[r.key] = r.offset
		}
	}
	want := map[int64]readRec{}
	for _, r := range all {
		if r.offset >= upper || last[r.key] == r.offset {
			want[r.offset] = r
		}
	}
	return want
}

func checkRecords(t *testing.T, got []readRec, want map[int64]readRec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d: %v", len(got), len(want), got)
	}
	prev := int64(-1)
	for _, r := range got {
		w, ok := want[r.offset]
		if !ok || w.key != r.key || !bytes.Equal(w.value, r.value) || (w.value == nil) != (r.value == nil) {
			t.Fatalf("record at %d: %q=%q, want %+v", r.offset, r.key, r.value, w)
		}
		if r.offset <= prev {
			t.Fatalf("offsets out of order: %d after %d", r.offset, prev)
		}
		prev = r.offset
	}
}

// fillKeyed appends rounds of versions of keys k0..k(keys-1), batches of
// two records, and returns every record appended.
func fillKeyed(t *testing.T, l *Log, rounds, keys int, compress bool) []readRec {
	t.Helper()
	var all []readRec
	for r := range rounds {
		for k := 0; k < keys; k += 2 {
			a := fmt.Sprintf("k%d=v%d-%d", k, r, k)
			b := fmt.Sprintf("k%d=v%d-%d", k+1, r, k+1)
			base, err := l.Append(keyedBatch(compress, a, b), 0)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range []string{a, b} {
				key, v, _ := strings.Cut(s, "=")
				all = append(all, readRec{offset: base + int64(i), key: key, value: []byte(v)})
			}
		}
	}
	return all
}

// TestCleanLatestPerKey: a clean keeps, below the active segment, the last
// record of each key, at its offset; plain and compressed batches alike;
// the result survives a reopen, and the next clean after more appends
// cleans again from the checkpoint.
func TestCleanLatestPerKey(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", compress), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 600, IndexIntervalBytes: 100, Decompress: gunzip}
			l := openTest(t, opts)
			all := fillKeyed(t, l, 10, 6, compress)
			sizeBefore := l.Size()
			upper := l.ActiveBase()
			st := cleanLog(t, l, time.Now(), 86400000)
			if st.Groups == 0 || st.End != upper {
				t.Fatalf("stats %+v, want groups and end %d", st, upper)
			}
			got, _ := readLog(t, l)
			checkRecords(t, got, latestBelow(all, upper))
			if l.Size() >= sizeBefore {
				t.Fatalf("%d bytes after cleaning, %d before", l.Size(), sizeBefore)
			}
			if cp := l.CleanerCheckpoint(); cp != upper {
				t.Fatalf("checkpoint %d, want %d", cp, upper)
			}
			for _, suffix := range []string{cleanedSuffix, swapSuffix} {
				if m, _ := filepath.Glob(filepath.Join(dir, "*"+suffix)); len(m) > 0 {
					t.Fatalf("left behind: %v", m)
				}
			}

			// Reopen: the same records, appends continue at the end.
			end := l.LogEndOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, opts)
			if l.LogEndOffset() != end {
				t.Fatalf("log end %d after reopen, want %d", l.LogEndOffset(), end)
			}
			got, _ = readLog(t, l)
			checkRecords(t, got, latestBelow(all, upper))

			more := fillKeyed(t, l, 3, 6, compress)
			all = append(all, more...)
			upper2 := l.ActiveBase()
			cleanLog(t, l, time.Now(), 86400000)
			got, _ = readLog(t, l)
			checkRecords(t, got, latestBelow(all, upper2))
		})
	}
}

// TestCleanTombstones: a tombstone that is the latest for its key is kept
// by the first clean (its batch gets a delete horizon of now +
// delete.retention.ms) and dropped by a clean after the horizon.
func TestCleanTombstones(t *testing.T) {
	opts := Options{Dir: t.TempDir(), SegmentBytes: 300}
	l := openTest(t, opts)
	for _, kv := range [][]string{{"a=1", "b=1"}, {"a=2", "c=1"}, {"b="}, {"c=2", "d=1"}, {"e=1"}, {"e=2"}} {
		if _, err := l.Append(keyedBatch(false, kv...), 0); err != nil {
			t.Fatal(err)
		}
	}
	now := time.UnixMilli(1_000_000)
	cleanLog(t, l, now, 1000)
	got, hs := readLog(t, l)
	tomb := false
	for _, r := range got {
		if r.key == "b" {
			if r.value != nil {
				t.Fatalf("b: %q survived its tombstone", r.value)
			}
			tomb = true
		}
	}
	if !tomb {
		t.Fatalf("tombstone dropped by the first clean: %v", got)
	}
	horizon := false
	for _, h := range hs {
		if hz, ok := deleteHorizon(h); ok {
			if hz != now.UnixMilli()+1000 {
				t.Fatalf("delete horizon %d, want %d", hz, now.UnixMilli()+1000)
			}
			horizon = true
		}
	}
	if !horizon {
		t.Fatal("no batch carries a delete horizon")
	}

	// More data makes the log dirty again; a clean before the horizon keeps
	// the tombstone, one after it drops it.
	for base := l.ActiveBase(); l.ActiveBase() == base; {
		if _, err := l.Append(keyedBatch(false, "f=1"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if st := cleanLog(t, l, now.Add(500*time.Millisecond), 1000); st.Groups == 0 {
		t.Fatalf("nothing cleaned: %+v", st)
	}
	if got, _ := readLog(t, l); !hasKey(got, "b") {
		t.Fatal("tombstone dropped before its horizon")
	}
	for base := l.ActiveBase(); l.ActiveBase() == base; {
		if _, err := l.Append(keyedBatch(false, "h=1"), 0); err != nil {
			t.Fatal(err)
		}
	}
	if st := cleanLog(t, l, now.Add(2*time.Second), 1000); st.Groups == 0 {
		t.Fatalf("nothing cleaned: %+v", st)
	}
	if got, _ := readLog(t, l); hasKey(got, "b") {
		t.Fatalf("tombstone kept after its horizon: %v", got)
	}
}

func hasKey(recs []readRec, key string) bool {
	for _, r := range recs {
		if r.key == key {
			return true
		}
	}
	return false
}

// TestCleanAbortedAndMarkers: records of an aborted transaction are
// removed; a committed transaction's records are compacted like others;
// the markers stay while anything of their transaction does, and the
// last batch of an active producer stays (empty) with its offsets and
// sequence.
func TestCleanAbortedAndMarkers(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir(), SegmentBytes: 400})
	x := &txnLog{t: t, l: l, tr: txnTracker{ongoing: map[int64]int64{}}}
	txn := func(pid int64, seq int32, kv string) {
		t.Helper()
		k, v, _ := strings.Cut(kv, "=")
		b := makeBatch([]testRecord{{ts: 1000, key: []byte(k), value: []byte(v)}},
			batchOpts{producerID: pid, baseSequence: seq, attributes: attrTransactional})
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
		h, _ := ParseBatchHeader(b)
		x.tr.data(h)
	}
	txn(7, 0, "a=aborted")
	txn(8, 0, "a=committed")
	x.marker(7, false)
	x.marker(8, true)
	txn(7, 1, "b=aborted")
	x.marker(7, false)
	for range 6 {
		if _, err := l.Append(keyedBatch(false, "z=filler"), 0); err != nil {
			t.Fatal(err)
		}
	}
	upper := l.ActiveBase()
	st, err := l.Clean(CleanOptions{
		FirstDirty: 0, UpperBound: l.LogEndOffset(), Now: time.Now(), DeleteRetentionMs: 1000,
		ActiveProducers: map[int64]LastRecord{7: {DataOffset: 4, Epoch: 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, hs := readLog(t, l)
	t.Logf("stats %+v, records %v", st, got)
	for _, r := range got {
		if string(r.value) == "aborted" {
			t.Fatalf("aborted record survived at %d", r.offset)
		}
	}
	if !hasKey(got, "a") {
		t.Fatal("committed a=committed removed")
	}
	var kept7 *BatchHeader
	for i, h := range hs {
		if h.ProducerID == 7 && !h.IsControl() && h.LastOffset() == 4 {
			kept7 = &hs[i]
		}
	}
	if kept7 == nil || kept7.NumRecords != 0 || kept7.BaseSequence != 1 || kept7.BaseOffset != 4 {
		t.Fatalf("producer 7's last batch: %+v, want it empty at offset 4 with sequence 1", kept7)
	}
	if upper > 9 {
		// The filler batches below the active segment: only the last z.
		n := 0
		for _, r := range got {
			if r.key == "z" && r.offset < upper {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d z records below %d, want 1", n, upper)
		}
	}
}

// TestCleanCrash: a clean of one group of several segments stopped after
// writing the .cleaned files, after renaming them to .swap, or after
// deleting the group's other segments,
// leaves a log that opens consistent (the swap completed or undone) with
// every key's latest value, and cleans to the same result.
func TestCleanCrash(t *testing.T) {
	for _, point := range []string{"cleaned", "swap", "deleted"} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 600, IndexIntervalBytes: 100}
			stop := opts
			stop.cleanerStop = func(p string) bool { return p == point }
			l, err := Open(stop)
			if err != nil {
				t.Fatal(err)
			}
			all := fillKeyed(t, l, 10, 6, false)
			upper := l.ActiveBase()
			end := l.LogEndOffset()
			// One group of all the sealed segments: the crash points
			// between deleting its other segments and the swap matter.
			_, err = l.Clean(CleanOptions{FirstDirty: 0, UpperBound: end, Now: time.Now(), DeleteRetentionMs: 1000, MaxGroupBytes: 1 << 20})
			if !errors.Is(err, errCleanerCrash) {
				t.Fatalf("Clean: %v, want the crash", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, opts)
			if l.LogEndOffset() != end {
				t.Fatalf("log end %d, want %d", l.LogEndOffset(), end)
			}
			got, _ := readLog(t, l)
			// Every key's latest value is there, in offset order, and
			// nothing that was not written.
			last := map[string]readRec{}
			for _, r := range all {
				last[r.key] = r
			}
			byOffset := map[int64]readRec{}
			for _, r := range all {
				byOffset[r.offset] = r
			}
			seen := map[string]readRec{}
			prev := int64(-1)
			for _, r := range got {
				w, ok := byOffset[r.offset]
				if !ok || w.key != r.key || !bytes.Equal(w.value, r.value) || r.offset <= prev {
					t.Fatalf("record %+v not as written (%+v) or out of order", r, w)
				}
				prev = r.offset
				seen[r.key] = r
			}
			for k, w := range last {
				if seen[k].offset != w.offset {
					t.Fatalf("key %s: latest %+v, want %+v", k, seen[k], w)
				}
			}
			for _, suffix := range []string{cleanedSuffix, swapSuffix} {
				if m, _ := filepath.Glob(filepath.Join(dir, "*"+suffix)); len(m) > 0 {
					t.Fatalf("left behind after open: %v", m)
				}
			}
			cleanLog(t, l, time.Now(), 1000)
			got, _ = readLog(t, l)
			checkRecords(t, got, latestBelow(all, upper))
		})
	}
}

// TestCleanReaderKeepsOldSegment: a reader holding the segments from
// before a clean reads them whole after the swap.
func TestCleanReaderKeepsOldSegment(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir(), SegmentBytes: 600})
	all := fillKeyed(t, l, 10, 6, false)
	views, _, _, err := l.snapshot(0)
	if err != nil {
		t.Fatal(err)
	}
	cleanLog(t, l, time.Now(), 1000)
	n := 0
	for i := range views {
		v := &views[i]
		w := newHeaderWalker(v.seg.log, 0, v.size)
		for {
			h, pos, err := w.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("old segment %d after the swap: %v", v.seg.base, err)
			}
			b, err := v.readBatch(h, pos)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ValidateStoredBatch(b); err != nil {
				t.Fatal(err)
			}
			n += int(h.NumRecords)
		}
	}
	l.release(views)
	if n != len(all) {
		t.Fatalf("read %d records through the old segments, want %d", n, len(all))
	}
	if _, err := os.Stat(l.opts.Dir); err != nil {
		t.Fatal(err)
	}
}

// TestCleanKeepsLogEnd: cleaned up to an empty active segment, with
// several segments merged into one, the log opens again with the same
// start and end (recovery drops the empty active segment and takes the
// last cleaned one's end), and appends go on at the end.
func TestCleanKeepsLogEnd(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 600}
	l := openTest(t, opts)
	all := fillKeyed(t, l, 10, 6, false)
	l.mu.Lock()
	err := l.roll()
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	start, end := l.LogStartOffset(), l.LogEndOffset()
	segs := l.Segments()
	st, err := l.Clean(CleanOptions{FirstDirty: 0, UpperBound: end, Now: time.Now(), MaxGroupBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if st.Groups != 1 || st.Segments != segs-1 || l.Segments() != 2 {
		t.Fatalf("stats %+v, %d segments (from %d), want one group of all sealed ones", st, l.Segments(), segs)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	if l.LogStartOffset() != start || l.LogEndOffset() != end {
		t.Fatalf("reopened as [%d, %d), want [%d, %d)", l.LogStartOffset(), l.LogEndOffset(), start, end)
	}
	got, _ := readLog(t, l)
	checkRecords(t, got, latestBelow(all, end))
	if base, err := l.Append(keyedBatch(false, "k0=next"), 0); err != nil || base != end {
		t.Fatalf("append after reopen: offset %d, %v; want %d", base, err, end)
	}
}

// TestCleanAborted: a clean told to stop part way leaves the log as it
// was (the group being written deleted) and a later clean does the work.
func TestCleanAborted(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, Options{Dir: dir, SegmentBytes: 600})
	all := fillKeyed(t, l, 10, 6, false)
	upper := l.ActiveBase()
	n := 0
	_, err := l.Clean(CleanOptions{FirstDirty: 0, UpperBound: upper, Now: time.Now(), MaxGroupBytes: 1 << 20,
		Aborted: func() bool { n++; return n > 40 }})
	if !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("Clean: %v, want ErrCleanAborted", err)
	}
	for _, suffix := range []string{cleanedSuffix, swapSuffix} {
		if m, _ := filepath.Glob(filepath.Join(dir, "*"+suffix)); len(m) > 0 {
			t.Fatalf("left behind: %v", m)
		}
	}
	got, _ := readLog(t, l)
	checkRecords(t, got, latestBelow(all, 0))
	cleanLog(t, l, time.Now(), 1000)
	got, _ = readLog(t, l)
	checkRecords(t, got, latestBelow(all, upper))
}
