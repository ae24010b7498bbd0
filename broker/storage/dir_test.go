package storage

import (
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/storage/vfs"
)

func TestDirMarkerRoundTrip(t *testing.T) {
	m := Marker{TopicID: 42, UUID: [16]byte{1, 2, 3, 15: 0xff}}
	got, err := parseMarker(m.encode())
	if err != nil || got != m {
		t.Fatalf("parseMarker(encode(%v)) = %v, %v", m, got, err)
	}
	for _, bad := range []string{"", "version: 1\nkafgres_topic_id: 1\ntopic_uuid: " + hex.EncodeToString(m.UUID[:]),
		"version: 0\nkafgres_topic_id: x\ntopic_uuid: " + hex.EncodeToString(m.UUID[:]), "version: 0\nkafgres_topic_id: 1\ntopic_uuid: abc"} {
		if _, err := parseMarker([]byte(bad)); err == nil {
			t.Errorf("parseMarker(%q) accepted", bad)
		}
	}
}

// mkdir makes root/name holding files (name: content).
func mkdir(t *testing.T, root, name string, files map[string]string) string {
	t.Helper()
	d := filepath.Join(root, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, c := range files {
		if err := os.WriteFile(filepath.Join(d, f), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// claim decides what happens to each directory of the data directory.
func TestClaim(t *testing.T) {
	root := t.TempDir()
	want := &Topic{ID: 7, Name: "t", UUID: [16]byte{7}, Partitions: 2}
	mine := Marker{TopicID: 7, UUID: [16]byte{7}}
	other := Marker{TopicID: 9, UUID: [16]byte{9}}
	legacy := mkdir(t, root, "legacy", map[string]string{"partition.metadata": "version: 0\ntopic_id: " + hex.EncodeToString(want.UUID[:]) + "\n", "00000000000000000000.log": "x"})
	stranger := mkdir(t, root, "stranger", map[string]string{"partition.metadata": "version: 0\ntopic_id: " + hex.EncodeToString(other.UUID[:]) + "\n"})
	empty := mkdir(t, root, "empty", nil)
	for _, tc := range []struct {
		name   string
		dir    string
		want   *Topic
		index  int
		m      Marker
		marked bool
		verd   dirVerdict
	}{
		{"ours", root, want, 1, mine, true, dirKeep},
		{"ours beyond the catalog's partitions", root, want, 2, mine, true, dirConflict},
		{"marked for another topic", root, want, 0, other, true, dirCheckDropped},
		{"marked, name unknown", root, nil, 0, other, true, dirCheckDropped},
		{"unmarked, name unknown", stranger, nil, 0, Marker{}, false, dirLeave},
		{"0.2.0 directory of the topic", legacy, want, 0, Marker{}, false, dirAdopt},
		{"0.2.0 directory beyond the partitions", legacy, want, 5, Marker{}, false, dirConflict},
		{"unmarked, another topic's", stranger, want, 0, Marker{}, false, dirConflict},
		{"unmarked and empty", empty, want, 0, Marker{}, false, dirRemove},
	} {
		if got, _ := claim(vfs.OS, tc.dir, tc.want, tc.index, tc.m, tc.marked); got != tc.verd {
			t.Errorf("%s: verdict %d, want %d", tc.name, got, tc.verd)
		}
	}
}

// fakeCatalog lists dropped topics and a topic id sequence.
type fakeCatalog struct {
	dropped map[Marker]bool
	seq     int64
}

func (c fakeCatalog) Dropped(_ context.Context, ms []Marker) (map[Marker]bool, error) {
	out := map[Marker]bool{}
	for _, m := range ms {
		if c.dropped[m] {
			out[m] = true
		}
	}
	return out, nil
}

func (c fakeCatalog) TopicIDSequence(context.Context) (int64, error) { return c.seq, nil }

func exists(t *testing.T, dir string) bool {
	t.Helper()
	_, err := os.Stat(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// Check removes what is proved dead, adopts, leaves strangers, and when
// anything conflicts refuses having changed nothing.
func TestCheck(t *testing.T) {
	root := t.TempDir()
	d, err := Open(root, true)
	if err != nil {
		t.Fatal(err)
	}
	keep := Topic{ID: 1, Name: "keep", UUID: [16]byte{1}, Partitions: 1}
	old := Topic{ID: 2, Name: "old", UUID: [16]byte{2}, Partitions: 1}
	gone := Marker{TopicID: 3, UUID: [16]byte{3}}
	marker := func(m Marker) map[string]string { return map[string]string{segment.MarkerFile: string(m.encode())} }
	keepDir := mkdir(t, root, "keep-0", marker(Marker{keep.ID, keep.UUID}))
	oldDir := mkdir(t, root, "old-0", map[string]string{"partition.metadata": "version: 0\ntopic_id: " + hex.EncodeToString(old.UUID[:]) + "\n"})
	goneDir := mkdir(t, root, "gone-0", marker(gone))
	strayNew := mkdir(t, root, "x-0.kafgres-new", marker(gone))
	strayDelete := mkdir(t, root, "x-0."+strings.Repeat("0f", 16)+"-delete", marker(gone))
	foreign := mkdir(t, root, "foreign-0", map[string]string{"notes.txt": "x"})
	unknown := mkdir(t, root, "unknown-0", marker(Marker{TopicID: 4, UUID: [16]byte{4}}))

	cat := fakeCatalog{dropped: map[Marker]bool{gone: true}, seq: 4}
	_, err = d.Check(context.Background(), []Topic{keep, old}, cat)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || len(conflict.Problems) != 1 || !strings.Contains(conflict.Problems[0], unknown) {
		t.Fatalf("Check with a topic the catalog neither has nor dropped: %v", err)
	}
	for _, dir := range []string{keepDir, oldDir, goneDir, strayNew, strayDelete, foreign, unknown} {
		if !exists(t, dir) {
			t.Fatalf("refusing Check removed %s", dir)
		}
	}

	if err := os.RemoveAll(unknown); err != nil {
		t.Fatal(err)
	}
	done, err := d.Check(context.Background(), []Topic{keep, old}, cat)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done.Left, []string{foreign}) || !slices.Equal(done.Adopted, []string{oldDir}) ||
		!slices.Equal(done.Removed, []string{goneDir}) || len(done.Interrupted) != 2 {
		t.Fatalf("Check did %+v", done)
	}
	for _, i := range done.Interrupted {
		if i.Err != nil {
			t.Errorf("interrupted %s left: %v", i.Dir, i.Err)
		}
	}
	for _, dir := range []string{goneDir, strayNew, strayDelete} {
		if exists(t, dir) {
			t.Errorf("%s still there", dir)
		}
	}
	if m, ok, err := readDirMarker(vfs.OS, oldDir); err != nil || !ok || m != (Marker{old.ID, old.UUID}) {
		t.Errorf("old-0 not adopted: %v, %v, %v", m, ok, err)
	}
	if !exists(t, keepDir) || !exists(t, foreign) {
		t.Error("Check removed a live or foreign directory")
	}
}

// A partition directory is created with its marker, kept, replaced when a
// dropped topic left it, refused when nobody dropped it, and removed
// through a deletion directory.
func TestPreparePartition(t *testing.T) {
	root := t.TempDir()
	d, err := Open(filepath.Join(root, "data"), false)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := Marker{TopicID: 5, UUID: [16]byte{5}}
	dir := d.PartitionDir("t", 3)
	if dir != filepath.Join(root, "data", "t-3") {
		t.Fatalf("PartitionDir = %s", dir)
	}
	if did, err := d.PreparePartition(ctx, "t", 3, m, fakeCatalog{}); err != nil || did != PartitionCreated {
		t.Fatalf("create: %v, %v", did, err)
	}
	if got, ok, err := readDirMarker(vfs.OS, dir); err != nil || !ok || got != m {
		t.Fatalf("marker %v, %v, %v", got, ok, err)
	}
	if did, err := d.PreparePartition(ctx, "t", 3, m, fakeCatalog{}); err != nil || did != PartitionKept {
		t.Fatalf("reopen: %v, %v", did, err)
	}
	next := Marker{TopicID: 6, UUID: [16]byte{6}}
	if _, err := d.PreparePartition(ctx, "t", 3, next, fakeCatalog{}); err == nil || !strings.Contains(err.Error(), "neither has nor dropped") {
		t.Fatalf("another topic's directory taken over: %v", err)
	}
	if did, err := d.PreparePartition(ctx, "t", 3, next, fakeCatalog{dropped: map[Marker]bool{m: true}}); err != nil || did != PartitionReplacedDropped {
		t.Fatalf("replace dropped: %v, %v", did, err)
	}
	if got, _, _ := readDirMarker(vfs.OS, dir); got != next {
		t.Fatalf("marker %v after replacing, want %v", got, next)
	}
	if removed, err := d.RemovePartition(dir, next.UUID); err != nil || !strings.HasSuffix(removed, "-delete") {
		t.Fatalf("RemovePartition: %s, %v", removed, err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "data"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("data directory after removal: %v, %v", entries, err)
	}
	if err := d.WritePIDFile(); err != nil {
		t.Fatal(err)
	}
	if d.Abs() != filepath.Join(root, "data") {
		t.Fatalf("Abs = %s", d.Abs())
	}
}
