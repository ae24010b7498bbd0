package segment

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMarkerBatch checks the control batch byte for byte against the layout
// Kafka writes (MemoryRecords.withEndTransactionMarker) and decodes it with
// an independent reader.
func TestMarkerBatch(t *testing.T) {
	const now = 0x0000018f00000000
	b := NewMarkerBatch(Marker{ProducerID: 0x1234, ProducerEpoch: 3, CoordinatorEpoch: 5, Commit: true}, now)
	want := "" +
		"0000000000000000" + // base offset (stamped by Append)
		"00000042" + // batch length: 78 - 12
		"00000000" + // leader epoch (stamped by Append)
		"02" + // magic
		"........" + // crc, checked below
		"0030" + // attributes: transactional | control
		"00000000" + // last offset delta
		"0000018f00000000" + "0000018f00000000" + // first and max timestamp
		"0000000000001234" + "0003" + // producer id and epoch
		"ffffffff" + "00000001" + // no sequence, one record
		"20" + // record length 16
		"00" + "00" + "00" + // attributes, timestamp and offset deltas
		"08" + "0000" + "0001" + // key: 4 bytes, version 0, COMMIT
		"0c" + "0000" + "00000005" + // value: 6 bytes, version 0, coordinator epoch 5
		"00" // no headers
	got := hex.EncodeToString(b)
	if len(got) != len(want) {
		t.Fatalf("marker batch is %d bytes, want %d:\n%s", len(b), len(want)/2, got)
	}
	for i := range want {
		if want[i] != '.' && want[i] != got[i] {
			t.Fatalf("marker batch differs at byte %d:\n got %s\nwant %s", i/2, got, want)
		}
	}
	if len(b) != MarkerBatchSize {
		t.Fatalf("MarkerBatchSize %d, batch %d bytes", MarkerBatchSize, len(b))
	}
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.IsControl() || !h.IsTransactional() || h.BaseSequence != -1 || h.NumRecords != 1 {
		t.Fatalf("header %+v", h)
	}

	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	var kr kmsg.Record
	if err := kr.ReadFrom(kb.Records); err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(kr.Key) != "00000001" || hex.EncodeToString(kr.Value) != "000000000005" {
		t.Fatalf("record key %x value %x", kr.Key, kr.Value)
	}

	for _, m := range []Marker{
		{ProducerID: 9, ProducerEpoch: 1, CoordinatorEpoch: 0, Commit: false},
		{ProducerID: 1 << 40, ProducerEpoch: 32000, CoordinatorEpoch: 77, Commit: true},
	} {
		got, err := ParseMarker(NewMarkerBatch(m, now))
		if err != nil || got != m {
			t.Fatalf("ParseMarker = %+v, %v; want %+v", got, err, m)
		}
	}
	if _, err := ParseMarker(makeBatch([]testRecord{{ts: 1, value: []byte("x")}}, batchOpts{producerID: -1, baseSequence: -1})); err == nil {
		t.Fatal("ParseMarker accepted a data batch")
	}
}

// txnBatch is a transactional data batch of pid.
func txnBatch(pid int64, seq int32) []byte {
	return makeBatch([]testRecord{{ts: 1000, value: make([]byte, 40)}}, batchOpts{producerID: pid, baseSequence: seq, attributes: attrTransactional})
}

// txnLog drives a log as the broker does: it tracks the open transactions
// and writes index entries with the markers.
type txnLog struct {
	t    *testing.T
	l    *Log
	tr   txnTracker
	want []AbortedTxn
}

func (x *txnLog) data(pid int64) {
	x.t.Helper()
	b := txnBatch(pid, 0)
	if _, err := x.l.Append(b, 0); err != nil {
		x.t.Fatal(err)
	}
	h, _ := ParseBatchHeader(b)
	x.tr.data(h)
}

func (x *txnLog) plain() {
	x.t.Helper()
	b, _ := simpleBatch(1, 1, 1000, 40)
	if _, err := x.l.Append(b, 0); err != nil {
		x.t.Fatal(err)
	}
}

func (x *txnLog) marker(pid int64, commit bool) {
	x.t.Helper()
	off := x.l.LogEndOffset()
	m := Marker{ProducerID: pid, Commit: commit}
	a, ok := x.tr.marker(off, m)
	var ap *AbortedTxn
	if ok {
		ap = &a
		x.want = append(x.want, a)
	}
	if _, err := x.l.AppendMarker(NewMarkerBatch(m, 1000), 0, ap); err != nil {
		x.t.Fatal(err)
	}
}

func checkAborted(t *testing.T, l *Log, fetch, upper int64, want []AbortedTxn) {
	t.Helper()
	got, err := l.AbortedTxns(fetch, upper)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AbortedTxns(%d, %d) = %+v, want %+v", fetch, upper, got, want)
	}
}

// overlapping is what a fetch of [fetch, upper) must be told, computed
// without the early stop.
func overlapping(all []AbortedTxn, fetch, upper int64) []AbortedTxn {
	var out []AbortedTxn
	for _, a := range all {
		if a.LastOffset >= fetch && a.FirstOffset < upper {
			out = append(out, a)
		}
	}
	return out
}

func checkAllRanges(t *testing.T, l *Log, all []AbortedTxn) {
	t.Helper()
	end := l.LogEndOffset()
	for fetch := l.LogStartOffset(); fetch < end; fetch++ {
		for upper := fetch + 1; upper <= end; upper++ {
			checkAborted(t, l, fetch, upper, overlapping(all, fetch, upper))
		}
	}
}

func TestTxnIndex(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 400, Fsync: true}
	l := openTest(t, opts)
	x := &txnLog{t: t, l: l, tr: txnTracker{ongoing: map[int64]int64{}}}
	// Producer 1's transaction spans segments and is aborted while
	// producer 2's is open; 3 aborts at once; 2 commits; 4 aborts last.
	x.data(1)
	x.plain()
	x.data(2)
	x.data(1)
	x.plain()
	x.marker(1, false)
	x.data(3)
	x.marker(3, false)
	x.data(2)
	x.marker(2, true)
	x.marker(2, false) // a second marker ends nothing
	x.plain()
	x.data(4)
	x.plain()
	x.marker(4, false)
	if l.Segments() < 3 {
		t.Fatalf("%d segments: the test needs transactions across rolls", l.Segments())
	}
	if len(x.want) != 3 || x.want[0] != (AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 5, LastStableOffset: 2}) {
		t.Fatalf("tracker made %+v", x.want)
	}
	checkAllRanges(t, l, x.want)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	all := x.want

	// A clean reopen loads the sealed indexes as they are.
	entries := func() map[string][]byte {
		out := map[string][]byte{}
		files, _ := filepath.Glob(filepath.Join(dir, "*"+extTxnIndex))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(f)] = b
		}
		return out
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	clean := entries()
	if len(clean) != l.Segments() {
		t.Fatalf("%d transaction indexes for %d segments", len(clean), l.Segments())
	}
	l = openTest(t, opts)
	checkAllRanges(t, l, all)
	l.Close()

	// Missing and damaged indexes of sealed segments, and the active one
	// torn, are rebuilt the same.
	files := slices.Sorted(func(yield func(string) bool) {
		for f := range clean {
			if !yield(f) {
				return
			}
		}
	})
	for _, f := range files {
		if len(clean[f]) > 0 {
			if err := os.WriteFile(filepath.Join(dir, f), clean[f][:len(clean[f])-5], 0o644); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if err := os.Remove(filepath.Join(dir, files[0])); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, files[len(files)-1]), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	checkAllRanges(t, l, all)
	l.Close()
	for f, b := range entries() {
		if string(b) != string(clean[f]) {
			t.Fatalf("%s rebuilt as %x, want %x", f, b, clean[f])
		}
	}

	// A torn tail that takes the last marker takes its entry.
	last := segmentPath(dir, l.segs[len(l.segs)-1].base, extLog)
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, fi.Size()-10); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	if l.LogEndOffset() != all[2].LastOffset {
		t.Fatalf("log end %d after the torn marker, want %d", l.LogEndOffset(), all[2].LastOffset)
	}
	all = all[:2]
	checkAllRanges(t, l, all)

	// Deleting records removes whole segments with their indexes; what is
	// left still answers.
	if _, err := l.DeleteRecordsBefore(7); err != nil {
		t.Fatal(err)
	}
	checkSegmentFiles(t, dir, segmentBases(t, dir))
	checkAborted(t, l, 7, l.LogEndOffset(), overlapping(all, 7, l.LogEndOffset()))
}

func TestTxnEntryParse(t *testing.T) {
	a := AbortedTxn{ProducerID: 3, FirstOffset: 10, LastOffset: 12, LastStableOffset: 13}
	b := appendTxnEntry(nil, a)
	if len(b) != txnEntrySize || binary.BigEndian.Uint16(b) != 0 {
		t.Fatalf("entry %x", b)
	}
	if got, err := parseTxnEntries(b, 10, 20); err != nil || len(got) != 1 || got[0] != a {
		t.Fatalf("parse = %+v, %v", got, err)
	}
	for _, bad := range []struct {
		b         []byte
		base, end int64
	}{
		{b[:33], 10, 20},
		{b, 13, 20}, // marker before the segment
		{b, 0, 12},  // marker past its end
		{append(appendTxnEntry(nil, a), b...), 10, 20}, // out of order
	} {
		if _, err := parseTxnEntries(bad.b, bad.base, bad.end); err == nil {
			t.Fatalf("parsed %x in [%d, %d)", bad.b, bad.base, bad.end)
		}
	}
}
