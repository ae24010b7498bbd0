package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrPowerCut is what every call on a StrictMem fails with between a power
// cut and the Restart after it, and what a file opened before the cut
// fails with for ever.
var ErrPowerCut = errors.New("power cut")

// StrictMem is an in-memory file system that keeps, across a simulated
// power cut, only what was made durable, in the manner of Pebble's strict
// MemFS: a file's bytes as of its last Sync or Datasync, and a directory's
// names as of its last SyncDir. A file created and synced in a directory
// that was not synced afterwards is gone after the cut; a rename or a
// remove not followed by a SyncDir of the directory is undone.
//
// What a disk may keep beyond that is chosen at random by Restart: any
// 4 KiB page written since the last sync may or may not have reached the
// platter, and the file's size may be the old or the new one, so a batch
// written across pages can come back torn, or a later page can survive an
// earlier one; and a directory may keep, in order, the first few of the
// changes to its names since its last sync (a journal committed part of
// the way). Each change to a name is whole; a rename between two
// directories is a change to each, which may survive in one alone.
//
// Paths are slash-separated and taken relative to the root whatever their
// leading slash; there are no symbolic links.
type StrictMem struct {
	mu      sync.Mutex
	root    *memNode
	gen     uint64 // bumped by Restart: files opened before it are dead
	cut     bool   // between a power cut and Restart
	cutIn   int64  // > 0: the power goes when this many more changes were made
	changes int64  // changes (writes, syncs, names) made since New
}

type memNode struct {
	dir   bool
	mode  fs.FileMode
	mtime time.Time

	// A file's bytes, and those its last sync made durable.
	data, synced []byte
	// A directory's names, those its last SyncDir made durable, and the
	// changes to them since, in order.
	children, syncedChildren map[string]*memNode
	changed                  []nameChange
}

// nameChange is one change to a directory's names: name now refers to n,
// or to nothing if n is nil.
type nameChange struct {
	name string
	n    *memNode
}

// setName changes a directory's name, logging the change for Restart.
func (d *memNode) setName(name string, n *memNode) {
	if n == nil {
		delete(d.children, name)
	} else {
		d.children[name] = n
	}
	d.changed = append(d.changed, nameChange{name, n})
}

// NewStrictMem returns an empty StrictMem whose root directory exists
// (durably).
func NewStrictMem() *StrictMem {
	return &StrictMem{root: newDir(0o755)}
}

func newDir(perm fs.FileMode) *memNode {
	return &memNode{dir: true, mode: fs.ModeDir | perm.Perm(), mtime: time.Now(),
		children: map[string]*memNode{}, syncedChildren: map[string]*memNode{}}
}

// CutAfter arranges for the power to go once n more changes (a write,
// truncate, sync, create, rename, remove, mkdir) have been made: the one
// after them fails, as does everything else until Restart. n <= 0 cancels.
func (m *StrictMem) CutAfter(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cutIn = 0
	if n > 0 {
		m.cutIn = n + 1 // counts down to the change that fails
	}
}

// Cut makes the power go now.
func (m *StrictMem) Cut() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cut = true
}

// IsCut says whether the power is off.
func (m *StrictMem) IsCut() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cut
}

// Changes is the number of changes made so far, for choosing cut points.
func (m *StrictMem) Changes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changes
}

// Restart cuts the power if it is still on and brings the file system back
// as a disk would find it: every durable name and byte, plus what rng
// chooses of the rest (see StrictMem). Files opened before fail for ever.
func (m *StrictMem) Restart(rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]bool{}
	var walk func(n *memNode)
	walk = func(n *memNode) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			n.data = survivingBytes(n.synced, n.data, rng)
			n.synced = slices.Clone(n.data)
			return
		}
		n.children = cloneNames(n.syncedChildren)
		if rng != nil && len(n.changed) > 0 && rng.IntN(2) == 0 {
			for _, c := range n.changed[:rng.IntN(len(n.changed)+1)] {
				n.setName(c.name, c.n)
			}
		}
		n.changed = nil
		n.syncedChildren = cloneNames(n.children)
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(m.root)
	m.gen++
	m.cut = false
	m.cutIn = 0
}

const pageSize = 4096

// survivingBytes is what a disk holds of a file after a power cut: the
// synced bytes, overlaid page by page with a random choice of the pages
// written since, at the old size or the new one.
func survivingBytes(synced, data []byte, rng *rand.Rand) []byte {
	if rng == nil || slices.Equal(synced, data) || rng.IntN(3) == 0 {
		return slices.Clone(synced)
	}
	size := len(synced)
	if rng.IntN(2) == 0 {
		size = len(data)
	}
	out := make([]byte, size)
	copy(out, synced)
	for p := 0; p < size; p += pageSize {
		end := min(p+pageSize, size)
		if end > len(data) {
			end = len(data)
		}
		if p >= end {
			break
		}
		if rng.IntN(2) == 0 {
			copy(out[p:end], data[p:end])
		}
	}
	return out
}

func cloneNames(names map[string]*memNode) map[string]*memNode {
	out := make(map[string]*memNode, len(names))
	for k, v := range names {
		out[k] = v
	}
	return out
}

// change counts one change, cutting the power when its time has come;
// callers hold mu and make no change if it fails.
func (m *StrictMem) change() error {
	if m.cut {
		return ErrPowerCut
	}
	if m.cutIn > 0 {
		m.cutIn--
		if m.cutIn == 0 {
			m.cut = true
			return ErrPowerCut
		}
	}
	m.changes++
	return nil
}

// live fails while the power is off.
func (m *StrictMem) live() error {
	if m.cut {
		return ErrPowerCut
	}
	return nil
}

func splitPath(name string) []string {
	name = strings.Trim(path.Clean("/"+name), "/")
	if name == "" {
		return nil
	}
	return strings.Split(name, "/")
}

// lookup finds name's node, or nil.
func (m *StrictMem) lookup(name string) *memNode {
	n := m.root
	for _, part := range splitPath(name) {
		if !n.dir {
			return nil
		}
		if n = n.children[part]; n == nil {
			return nil
		}
	}
	return n
}

// parent finds the directory that holds name, and name's last element.
func (m *StrictMem) parent(op, name string) (*memNode, string, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: syscall.EINVAL}
	}
	dir := m.lookup(strings.Join(parts[:len(parts)-1], "/"))
	if dir == nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	if !dir.dir {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
	}
	return dir, parts[len(parts)-1], nil
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

func (m *StrictMem) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(); err != nil {
		return nil, pathErr("open", name, err)
	}
	dir, base, err := m.parent("open", name)
	if err != nil {
		return nil, err
	}
	n := dir.children[base]
	switch {
	case n != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case n != nil && n.dir && flag&(os.O_WRONLY|os.O_RDWR) != 0:
		return nil, pathErr("open", name, syscall.EISDIR)
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case n == nil:
		if err := m.change(); err != nil {
			return nil, pathErr("open", name, err)
		}
		n = &memNode{mode: perm.Perm(), mtime: time.Now()}
		dir.setName(base, n)
	case flag&os.O_TRUNC != 0 && len(n.data) > 0:
		if err := m.change(); err != nil {
			return nil, pathErr("open", name, err)
		}
		n.data = nil
	}
	return &memFile{m: m, n: n, name: name, gen: m.gen,
		write: flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

func (m *StrictMem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n := dir.children[base]
	switch {
	case n == nil:
		return pathErr("remove", name, fs.ErrNotExist)
	case n.dir && len(n.children) > 0:
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	if err := m.change(); err != nil {
		return pathErr("remove", name, err)
	}
	dir.setName(base, nil)
	return nil
}

func (m *StrictMem) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(); err != nil {
		return pathErr("removeall", name, err)
	}
	dir, base, err := m.parent("removeall", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if dir.children[base] == nil {
		return nil
	}
	if err := m.change(); err != nil {
		return pathErr("removeall", name, err)
	}
	// Removing the subtree's names is one change here: a disk may lose
	// some of them, but only if the directories were not synced, and then
	// the whole subtree's entry in dir is undone anyway.
	dir.setName(base, nil)
	return nil
}

func (m *StrictMem) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	odir, obase, err := m.parent("rename", oldpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	ndir, nbase, err := m.parent("rename", newpath)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	n := odir.children[obase]
	if n == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	if t := ndir.children[nbase]; t != nil && t != n {
		switch {
		case t.dir && !n.dir:
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EISDIR}
		case !t.dir && n.dir:
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.ENOTDIR}
		case t.dir && len(t.children) > 0:
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.ENOTEMPTY}
		}
	}
	if err := m.change(); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	odir.setName(obase, nil)
	ndir.setName(nbase, n)
	return nil
}

func (m *StrictMem) Mkdir(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mkdir(name, perm)
}

func (m *StrictMem) mkdir(name string, perm fs.FileMode) error {
	dir, base, err := m.parent("mkdir", name)
	if err != nil {
		return err
	}
	if dir.children[base] != nil {
		return pathErr("mkdir", name, fs.ErrExist)
	}
	if err := m.change(); err != nil {
		return pathErr("mkdir", name, err)
	}
	dir.setName(base, newDir(perm))
	return nil
}

func (m *StrictMem) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(); err != nil {
		return pathErr("mkdir", name, err)
	}
	parts := splitPath(name)
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		n := m.lookup(p)
		if n == nil {
			if err := m.mkdir(p, perm); err != nil {
				return err
			}
			continue
		}
		if !n.dir {
			return pathErr("mkdir", p, syscall.ENOTDIR)
		}
	}
	return nil
}

func (m *StrictMem) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(); err != nil {
		return nil, pathErr("open", name, err)
	}
	n := m.lookup(name)
	switch {
	case n == nil:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case !n.dir:
		return nil, pathErr("readdirent", name, syscall.ENOTDIR)
	}
	out := make([]fs.DirEntry, 0, len(n.children))
	for k, c := range n.children {
		out = append(out, fs.FileInfoToDirEntry(c.info(k)))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func (m *StrictMem) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(); err != nil {
		return nil, pathErr("stat", name, err)
	}
	n := m.lookup(name)
	if n == nil {
		return nil, pathErr("stat", name, fs.ErrNotExist)
	}
	return n.info(path.Base("/" + name)), nil
}

func (m *StrictMem) Lstat(name string) (fs.FileInfo, error) { return m.Stat(name) }

func (m *StrictMem) Chtimes(name string, _, mtime time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookup(name)
	if n == nil {
		return pathErr("chtimes", name, fs.ErrNotExist)
	}
	if err := m.change(); err != nil {
		return pathErr("chtimes", name, err)
	}
	n.mtime = mtime
	return nil
}

func (m *StrictMem) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookup(name)
	switch {
	case n == nil:
		return fmt.Errorf("open directory %s: %w", name, pathErr("open", name, fs.ErrNotExist))
	case !n.dir:
		return fmt.Errorf("fsync directory %s: %w", name, syscall.ENOTDIR)
	}
	if err := m.change(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", name, err)
	}
	n.syncedChildren = cloneNames(n.children)
	n.changed = nil
	return nil
}

func (n *memNode) info(name string) fs.FileInfo {
	return memInfo{name: name, size: int64(len(n.data)), mode: n.mode, mtime: n.mtime}
}

type memInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.mtime }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	m      *StrictMem
	n      *memNode
	name   string
	gen    uint64
	write  bool
	pos    int64 // for Write
	closed bool
}

// check fails for a closed file, one opened before the last Restart, or
// while the power is off; callers hold m.mu.
func (f *memFile) check(op string) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, fs.ErrClosed)
	case f.gen != f.m.gen || f.m.cut:
		return pathErr(op, f.name, ErrPowerCut)
	}
	return nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) ReadAt(b []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, syscall.EINVAL)
	}
	if len(b) == 0 {
		return 0, nil // as os.File.ReadAt
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(b, f.n.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(b []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	return f.writeAt(b, off)
}

func (f *memFile) writeAt(b []byte, off int64) (int, error) {
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if !f.write {
		return 0, pathErr("write", f.name, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	if err := f.m.change(); err != nil {
		return 0, pathErr("write", f.name, err)
	}
	if end := off + int64(len(b)); end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], b)
	f.n.mtime = time.Now()
	return len(b), nil
}

func (f *memFile) Write(b []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	n, err := f.writeAt(b, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("stat"); err != nil {
		return nil, err
	}
	return f.n.info(path.Base("/" + f.name)), nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("truncate"); err != nil {
		return err
	}
	if size < 0 || !f.write {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	if err := f.m.change(); err != nil {
		return pathErr("truncate", f.name, err)
	}
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	if err := f.m.change(); err != nil {
		return pathErr("sync", f.name, err)
	}
	f.n.synced = slices.Clone(f.n.data)
	return nil
}

func (f *memFile) Datasync() error { return f.Sync() }
