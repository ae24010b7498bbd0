package segment

import (
	"io/fs"
	"os"
	"sync"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// lazyFile is one of a segment's index files, opened when first used.
// The active segment keeps its offset and time indexes in memory and a
// sealed segment's are read only by lookups into it, so between them a log
// holds one descriptor per segment, its .log, until something needs an
// index: 10,000 idle partitions need 10,000 descriptors, not 40,000 (Kafka
// holds the .log and maps the indexes). release closes the file until its
// next use; Close closes it for good.
type lazyFile struct {
	fsys vfs.FS
	path string
	flag int // for the first open; later ones only reopen (O_RDWR)

	mu     sync.RWMutex
	f      vfs.File // nil while not open
	closed bool
	pinned bool // never closed until Close, never opened again by name
}

func newLazyFile(fsys vfs.FS, path string, flag int) *lazyFile {
	return &lazyFile{fsys: fsys, path: path, flag: flag}
}

// use runs fn with the file open, opening it first if it is not.
func (lf *lazyFile) use(fn func(vfs.File) error) error {
	for {
		lf.mu.RLock()
		if f := lf.f; f != nil {
			defer lf.mu.RUnlock()
			return fn(f)
		}
		lf.mu.RUnlock()
		if err := lf.open(); err != nil {
			return err
		}
	}
}

func (lf *lazyFile) open() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	switch {
	case lf.closed, lf.pinned && lf.f == nil:
		return &fs.PathError{Op: "open", Path: lf.path, Err: fs.ErrClosed}
	case lf.f != nil:
		return nil
	}
	f, err := lf.fsys.OpenFile(lf.path, lf.flag, 0o644)
	if err != nil {
		return err
	}
	lf.f, lf.flag = f, os.O_RDWR
	return nil
}

// ensure creates the file if it was never opened, so that a sealed
// segment has all its files.
func (lf *lazyFile) ensure() error { return lf.use(func(vfs.File) error { return nil }) }

// pin opens the file for the rest of its life: its name is about to go
// (the segment is deleted, or a cleaned segment takes the name), and
// readers still holding the segment must read this file, not whatever
// has the name next. If it cannot be opened they fail with fs.ErrClosed.
func (lf *lazyFile) pin() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.f == nil && !lf.closed && !lf.pinned {
		f, err := lf.fsys.OpenFile(lf.path, lf.flag, 0o644)
		if err == nil {
			lf.f = f
		}
		lf.pinned = true
		return err
	}
	lf.pinned = true
	return nil
}

// release closes the file until its next use.
func (lf *lazyFile) release() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if lf.f == nil || lf.pinned {
		return nil
	}
	err := lf.f.Close()
	lf.f = nil
	return err
}

func (lf *lazyFile) Name() string { return lf.path }

// Close closes the file for good: later uses fail with fs.ErrClosed, as
// reads of a closed log must.
func (lf *lazyFile) Close() error {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	lf.closed = true
	if lf.f == nil {
		return nil
	}
	err := lf.f.Close()
	lf.f = nil
	return err
}

func (lf *lazyFile) ReadAt(b []byte, off int64) (n int, err error) {
	err = lf.use(func(f vfs.File) error { n, err = f.ReadAt(b, off); return err })
	return n, err
}

func (lf *lazyFile) WriteAt(b []byte, off int64) (n int, err error) {
	err = lf.use(func(f vfs.File) error { n, err = f.WriteAt(b, off); return err })
	return n, err
}

func (lf *lazyFile) Write(b []byte) (n int, err error) {
	err = lf.use(func(f vfs.File) error { n, err = f.Write(b); return err })
	return n, err
}

func (lf *lazyFile) Stat() (fi fs.FileInfo, err error) {
	err = lf.use(func(f vfs.File) error { fi, err = f.Stat(); return err })
	return fi, err
}

func (lf *lazyFile) Truncate(size int64) error {
	return lf.use(func(f vfs.File) error { return f.Truncate(size) })
}

func (lf *lazyFile) Sync() error     { return lf.use(vfs.File.Sync) }
func (lf *lazyFile) Datasync() error { return lf.use(vfs.File.Datasync) }

var _ vfs.File = (*lazyFile)(nil)
