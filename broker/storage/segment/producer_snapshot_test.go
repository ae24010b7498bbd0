package segment

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

func testSnapshotEntries() []ProducerSnapshotEntry {
	return []ProducerSnapshotEntry{
		{ProducerID: 7, Epoch: 2, LastSequence: 9, LastOffset: 41, OffsetDelta: 4, Timestamp: 1700000000000, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 7, Epoch: 2, LastSequence: 14, LastOffset: 50, OffsetDelta: 4, Timestamp: 1700000000001, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 1 << 40, Epoch: 0, LastSequence: -1, LastOffset: -1, Timestamp: 5, CoordinatorEpoch: 3, CurrentTxnFirstOffset: 17},
	}
}

func TestProducerSnapshotRoundTrip(t *testing.T) {
	entries := testSnapshotEntries()
	b := EncodeProducerSnapshot(entries)
	// Kafka's layout: version 1, CRC, count, 46 bytes per entry.
	if len(b) != 10+46*len(entries) || binary.BigEndian.Uint16(b) != 1 || binary.BigEndian.Uint32(b[6:]) != uint32(len(entries)) {
		t.Fatalf("layout: %d bytes, version %d, count %d", len(b), binary.BigEndian.Uint16(b), binary.BigEndian.Uint32(b[6:]))
	}
	// The third entry's producer id and current transaction first offset
	// sit where Kafka's reader looks for them.
	e := b[10+2*46:]
	if binary.BigEndian.Uint64(e) != 1<<40 || binary.BigEndian.Uint64(e[38:]) != 17 {
		t.Fatalf("entry fields misplaced: % x", e)
	}
	got, err := DecodeProducerSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, entries) {
		t.Fatalf("decoded %+v, want %+v", got, entries)
	}
	if got, err := DecodeProducerSnapshot(EncodeProducerSnapshot(nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty snapshot: %v %v", got, err)
	}
}

func TestProducerSnapshotCorrupt(t *testing.T) {
	good := EncodeProducerSnapshot(testSnapshotEntries())
	cases := map[string][]byte{
		"empty":     nil,
		"short":     good[:8],
		"truncated": good[:len(good)-1],
		"longer":    append(slices.Clone(good), 0),
		"version":   append([]byte{0, 2}, good[2:]...),
	}
	for _, i := range []int{3, 7, 20, len(good) - 1} {
		b := slices.Clone(good)
		b[i] ^= 0x10
		cases["flip "+string(rune('a'+i%26))] = b
	}
	for name, b := range cases {
		if _, err := DecodeProducerSnapshot(b); !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("%s: err %v, want ErrCorruptSnapshot", name, err)
		}
	}
}

// snapshotLog opens a log of batches of 10 records, one segment each.
func snapshotLog(t *testing.T, dir string, batches int) *Log {
	t.Helper()
	l := openTest(t, Options{Dir: dir, SegmentBytes: 200})
	for i := range batches {
		b, _ := simpleBatch(i, 10, int64(i), 10)
		if _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	return l
}

func snapshotOffsets(t *testing.T, l *Log) []int64 {
	t.Helper()
	offs, err := l.ProducerSnapshotOffsets()
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

func TestLoadProducerSnapshotNewestUsable(t *testing.T) {
	dir := t.TempDir()
	l := snapshotLog(t, dir, 5) // offsets [0, 50)
	for _, off := range []int64{10, 20, 30} {
		if err := l.WriteProducerSnapshot(off, []ProducerSnapshotEntry{{ProducerID: off, LastOffset: -1, LastSequence: -1, CurrentTxnFirstOffset: -1}}); err != nil {
			t.Fatal(err)
		}
	}
	off, entries, ok := l.LoadProducerSnapshot()
	if !ok || off != 30 || len(entries) != 1 || entries[0].ProducerID != 30 {
		t.Fatalf("loaded %d %+v %v, want the one at 30", off, entries, ok)
	}
	// A corrupt newest one is deleted and the next older one used.
	path := filepath.Join(dir, producerSnapshotName(30))
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	off, _, ok = l.LoadProducerSnapshot()
	if !ok || off != 20 {
		t.Fatalf("after corrupting 30: loaded %d %v, want 20", off, ok)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("corrupt snapshot kept: %v", err)
	}
	for _, off := range []int64{10, 20} {
		if err := os.WriteFile(filepath.Join(dir, producerSnapshotName(off)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if off, _, ok := l.LoadProducerSnapshot(); ok {
		t.Fatalf("loaded %d from corrupt snapshots", off)
	}
	if offs := snapshotOffsets(t, l); len(offs) != 0 {
		t.Fatalf("snapshots %v left", offs)
	}
}

func TestProducerSnapshotsBeyondRecoveredEnd(t *testing.T) {
	dir := t.TempDir()
	l := snapshotLog(t, dir, 3) // [0, 30)
	for _, off := range []int64{10, 30, 40} {
		if err := l.WriteProducerSnapshot(off, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A torn write: the last batch loses its tail, and a temporary file
	// is left behind.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	logs := segmentBases(t, dir)
	last := segmentPath(dir, logs[len(logs)-1], extLog)
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, fi.Size()-3); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, producerSnapshotName(20)+tempSuffix), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, Options{Dir: dir, SegmentBytes: 200})
	if l2.LogEndOffset() != 20 {
		t.Fatalf("recovered end %d, want 20", l2.LogEndOffset())
	}
	if got := snapshotOffsets(t, l2); !slices.Equal(got, []int64{10}) {
		t.Fatalf("snapshots after recovery %v, want [10]", got)
	}
	if _, err := os.Stat(filepath.Join(dir, producerSnapshotName(20)+tempSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary snapshot kept: %v", err)
	}
	if off, _, ok := l2.LoadProducerSnapshot(); !ok || off != 10 {
		t.Fatalf("loaded %d %v, want 10", off, ok)
	}
}

func TestProducerSnapshotsDeletedWithSegments(t *testing.T) {
	dir := t.TempDir()
	l := snapshotLog(t, dir, 6) // [0, 60), one segment per batch
	for _, off := range []int64{10, 20, 30, 40, 50, 60} {
		if err := l.WriteProducerSnapshot(off, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.DeleteRecordsBefore(25); err != nil {
		t.Fatal(err)
	}
	if got := snapshotOffsets(t, l); !slices.Equal(got, []int64{30, 40, 50, 60}) {
		t.Fatalf("after DeleteRecords(25): %v", got)
	}
	// Retention by size keeps the last segment only.
	if n, err := l.ApplyRetention(Retention{Ms: -1, Bytes: 1}, time.Now()); err != nil || n == 0 {
		t.Fatalf("retention deleted %d: %v", n, err)
	}
	start := l.LogStartOffset()
	for _, off := range snapshotOffsets(t, l) {
		if off < start {
			t.Fatalf("snapshot %d below log start %d kept", off, start)
		}
	}
	if got := snapshotOffsets(t, l); !slices.Contains(got, 60) {
		t.Fatalf("snapshot at the log end deleted: %v", got)
	}
	// A snapshot below the start (written late, racing retention) goes at
	// the next open.
	if err := l.WriteProducerSnapshot(0, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openTest(t, Options{Dir: dir, SegmentBytes: 200})
	if slices.Contains(snapshotOffsets(t, l2), 0) {
		t.Fatal("snapshot below the log start kept by Open")
	}
}

func TestEpochCheckpoint(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := ReadEpochCheckpoint(vfs.OS, dir); ok || err != nil {
		t.Fatalf("missing file: ok %v err %v", ok, err)
	}
	want := []EpochEntry{{0, 0}, {3, 100}, {4, 250}}
	if err := WriteEpochCheckpoint(vfs.OS, dir, want, true); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, EpochCheckpointFile))
	if err != nil || string(data) != "0\n3\n0 0\n3 100\n4 250\n" {
		t.Fatalf("file %q %v", data, err)
	}
	got, ok, err := ReadEpochCheckpoint(vfs.OS, dir)
	if !ok || err != nil || !slices.Equal(got, want) {
		t.Fatalf("read %v %v %v", got, ok, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0 x\n", "0\n2\n3 10\n2 20\n", "0\n1\n0 0\n1 5\n"} {
		if err := os.WriteFile(filepath.Join(dir, EpochCheckpointFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := ReadEpochCheckpoint(vfs.OS, dir); ok || err == nil {
			t.Errorf("%q: ok %v err %v, want an error", bad, ok, err)
		}
	}
}
