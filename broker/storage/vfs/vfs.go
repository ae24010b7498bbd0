// Package vfs is the file system the segment engine writes through: the
// operating system's in a running broker, or StrictMem in the power-loss
// tests, which forgets on Crash everything that was not made durable.
//
// The interface is the subset of package os the engine uses, plus the two
// durability calls that os spells awkwardly: Datasync (fdatasync) and
// SyncDir (fsync of a directory, which is what makes a created, renamed or
// removed name durable).
package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// FS is a file system.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldpath, newpath string) error
	Mkdir(name string, perm fs.FileMode) error
	MkdirAll(name string, perm fs.FileMode) error
	ReadDir(name string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	Chtimes(name string, atime, mtime time.Time) error
	// SyncDir makes the names in directory name durable: entries created,
	// renamed into or removed from it before the call survive a crash.
	SyncDir(name string) error
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	io.Closer
	Name() string
	Stat() (fs.FileInfo, error)
	Truncate(size int64) error
	// Sync makes the file's data and metadata durable (fsync).
	Sync() error
	// Datasync makes the file's data and size durable (fdatasync).
	Datasync() error
}

// Open opens name for reading.
func Open(fsys FS, name string) (File, error) { return fsys.OpenFile(name, os.O_RDONLY, 0) }

// ReadFile reads the whole of name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	if fsys == OS {
		return os.ReadFile(name)
	}
	f, err := Open(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) Mkdir(name string, perm fs.FileMode) error    { return os.Mkdir(name, perm) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (osFS) Lstat(name string) (fs.FileInfo, error)       { return os.Lstat(name) }
func (osFS) Chtimes(name string, atime, mtime time.Time) error {
	return os.Chtimes(name, atime, mtime)
}

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", name, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", name, err)
	}
	return nil
}

type osFile struct{ *os.File }

func (f osFile) Datasync() error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
