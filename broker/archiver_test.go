package broker

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/broker/storage"
	"github.com/kafgres/kafgres/broker/storage/segment"
)

func TestExpandArchiveCommand(t *testing.T) {
	for _, tc := range []struct{ cmd, want string }{
		{"cp %p /a/%f", "cp /d/x.log /a/t-0-x.log"},
		{`cp "%p" "/a b/%f"`, `cp "/d/x.log" "/a b/t-0-x.log"`},
		{"echo 100%% %f", "echo 100% t-0-x.log"},
		{"echo %%p", "echo %p"},
		{"echo %x %", "echo %x %"}, // unknown and trailing: kept, as Postgres does
		{"%p%f%%", "/d/x.logt-0-x.log%"},
		{"", ""},
	} {
		if got := expandArchiveCommand(tc.cmd, "/d/x.log", "t-0-x.log"); got != tc.want {
			t.Errorf("expand %q = %q, want %q", tc.cmd, got, tc.want)
		}
	}
	if got := archiveFileName("a-1", 0, "/d/a-1-0/00000000000000000003.log"); got != "a-1-0-00000000000000000003.log" {
		t.Errorf("archiveFileName = %q", got)
	}
}

// archiveLog is a partition log with sealed segments [0,3) [3,6) [6,9)
// and the active [9,10), archiving on.
func archiveLog(t *testing.T, dir string) *segment.Log {
	t.Helper()
	b := producerBatch(-1, -1, -1, 1, strings.Repeat("v", 100))
	l, err := segment.Open(segment.Options{Dir: dir, SegmentBytes: int64(3 * len(b)), Fsync: true, Archive: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := l.Append(producerBatch(-1, -1, -1, 1, strings.Repeat("v", 100)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return l
}

type archiverHarness struct {
	t     *testing.T
	a     *archiver
	store *metadata.Memory
	logs  *bytes.Buffer
	now   time.Time
	dest  string
}

func newArchiverHarness(t *testing.T, command string) *archiverHarness {
	h := &archiverHarness{t: t, store: metadata.NewMemory(), logs: &bytes.Buffer{}, now: time.Unix(1000, 0), dest: filepath.Join(t.TempDir(), "archive dir")}
	if err := os.Mkdir(h.dest, 0o755); err != nil {
		t.Fatal(err)
	}
	h.a = newArchiver(command, t.TempDir(), h.store, slog.New(slog.NewTextHandler(h.logs, nil)), time.Second, 8*time.Second)
	h.a.now = func() time.Time { return h.now }
	return h
}

func (h *archiverHarness) step(l *segment.Log) bool {
	h.t.Helper()
	done, err := h.a.step(context.Background(), archiveKey{topicID: 7, topic: "t", partition: 0}, l)
	if err != nil {
		h.t.Fatal(err)
	}
	return done
}

func (h *archiverHarness) archived() []string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dest, "list"))
	if err != nil && !os.IsNotExist(err) {
		h.t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// TestArchiverOrderAndQuoting: every sealed segment's files go to the
// command once, indexes first and the log last, segments in offset order;
// %p and %f expand so that a quoted destination with a space works.
func TestArchiverOrderAndQuoting(t *testing.T) {
	h := newArchiverHarness(t, "")
	h.a.command = `cp %p "` + h.dest + `/%f" && echo %f >> "` + h.dest + `/list"`
	l := archiveLog(t, t.TempDir())
	defer l.Close()
	if !h.step(l) {
		t.Fatal("step not done")
	}
	var want []string
	for _, base := range []string{"00000000000000000000", "00000000000000000003", "00000000000000000006"} {
		for _, ext := range []string{".index", ".timeindex", ".txnindex", ".log"} {
			want = append(want, "t-0-"+base+ext)
		}
	}
	if got := h.archived(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("archived\n%v\nwant\n%v", got, want)
	}
	for _, n := range want {
		if _, err := os.Stat(filepath.Join(h.dest, n)); err != nil {
			t.Fatal(err)
		}
	}
	if l.ArchivedOffset() != 9 {
		t.Fatalf("archived offset %d", l.ArchivedOffset())
	}
	// Nothing twice.
	h.step(l)
	if got := h.archived(); len(got) != len(want) {
		t.Fatalf("archived again: %v", got)
	}
	h.a.report(context.Background())
	st, ok := h.store.ArchiveStatus(7, 0)
	if !ok || st.ArchivedOffset != 9 || st.LastSegment != "t-0-00000000000000000006.log" || st.BacklogSegments != 0 || st.Failed != 0 {
		t.Fatalf("status %+v, %v", st, ok)
	}
}

// TestArchiverRetry: a failing command is retried after a doubling wait,
// logged once for its cause, counted, and blocks retention until it
// succeeds.
func TestArchiverRetry(t *testing.T) {
	h := newArchiverHarness(t, "")
	flag := filepath.Join(h.dest, "fail")
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.a.command = `test ! -e "` + flag + `" || { echo no space >&2; exit 3; }; echo %f >> "` + h.dest + `/list"`
	l := archiveLog(t, t.TempDir())
	defer l.Close()
	runs := func() int { return strings.Count(h.logs.String(), "segment archive command failed") }
	if h.step(l) {
		t.Fatal("done while failing")
	}
	if runs() != 1 || !strings.Contains(h.logs.String(), "no space") || !strings.Contains(h.logs.String(), "exit status 3") {
		t.Fatalf("log: %s", h.logs)
	}
	// Within the backoff nothing runs.
	h.now = h.now.Add(500 * time.Millisecond)
	h.step(l)
	if st := h.a.parts[archiveKey{7, "t", 0}].status; st.Failed != 1 || st.BacklogSegments != 3 {
		t.Fatalf("status %+v", st)
	}
	// After it: runs again, fails again, not logged again; the wait doubles.
	h.now = h.now.Add(600 * time.Millisecond)
	h.step(l)
	st := h.a.parts[archiveKey{7, "t", 0}]
	if st.status.Failed != 2 || runs() != 1 || st.notBefore.Sub(h.now) != 2*time.Second {
		t.Fatalf("failed %d, logged %d, next in %v", st.status.Failed, runs(), st.notBefore.Sub(h.now))
	}
	if n, err := l.ApplyRetention(segment.Retention{Ms: -1, Bytes: 0}, time.Now()); err != nil || n != 0 {
		t.Fatalf("retention deleted %d unarchived segments, %v", n, err)
	}
	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(2 * time.Second)
	if !h.step(l) || len(h.archived()) != 12 {
		t.Fatalf("after recovery archived %v", h.archived())
	}
	if n, err := l.ApplyRetention(segment.Retention{Ms: -1, Bytes: 0}, time.Now()); err != nil || n != 3 {
		t.Fatalf("retention deleted %d archived segments, %v; want 3", n, err)
	}
	h.a.report(context.Background())
	if s, _ := h.store.ArchiveStatus(7, 0); s.Failed != 2 || !strings.Contains(s.LastFailure, "no space") || s.ArchivedOffset != 9 {
		t.Fatalf("status %+v", s)
	}
}

// TestArchiverResumesAfterRestart: progress is per segment and survives a
// restart; a segment whose command failed part way is given again whole
// (the documented re-run), the ones before it never.
func TestArchiverResumesAfterRestart(t *testing.T) {
	h := newArchiverHarness(t, "")
	h.a.command = `case %f in *03.log) test -e "` + h.dest + `/ok" || exit 1;; esac; echo %f >> "` + h.dest + `/list"`
	dir := t.TempDir()
	l := archiveLog(t, dir)
	h.step(l)
	if got := h.archived(); len(got) != 7 || l.ArchivedOffset() != 3 {
		t.Fatalf("archived %v, offset %d", got, l.ArchivedOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dest, "ok"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := segment.Open(segment.Options{Dir: dir, Fsync: true, Archive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h2 := newArchiverHarness(t, h.a.command) // a new broker
	h2.dest = h.dest
	if !h2.step(l) {
		t.Fatal("not done")
	}
	got := h.archived()
	count := map[string]int{}
	for _, n := range got {
		count[n]++
	}
	for n, c := range count {
		want := 1
		if strings.Contains(n, "03.") && !strings.HasSuffix(n, ".log") {
			want = 2 // its indexes went before the .log failed
		}
		if c != want {
			t.Errorf("%s archived %d times, want %d", n, c, want)
		}
	}
	if len(count) != 12 || l.ArchivedOffset() != 9 {
		t.Fatalf("archived %v, offset %d", got, l.ArchivedOffset())
	}
}

// TestArchiveRestoreRoundTrip: what the archiver archived restores into a
// log with the same batches at the same offsets.
func TestArchiveRestoreRoundTrip(t *testing.T) {
	h := newArchiverHarness(t, "")
	h.a.command = `cp %p "` + h.dest + `/%f"`
	l := archiveLog(t, t.TempDir())
	defer l.Close()
	h.step(l)
	data := t.TempDir()
	out, err := storage.RestorePartition(storage.Restore{ArchiveDir: h.dest, DataDir: data, Topic: "t", Partition: 0,
		TopicUUID: "0123456789abcdef0123456789abcdef", Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Segments != 3 || out.Start != 0 || out.End != 9 {
		t.Fatalf("restored %+v", out)
	}
	r, err := segment.Open(segment.Options{Dir: out.Dir, Archive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.LogEndOffset() != 9 || r.ArchivedOffset() != 9 {
		t.Fatalf("restored log end %d, archived %d", r.LogEndOffset(), r.ArchivedOffset())
	}
	want, err := l.Read(0, 1<<20, 9)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(0, 1<<20, 9)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("restored batches differ: %d bytes, want %d", len(got), len(want))
	}
	if p, _ := r.PendingArchive(); len(p) != 0 {
		t.Fatalf("restored segments pending archive: %+v", p)
	}
	// A second restore refuses to overwrite.
	if _, err := storage.RestorePartition(storage.Restore{ArchiveDir: h.dest, DataDir: data, Topic: "t", Partition: 0,
		TopicUUID: "0123456789abcdef0123456789abcdef"}); err == nil {
		t.Fatal("restore over an existing directory succeeded")
	}
}
