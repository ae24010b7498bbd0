package segment

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// A new partition directory appears under its name only with its marker,
// and is fsynced into its parent before CreateDir returns.
func TestCreateDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "t-0")
	var synced []string
	record := func(d string) error { synced = append(synced, d); return vfs.OS.SyncDir(d) }
	if err := createDir(vfs.OS, dir, []byte("marker"), true, record); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadMarker(vfs.OS, dir); err != nil || string(b) != "marker" {
		t.Fatalf("marker %q, %v", b, err)
	}
	if !slices.Contains(synced, root) {
		t.Fatalf("parent %s not fsynced; fsynced %v", root, synced)
	}
	if _, err := os.Stat(CreatingDir(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary directory left: %v", err)
	}
	if err := CreateDir(vfs.OS, dir, []byte("again"), true); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CreateDir over an existing directory: %v", err)
	}
	if b, _ := ReadMarker(vfs.OS, dir); string(b) != "marker" {
		t.Fatalf("existing marker replaced: %q", b)
	}

	// A creation a crash interrupted is cleaned up by the next one.
	other := filepath.Join(root, "t-1")
	if err := os.Mkdir(CreatingDir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(CreatingDir(other), MarkerFile), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CreateDir(vfs.OS, other, []byte("new"), false); err != nil {
		t.Fatal(err)
	}
	if b, _ := ReadMarker(vfs.OS, other); string(b) != "new" {
		t.Fatalf("marker %q", b)
	}
}

// RemoveMarkedDir deletes only directories that are empty or marked.
func TestRemoveMarkedDir(t *testing.T) {
	root := t.TempDir()
	foreign := filepath.Join(root, "foreign-0")
	if err := os.Mkdir(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "00000000000000000000.log"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RemoveMarkedDir(vfs.OS, foreign); !errors.Is(err, ErrNotMarked) {
		t.Fatalf("unmarked directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(foreign, "00000000000000000000.log")); err != nil {
		t.Fatalf("unmarked directory lost a file: %v", err)
	}

	empty := filepath.Join(root, "empty-0")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RemoveMarkedDir(vfs.OS, empty); err != nil {
		t.Fatal(err)
	}

	// a crash while CreateDir wrote the marker leaves only its temporary file
	halfMade := filepath.Join(root, "half-0.kafgres-new")
	if err := os.Mkdir(halfMade, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(halfMade, markerTemp), []byte("m"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RemoveMarkedDir(vfs.OS, halfMade); err != nil {
		t.Fatalf("directory holding only the marker's temporary file: %v", err)
	}
	// but the temporary file does not make other files ours
	if err := os.WriteFile(filepath.Join(foreign, markerTemp), []byte("m"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RemoveMarkedDir(vfs.OS, foreign); !errors.Is(err, ErrNotMarked) {
		t.Fatalf("unmarked directory with a marker temporary file: %v", err)
	}

	ours := filepath.Join(root, "ours-0")
	if err := CreateDir(vfs.OS, ours, []byte("m"), false); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, Options{Dir: ours, TopicID: "00112233445566778899aabbccddeeff"})
	l.Close()
	if err := RemoveMarkedDir(vfs.OS, ours); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{empty, halfMade, ours} {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s still there: %v", d, err)
		}
	}
}
