package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

const (
	metadataFile = "partition.metadata"
	metadataTmp  = metadataFile + ".tmp"
)

// ReadPartitionMetadata returns the topic id recorded in dir's
// partition.metadata. A missing file yields an error matching fs.ErrNotExist.
func ReadPartitionMetadata(fsys vfs.FS, dir string) (string, error) {
	path := filepath.Join(dir, metadataFile)
	b, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return "", fmt.Errorf("read partition metadata: %w", err)
	}
	var version, topicID string
	var haveVersion, haveTopicID bool
	for _, line := range strings.Split(string(b), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "version":
			version, haveVersion = strings.TrimSpace(value), true
		case "topic_id":
			topicID, haveTopicID = strings.TrimSpace(value), true
		}
	}
	if !haveVersion || version != "0" {
		return "", fmt.Errorf("read partition metadata %s: unsupported version %q", path, version)
	}
	if !haveTopicID || topicID == "" {
		return "", fmt.Errorf("read partition metadata %s: no topic_id", path)
	}
	return topicID, nil
}

// writePartitionMetadata writes the file atomically: a torn file would make
// the next start refuse the directory.
func writePartitionMetadata(fsys vfs.FS, dir, topicID string, fsync bool) error {
	data := fmt.Sprintf("version: 0\ntopic_id: %s\n", topicID)
	if err := writeFileAtomic(fsys, dir, metadataFile, []byte(data), fsync); err != nil {
		return fmt.Errorf("write partition metadata: %w", err)
	}
	return nil
}

// writeFileAtomic replaces dir/name with data through dir/name.tmp, so that
// a crash leaves the old file or the new one, never a torn one; with fsync
// the new file is durable when it returns. Recovery removes a left-over
// temporary file.
func writeFileAtomic(fsys vfs.FS, dir, name string, data []byte, fsync bool) error {
	if err := renameWritten(fsys, dir, name, data, fsync); err != nil {
		return err
	}
	if fsync {
		return fsys.SyncDir(dir)
	}
	return nil
}

// renameWritten is writeFileAtomic without the directory fsync, for a
// caller that fsyncs dir afterwards anyway: until then a crash leaves
// either the old file or the new one.
func renameWritten(fsys vfs.FS, dir, name string, data []byte, fsync bool) error {
	tmp := filepath.Join(dir, name+tempSuffix)
	path := filepath.Join(dir, name)
	err := writeFileSynced(fsys, tmp, data, fsync)
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeFileSynced writes data to path in place, fsynced when fsync.
func writeFileSynced(fsys vfs.FS, path string, data []byte, fsync bool) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFileAtomic replaces dir/name with data as a whole: written aside,
// fsynced, renamed, and the directory fsynced (the fsyncs only with fsync).
func WriteFileAtomic(fsys vfs.FS, dir, name string, data []byte, fsync bool) error {
	return writeFileAtomic(fsys, dir, name, data, fsync)
}

// MarkerFile is the file by which a partition directory says that kafgres
// created it. Its content belongs to the caller (the broker records which
// topic the directory was made for); this package only places it durably
// and keeps it until the directory's last file is gone, so that nothing is
// ever deleted without it being known whose data it is.
const MarkerFile = "kafgres.partition"

// creatingSuffix names a partition directory under construction: it gets
// its final name only once its marker is durable.
const creatingSuffix = ".kafgres-new"

// CreatingDir is the name dir has while CreateDir builds it; a directory
// left under that name by a crash never held anything but its marker.
func CreatingDir(dir string) string { return dir + creatingSuffix }

// CreateDir creates the partition directory dir holding marker as its
// MarkerFile. The directory is built under another name and renamed, so
// dir never exists without its marker; with fsync the marker, the new
// directory and its entry in the parent are all durable when CreateDir
// returns, before anything can be appended (and acknowledged) there. dir
// must not exist.
func CreateDir(fsys vfs.FS, dir string, marker []byte, fsync bool) error {
	return createDir(fsys, dir, marker, fsync, fsys.SyncDir)
}

// createDir is CreateDir with the directory fsync as a parameter, for tests.
func createDir(fsys vfs.FS, dir string, marker []byte, fsync bool, syncDir func(string) error) error {
	tmp := CreatingDir(dir)
	if err := RemoveMarkedDir(fsys, tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := fsys.Mkdir(tmp, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := writeFileAtomic(fsys, tmp, MarkerFile, marker, fsync); err != nil {
		_ = fsys.RemoveAll(tmp) // ours: created just now
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if _, err := fsys.Lstat(dir); err == nil {
		_ = fsys.RemoveAll(tmp)
		return fmt.Errorf("create %s: %w", dir, fs.ErrExist)
	}
	if err := fsys.Rename(tmp, dir); err != nil {
		_ = fsys.RemoveAll(tmp)
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if fsync {
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	return nil
}

// ReadMarker returns dir's MarkerFile; a missing file (or directory)
// yields an error matching fs.ErrNotExist.
func ReadMarker(fsys vfs.FS, dir string) ([]byte, error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, MarkerFile))
	if err != nil {
		return nil, fmt.Errorf("read marker: %w", err)
	}
	return b, nil
}

// WriteMarker puts marker into the existing directory dir (adopting a
// directory made before markers existed), atomically and, with fsync,
// durably.
func WriteMarker(fsys vfs.FS, dir string, marker []byte, fsync bool) error {
	if err := writeFileAtomic(fsys, dir, MarkerFile, marker, fsync); err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	return nil
}

// RemoveMarkedDir deletes dir and everything in it if dir is empty, holds
// a MarkerFile, or holds nothing but the marker's temporary file (a crash
// while CreateDir wrote the marker); otherwise it deletes nothing and
// fails. The marker is removed last, so a crash in the middle leaves a
// directory that is still recognisably kafgres's and is removed again next
// time.
func RemoveMarkedDir(fsys vfs.FS, dir string) error {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	marked, markerOnly := false, true
	for _, e := range entries {
		switch {
		case e.Name() == MarkerFile && e.Type().IsRegular():
			marked = true
		case e.Name() != markerTemp || !e.Type().IsRegular():
			markerOnly = false
		}
	}
	if !marked && !markerOnly {
		return fmt.Errorf("remove %s: %w", dir, ErrNotMarked)
	}
	for _, e := range entries {
		if e.Name() == MarkerFile {
			continue
		}
		if err := fsys.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
	}
	if err := fsys.Remove(filepath.Join(dir, MarkerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	if err := fsys.Remove(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// tempSuffix names the file writeFileAtomic writes before renaming it;
// markerTemp is the marker's.
const (
	tempSuffix = ".tmp"
	markerTemp = MarkerFile + tempSuffix
)

// ErrNotMarked: a directory has files but no MarkerFile, so kafgres did
// not create it (or did so before markers existed) and must not delete it.
var ErrNotMarked = errors.New("directory has no kafgres marker")

// SyncDir fsyncs the directory dir, making the entries in it durable.
func SyncDir(fsys vfs.FS, dir string) error { return fsys.SyncDir(dir) }
