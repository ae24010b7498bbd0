package segment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// segmentBases lists the base offsets of the .log files in dir.
func segmentBases(t *testing.T, dir string) []int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		if base, ext, ok := parseSegmentName(e.Name()); ok && ext == extLog {
			out = append(out, base)
		}
	}
	return out
}

// checkSegmentFiles checks that dir holds exactly the four files of each
// segment in bases and nothing else that looks like a segment.
func checkSegmentFiles(t *testing.T, dir string, bases []int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if _, _, ok := parseSegmentName(e.Name()); ok || strings.HasSuffix(e.Name(), ".tmp") {
			got = append(got, e.Name())
		}
	}
	var want []string
	for _, b := range bases {
		for _, ext := range []string{extIndex, extLog, extTimeIndex, extTxnIndex} {
			want = append(want, filepath.Base(segmentPath(dir, b, ext)))
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("segment files %v, want %v", got, want)
	}
}

// diskLogBytes sums the bytes of the batches in the .log files in dir,
// checking that only the last (active) one has anything after them: zeros
// written ahead.
func diskLogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	bases := segmentBases(t, dir)
	for i, b := range bases {
		path := segmentPath(dir, b, extLog)
		size := fileSize(t, path)
		batches := batchBytes(t, path)
		if i < len(bases)-1 && batches != size {
			t.Fatalf("sealed %s: %d bytes of batches in a file of %d", path, batches, size)
		}
		n += batches
	}
	return n
}

func readCheckpoint(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, startCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustSync(t *testing.T, l *Log) {
	t.Helper()
	if d, err := l.Sync(); err != nil || d != l.LogEndOffset() {
		t.Fatalf("Sync = %d, %v; end %d", d, err, l.LogEndOffset())
	}
}

// from returns the batches holding offsets at or after start.
func from(as []appended, start int64) []appended {
	for i, a := range as {
		if a.last() >= start {
			return as[i:]
		}
	}
	return nil
}

func TestDeleteRecordsBefore(t *testing.T) {
	for _, fsync := range []bool{true, false} {
		t.Run(fmt.Sprint("fsync=", fsync), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 1000, Fsync: fsync}
			l := openTest(t, opts)
			as := writeBatches(t, l, 30, 100)
			end := l.LogEndOffset()
			mustSync(t, l)
			bases := segmentBases(t, dir)
			if len(bases) < 10 {
				t.Fatalf("only %d segments", len(bases))
			}

			for _, off := range []int64{-5, 0} {
				if s, err := l.DeleteRecordsBefore(off); err != nil || s != 0 {
					t.Fatalf("DeleteRecordsBefore(%d) = %d, %v; want a no-op", off, s, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, startCheckpointFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a no-op wrote the checkpoint: %v", err)
			}
			if s, err := l.DeleteRecordsBefore(end + 1); !errors.Is(err, ErrOffsetOutOfRange) || s != 0 {
				t.Fatalf("DeleteRecordsBefore(end+1) = %d, %v; want ErrOffsetOutOfRange", s, err)
			}

			// Inside a batch in the middle of a segment.
			const start = 31
			if s, err := l.DeleteRecordsBefore(start); err != nil || s != start {
				t.Fatalf("DeleteRecordsBefore(%d) = %d, %v", start, s, err)
			}
			check := func(t *testing.T, l *Log) {
				t.Helper()
				if l.LogStartOffset() != start || l.LogEndOffset() != end {
					t.Fatalf("log is [%d, %d), want [%d, %d)", l.LogStartOffset(), l.LogEndOffset(), start, end)
				}
				if _, err := l.Read(start-1, 1<<20, end); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("Read below the start: %v", err)
				}
				// The batch holding the start is served whole, as Kafka does.
				if got := mustRead(t, l, start, 1<<20, end); !bytes.Equal(got, concat(from(as, start))) {
					t.Fatalf("Read(%d) = %d bytes, want %d", start, len(got), len(concat(from(as, start))))
				}
				var first BatchHeader
				if err := l.ScanBatches(0, func(h BatchHeader) error {
					if first.Length == 0 {
						first = h
					}
					return nil
				}); err != nil || first.BaseOffset != 30 {
					t.Fatalf("ScanBatches(0) starts at %d, %v; want the batch at 30", first.BaseOffset, err)
				}
				var keep []int64
				for i, b := range bases {
					if i == len(bases)-1 || bases[i+1] > start {
						keep = append(keep, b)
					}
				}
				checkSegmentFiles(t, dir, keep)
				if l.Segments() != len(keep) || l.Size() != diskLogBytes(t, dir) {
					t.Fatalf("%d segments of %d bytes, want %d of %d", l.Segments(), l.Size(), len(keep), diskLogBytes(t, dir))
				}
				if got := readCheckpoint(t, dir); got != "0\n31\n" {
					t.Fatalf("checkpoint %q", got)
				}
			}
			check(t, l)
			if s, err := l.DeleteRecordsBefore(20); err != nil || s != start {
				t.Fatalf("DeleteRecordsBefore below the start = %d, %v", s, err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.DeleteRecordsBefore(40); !errors.Is(err, ErrClosed) {
				t.Fatalf("DeleteRecordsBefore after Close: %v", err)
			}
			l = openTest(t, opts)
			check(t, l)

			// Everything: the active segment is rolled, then deleted.
			if s, err := l.DeleteRecordsBefore(end); err != nil || s != end {
				t.Fatalf("DeleteRecordsBefore(end) = %d, %v", s, err)
			}
			checkEmptyAt := func(t *testing.T, l *Log, at int64) {
				t.Helper()
				if l.LogStartOffset() != at || l.LogEndOffset() != at || l.Segments() != 1 || l.Size() != 0 {
					t.Fatalf("log [%d, %d) in %d segments of %d bytes, want empty at %d",
						l.LogStartOffset(), l.LogEndOffset(), l.Segments(), l.Size(), at)
				}
				checkSegmentFiles(t, dir, []int64{at})
				if got := mustRead(t, l, at, 1<<20, at); len(got) != 0 {
					t.Fatalf("Read at the end returned %d bytes", len(got))
				}
				if _, err := l.Read(at-1, 1<<20, at); !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("Read below the start: %v", err)
				}
				if _, _, ok, err := l.OffsetForTimestamp(0, at); ok || err != nil {
					t.Fatalf("OffsetForTimestamp on an empty log: %v %v", ok, err)
				}
				if _, _, ok, err := l.MaxTimestamp(at); ok || err != nil {
					t.Fatalf("MaxTimestamp on an empty log: %v %v", ok, err)
				}
			}
			checkEmptyAt(t, l, end)
			l.Close()
			l = openTest(t, opts)
			checkEmptyAt(t, l, end)
			more := writeBatches(t, l, 2, 10)
			if more[0].base != end {
				t.Fatalf("append after deleting everything at %d, want %d", more[0].base, end)
			}
			l.Close()
			l = openTest(t, opts)
			if l.LogStartOffset() != end || !bytes.Equal(mustRead(t, l, end, 1<<20, l.LogEndOffset()), concat(more)) {
				t.Fatalf("after reopen start %d, or the new batches do not read back", l.LogStartOffset())
			}
		})
	}
}

// bruteFrom are bruteOffsetForTimestamp and bruteMaxTimestamp over the
// records at or after start.
func bruteOffsetForTimestampFrom(as []appended, start, ts, limit int64) (int64, int64, bool) {
	for _, a := range as {
		if a.base >= limit {
			break
		}
		for i, r := range a.recs {
			if a.base+int64(i) >= start && r.ts >= ts {
				return a.base + int64(i), r.ts, true
			}
		}
	}
	return 0, 0, false
}

func bruteMaxTimestampFrom(as []appended, start, limit int64) (int64, int64, bool) {
	var off, best int64 = 0, -1
	for _, a := range as {
		if a.base >= limit {
			break
		}
		for i, r := range a.recs {
			if a.base+int64(i) >= start && r.ts > best {
				off, best = a.base+int64(i), r.ts
			}
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	return off, best, true
}

// Timestamp lookups never answer with an offset below the start, also when
// the start lies inside a batch (whose other records may hold the answer).
func TestTimestampsAfterDeleteRecords(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		t.Run(fmt.Sprint("compressed=", compressed), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 4000, IndexIntervalBytes: 500, Decompress: gunzip}
			l := openTest(t, opts)
			batches, recs := timestampBatches()
			if compressed {
				for i, r := range recs {
					batches[i] = makeBatch(r, batchOpts{attributes: 1, compress: gzipBytes, producerID: -1})
				}
			}
			as := appendAll(t, l, batches, recs)
			end := l.LogEndOffset()
			mustSync(t, l)
			if l.Segments() < 4 {
				t.Fatalf("want several segments, got %d", l.Segments())
			}
			check := func(t *testing.T, l *Log, start int64) {
				t.Helper()
				for _, limit := range []int64{start, start + 1, start + 3, start + 40, end - 4, end} {
					for ts := int64(9_000); ts <= 10_000+100*121; ts += 41 {
						wo, wt, wok := bruteOffsetForTimestampFrom(as, start, ts, limit)
						o, gt, ok, err := l.OffsetForTimestamp(ts, limit)
						if err != nil {
							t.Fatal(err)
						}
						if ok != wok || o != wo || gt != wt {
							t.Fatalf("start %d: OffsetForTimestamp(%d, limit %d) = %d %d %v, want %d %d %v", start, ts, limit, o, gt, ok, wo, wt, wok)
						}
					}
					wo, wt, wok := bruteMaxTimestampFrom(as, start, limit)
					o, gt, ok, err := l.MaxTimestamp(limit)
					if err != nil {
						t.Fatal(err)
					}
					if ok != wok || o != wo || gt != wt {
						t.Fatalf("start %d: MaxTimestamp(limit %d) = %d %d %v, want %d %d %v", start, limit, o, gt, ok, wo, wt, wok)
					}
				}
			}
			// Starts inside batches (the first segment's, and later ones'),
			// at a batch boundary, and at a segment boundary.
			starts := []int64{2, as[7].base + 1, as[30].base, as[61].base + 3}
			bases := segmentBases(t, dir)
			starts = append(starts, bases[len(bases)-2])
			for _, s := range starts {
				if got, err := l.DeleteRecordsBefore(s); err != nil || got != s {
					t.Fatalf("DeleteRecordsBefore(%d) = %d, %v", s, got, err)
				}
				check(t, l, s)
			}
			l.Close()
			check(t, openTest(t, opts), starts[len(starts)-1])
		})
	}
}

// Without a way to decompress, a compressed batch holding the start answers
// with the start itself.
func TestTimestampsAfterDeleteRecordsNoDecompress(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir()})
	recs := []testRecord{{ts: 500}, {ts: 900}, {ts: 700}, {ts: 800}}
	b := makeBatch(recs, batchOpts{attributes: 1, compress: gzipBytes, producerID: -1})
	if _, err := l.Append(b, 0); err != nil {
		t.Fatal(err)
	}
	mustSync(t, l)
	if _, err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if o, ts, ok, err := l.OffsetForTimestamp(100, 4); err != nil || !ok || o != 2 || ts != 900 {
		t.Fatalf("OffsetForTimestamp = %d %d %v %v, want 2 900", o, ts, ok, err)
	}
	if o, ts, ok, err := l.MaxTimestamp(4); err != nil || !ok || o != 2 || ts != 900 {
		t.Fatalf("MaxTimestamp = %d %d %v %v, want 2 900", o, ts, ok, err)
	}
}

// A reader that took its view of a segment before the segment was deleted
// reads it to the end: the files stay open until the last reader is done.
func TestReaderOutlivesDeletedSegment(t *testing.T) {
	readers := map[string]func(l *Log, as []appended) error{
		"Read": func(l *Log, as []appended) error {
			got, err := l.Read(0, 1<<30, as[len(as)-1].last()+1)
			if err == nil && !bytes.Equal(got, concat(as)) {
				err = fmt.Errorf("read %d bytes, want %d", len(got), len(concat(as)))
			}
			return err
		},
		"OffsetForTimestamp": func(l *Log, as []appended) error {
			o, _, ok, err := l.OffsetForTimestamp(1005, 1<<40)
			if err == nil && (!ok || o != 3) {
				err = fmt.Errorf("OffsetForTimestamp = %d %v, want 3", o, ok)
			}
			return err
		},
		"MaxTimestamp": func(l *Log, as []appended) error {
			o, _, ok, err := l.MaxTimestamp(1 << 40)
			if err == nil && (!ok || o != as[len(as)-1].last()) {
				err = fmt.Errorf("MaxTimestamp = %d %v, want %d", o, ok, as[len(as)-1].last())
			}
			return err
		},
		"ScanBatches": func(l *Log, as []appended) error {
			n := 0
			err := l.ScanBatches(0, func(BatchHeader) error { n++; return nil })
			if err == nil && n != len(as) {
				err = fmt.Errorf("scanned %d batches, want %d", n, len(as))
			}
			return err
		},
	}
	for name, read := range readers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var l *Log
			var deleteErr error
			armed := false
			opts := Options{Dir: dir, SegmentBytes: 1000, IndexIntervalBytes: 200, afterSnapshot: func() {
				if armed {
					armed = false
					_, deleteErr = l.DeleteRecordsBefore(l.LogEndOffset())
				}
			}}
			l = openTest(t, opts)
			as := writeBatches(t, l, 20, 100)
			mustSync(t, l)
			old := slices.Clone(l.segs)
			armed = true
			if err := read(l, as); err != nil {
				t.Fatalf("reading while the segments are deleted: %v", err)
			}
			if deleteErr != nil {
				t.Fatal(deleteErr)
			}
			checkSegmentFiles(t, dir, []int64{l.LogEndOffset()})
			for _, s := range old {
				if _, err := s.log.Stat(); !errors.Is(err, os.ErrClosed) {
					t.Fatalf("segment %d still open after the last reader: %v", s.base, err)
				}
			}
		})
	}
}

// Sync fsyncs the segment that was active when it started, even if that
// segment is rolled and deleted meanwhile.
func TestSyncOutlivesDeletedSegment(t *testing.T) {
	var l *Log
	var deleteErr error
	armed := false
	opts := Options{Dir: t.TempDir(), Fsync: true, beforeFsync: func() {
		if armed {
			armed = false
			_, deleteErr = l.DeleteRecordsBefore(l.LogEndOffset())
		}
	}}
	l = openTest(t, opts)
	as := writeBatches(t, l, 3, 10)
	end := as[len(as)-1].last() + 1
	armed = true
	if d, err := l.Sync(); err != nil || d != end {
		t.Fatalf("Sync = %d, %v; want %d", d, err, end)
	}
	if deleteErr != nil {
		t.Fatal(deleteErr)
	}
	if l.LogStartOffset() != end || l.Segments() != 1 {
		t.Fatalf("start %d with %d segments", l.LogStartOffset(), l.Segments())
	}
	writeBatches(t, l, 1, 10)
	mustSync(t, l)
}

// openFiles counts this process's descriptors open on files in dir.
// openFiles counts the files under dir the process has open, and how many
// of them are deleted.
func openFiles(t *testing.T, dir string) (open, deleted int) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") {
			open++
			if strings.HasSuffix(target, " (deleted)") {
				deleted++
			}
		}
	}
	return open, deleted
}

func TestConcurrentDeleteAndRead(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, Options{Dir: dir, SegmentBytes: 4 << 10, IndexIntervalBytes: 512, Decompress: gunzip})
	const n = 600
	var wg sync.WaitGroup
	// The others go on until the appender is done and the deleter has
	// deleted something, however the goroutines are scheduled (on a busy
	// machine the appender can finish before the deleter first runs).
	appended, done := make(chan struct{}), make(chan struct{})
	var retained atomic.Int64 // segments deleted by retention
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(appended)
		for i := range n {
			b, _ := simpleBatch(i, 1+i%3, int64(1000+i), 100)
			if _, err := l.Append(b, 1); err != nil {
				fail("Append: %v", err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := l.Sync(); err != nil {
				fail("Sync: %v", err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		prev := int64(0)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			var err error
			if i%2 == 0 {
				d := l.DurableEnd()
				s := l.LogStartOffset()
				var got int64
				got, err = l.DeleteRecordsBefore(s + (d-s)/2)
				if err == nil && (got < prev || got > d) {
					fail("DeleteRecordsBefore = %d after %d, durable %d", got, prev, d)
					return
				}
			} else {
				var n int
				n, err = l.ApplyRetention(Retention{Ms: -1, Bytes: 12 << 10}, time.Now())
				retained.Add(int64(n))
			}
			if err != nil {
				fail("deleting: %v", err)
				return
			}
			prev = l.LogStartOffset()
			time.Sleep(time.Millisecond)
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
				if err := readAll(l); err != nil {
					fail("%v", err)
					return
				}
			}
		}()
	}
	<-appended
	for deadline := time.Now().Add(30 * time.Second); !t.Failed() && (retained.Load() == 0 || l.LogStartOffset() == 0); {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(done)
	wg.Wait()
	if t.Failed() {
		return
	}
	if retained.Load() == 0 || l.LogStartOffset() == 0 {
		t.Fatalf("retention deleted %d segments, start %d: the test deleted too little", retained.Load(), l.LogStartOffset())
	}
	mustSync(t, l)
	if err := readAll(l); err != nil {
		t.Fatal(err)
	}
	// Every deleted segment's files are closed and gone.
	checkSegmentFiles(t, dir, segmentBases(t, dir))
	if len(segmentBases(t, dir)) != l.Segments() {
		t.Fatalf("%d segments on disk, %d in the log", len(segmentBases(t, dir)), l.Segments())
	}
	// Each segment holds its .log open, and its indexes once read.
	if open, deleted := openFiles(t, dir); deleted > 0 || open < l.Segments() || open > 4*l.Segments() {
		t.Fatalf("%d files open (%d of them deleted) for %d segments", open, deleted, l.Segments())
	}
}

// readAll reads the visible log with every reader, checking that nothing
// below the start it saw before is returned. A start that moves during a
// Read legitimately makes it fail with ErrOffsetOutOfRange.
func readAll(l *Log) error {
	start, hw := l.LogStartOffset(), l.DurableEnd()
	off := start
	for off < hw {
		b, err := l.Read(off, 4096, hw)
		if errors.Is(err, ErrOffsetOutOfRange) && l.LogStartOffset() > off {
			return nil
		}
		if err != nil {
			return err
		}
		for first := true; len(b) > 0; first = false {
			h, err := ParseBatchHeader(b)
			if err == nil {
				_, err = ValidateBatch(b[:h.Length])
			}
			if err != nil {
				return fmt.Errorf("read at %d: %w", off, err)
			}
			if (first && (h.BaseOffset > off || h.LastOffset() < off)) || (!first && h.BaseOffset != off) {
				return fmt.Errorf("read at %d returned a batch [%d, %d]", off, h.BaseOffset, h.LastOffset())
			}
			off = h.LastOffset() + 1
			b = b[h.Length:]
		}
	}
	if o, _, ok, err := l.OffsetForTimestamp(0, hw); err != nil || (ok && o < start) {
		return fmt.Errorf("OffsetForTimestamp = %d, %v; start was %d", o, err, start)
	}
	if o, _, ok, err := l.MaxTimestamp(hw); err != nil || (ok && o < start) {
		return fmt.Errorf("MaxTimestamp = %d, %v; start was %d", o, err, start)
	}
	return l.ScanBatches(0, func(h BatchHeader) error {
		if h.LastOffset() < start {
			return fmt.Errorf("ScanBatches returned [%d, %d] below the start %d", h.BaseOffset, h.LastOffset(), start)
		}
		return nil
	})
}

func oneBatch() []byte {
	b, _ := simpleBatch(0, 1, 1, 1)
	return b
}

// The kill tests: a copy of the directory taken at any moment after
// DeleteRecordsBefore or ApplyRetention returned (no Close) opens with the
// same start and the same records.
func TestCrashAfterDeletion(t *testing.T) {
	for name, del := range map[string]func(*Log) error{
		"DeleteRecordsBefore": func(l *Log) error { _, err := l.DeleteRecordsBefore(40); return err },
		"DeleteEverything":    func(l *Log) error { _, err := l.DeleteRecordsBefore(l.LogEndOffset()); return err },
		"ApplyRetention":      func(l *Log) error { _, err := l.ApplyRetention(Retention{Ms: -1, Bytes: 3000}, time.Now()); return err },
		"RetainNothing":       func(l *Log) error { _, err := l.ApplyRetention(Retention{Ms: 0, Bytes: -1}, time.Now()); return err },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 1000, Fsync: true}
			l := openTest(t, opts)
			writeBatches(t, l, 30, 100)
			mustSync(t, l)
			if err := del(l); err != nil {
				t.Fatal(err)
			}
			start, end := l.LogStartOffset(), l.LogEndOffset()
			if start == 0 {
				t.Fatal("nothing deleted")
			}
			want := mustRead(t, l, start, 1<<30, end)
			crash := t.TempDir()
			copyDir(t, dir, crash)
			c := openTest(t, Options{Dir: crash, SegmentBytes: 1000, Fsync: true})
			if c.LogStartOffset() != start || c.LogEndOffset() != end || c.Segments() != l.Segments() {
				t.Fatalf("after the crash [%d, %d) in %d segments, want [%d, %d) in %d",
					c.LogStartOffset(), c.LogEndOffset(), c.Segments(), start, end, l.Segments())
			}
			if got := mustRead(t, c, start, 1<<30, end); !bytes.Equal(got, want) {
				t.Fatal("records differ after the crash")
			}
			checkSegmentFiles(t, crash, segmentBases(t, dir))
		})
	}
}

// Open finishes what a crash interrupted, using the checkpoint.
func TestOpenAppliesCheckpoint(t *testing.T) {
	// setup makes a closed log of 30 batches of 3 records in several
	// segments and returns its options and batches.
	setup := func(t *testing.T) (Options, []appended) {
		dir := t.TempDir()
		opts := Options{Dir: dir, SegmentBytes: 1000, Fsync: true}
		l, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		as := writeBatches(t, l, 30, 100)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return opts, as
	}
	writeCP := func(t *testing.T, dir, content string) {
		if err := os.WriteFile(filepath.Join(dir, startCheckpointFile), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("segments left below the start", func(t *testing.T) {
		opts, as := setup(t)
		bases := segmentBases(t, opts.Dir)
		start := bases[3] + 1
		writeCP(t, opts.Dir, fmt.Sprintf("0\n%d\n", start))
		l := openTest(t, opts)
		if l.LogStartOffset() != start {
			t.Fatalf("start %d, want %d", l.LogStartOffset(), start)
		}
		checkSegmentFiles(t, opts.Dir, bases[3:])
		if got := mustRead(t, l, start, 1<<30, 90); !bytes.Equal(got, concat(from(as, start))) {
			t.Fatal("records differ")
		}
	})
	t.Run("roll lost", func(t *testing.T) {
		// The start reached the end, but the segment rolled for it is gone.
		opts, _ := setup(t)
		writeCP(t, opts.Dir, "0\n90\n")
		l := openTest(t, opts)
		if l.LogStartOffset() != 90 || l.LogEndOffset() != 90 || l.Segments() != 1 {
			t.Fatalf("[%d, %d) in %d segments", l.LogStartOffset(), l.LogEndOffset(), l.Segments())
		}
		checkSegmentFiles(t, opts.Dir, []int64{90})
		if base, err := l.Append(oneBatch(), 0); err != nil || base != 90 {
			t.Fatalf("Append = %d, %v", base, err)
		}
	})
	t.Run("start past the end", func(t *testing.T) {
		// A torn tail took records below the start: start over there.
		opts, _ := setup(t)
		writeCP(t, opts.Dir, "0\n150\n")
		l := openTest(t, opts)
		if l.LogStartOffset() != 150 || l.LogEndOffset() != 150 || l.DurableEnd() != 150 || l.Segments() != 1 {
			t.Fatalf("[%d, %d) in %d segments", l.LogStartOffset(), l.LogEndOffset(), l.Segments())
		}
		checkSegmentFiles(t, opts.Dir, []int64{150})
		if base, err := l.Append(oneBatch(), 0); err != nil || base != 150 {
			t.Fatalf("Append = %d, %v", base, err)
		}
	})
	t.Run("start below the first segment", func(t *testing.T) {
		opts, _ := setup(t)
		bases := segmentBases(t, opts.Dir)
		for _, b := range bases[:2] {
			if err := removeSegmentFiles(vfs.OS, opts.Dir, b); err != nil {
				t.Fatal(err)
			}
		}
		writeCP(t, opts.Dir, "0\n1\n")
		l := openTest(t, opts)
		if l.LogStartOffset() != bases[2] {
			t.Fatalf("start %d, want %d", l.LogStartOffset(), bases[2])
		}
	})
	for name, content := range map[string]string{
		"garbage":     "garbage",
		"empty":       "",
		"version":     "1\n30\n",
		"negative":    "0\n-3\n",
		"no newline":  "0\n30",
		"extra lines": "0\n30\n40\n",
	} {
		t.Run("malformed "+name, func(t *testing.T) {
			opts, as := setup(t)
			writeCP(t, opts.Dir, content)
			l := openTest(t, opts)
			if l.LogStartOffset() != 0 {
				t.Fatalf("start %d from %q", l.LogStartOffset(), content)
			}
			if got := mustRead(t, l, 0, 1<<30, 90); !bytes.Equal(got, concat(as)) {
				t.Fatal("records differ")
			}
		})
	}
	t.Run("temporary file", func(t *testing.T) {
		opts, _ := setup(t)
		writeCP(t, opts.Dir, "0\n30\n")
		tmp := filepath.Join(opts.Dir, startCheckpointTmp)
		if err := os.WriteFile(tmp, []byte("0\n60\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		l := openTest(t, opts)
		if l.LogStartOffset() != 30 {
			t.Fatalf("start %d, want 30", l.LogStartOffset())
		}
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("temporary checkpoint not removed: %v", err)
		}
	})
}

// equalBatches appends n one-record batches of the same size with the given
// timestamps (all -1 if ts is nil) and returns the batch size.
func equalBatches(t *testing.T, l *Log, ts []int64) int64 {
	t.Helper()
	var size int64
	for i, x := range ts {
		b := makeBatch([]testRecord{{ts: x, value: bytes.Repeat([]byte{byte(i)}, 100)}},
			batchOpts{producerID: -1, producerEpoch: -1, baseSequence: -1})
		size = int64(len(b))
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	return size
}

func batchSize(t *testing.T) int64 {
	b := makeBatch([]testRecord{{ts: 1, value: bytes.Repeat([]byte{0}, 100)}}, batchOpts{producerID: -1})
	return int64(len(b))
}

func TestApplyRetentionBytes(t *testing.T) {
	dir := t.TempDir()
	size := batchSize(t)
	opts := Options{Dir: dir, SegmentBytes: 3 * size, Fsync: true}
	l := openTest(t, opts)
	equalBatches(t, l, make([]int64, 10))
	// Segments [0,3) [3,6) [6,9) [9,10): 3, 3, 3 and 1 batches.
	if l.Segments() != 4 || l.Size() != 10*size {
		t.Fatalf("%d segments of %d bytes", l.Segments(), l.Size())
	}

	// Nothing is deleted above the durable end (Kafka: the high watermark).
	if n, err := l.ApplyRetention(Retention{Ms: -1, Bytes: 0}, time.Now()); err != nil || n != 0 {
		t.Fatalf("ApplyRetention before Sync deleted %d, %v", n, err)
	}
	mustSync(t, l)

	for _, tc := range []struct {
		bytes   int64
		deleted int
		start   int64
		bases   []int64
	}{
		{-1, 0, 0, []int64{0, 3, 6, 9}},
		{10*size + 1, 0, 0, []int64{0, 3, 6, 9}}, // smaller than the limit
		{7*size + 1, 0, 0, []int64{0, 3, 6, 9}},  // the first segment would take it below
		{7 * size, 1, 3, []int64{3, 6, 9}},
		{size, 2, 9, []int64{9}},      // the active segment would take it below
		{0, 1, 10, []int64{10}},       // the active segment is rolled and deleted
		{0, 0, 10, []int64{10}},       // an empty active segment stays
		{-1, 0, 10, []int64{10}},      // unlimited
		{1 << 40, 0, 10, []int64{10}}, // far below the limit
	} {
		n, err := l.ApplyRetention(Retention{Ms: -1, Bytes: tc.bytes}, time.Now())
		if err != nil || n != tc.deleted || l.LogStartOffset() != tc.start {
			t.Fatalf("Bytes %d: deleted %d, %v, start %d; want %d, start %d", tc.bytes, n, err, l.LogStartOffset(), tc.deleted, tc.start)
		}
		checkSegmentFiles(t, dir, tc.bases)
		if l.Size() != diskLogBytes(t, dir) {
			t.Fatalf("Size %d, disk %d", l.Size(), diskLogBytes(t, dir))
		}
		if tc.start > 0 {
			if got := readCheckpoint(t, dir); got != fmt.Sprintf("0\n%d\n", tc.start) {
				t.Fatalf("checkpoint %q, want start %d", got, tc.start)
			}
		}
	}
	l.Close()
	l = openTest(t, opts)
	if l.LogStartOffset() != 10 || l.LogEndOffset() != 10 || l.Segments() != 1 {
		t.Fatalf("after reopen [%d, %d) in %d segments", l.LogStartOffset(), l.LogEndOffset(), l.Segments())
	}
}

func TestApplyRetentionMs(t *testing.T) {
	dir := t.TempDir()
	size := batchSize(t)
	opts := Options{Dir: dir, SegmentBytes: 2 * size}
	l := openTest(t, opts)
	// Segments by largest timestamp: 2000, 9000, 5000 and (active) 6000.
	equalBatches(t, l, []int64{1000, 2000, 9000, 3000, 4000, 5000, 6000})
	mustSync(t, l)
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }

	for _, tc := range []struct {
		now, ms int64
		deleted int
		start   int64
	}{
		{10_000, -1, 0, 0},
		{10_000, 8000, 0, 0}, // exactly retention.ms old is not breached
		{10_000, 7999, 1, 2},
		{10_000, 4500, 0, 2}, // the next segment is recent; the one after it does not count
		{20_000, 5000, 3, 7}, // the active segment too: rolled and deleted
	} {
		n, err := l.ApplyRetention(Retention{Ms: tc.ms, Bytes: -1}, at(tc.now))
		if err != nil || n != tc.deleted || l.LogStartOffset() != tc.start {
			t.Fatalf("now %d Ms %d: deleted %d, %v, start %d; want %d, start %d", tc.now, tc.ms, n, err, l.LogStartOffset(), tc.deleted, tc.start)
		}
	}
	checkSegmentFiles(t, dir, []int64{7})
	l.Close()
	l = openTest(t, opts)
	if l.LogStartOffset() != 7 || l.LogEndOffset() != 7 {
		t.Fatalf("after reopen [%d, %d)", l.LogStartOffset(), l.LogEndOffset())
	}
}

// Size first, then time, as Kafka runs them: the time rule continues after
// the segments the size rule deleted.
func TestApplyRetentionSizeThenTime(t *testing.T) {
	size := batchSize(t)
	l := openTest(t, Options{Dir: t.TempDir(), SegmentBytes: 2 * size})
	equalBatches(t, l, []int64{9000, 9000, 1000, 1000, 9000, 9000, 9000})
	mustSync(t, l)
	now := time.UnixMilli(10_000)
	if n, err := l.ApplyRetention(Retention{Ms: 5000, Bytes: -1}, now); err != nil || n != 0 {
		t.Fatalf("time alone deleted %d, %v", n, err)
	}
	if n, err := l.ApplyRetention(Retention{Ms: 5000, Bytes: 5 * size}, now); err != nil || n != 2 || l.LogStartOffset() != 4 {
		t.Fatalf("size and time deleted %d, %v, start %d; want 2, start 4", n, err, l.LogStartOffset())
	}
}

// Segments whose batches carry no timestamp age by their file's mtime.
func TestApplyRetentionMtime(t *testing.T) {
	dir := t.TempDir()
	size := batchSize(t)
	l := openTest(t, Options{Dir: dir, SegmentBytes: 2 * size})
	equalBatches(t, l, []int64{-1, -1, -1, -1, -1})
	mustSync(t, l)
	now := time.Now()
	for base, age := range map[int64]time.Duration{0: 3 * time.Hour, 2: 30 * time.Minute} {
		mt := now.Add(-age)
		if err := os.Chtimes(segmentPath(dir, base, extLog), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := l.ApplyRetention(Retention{Ms: time.Hour.Milliseconds(), Bytes: -1}, now); err != nil || n != 1 || l.LogStartOffset() != 2 {
		t.Fatalf("deleted %d, %v, start %d; want 1, start 2", n, err, l.LogStartOffset())
	}
	checkSegmentFiles(t, dir, []int64{2, 4})
}

// A retention pass after DeleteRecordsBefore keeps the start inside the
// first segment until that segment itself goes.
func TestApplyRetentionAfterDeleteRecords(t *testing.T) {
	size := batchSize(t)
	l := openTest(t, Options{Dir: t.TempDir(), SegmentBytes: 3 * size})
	equalBatches(t, l, make([]int64, 9))
	mustSync(t, l)
	if _, err := l.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(Retention{Ms: -1, Bytes: 7 * size}, time.Now()); err != nil || n != 0 || l.LogStartOffset() != 4 {
		t.Fatalf("deleted %d, %v, start %d", n, err, l.LogStartOffset())
	}
	if n, err := l.ApplyRetention(Retention{Ms: -1, Bytes: 3 * size}, time.Now()); err != nil || n != 1 || l.LogStartOffset() != 6 {
		t.Fatalf("deleted %d, %v, start %d", n, err, l.LogStartOffset())
	}
}

func TestApplyRetentionClosed(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir()})
	l.Close()
	if _, err := l.ApplyRetention(Retention{Ms: 0, Bytes: 0}, time.Now()); !errors.Is(err, ErrClosed) {
		t.Fatalf("ApplyRetention after Close: %v", err)
	}
}

func TestSetSegmentLimits(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	size := batchSize(t)
	l := openTest(t, Options{Dir: t.TempDir(), now: func() time.Time { return now }})
	equalBatches(t, l, make([]int64, 5))
	if l.Segments() != 1 {
		t.Fatalf("%d segments", l.Segments())
	}
	l.SetSegmentLimits(2*size, 0)
	equalBatches(t, l, make([]int64, 4))
	// The full active segment rolls at once, then every two batches.
	if l.Segments() != 3 {
		t.Fatalf("%d segments after lowering segment.bytes, want 3", l.Segments())
	}
	l.SetSegmentLimits(0, 1000)
	if l.opts.SegmentBytes != DefaultSegmentBytes || l.opts.SegmentMs != 1000 {
		t.Fatalf("limits %d %d", l.opts.SegmentBytes, l.opts.SegmentMs)
	}
	equalBatches(t, l, make([]int64, 3))
	if l.Segments() != 3 {
		t.Fatalf("%d segments, want 3", l.Segments())
	}
	now = now.Add(1500 * time.Millisecond)
	equalBatches(t, l, make([]int64, 1))
	if l.Segments() != 4 {
		t.Fatalf("%d segments after segment.ms passed, want 4", l.Segments())
	}
	l.SetSegmentLimits(1<<40, -1)
	if l.opts.SegmentBytes != 1<<31-1 || l.opts.SegmentMs != DefaultSegmentMs {
		t.Fatalf("limits %d %d", l.opts.SegmentBytes, l.opts.SegmentMs)
	}
}

// Run under -race: limits change while appends read them.
func TestSetSegmentLimitsConcurrent(t *testing.T) {
	size := batchSize(t)
	l := openTest(t, Options{Dir: t.TempDir()})
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			l.SetSegmentLimits(int64(2+i%3)*size, 0)
		}
	}()
	go func() {
		defer wg.Done()
		defer close(done)
		for range 200 {
			b, _ := simpleBatch(0, 1, 1, 100)
			if _, err := l.Append(b, 0); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	l.SetSegmentLimits(size, 0)
	before := l.Segments()
	equalBatches(t, l, make([]int64, 3))
	if l.Segments() != before+3 {
		t.Fatalf("%d segments after 3 appends at one batch per segment, want %d", l.Segments(), before+3)
	}
}

func TestSize(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, Options{Dir: dir, SegmentBytes: 1000})
	if l.Size() != 0 {
		t.Fatalf("empty log has size %d", l.Size())
	}
	as := writeBatches(t, l, 20, 100)
	if l.Size() != int64(len(concat(as))) || l.Size() != diskLogBytes(t, dir) {
		t.Fatalf("Size %d, batches %d, disk %d", l.Size(), len(concat(as)), diskLogBytes(t, dir))
	}
}

// TestOneDescriptorPerSegment: a log holds its segments' .log files open
// and their indexes only once a lookup needs them, so an idle partition
// costs one descriptor per segment (as in Kafka) rather than four; a
// closed log holds none.
func TestOneDescriptorPerSegment(t *testing.T) {
	dir := t.TempDir()
	l := openTest(t, Options{Dir: dir, SegmentBytes: 2 << 10, IndexIntervalBytes: 256})
	as := writeBatches(t, l, 40, 100)
	mustSync(t, l)
	if l.Segments() < 3 {
		t.Fatalf("%d segments; want several", l.Segments())
	}
	if open, _ := openFiles(t, dir); open != l.Segments() {
		t.Fatalf("%d files open for %d segments after appends and rolls; want one each", open, l.Segments())
	}
	// A read from the middle of the first segment looks up its offset index.
	mustRead(t, l, as[2].base, 1<<20, l.LogEndOffset())
	if open, _ := openFiles(t, dir); open != l.Segments()+1 {
		t.Fatalf("%d files open for %d segments after a lookup; want one more, the index read", open, l.Segments())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, Options{Dir: dir, SegmentBytes: 2 << 10, IndexIntervalBytes: 256})
	if open, _ := openFiles(t, dir); open != l2.Segments() {
		t.Fatalf("%d files open for %d segments after recovery; want one each", open, l2.Segments())
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if open, _ := openFiles(t, dir); open != 0 {
		t.Fatalf("%d files open after Close", open)
	}
}
