package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// activeState is what recovery learns about the active segment, for
// comparing an Open after a clean stop with one that scans.
func activeState(l *Log) segState {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.active().st
	st.idxMem, st.tidxMem = bytes.Clone(st.idxMem), bytes.Clone(st.tidxMem)
	return st
}

func sameActiveState(t *testing.T, got, want segState) {
	t.Helper()
	if got.size != want.size || got.alloc != want.alloc || got.end != want.end ||
		got.idxN != want.idxN || got.tidxN != want.tidxN || got.txnN != want.txnN ||
		got.lastIndexedTs != want.lastIndexedTs || got.maxTs != want.maxTs || got.maxTsOffset != want.maxTsOffset ||
		got.sinceIndex != want.sinceIndex || got.sealed != want.sealed {
		t.Fatalf("active segment after a clean stop\n%+v\nafter a scan\n%+v", got, want)
	}
	if !bytes.Equal(got.idxMem, want.idxMem) || !bytes.Equal(got.tidxMem, want.tidxMem) {
		t.Fatal("active index entries after a clean stop differ from a scan's")
	}
}

// After Close, Open takes the active segment from the clean stop's record
// instead of its batches: the same state a scan finds, the record gone, and
// the log appends and reopens as before.
func TestCleanStopOpensWithoutScan(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 1 << 20, IndexIntervalBytes: 300, Fsync: true}
	l := openTest(t, opts)
	as := writeBatches(t, l, 40, 100)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanStopFile)); err != nil {
		t.Fatalf("no clean stop record after Close: %v", err)
	}

	// The same files without the record: recovered by a scan.
	scanned := t.TempDir()
	copyDir(t, dir, scanned)
	if err := os.Remove(filepath.Join(scanned, cleanStopFile)); err != nil {
		t.Fatal(err)
	}
	so := opts
	so.Dir = scanned
	want := activeState(openTest(t, so))

	l = openTest(t, opts)
	if _, err := os.Stat(filepath.Join(dir, cleanStopFile)); !os.IsNotExist(err) {
		t.Fatalf("clean stop record still there after Open: %v", err)
	}
	got := activeState(l)
	sameActiveState(t, got, want)
	if got.idxN < 5 {
		t.Fatalf("%d index entries: the test wants several", got.idxN)
	}
	end := l.LogEndOffset()
	if got := mustRead(t, l, 0, 1<<30, end); !bytes.Equal(got, concat(as)) {
		t.Fatal("bytes differ after a clean reopen")
	}
	more := writeBatches(t, l, 5, 100)
	if more[0].base != end {
		t.Fatalf("first append after a clean reopen got offset %d, want %d", more[0].base, end)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	if got := mustRead(t, l, 0, 1<<30, l.LogEndOffset()); !bytes.Equal(got, concat(append(as, more...))) {
		t.Fatal("bytes differ after appending to a cleanly reopened log")
	}
}

// The record is trusted only as far as the files match it; once Open has
// taken it, a crash finds none and the active segment is scanned.
func TestCleanStopTrustedOnlyUntilOpen(t *testing.T) {
	opts, logPath, size := cleanlyStopped(t)

	// A byte of the last batch changed while stopped: not read, so kept
	// (Kafka too trusts a cleanly stopped segment). This is how the test
	// sees that no scan ran.
	writeAt(t, logPath, []byte{0xff}, size-5)
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := activeState(l).size; got != size {
		t.Fatalf("after a clean stop the active segment is %d bytes, want all %d (no scan)", got, size)
	}
	// A crash now (no Close): the record is gone, so the next Open scans
	// and cuts the corrupt batch.
	crashed := l
	t.Cleanup(func() { _ = crashed.Close() })
	l2 := openTest(t, opts)
	if got := activeState(l2).size; got >= size {
		t.Fatalf("after a crash the active segment is %d bytes: the corrupt last batch was not cut", got)
	}

	// A record that does not match the files (the segment grew) is not
	// trusted either.
	o2, p2, size2 := cleanlyStopped(t)
	writeAt(t, p2, []byte("a torn tail"), size2)
	l4 := openTest(t, o2)
	if got := activeState(l4).size; got != size2 {
		t.Fatalf("a record that does not match: active segment %d bytes, want the scanned %d", got, size2)
	}
}

// cleanlyStopped is a log of ten batches in a new directory, closed: its
// options, its active segment's path and size.
func cleanlyStopped(t *testing.T) (opts Options, logPath string, size int64) {
	t.Helper()
	dir := t.TempDir()
	opts = Options{Dir: dir, SegmentBytes: 1 << 20, Fsync: true}
	l := openTest(t, opts)
	writeBatches(t, l, 10, 100)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	logPath = segmentPath(dir, 0, extLog)
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return opts, logPath, fi.Size()
}

func TestCleanStopRecordEncoding(t *testing.T) {
	c := cleanStop{base: 5, size: 6, end: 7, idxN: 8, tidxN: 9, lastIndexedTs: -1, maxTs: 11, maxTsOffset: 12, sinceIndex: 13, created: 14}
	b := c.encode()
	got, err := decodeCleanStop(b)
	if err != nil || got != c {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", c, got, err)
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 1
		if _, err := decodeCleanStop(bad); err == nil {
			t.Fatalf("a flipped byte %d decodes", i)
		}
	}
	if _, err := decodeCleanStop(b[:len(b)-1]); err == nil {
		t.Fatal("a short record decodes")
	}
}
