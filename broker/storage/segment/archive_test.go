package segment

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func pendingBases(t *testing.T, l *Log) []int64 {
	t.Helper()
	p, err := l.PendingArchive()
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, s := range p {
		if filepath.Ext(s.Files[len(s.Files)-1]) != extLog {
			t.Fatalf("segment %d: the log is not the last file: %v", s.Base, s.Files)
		}
		out = append(out, s.Base)
	}
	return out
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestArchiveBlocksRetention: retention deletes only archived segments,
// and resumes as the archive takes more.
func TestArchiveBlocksRetention(t *testing.T) {
	dir := t.TempDir()
	size := batchSize(t)
	opts := Options{Dir: dir, SegmentBytes: 3 * size, Fsync: true, Archive: true}
	l := openTest(t, opts)
	equalBatches(t, l, make([]int64, 10)) // [0,3) [3,6) [6,9) [9,10)
	mustSync(t, l)
	if got := pendingBases(t, l); !equalInt64s(got, []int64{0, 3, 6}) {
		t.Fatalf("pending %v", got)
	}
	if n, err := l.ApplyRetention(Retention{Ms: -1, Bytes: 0}, time.Now()); err != nil || n != 0 {
		t.Fatalf("retention deleted %d unarchived segments, %v", n, err)
	}
	checkSegmentFiles(t, dir, []int64{0, 3, 6, 9})
	if err := l.MarkArchived(3); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(Retention{Ms: -1, Bytes: 0}, time.Now()); err != nil || n != 1 || l.LogStartOffset() != 3 {
		t.Fatalf("retention deleted %d, %v, start %d; want 1, start 3", n, err, l.LogStartOffset())
	}
	checkSegmentFiles(t, dir, []int64{3, 6, 9})
	if got := pendingBases(t, l); !equalInt64s(got, []int64{3, 6}) {
		t.Fatalf("pending %v", got)
	}
}

// TestArchiveDefersDeleteRecords: DeleteRecords moves the log start at
// once, as Kafka's does, but the files below it stay until archived.
func TestArchiveDefersDeleteRecords(t *testing.T) {
	dir := t.TempDir()
	size := batchSize(t)
	opts := Options{Dir: dir, SegmentBytes: 3 * size, Fsync: true, Archive: true}
	l := openTest(t, opts)
	equalBatches(t, l, make([]int64, 10))
	mustSync(t, l)
	if s, err := l.DeleteRecordsBefore(7); err != nil || s != 7 {
		t.Fatalf("DeleteRecordsBefore = %d, %v", s, err)
	}
	checkSegmentFiles(t, dir, []int64{0, 3, 6, 9})
	if _, err := l.Read(2, 1<<20, l.LogEndOffset()); err == nil {
		t.Fatal("read below the log start succeeded")
	}
	// Reopen: the start is kept, and the unarchived files too.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	if l.LogStartOffset() != 7 {
		t.Fatalf("start %d after reopen", l.LogStartOffset())
	}
	checkSegmentFiles(t, dir, []int64{0, 3, 6, 9})
	if err := l.MarkArchived(6); err != nil {
		t.Fatal(err)
	}
	checkSegmentFiles(t, dir, []int64{6, 9})
	if got := pendingBases(t, l); !equalInt64s(got, []int64{6}) {
		t.Fatalf("pending %v", got)
	}
}

// TestArchiveProgressSurvivesRestart: the progress file is read back, so a
// restart resumes at the first segment not archived, and a malformed file
// stops Open rather than start over or skip.
func TestArchiveProgressSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	size := batchSize(t)
	opts := Options{Dir: dir, SegmentBytes: 3 * size, Fsync: true, Archive: true}
	l := openTest(t, opts)
	equalBatches(t, l, make([]int64, 10))
	mustSync(t, l)
	if err := l.MarkArchived(6); err != nil {
		t.Fatal(err)
	}
	if err := l.MarkArchived(3); err != nil { // never backwards
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A temporary file left by a crash is ignored and removed.
	if err := os.WriteFile(filepath.Join(dir, archiveProgressTmp), []byte("0\n9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	if l.ArchivedOffset() != 6 {
		t.Fatalf("archived %d after reopen, want 6", l.ArchivedOffset())
	}
	if got := pendingBases(t, l); !equalInt64s(got, []int64{6}) {
		t.Fatalf("pending %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, archiveProgressTmp)); !os.IsNotExist(err) {
		t.Fatalf("temporary progress file left: %v", err)
	}
	l.Close()
	if err := os.WriteFile(filepath.Join(dir, archiveProgressFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(opts); err == nil {
		l.Close()
		t.Fatal("Open accepted a malformed archive progress file")
	}
	// Without archiving the file is not read.
	l = openTest(t, Options{Dir: dir, SegmentBytes: 3 * size})
	if n, err := l.ApplyRetention(Retention{Ms: -1, Bytes: 0}, time.Now()); err != nil || n != 4 { // the active segment is rolled and goes too
		t.Fatalf("retention without archiving deleted %d, %v", n, err)
	}
}

// TestArchiveBlocksCleaning: the cleaner rewrites only archived segments,
// so the archive receives every segment as it was sealed.
func TestArchiveBlocksCleaning(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SegmentBytes: 600, IndexIntervalBytes: 100, Decompress: gunzip, Archive: true}
	l := openTest(t, opts)
	fillKeyed(t, l, 10, 6, false)
	c, err := l.Cleanable(0, l.LogEndOffset(), time.Now(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.FirstUncleanable != 0 || c.CleanableBytes != 0 {
		t.Fatalf("unarchived log cleanable: %+v", c)
	}
	st := cleanLog(t, l, time.Now(), 86400000)
	if st.Groups != 0 {
		t.Fatalf("cleaned unarchived segments: %+v", st)
	}
	pending := pendingBases(t, l)
	if len(pending) < 3 {
		t.Fatalf("pending %v: want at least 3 sealed segments", pending)
	}
	ps, _ := l.PendingArchive()
	bound := ps[1].End
	if err := l.MarkArchived(bound); err != nil {
		t.Fatal(err)
	}
	st = cleanLog(t, l, time.Now(), 86400000)
	if st.UpperBound != bound {
		t.Fatalf("cleaned up to %d, want the archived offset %d (%+v)", st.UpperBound, bound, st)
	}
	if got := pendingBases(t, l); !equalInt64s(got, pending[2:]) {
		t.Fatalf("pending after clean %v, want %v", got, pending[2:])
	}
}
