package segment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

type sourceEntry struct {
	offset int64
	source uint64
}

// readSourceFile parses the source index file as it is on disk: its
// entries, followed by nothing but zeros (written ahead).
func readSourceFile(t *testing.T, dir string) []sourceEntry {
	t.Helper()
	return parseSourceFile(t, readFile(t, filepath.Join(dir, sourceIndexFile)))
}

func parseSourceFile(t *testing.T, b []byte) []sourceEntry {
	t.Helper()
	var out []sourceEntry
	for ; len(b) >= sourceEntrySize; b = b[sourceEntrySize:] {
		o, s := parseSourceEntry(b)
		if s == 0 {
			break
		}
		out = append(out, sourceEntry{o, s})
	}
	if len(bytes.Trim(b, "\x00")) != 0 {
		t.Fatalf("source index has %d bytes after its %d entries that are not zeros", len(b), len(out))
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

// sourced makes n sourced batches of records records each, with the given
// sources, and the batch bytes to expect back once stamped.
func sourced(seed int, records int, sources ...uint64) []SourcedBatch {
	var out []SourcedBatch
	for i, s := range sources {
		b, _ := simpleBatch(seed+i, records, int64(1000+i), 100)
		out = append(out, SourcedBatch{Batch: b, Source: s})
	}
	return out
}

// appendSourced appends and checks the offsets against the log end and the
// batch sizes, and that the stamped bytes read back.
func appendSourced(t *testing.T, l *Log, bs []SourcedBatch) []int64 {
	t.Helper()
	want := make([]int64, len(bs))
	next := l.LogEndOffset()
	for i, b := range bs {
		want[i] = next
		h, err := ParseBatchHeader(b.Batch)
		if err != nil {
			t.Fatal(err)
		}
		next += int64(h.LastOffsetDelta) + 1
	}
	got, err := l.AppendSourced(bs, 3)
	if err != nil {
		t.Fatalf("AppendSourced: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AppendSourced offsets %v, want %v", got, want)
	}
	for i, b := range bs {
		h, err := ValidateBatch(b.Batch)
		if err != nil || h.BaseOffset != want[i] || h.LeaderEpoch != 3 {
			t.Fatalf("batch %d stamped %+v, %v; want base %d epoch 3", i, h, err, want[i])
		}
		if r := mustRead(t, l, want[i], 1, l.LogEndOffset()); !bytes.Equal(r, b.Batch) {
			t.Fatalf("batch %d does not read back at %d", i, want[i])
		}
	}
	return got
}

func TestAppendSourcedInterleaved(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, Fsync: true}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	writeBatches(t, l, 2, 10) // offsets 0-5
	if _, err := os.Stat(filepath.Join(dir, sourceIndexFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("plain Append created the source index: %v", err)
	}
	if l.SourceApplied() != 0 {
		t.Fatalf("SourceApplied %d before any sourced batch", l.SourceApplied())
	}
	if got, err := l.AppendSourced(nil, 3); err != nil || got != nil {
		t.Fatalf("empty AppendSourced = %v, %v", got, err)
	}

	var want []sourceEntry
	record := func(bases []int64, bs []SourcedBatch) {
		for i, b := range bases {
			want = append(want, sourceEntry{b, bs[i].Source})
		}
	}
	bs := sourced(10, 2, 100, 100, 250) // offsets 6-11
	record(appendSourced(t, l, bs), bs)
	writeBatches(t, l, 1, 10) // 12-14
	bs = sourced(20, 4, 250, 300)
	record(appendSourced(t, l, bs), bs) // 15-22
	writeBatches(t, l, 1, 10)           // 23-25
	if l.LogEndOffset() != 26 || l.SourceApplied() != 300 {
		t.Fatalf("end %d applied %d, want 26 300", l.LogEndOffset(), l.SourceApplied())
	}
	if got := readSourceFile(t, dir); !slices.Equal(got, want) {
		t.Fatalf("source index %v, want %v", got, want)
	}

	// Sources must not go backwards, within a call or across calls; a
	// rejected call writes nothing.
	for name, bs := range map[string][]SourcedBatch{
		"within": sourced(30, 1, 400, 399),
		"across": sourced(30, 1, 299),
	} {
		if _, err := l.AppendSourced(bs, 3); !errors.Is(err, ErrSourceOrder) {
			t.Fatalf("%s: AppendSourced = %v, want ErrSourceOrder", name, err)
		}
	}
	if l.LogEndOffset() != 26 || len(readSourceFile(t, dir)) != len(want) {
		t.Fatal("rejected AppendSourced wrote something")
	}
	// A malformed batch is rejected before anything is written too.
	bad := sourced(40, 1, 500)
	bad[0].Batch = bad[0].Batch[:len(bad[0].Batch)-1]
	if _, err := l.AppendSourced(bad, 3); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("malformed batch: %v", err)
	}
	if l.LogEndOffset() != 26 || l.SourceApplied() != 300 {
		t.Fatal("malformed AppendSourced changed the log")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendSourced(sourced(50, 1, 600), 3); !errors.Is(err, ErrClosed) {
		t.Fatalf("AppendSourced after Close: %v", err)
	}

	l = openTest(t, opts)
	if l.SourceApplied() != 300 || l.sourceEntries() != len(want) || l.LogEndOffset() != 26 {
		t.Fatalf("after reopen applied %d entries %d end %d", l.SourceApplied(), l.sourceEntries(), l.LogEndOffset())
	}
	bs = sourced(60, 1, 300, 700)
	record(appendSourced(t, l, bs), bs)
	if l.SourceApplied() != 700 {
		t.Fatalf("applied %d, want 700", l.SourceApplied())
	}
	if got := readSourceFile(t, dir); !slices.Equal(got, want) {
		t.Fatalf("source index after reopen %v, want %v", got, want)
	}
}

// buildSourcedLog writes plain batches (offsets 0-5) and then sourced batches
// of 3 records with sources 10, 20, ... into one segment, closes the log and
// returns the bases and the stamped bytes of the sourced batches.
func buildSourcedLog(t *testing.T, dir string, n int) ([]int64, []SourcedBatch) {
	t.Helper()
	l, err := Open(Options{Dir: dir, Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	writeBatches(t, l, 2, 10)
	var sources []uint64
	for i := range n {
		sources = append(sources, uint64(10*(i+1)))
	}
	bs := sourced(0, 3, sources...)
	bases := appendSourced(t, l, bs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return bases, bs
}

// A crash tore off batches whose index entries were fsynced before them.
func TestSourceIndexTornBatches(t *testing.T) {
	src := t.TempDir()
	bases, bs := buildSourcedLog(t, src, 5)
	logPath := segmentPath(src, 0, extLog)
	full, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	batchPos := func(i int) int { return len(full) - len(concatSourced(bs[i:])) }

	for _, tc := range []struct {
		name    string
		cut     int // log size after the crash
		applied uint64
		entries int
	}{
		{"mid batch 3", batchPos(3) + 20, 30, 3},
		{"at batch 3", batchPos(3), 30, 3},
		{"last byte", len(full) - 1, 40, 4},
		{"all sourced", batchPos(0) + 1, 0, 0},
		{"nothing", len(full), 50, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, src, dir)
			if err := os.Truncate(filepath.Join(dir, filepath.Base(logPath)), int64(tc.cut)); err != nil {
				t.Fatal(err)
			}
			l := openTest(t, Options{Dir: dir, Fsync: true})
			if l.SourceApplied() != tc.applied || l.sourceEntries() != tc.entries {
				t.Fatalf("applied %d entries %d, want %d %d", l.SourceApplied(), l.sourceEntries(), tc.applied, tc.entries)
			}
			got := readSourceFile(t, dir)
			if len(got) != tc.entries {
				t.Fatalf("source index file has %d entries, want %d", len(got), tc.entries)
			}
			for i, e := range got {
				if e.offset != bases[i] || e.source != bs[i].Source || e.offset >= l.LogEndOffset() {
					t.Fatalf("entry %d = %+v, log end %d", i, e, l.LogEndOffset())
				}
			}
			// The replay appends the lost batches again at the same offsets
			// (and a plain append may come first: its offset must not be
			// credited to a dropped entry).
			end := l.LogEndOffset()
			writeBatches(t, l, 1, 10)
			again := sourced(100, 1, 60)
			if got := appendSourced(t, l, again); got[0] != end+3 {
				t.Fatalf("re-append at %d, want %d", got[0], end+3)
			}
			if l.SourceApplied() != 60 {
				t.Fatalf("applied %d after re-append", l.SourceApplied())
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, Options{Dir: dir, Fsync: true})
			if l.SourceApplied() != 60 || l.sourceEntries() != tc.entries+1 {
				t.Fatalf("after second reopen applied %d entries %d", l.SourceApplied(), l.sourceEntries())
			}
		})
	}

	// A crash between the index fsync and the batch write: entries for
	// offsets the log never reached.
	t.Run("never written", func(t *testing.T) {
		dir := t.TempDir()
		copyDir(t, src, dir)
		f, err := os.OpenFile(filepath.Join(dir, sourceIndexFile), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		end := bases[4] + 3
		f.Write(appendSourceEntry(appendSourceEntry(nil, end, 60), end+3, 70))
		f.Close()
		l := openTest(t, Options{Dir: dir})
		if l.SourceApplied() != 50 || len(readSourceFile(t, dir)) != 5 {
			t.Fatalf("applied %d, %d entries on disk", l.SourceApplied(), len(readSourceFile(t, dir)))
		}
	})
}

func concatSourced(bs []SourcedBatch) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b.Batch...)
	}
	return out
}

func TestSourceIndexTornEntry(t *testing.T) {
	src := t.TempDir()
	bases, _ := buildSourcedLog(t, src, 3)
	path := filepath.Join(src, sourceIndexFile)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := bases[2] + 3
	for name, tail := range map[string][]byte{
		"partial":           appendSourceEntry(nil, end, 40)[:7],
		"partial past one":  appendSourceEntry(appendSourceEntry(nil, end, 40), end+3, 50)[:sourceEntrySize+5],
		"zeros":             make([]byte, 2*sourceEntrySize),
		"offset backwards":  appendSourceEntry(nil, bases[1], 40),
		"source backwards":  appendSourceEntry(nil, bases[2]+1, 20),
		"zeros and partial": make([]byte, sourceEntrySize+3),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, src, dir)
			if err := os.WriteFile(filepath.Join(dir, sourceIndexFile), append(bytes.Clone(orig), tail...), 0o644); err != nil {
				t.Fatal(err)
			}
			l := openTest(t, Options{Dir: dir, Fsync: true})
			if l.SourceApplied() != 30 || l.sourceEntries() != 3 {
				t.Fatalf("applied %d entries %d, want 30 3", l.SourceApplied(), l.sourceEntries())
			}
			// Cut back to its valid entries, or to them and zeros.
			if got, want := readSourceFile(t, dir), parseSourceFile(t, orig); !slices.Equal(got, want) {
				t.Fatalf("source index %v after recovery, want %v", got, want)
			}
			// New entries go right after the valid ones.
			bs := sourced(9, 1, 40)
			got := appendSourced(t, l, bs)
			if e := readSourceFile(t, dir); len(e) != 4 || e[3] != (sourceEntry{got[0], 40}) {
				t.Fatalf("source index after append %v", e)
			}
		})
	}
}

func TestSourceIndexCompactAtOpen(t *testing.T) {
	dir := t.TempDir()
	bases, _ := buildSourcedLog(t, dir, 20)
	full := readSourceFile(t, dir)
	if len(full) != 20 {
		t.Fatalf("%d entries, want 20", len(full))
	}
	// A crash during an earlier compaction left its temporary file.
	tmp := filepath.Join(dir, sourceIndexTmp)
	if err := os.WriteFile(tmp, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{Dir: dir, Fsync: true, sourceIndexMaxBytes: 10 * sourceEntrySize}
	l := openTest(t, opts)
	if l.SourceApplied() != 200 || l.sourceEntries() != 1 {
		t.Fatalf("applied %d entries %d, want 200 1", l.SourceApplied(), l.sourceEntries())
	}
	if got := readSourceFile(t, dir); !slices.Equal(got, full[19:]) {
		t.Fatalf("compacted index %v, want %v", got, full[19:])
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
	// The rewritten file is the one appended to.
	appendSourced(t, l, sourced(50, 1, 210))
	if got := readSourceFile(t, dir); len(got) != 2 || got[0].offset != bases[19] || got[1].source != 210 {
		t.Fatalf("index after append %v", got)
	}
}

// Compaction while running keeps what a crash of the not yet durable
// batches would need: the last entry below the durable end and all after.
func TestSourceIndexCompactKeepsDurableTail(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, Fsync: true, sourceIndexMaxBytes: 8 * sourceEntrySize}
	l := openTest(t, opts)
	var source uint64
	next := func(n int) []int64 {
		var out []int64
		for range n {
			source += 10
			out = append(out, appendSourced(t, l, sourced(int(source), 1, source))...)
		}
		return out
	}
	next(5)
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	durableSource := source
	durableSize := batchBytes(t, segmentPath(dir, 0, extLog))
	unsynced := next(6) // the 9th entry triggers compaction
	entries := readSourceFile(t, dir)
	if len(entries) > 8 {
		t.Fatalf("index not compacted: %d entries", len(entries))
	}
	if entries[0].source != durableSource || entries[0].offset >= l.DurableEnd() {
		t.Fatalf("compacted index starts with %+v, want the last durable entry (source %d, below %d)",
			entries[0], durableSource, l.DurableEnd())
	}
	if got := entries[len(entries)-1]; got.offset != unsynced[5] || got.source != source {
		t.Fatalf("compacted index ends with %+v", got)
	}
	if l.SourceApplied() != source {
		t.Fatalf("applied %d, want %d", l.SourceApplied(), source)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A host crash loses what Sync had not covered.
	if err := os.Truncate(segmentPath(dir, 0, extLog), durableSize); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	if l.SourceApplied() != durableSource {
		t.Fatalf("after losing unsynced batches applied %d, want %d", l.SourceApplied(), durableSource)
	}
	// Many more, each made durable: the file stays bounded and the answer
	// right.
	for range 40 {
		next(1)
		if _, err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(readSourceFile(t, dir)); n > 8 || l.SourceApplied() != source {
		t.Fatalf("%d entries, applied %d (want %d)", n, l.SourceApplied(), source)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	if l.SourceApplied() != source {
		t.Fatalf("after reopen applied %d, want %d", l.SourceApplied(), source)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// The index entries are written (and fsynced with Fsync on) before any of
// the batch bytes, and segments may roll between the batches of one call.
func TestAppendSourcedOrderAndRolls(t *testing.T) {
	for _, fsync := range []bool{true, false} {
		t.Run(fmt.Sprint("fsync=", fsync), func(t *testing.T) {
			dir := t.TempDir()
			var events []string
			b0, _ := simpleBatch(0, 3, 1, 100)
			opts := Options{Dir: dir, Fsync: fsync, SegmentBytes: int64(2 * len(b0))}
			opts.syncSourceIndex = func(f vfs.File) error {
				b, err := os.ReadFile(f.Name())
				if err != nil {
					return err
				}
				events = append(events, fmt.Sprintf("sync %d", len(parseSourceFile(t, b))))
				return f.Sync()
			}
			opts.beforeBatchWrite = func(base int64) {
				// Whatever the order of the calls, the entry must be in the
				// file when its batch is written.
				mark := ""
				if b, err := os.ReadFile(filepath.Join(dir, sourceIndexFile)); err == nil {
					for ; len(b) >= sourceEntrySize; b = b[sourceEntrySize:] {
						if o, _ := parseSourceEntry(b); o == base {
							mark = " indexed"
						}
					}
				}
				events = append(events, fmt.Sprintf("write %d%s", base, mark))
			}
			l := openTest(t, opts)
			writeBatches(t, l, 1, 100)
			bs := sourced(1, 3, 5, 6, 7, 8, 9)
			segs := l.Segments()
			bases := appendSourced(t, l, bs)
			writeBatches(t, l, 1, 100)

			want := []string{"write 0"}
			if fsync {
				want = append(want, "sync 5")
			}
			for _, b := range bases {
				want = append(want, fmt.Sprintf("write %d indexed", b))
			}
			want = append(want, "write 18")
			if !slices.Equal(events, want) {
				t.Fatalf("operations %q, want %q", events, want)
			}
			// Two batches per segment: the call rolled twice or more.
			if got := l.Segments(); got < segs+2 {
				t.Fatalf("%d segments after the call, %d before", got, segs)
			}
			if got := mustRead(t, l, bases[0], 1<<30, bases[4]+3); !bytes.Equal(got, concatSourced(bs)) {
				t.Fatal("sourced batches do not read back across segments")
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, Options{Dir: dir, Fsync: fsync, SegmentBytes: opts.SegmentBytes})
			if l.SourceApplied() != 9 || l.sourceEntries() != 5 || l.LogEndOffset() != 21 {
				t.Fatalf("after reopen applied %d entries %d end %d", l.SourceApplied(), l.sourceEntries(), l.LogEndOffset())
			}
		})
	}
}

// A failed index fsync fails the log, as a failed log fsync does, before a
// single batch byte is written.
func TestAppendSourcedIndexSyncFails(t *testing.T) {
	dir := t.TempDir()
	fail := false
	opts := Options{Dir: dir, Fsync: true}
	opts.syncSourceIndex = func(f vfs.File) error {
		if fail {
			return errors.New("injected EIO")
		}
		return f.Sync()
	}
	opts.beforeBatchWrite = func(base int64) {
		if fail {
			t.Errorf("batch at %d written after a failed index fsync", base)
		}
	}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	appendSourced(t, l, sourced(0, 2, 10))
	end := l.LogEndOffset()
	fail = true
	got, err := l.AppendSourced(sourced(1, 2, 20, 30), 3)
	if err == nil || len(got) != 0 {
		t.Fatalf("AppendSourced with failing fsync = %v, %v", got, err)
	}
	if l.LogEndOffset() != end || l.SourceApplied() != 10 {
		t.Fatalf("end %d applied %d after failure", l.LogEndOffset(), l.SourceApplied())
	}
	b, _ := simpleBatch(0, 1, 1, 1)
	if _, err := l.Append(b, 0); err == nil {
		t.Fatal("Append succeeded on a failed log")
	}
	if _, err := l.Sync(); err == nil {
		t.Fatal("Sync succeeded on a failed log")
	}
	l.Close()

	fail = false
	l = openTest(t, Options{Dir: dir, Fsync: true})
	if l.SourceApplied() != 10 || l.sourceEntries() != 1 || l.LogEndOffset() != end {
		t.Fatalf("after reopen applied %d entries %d end %d", l.SourceApplied(), l.sourceEntries(), l.LogEndOffset())
	}
}

// A batch that cannot be written mid-call takes its index entry, and those
// of the batches after it, back out; the batches before it stay.
func TestAppendSourcedPartialFailure(t *testing.T) {
	dir := t.TempDir()
	b0, _ := simpleBatch(0, 2, 1, 100)
	opts := Options{Dir: dir, Fsync: true, SegmentBytes: int64(2 * len(b0))}
	l := openTest(t, opts)
	appendSourced(t, l, sourced(0, 2, 10)) // offsets 0-1
	// Two batches fit a segment: of the next four, the second rolls to a
	// segment at offset 4 and the fourth would roll to one at 8, but a file
	// already there makes that roll fail.
	blocker := segmentPath(dir, 8, extLog)
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bs := sourced(1, 2, 20, 30, 40, 50)
	got, err := l.AppendSourced(bs, 3)
	if err == nil {
		t.Fatal("AppendSourced succeeded with the roll blocked")
	}
	if !slices.Equal(got, []int64{2, 4, 6}) || l.LogEndOffset() != 8 || l.SourceApplied() != 40 || l.Segments() != 2 {
		t.Fatalf("partial AppendSourced = %v; end %d applied %d segments %d",
			got, l.LogEndOffset(), l.SourceApplied(), l.Segments())
	}
	want := []sourceEntry{{0, 10}, {2, 20}, {4, 30}, {6, 40}}
	if e := readSourceFile(t, dir); !slices.Equal(e, want) {
		t.Fatalf("source index %v, want %v", e, want)
	}
	// The log still works once the obstacle is gone; the remaining batch
	// takes the offset its dropped entry had.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	appendSourced(t, l, sourced(5, 2, 50))
	want = append(want, sourceEntry{8, 50})
	if e := readSourceFile(t, dir); !slices.Equal(e, want) {
		t.Fatalf("source index %v, want %v", e, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, opts)
	if l.SourceApplied() != 50 || l.sourceEntries() != 5 || l.LogEndOffset() != 10 {
		t.Fatalf("after reopen applied %d entries %d end %d", l.SourceApplied(), l.sourceEntries(), l.LogEndOffset())
	}
}

// Concurrent Append and AppendSourced calls never interleave inside a
// sourced call, and every index entry names its own batch.
func TestAppendSourcedConcurrent(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, Fsync: true, SegmentBytes: 8 << 10}
	l := openTest(t, opts)
	type call struct {
		bases []int64
		bytes [][]byte
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		calls []call
	)
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := range 100 {
			b, _ := simpleBatch(i, 1+i%3, int64(i), 50)
			if _, err := l.Append(b, 1); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 60 {
			s := uint64(100 * (i + 1))
			bs := sourced(i, 1+i%4, s, s, s+1)
			bases, err := l.AppendSourced(bs, 2)
			if err != nil {
				t.Error(err)
				return
			}
			c := call{bases: bases}
			for _, b := range bs {
				c.bytes = append(c.bytes, bytes.Clone(b.Batch))
			}
			mu.Lock()
			calls = append(calls, c)
			mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for range 50 {
			if _, err := l.Sync(); err != nil {
				t.Error(err)
				return
			}
			_ = l.SourceApplied()
		}
	}()
	wg.Wait()
	if t.Failed() {
		return
	}
	end := l.LogEndOffset()
	for _, c := range calls {
		// One call's batches are contiguous.
		got := mustRead(t, l, c.bases[0], 1<<30, c.bases[len(c.bases)-1]+1)
		if !bytes.Equal(got, bytes.Join(c.bytes, nil)) {
			t.Fatalf("call at %v does not read back contiguously", c.bases)
		}
	}
	if l.SourceApplied() != 6001 || l.sourceEntries() != 180 {
		t.Fatalf("applied %d entries %d", l.SourceApplied(), l.sourceEntries())
	}
	for _, e := range readSourceFile(t, dir) {
		if e.offset >= end {
			t.Fatalf("entry %+v past the end %d", e, end)
		}
	}
	l.Close()
	l = openTest(t, opts)
	if l.SourceApplied() != 6001 || l.sourceEntries() != 180 {
		t.Fatalf("after reopen applied %d entries %d", l.SourceApplied(), l.sourceEntries())
	}
}

// With Fsync on, the source index is extended with zeros a chunk at a
// time, so that most entries overwrite zeros (and need no inode write to
// be durable); the zeros survive a reopen, which finds the entries before
// them; without Fsync nothing is written ahead.
func TestSourceIndexWritesAhead(t *testing.T) {
	for _, fsync := range []bool{true, false} {
		t.Run(fmt.Sprint("fsync=", fsync), func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, Fsync: fsync, sourceIndexMaxBytes: 4 * sourceIndexChunk}
			syncs := 0
			opts.syncSourceIndex = func(vfs.File) error { syncs++; return nil } // speed: no real fsync
			l := openTest(t, opts)
			path := filepath.Join(dir, sourceIndexFile)
			perChunk := sourceIndexChunk / sourceEntrySize
			var source uint64
			add := func(n int) {
				for range n {
					source++
					if _, err := l.AppendSourced(sourced(int(source), 1, source), 1); err != nil {
						t.Fatal(err)
					}
				}
			}
			wantSize := func(entries int) int64 {
				if !fsync {
					return int64(entries * sourceEntrySize)
				}
				return int64((entries + perChunk - 1) / perChunk * sourceIndexChunk)
			}
			add(1)
			if got := fileSize(t, path); got != wantSize(1) {
				t.Fatalf("after 1 entry the file has %d bytes, want %d", got, wantSize(1))
			}
			add(perChunk) // one more than a chunk holds
			if got := fileSize(t, path); got != wantSize(perChunk+1) {
				t.Fatalf("after %d entries the file has %d bytes, want %d", perChunk+1, got, wantSize(perChunk+1))
			}
			if fsync && syncs != perChunk+1 {
				t.Fatalf("%d index syncs for %d appends", syncs, perChunk+1)
			}
			if got := readSourceFile(t, dir); len(got) != perChunk+1 || got[len(got)-1].source != source {
				t.Fatalf("%d entries on disk, last %+v", len(got), got[len(got)-1])
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openTest(t, opts)
			if l.SourceApplied() != source || l.sourceEntries() != perChunk+1 {
				t.Fatalf("after reopen applied %d entries %d, want %d %d", l.SourceApplied(), l.sourceEntries(), source, perChunk+1)
			}
			if got := fileSize(t, path); got != wantSize(perChunk+1) {
				t.Fatalf("reopen changed the file to %d bytes, want %d", got, wantSize(perChunk+1))
			}
			// The next entry goes right after the last one, over the zeros.
			add(1)
			if got := readSourceFile(t, dir); len(got) != perChunk+2 || got[len(got)-1].source != source {
				t.Fatalf("%d entries after reopen and append", len(got))
			}
		})
	}
}

// A source index written before entries were written ahead (no zeros after
// them) is read as it is and extended by the next append.
func TestSourceIndexWithoutZerosAhead(t *testing.T) {
	dir := t.TempDir()
	bases, _ := buildSourcedLog(t, dir, 3)
	path := filepath.Join(dir, sourceIndexFile)
	if err := os.Truncate(path, 3*sourceEntrySize); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, Options{Dir: dir, Fsync: true})
	if l.SourceApplied() != 30 || l.sourceEntries() != 3 {
		t.Fatalf("applied %d entries %d, want 30 3", l.SourceApplied(), l.sourceEntries())
	}
	got := appendSourced(t, l, sourced(7, 1, 40))
	want := []sourceEntry{{bases[0], 10}, {bases[1], 20}, {bases[2], 30}, {got[0], 40}}
	if e := readSourceFile(t, dir); !slices.Equal(e, want) {
		t.Fatalf("source index %v, want %v", e, want)
	}
	if n := fileSize(t, path); n != sourceIndexChunk {
		t.Fatalf("file has %d bytes, want %d", n, sourceIndexChunk)
	}
}

// Source 0 would read as the end of the index (an all-zero entry), so it
// is refused.
func TestAppendSourcedRejectsSourceZero(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir(), Fsync: true})
	if _, err := l.AppendSourced(sourced(1, 1, 0), 1); !errors.Is(err, ErrSourceOrder) {
		t.Fatalf("source 0: %v, want ErrSourceOrder", err)
	}
	if l.LogEndOffset() != 0 || l.sourceEntries() != 0 {
		t.Fatal("a refused batch was written")
	}
}

// TestForgetSourcesAbove: the positions above keep go, durably (a reopen
// finds the same), the batches stay, and lower sources append again.
func TestForgetSourcesAbove(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	appendSourced(t, l, sourced(0, 2, 100, 200, 300, 400))
	end := l.LogEndOffset()
	if err := l.ForgetSourcesAbove(250); err != nil {
		t.Fatal(err)
	}
	if got := l.SourceApplied(); got != 200 {
		t.Fatalf("SourceApplied after forgetting above 250 = %d, want 200", got)
	}
	if err := l.ForgetSourcesAbove(0); err != nil {
		t.Fatal(err)
	}
	if got := l.SourceApplied(); got != 0 {
		t.Fatalf("SourceApplied after forgetting all = %d, want 0", got)
	}
	if got := l.LogEndOffset(); got != end {
		t.Fatalf("log end %d after forgetting sources, want %d: batches must stay", got, end)
	}
	appendSourced(t, l, sourced(10, 1, 5, 6))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(Options{Dir: dir, Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.SourceApplied(); got != 6 {
		t.Fatalf("SourceApplied after reopen = %d, want 6", got)
	}
	want := []sourceEntry{{end, 5}, {end + 1, 6}}
	if got := readSourceFile(t, dir); !slices.Equal(got, want) {
		t.Fatalf("source index %v, want %v", got, want)
	}
}
