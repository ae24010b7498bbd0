package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kafgres/kafgres/broker/storage/vfs"
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
	if _, err := os.Stat(filepath.Join(dir, cleanStopFile)); err != nil {
		t.Fatalf("clean stop record gone after an Open that changed nothing: %v", err)
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
	if _, err := os.Stat(filepath.Join(dir, cleanStopFile)); !os.IsNotExist(err) {
		t.Fatalf("clean stop record still there after an append: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	if got := mustRead(t, l, 0, 1<<30, l.LogEndOffset()); !bytes.Equal(got, concat(append(as, more...))) {
		t.Fatal("bytes differ after appending to a cleanly reopened log")
	}
}

// The record is trusted only as far as the files match it and until the
// log first changes: a crash after that finds none and the active segment
// is scanned.
func TestCleanStopTrustedOnlyUntilWritten(t *testing.T) {
	opts, logPath, size := cleanlyStopped(t)

	// A byte of the last batch changed while stopped: not read, so kept
	// (Kafka too trusts a cleanly stopped segment). This is how the test
	// sees that no scan ran.
	writeAt(t, logPath, []byte{0xff}, size-5)
	l := openTest(t, opts)
	if got := activeState(l).size; got != size {
		t.Fatalf("after a clean stop the active segment is %d bytes, want all %d (no scan)", got, size)
	}
	// A crash (no Close) before any write: the record still holds.
	l = openTest(t, opts)
	if got := activeState(l).size; got != size {
		t.Fatalf("after a crash that changed nothing the active segment is %d bytes, want all %d (no scan)", got, size)
	}
	// A crash after a write: the record is gone, so the next Open scans
	// and cuts the corrupt batch (and the one after it).
	writeBatches(t, l, 1, 100)
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

// A transaction index that recovery rebuilt reaches the disk with the
// clean stop: the record vouches for the index files, so a power cut after
// the stop must find the rebuilt entries, not an index that lost them.
func TestCleanStopSyncsRebuiltTxnIndex(t *testing.T) {
	fsys, dir := strictPartition(t)
	opts := Options{Dir: dir, FS: fsys, Fsync: true}
	x := &txnLog{t: t, l: openTest(t, opts), tr: txnTracker{ongoing: map[int64]int64{}}}
	x.data(7)
	x.plain()
	x.marker(7, false)
	if err := x.l.Close(); err != nil {
		t.Fatal(err)
	}
	// The index gone while stopped: the next Open finds the record does
	// not match and rebuilds it from the markers.
	txnPath := segmentPath(dir, 0, extTxnIndex)
	if err := fsys.Remove(txnPath); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, opts)
	checkAborted(t, l, 0, l.LogEndOffset(), x.want)
	if err := l.CloseWithProducerSnapshot(nil); err != nil {
		t.Fatal(err)
	}

	fsys.Restart(nil) // everything not made durable is lost
	l = openTest(t, opts)
	checkAborted(t, l, 0, l.LogEndOffset(), x.want)
	if off, _, ok := l.LoadProducerSnapshot(); !ok || off != l.LogEndOffset() {
		t.Fatalf("producer snapshot after the clean stop: at %d (found %v), want at the log end %d", off, ok, l.LogEndOffset())
	}
}

// A log opened from a clean stop's record and closed again without a
// change writes nothing at either end (a broker's restart with 10,000
// partitions, most of them idle): the record stays, and so does the
// producer snapshot when the state to save is the same.
func TestCleanStopUntouchedWritesNothing(t *testing.T) {
	fsys, dir := strictPartition(t)
	opts := Options{Dir: dir, FS: fsys, Fsync: true}
	state := []ProducerSnapshotEntry{{ProducerID: 3, Epoch: 1, LastSequence: 9, LastOffset: 9, Timestamp: 1, CurrentTxnFirstOffset: -1}}
	l := openTest(t, opts)
	writeBatches(t, l, 10, 100)
	if err := l.CloseWithProducerSnapshot(state); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		before := fsys.Changes()
		l = openTest(t, opts)
		if err := l.CloseWithProducerSnapshot(state); err != nil {
			t.Fatal(err)
		}
		if n := fsys.Changes() - before; n != 0 {
			t.Fatalf("round %d: an untouched log made %d changes to the files at its open and close", round, n)
		}
	}
	// A new state is saved, and the record still vouches for the segment.
	state[0].Timestamp = 2
	l = openTest(t, opts)
	if err := l.CloseWithProducerSnapshot(state); err != nil {
		t.Fatal(err)
	}
	fsys.Restart(nil)
	l = openTest(t, opts)
	if _, got, ok := l.LoadProducerSnapshot(); !ok || !slices.Equal(got, state) {
		t.Fatalf("producer snapshot after the stop: %+v (found %v), want %+v", got, ok, state)
	}
	if _, err := fsys.Stat(filepath.Join(dir, cleanStopFile)); err != nil {
		t.Fatalf("clean stop record: %v", err)
	}
}

// strictPartition is a partition directory, durably created, on a file
// system that forgets at Restart what was not made durable.
func strictPartition(t *testing.T) (*vfs.StrictMem, string) {
	t.Helper()
	fsys := vfs.NewStrictMem()
	const dir = "/data/t-0"
	if err := fsys.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := CreateDir(fsys, dir, []byte("marker\n"), true); err != nil {
		t.Fatal(err)
	}
	return fsys, dir
}
