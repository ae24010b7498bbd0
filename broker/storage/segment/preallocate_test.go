package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// testNow is a clock close to the test batches' timestamps, so that a
// recovered segment is not rolled for its age.
func testNow() time.Time { return time.UnixMilli(10_000) }

// checkZerosAhead checks that the active segment file at path holds the
// log's batches and then only zeros, and returns its size.
func checkZerosAhead(t *testing.T, l *Log, path string) int64 {
	t.Helper()
	if got, want := batchBytes(t, path), l.active().st.size; got != want {
		t.Fatalf("%s: %d bytes of batches, log says %d", path, got, want)
	}
	return fileSize(t, path)
}

// With Fsync on, the active segment's file is written ahead with zeros, so
// that an append overwrites them and its sync does not change the file's
// size; everything that looks at the log sees only the batches.
func TestActiveSegmentWrittenAhead(t *testing.T) {
	dir := t.TempDir()
	var syncs int
	var sizesAtSync []int64
	path := segmentPath(dir, 0, extLog)
	opts := Options{Dir: dir, Fsync: true, syncActiveLog: func(f vfs.File) error {
		syncs++
		sizesAtSync = append(sizesAtSync, fileSize(t, path))
		return f.Datasync()
	}}
	l := openTest(t, opts)
	var as []appended
	for range 20 {
		as = append(as, writeBatches(t, l, 1, 100)...)
		mustSync(t, l)
		if size := checkZerosAhead(t, l, path); size != preallocateBytes {
			t.Fatalf("active segment file is %d bytes, want %d written ahead", size, preallocateBytes)
		}
	}
	if syncs != 20 {
		t.Fatalf("%d syncs of the active segment, want 20", syncs)
	}
	for i, s := range sizesAtSync {
		if s != preallocateBytes {
			t.Fatalf("sync %d saw a file of %d bytes: appends changed its size", i, s)
		}
	}
	want := concat(as)
	if l.Size() != int64(len(want)) {
		t.Fatalf("Size %d, want the batches' %d", l.Size(), len(want))
	}
	// Reads end at the last batch: no zeros, whatever maxBytes allows.
	if got := mustRead(t, l, 0, 1<<30, 1<<40); !bytes.Equal(got, want) {
		t.Fatalf("Read returned %d bytes, want the %d of the batches", len(got), len(want))
	}
	if got := mustRead(t, l, l.LogEndOffset(), 1<<30, 1<<40); got != nil {
		t.Fatalf("Read at the end returned %d bytes", len(got))
	}
	var scanned int64
	if err := l.ScanBatches(0, func(h BatchHeader) error { scanned += int64(h.Length); return nil }); err != nil || scanned != int64(len(want)) {
		t.Fatalf("ScanBatches saw %d bytes, %v", scanned, err)
	}

	// A clean close leaves exactly Kafka's format.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Fatalf("closed segment file is %d bytes, want exactly the %d of the batches", len(got), len(want))
	}
}

// Without Fsync there is nothing to gain: the file is the batches.
func TestActiveSegmentNotWrittenAheadWithoutFsync(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, Options{Dir: dir})
	as := writeBatches(t, l, 5, 100)
	mustSync(t, l)
	if got := readFile(t, segmentPath(dir, 0, extLog)); !bytes.Equal(got, concat(as)) {
		t.Fatalf("segment file is %d bytes, want the %d of the batches", len(got), len(concat(as)))
	}
}

// Rolling cuts the zeros before the sealed segment is fsynced; the space
// written ahead never goes past segment.bytes (unless one batch does).
func TestRollCutsZerosAhead(t *testing.T) {
	dir := t.TempDir()
	const segBytes = 1500
	l := openTest(t, Options{Dir: dir, Fsync: true, SegmentBytes: segBytes})
	var as []appended
	for range 12 {
		as = append(as, writeBatches(t, l, 1, 100)...)
		active := segmentPath(dir, l.active().base, extLog)
		if size := checkZerosAhead(t, l, active); size != segBytes {
			t.Fatalf("active segment file is %d bytes, want %d (segment.bytes)", size, segBytes)
		}
	}
	mustSync(t, l)
	if l.Segments() < 3 {
		t.Fatalf("want several segments, got %d", l.Segments())
	}
	// diskLogBytes fails on a sealed segment with anything after its batches.
	if got := diskLogBytes(t, dir); got != l.Size() || got != int64(len(concat(as))) {
		t.Fatalf("disk holds %d bytes of batches, Size %d, appended %d", got, l.Size(), len(concat(as)))
	}
	for _, s := range l.segs[:len(l.segs)-1] {
		if fs := fileSize(t, segmentPath(dir, s.base, extLog)); fs != s.st.size {
			t.Fatalf("sealed segment %d: file of %d bytes, %d of batches", s.base, fs, s.st.size)
		}
	}
	if got := mustRead(t, l, 0, 1<<30, l.LogEndOffset()); !bytes.Equal(got, concat(as)) {
		t.Fatal("bytes differ across rolled segments")
	}

	// A batch larger than segment.bytes gets exactly its own bytes.
	big, recs := simpleBatch(50, 3, 9000, 1000)
	as = append(as, appendAll(t, l, [][]byte{big}, [][]testRecord{recs})...)
	active := segmentPath(dir, l.active().base, extLog)
	if size := checkZerosAhead(t, l, active); size != int64(len(big)) {
		t.Fatalf("active segment with one large batch is %d bytes, want %d", size, len(big))
	}
	// Retention by size counts batches, not zeros, and rolls (cutting the
	// zeros) to delete the active segment.
	mustSync(t, l)
	if n, err := l.ApplyRetention(Retention{Ms: -1, Bytes: 0}, l.opts.now()); err != nil || n == 0 {
		t.Fatalf("ApplyRetention: %d, %v", n, err)
	}
	if l.Size() != 0 || diskLogBytes(t, dir) != 0 {
		t.Fatalf("after retention to 0 bytes: Size %d, disk %d", l.Size(), diskLogBytes(t, dir))
	}
}

// A process killed with the zeros ahead in place (what is on disk is what
// the page cache held) comes back with the log ending at the last batch,
// keeps the zeros and appends over them.
func TestRecoverZerosAheadAfterCrash(t *testing.T) {
	src := t.TempDir()
	l := openTest(t, Options{Dir: src, Fsync: true, now: testNow})
	as := writeBatches(t, l, 10, 100)
	mustSync(t, l)
	srcPath := segmentPath(src, 0, extLog)
	if checkZerosAhead(t, l, srcPath) != preallocateBytes {
		t.Fatal("no zeros ahead")
	}
	end := l.LogEndOffset()
	crash := func(t *testing.T) string {
		dir := t.TempDir()
		copyDir(t, src, dir) // without Close: a kill -9
		return dir
	}

	t.Run("zeros kept", func(t *testing.T) {
		dir := crash(t)
		path := segmentPath(dir, 0, extLog)
		l := openTest(t, Options{Dir: dir, Fsync: true, now: testNow})
		if l.LogEndOffset() != end || l.DurableEnd() != end || l.Size() != int64(len(concat(as))) {
			t.Fatalf("recovered end %d durable %d size %d, want %d, %d bytes",
				l.LogEndOffset(), l.DurableEnd(), l.Size(), end, len(concat(as)))
		}
		if got := mustRead(t, l, 0, 1<<30, 1<<40); !bytes.Equal(got, concat(as)) {
			t.Fatalf("recovered log reads %d bytes, want %d", len(got), len(concat(as)))
		}
		if size := checkZerosAhead(t, l, path); size != preallocateBytes {
			t.Fatalf("recovery changed the file to %d bytes", size)
		}
		more := writeBatches(t, l, 3, 50)
		mustSync(t, l)
		if more[0].base != end || fileSize(t, path) != preallocateBytes {
			t.Fatalf("append after recovery at %d (want %d), file %d bytes", more[0].base, end, fileSize(t, path))
		}
		all := concat(append(append([]appended(nil), as...), more...))
		if got := mustRead(t, l, 0, 1<<30, 1<<40); !bytes.Equal(got, all) {
			t.Fatal("bytes differ after appending over the recovered zeros")
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, path); !bytes.Equal(got, all) {
			t.Fatalf("closed file is %d bytes, want %d", len(got), len(all))
		}
		// And the cleanly closed file opens as any Kafka segment.
		l = openTest(t, Options{Dir: dir, Fsync: true, now: testNow})
		if got := mustRead(t, l, 0, 1<<30, 1<<40); !bytes.Equal(got, all) {
			t.Fatal("bytes differ after reopening")
		}
	})

	// reopenWithTail writes part of a next batch (what keep leaves of it)
	// after the batches of a crashed log, as a write that reached the disk
	// before the crash would have, and opens the log again.
	reopenWithTail := func(t *testing.T, seed int, keep func([]byte) []byte) (string, *Log) {
		t.Helper()
		dir := crash(t)
		path := segmentPath(dir, 0, extLog)
		b, _ := simpleBatch(seed, 3, 7000, 100)
		Stamp(b, end, 0)
		writeAt(t, path, keep(b), int64(len(concat(as))))
		return path, openTest(t, Options{Dir: dir, Fsync: true, now: testNow})
	}

	// A batch written over the zeros but torn by the crash is cut with the
	// zeros after it; the log goes on from the last whole batch.
	t.Run("torn batch in the zeros", func(t *testing.T) {
		path, l := reopenWithTail(t, 77, func(b []byte) []byte { return b[:len(b)/2] })
		if l.LogEndOffset() != end {
			t.Fatalf("recovered end %d, want %d", l.LogEndOffset(), end)
		}
		if fs := fileSize(t, path); fs != int64(len(concat(as))) {
			t.Fatalf("torn tail not cut: file %d bytes, batches %d", fs, len(concat(as)))
		}
		more := writeBatches(t, l, 2, 50)
		mustSync(t, l)
		checkZerosAhead(t, l, path)
		if got := mustRead(t, l, 0, 1<<30, 1<<40); !bytes.Equal(got, concat(append(append([]appended(nil), as...), more...))) {
			t.Fatal("bytes differ after appending past a torn batch")
		}
	})

	// A whole batch that reached the disk but was never acknowledged is
	// kept, as before: it is intact and in sequence.
	t.Run("whole unsynced batch", func(t *testing.T) {
		path, l := reopenWithTail(t, 78, func(b []byte) []byte { return b })
		if l.LogEndOffset() != end+3 || fileSize(t, path) != preallocateBytes {
			t.Fatalf("recovered end %d (want %d), file %d bytes", l.LogEndOffset(), end+3, fileSize(t, path))
		}
	})

	// Reopened without fsync, the zeros are cut: they would not be used.
	t.Run("reopened without fsync", func(t *testing.T) {
		dir := crash(t)
		path := segmentPath(dir, 0, extLog)
		l := openTest(t, Options{Dir: dir})
		if l.LogEndOffset() != end || fileSize(t, path) != int64(len(concat(as))) {
			t.Fatalf("recovered end %d (want %d), file %d bytes", l.LogEndOffset(), end, fileSize(t, path))
		}
	})
}

// A segment created by a roll and extended, with the process killed before
// its first batch reached the disk: all zeros, an empty active segment.
func TestRecoverSegmentOfZeros(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, Options{Dir: dir, Fsync: true, SegmentBytes: 1500})
	var as []appended
	for len(as) < 4 || l.active().st.size != int64(len(as[len(as)-1].bytes)) {
		b, recs := simpleBatch(len(as), 3, int64(1000+10*len(as)), 100)
		as = append(as, appendAll(t, l, [][]byte{b}, [][]testRecord{recs})...)
	}
	mustSync(t, l)
	last := as[len(as)-1]
	// Pretend the last batch was never written: its segment holds only zeros.
	active := l.active()
	if active.base != last.base || active.st.size != int64(len(last.bytes)) {
		t.Fatalf("want the last batch alone in the active segment (base %d, %d bytes)", active.base, active.st.size)
	}
	dir2 := t.TempDir()
	copyDir(t, dir, dir2)
	path := segmentPath(dir2, active.base, extLog)
	if err := os.WriteFile(path, make([]byte, fileSize(t, path)), 0o644); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, Options{Dir: dir2, Fsync: true, SegmentBytes: 1500})
	if l2.LogEndOffset() != last.base || l2.Size() != int64(len(concat(as[:len(as)-1]))) {
		t.Fatalf("end %d size %d, want %d, %d", l2.LogEndOffset(), l2.Size(), last.base, len(concat(as[:len(as)-1])))
	}
	if got := mustRead(t, l2, 0, 1<<30, 1<<40); !bytes.Equal(got, concat(as[:len(as)-1])) {
		t.Fatal("bytes differ")
	}
	b, recs := simpleBatch(99, 3, 9000, 100)
	re := appendAll(t, l2, [][]byte{b}, [][]testRecord{recs})
	mustSync(t, l2)
	if re[0].base != last.base {
		t.Fatalf("append at %d, want %d", re[0].base, last.base)
	}
	if got := mustRead(t, l2, last.base, 1<<30, 1<<40); !bytes.Equal(got, re[0].bytes) {
		t.Fatal("batch appended over the zeros reads back differently")
	}
}

// Files written before the zeros ahead (or by Kafka) have none: they open,
// and appending to them starts writing ahead.
func TestOpenSegmentWithoutZerosAhead(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, Options{Dir: dir, SegmentBytes: 1500})
	as := writeBatches(t, l, 12, 100)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, m := range matches {
		if batchBytes(t, m) != fileSize(t, m) {
			t.Fatalf("%s is not plain batches", m)
		}
	}
	l = openTest(t, Options{Dir: dir, Fsync: true, SegmentBytes: 1500})
	if got := mustRead(t, l, 0, 1<<30, 1<<40); !bytes.Equal(got, concat(as)) {
		t.Fatal("bytes differ after reopening with fsync")
	}
	more := writeBatches(t, l, 1, 10)
	mustSync(t, l)
	path := segmentPath(dir, l.active().base, extLog)
	if size := checkZerosAhead(t, l, path); size != 1500 {
		t.Fatalf("active segment is %d bytes, want 1500 written ahead", size)
	}
	if got := mustRead(t, l, 0, 1<<30, 1<<40); !bytes.Equal(got, concat(append(as, more...))) {
		t.Fatal("bytes differ after appending")
	}
}

// writeAt writes b into the file at path at off, as a write that reached
// the disk before a crash would have.
func writeAt(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// Zeros are written ahead only while syncs are small: after a Sync that
// found bigSyncBytes or more appended since the one before, appends extend
// the file; after a small one they write ahead again. Either way the log
// reads back exactly its batches, also after reopening.
func TestZerosAheadOnlyForSmallSyncs(t *testing.T) {
	dir := t.TempDir()
	path := segmentPath(dir, 0, extLog)
	opts := Options{Dir: dir, Fsync: true}
	l := openTest(t, opts)
	as := writeBatches(t, l, 1, 100)
	mustSync(t, l)
	if size := checkZerosAhead(t, l, path); size != preallocateBytes {
		t.Fatalf("after a small sync: file of %d bytes, want %d written ahead", size, preallocateBytes)
	}
	// A big sync (512 KiB since the last), then appends past the zeros
	// written before it: the file ends at the last batch.
	as = append(as, writeBatches(t, l, 8, 64<<10)...)
	mustSync(t, l)
	as = append(as, writeBatches(t, l, 12, 64<<10)...)
	if size := checkZerosAhead(t, l, path); size != l.active().st.size {
		t.Fatalf("after a big sync: file of %d bytes, want the %d of the batches", size, l.active().st.size)
	}
	mustSync(t, l)
	// A small sync: the next append past the end writes ahead again.
	as = append(as, writeBatches(t, l, 1, 100)...)
	mustSync(t, l)
	as = append(as, writeBatches(t, l, 1, 100)...)
	size := checkZerosAhead(t, l, path)
	if size%preallocateBytes != 0 || size <= l.active().st.size {
		t.Fatalf("after a small sync again: file of %d bytes for %d of batches, want zeros to a MiB", size, l.active().st.size)
	}
	mustSync(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	defer l.Close()
	if got := mustRead(t, l, 0, 1<<30, 1<<40); !bytes.Equal(got, concat(as)) {
		t.Fatalf("reopened: read %d bytes, want the %d of the batches", len(got), len(concat(as)))
	}
}
