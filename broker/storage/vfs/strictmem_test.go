package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

func mustWrite(t *testing.T, m *StrictMem, name string, data []byte, sync bool) File {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func content(t *testing.T, m *StrictMem, name string) ([]byte, bool) {
	t.Helper()
	b, err := ReadFile(m, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

// Only synced bytes under synced names survive a strict restart.
func TestStrictMemKeepsOnlyDurable(t *testing.T) {
	m := NewStrictMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, m, "/d/synced-named", []byte("a"), true)
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	f := mustWrite(t, m, "/d/synced-named", []byte("bb"), false) // unsynced overwrite
	mustWrite(t, m, "/d/synced-unnamed", []byte("c"), true)      // dir not synced after
	if err := m.Rename("/d/synced-named", "/d/renamed"); err != nil {
		t.Fatal(err)
	}
	m.Restart(nil)

	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("file opened before the cut: %v, want ErrPowerCut", err)
	}
	if b, ok := content(t, m, "/d/synced-named"); !ok || string(b) != "a" {
		t.Fatalf("synced-named = %q, %v; want the synced %q under the synced name", b, ok, "a")
	}
	for _, gone := range []string{"/d/synced-unnamed", "/d/renamed"} {
		if _, ok := content(t, m, gone); ok {
			t.Fatalf("%s survived without a directory sync", gone)
		}
	}
}

// A removal is undone unless the directory is synced after it; a synced
// rename replaces the target.
func TestStrictMemNames(t *testing.T) {
	m := NewStrictMem()
	mustWrite(t, m, "/x", []byte("x"), true)
	mustWrite(t, m, "/y", []byte("y"), true)
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/x"); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/y", "/z"); err != nil {
		t.Fatal(err)
	}
	m.Restart(nil)
	if _, ok := content(t, m, "/x"); !ok {
		t.Fatal("an unsynced remove survived the cut")
	}
	if _, ok := content(t, m, "/z"); ok {
		t.Fatal("an unsynced rename survived the cut")
	}
	if err := m.Rename("/y", "/x"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	m.Restart(nil)
	if b, _ := content(t, m, "/x"); string(b) != "y" {
		t.Fatalf("/x = %q after a synced rename over it, want %q", b, "y")
	}
	if _, ok := content(t, m, "/y"); ok {
		t.Fatal("the renamed name survived a synced rename")
	}
}

// CutAfter fails the n+1th change and everything after it until Restart.
func TestStrictMemCutAfter(t *testing.T) {
	m := NewStrictMem()
	f := mustWrite(t, m, "/f", nil, false)
	m.CutAfter(2)
	for i := range 2 {
		if _, err := f.WriteAt([]byte{byte(i)}, int64(i)); err != nil {
			t.Fatalf("write %d before the cut: %v", i, err)
		}
	}
	if _, err := f.WriteAt([]byte{2}, 2); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("third write: %v, want ErrPowerCut", err)
	}
	if _, err := m.Stat("/f"); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("stat while cut: %v, want ErrPowerCut", err)
	}
	m.Restart(nil)
	if _, err := m.Stat("/"); err != nil {
		t.Fatalf("stat after restart: %v", err)
	}
}

// With a random source, unsynced pages may survive, each on its own, and
// the size may be the old or the new one; synced bytes always do.
func TestStrictMemTornPages(t *testing.T) {
	synced := bytes.Repeat([]byte{1}, 2*pageSize)
	data := append(bytes.Repeat([]byte{2}, 3*pageSize), 3)
	kinds := map[string]bool{}
	for seed := range uint64(200) {
		got := survivingBytes(synced, data, rand.New(rand.NewPCG(seed, 1)))
		if len(got) != len(synced) && len(got) != len(data) {
			t.Fatalf("seed %d: size %d, want %d or %d", seed, len(got), len(synced), len(data))
		}
		for p := 0; p < len(got); p += pageSize {
			end := min(p+pageSize, len(got))
			page := got[p:end]
			old := make([]byte, end-p)
			if p < len(synced) {
				copy(old, synced[p:min(end, len(synced))])
			}
			switch {
			case bytes.Equal(page, data[p:end]):
				kinds["new"] = true
			case bytes.Equal(page, old):
				kinds["old"] = true
			default:
				t.Fatalf("seed %d: page at %d is neither the old nor the new one", seed, p)
			}
		}
		if len(got) == len(data) && !bytes.Equal(got[:pageSize], data[:pageSize]) && bytes.Equal(got[pageSize:2*pageSize], data[pageSize:2*pageSize]) {
			kinds["later page without earlier"] = true
		}
	}
	for _, k := range []string{"new", "old", "later page without earlier"} {
		if !kinds[k] {
			t.Errorf("200 seeds never produced a %q page", k)
		}
	}
}

// With a random source, a directory keeps a prefix of its changes since
// its last sync: b never survives without a, created before it.
func TestStrictMemNamePrefix(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(100) {
		m := NewStrictMem()
		mustWrite(t, m, "/a", []byte("a"), true)
		mustWrite(t, m, "/b", []byte("b"), true)
		m.Restart(rand.New(rand.NewPCG(seed, 2)))
		_, a := content(t, m, "/a")
		_, b := content(t, m, "/b")
		if b && !a {
			t.Fatalf("seed %d: the later name survived without the earlier one", seed)
		}
		seen[fmt.Sprint(a, b)] = true
	}
	for _, k := range []string{"false false", "true false", "true true"} {
		if !seen[k] {
			t.Errorf("100 seeds never left a=%s b=%s", k[:strings.IndexByte(k, ' ')], k[strings.IndexByte(k, ' ')+1:])
		}
	}
}
