// Package storage owns the broker's data directory: how partition
// directories are named, created durably, recognised as kafgres's and
// removed, and the check at start that the log there is the catalog's.
// Package segment keeps the log inside one partition directory; between
// them they do all of the broker's file I/O.
package storage

// The data directory holds one directory per partition, and it outlives
// the catalog it was written for: a database restored from an older
// backup, or kafgres.database pointed at another database, meets a log
// that the catalog does not describe. Only what can be proved kafgres's
// own and dead is therefore deleted:
//
//   - Its own: every partition directory kafgres creates carries a marker
//     file (segment.MarkerFile) naming the topic id and topic UUID it was
//     made for, and gets its name only once the marker is durable. A
//     directory without a marker is never deleted.
//   - Dead: the topic was seen dropped by the running broker (catalog
//     reload), or kafgres.dropped_topic — written in the transaction that
//     deleted the topic — lists its id and UUID (Catalog.Dropped).
//
// A marked directory whose topic the catalog neither has nor dropped, or a
// partition the catalog's topic does not have, means the log is ahead of
// the catalog: Check refuses (ConflictError) until the operator restores
// the matching data directory or moves the listed directories aside.
// Directories of 0.2.0, made before markers, are adopted when their
// partition.metadata names the catalog's topic UUID.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// Dir is the data directory: one directory per partition, named
// <topic>-<partition>, plus the broker's pid file.
type Dir struct {
	fsys  vfs.FS
	root  string
	fsync bool
}

// Open creates the data directory root if it does not exist. With fsync,
// a partition directory is durable in it before the call that created it
// returns, and SyncParent makes root's own entry durable.
func Open(root string, fsync bool) (*Dir, error) { return OpenOn(vfs.OS, root, fsync) }

// OpenOn is Open on the file system fsys (the power-loss tests' StrictMem).
func OpenOn(fsys vfs.FS, root string, fsync bool) (*Dir, error) {
	if err := fsys.MkdirAll(root, 0o750); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	return &Dir{fsys: fsys, root: root, fsync: fsync}, nil
}

// FS is the file system the data directory is on: the log of each of its
// partitions must be opened on it too (segment.Options.FS).
func (d *Dir) FS() vfs.FS { return d.fsys }

// ErrParentUnreadable is what SyncParent returns (wrapping the cause)
// when the directory holding the data directory may not be read.
var ErrParentUnreadable = errors.New("cannot fsync the parent of the data directory")

// SyncParent makes the data directory's own entry durable: Open may have
// just created it, and nothing may be put in it before. Without fsync it
// does nothing. A parent the broker may not read is someone else's
// business, not necessarily a failure: that error matches
// ErrParentUnreadable, for the caller to decide.
func (d *Dir) SyncParent() error {
	if !d.fsync {
		return nil
	}
	parent := filepath.Dir(filepath.Clean(d.root))
	err := segment.SyncDir(d.fsys, parent)
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w %s: %w", ErrParentUnreadable, parent, err)
	}
	return err
}

// Abs is the data directory's absolute path, as DescribeLogDirs names it
// (empty if it cannot be known).
func (d *Dir) Abs() string {
	abs, _ := filepath.Abs(d.root)
	return abs
}

// Usage is the size and the free space (for an unprivileged user) of the
// file system holding the data directory, in bytes.
func (d *Dir) Usage() (total, usable int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.root, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", d.root, err)
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

// WritePIDFile records the process's pid in the data directory
// (broker.pid), so operators and tests can find the process serving a
// given log.
func (d *Dir) WritePIDFile() error {
	p := filepath.Join(d.root, "broker.pid")
	return os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o640)
}

// sourceProducerFile holds the producer id of the SQL source's Kafka
// transactions (docs/producing.md). It belongs with the log: a transaction
// the source left open lives in these partitions.
const sourceProducerFile = "source-producer-id"

// SourceProducer reads the SQL source's producer id; ok is false when none
// was ever written here.
func (d *Dir) SourceProducer() (id int64, ok bool, err error) {
	b, err := vfs.ReadFile(d.fsys, filepath.Join(d.root, sourceProducerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read source producer id: %w", err)
	}
	id, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || id < 0 {
		return 0, false, fmt.Errorf("read source producer id: %s holds %q", filepath.Join(d.root, sourceProducerFile), b)
	}
	return id, true, nil
}

// SetSourceProducer records the SQL source's producer id, durably before
// it returns.
func (d *Dir) SetSourceProducer(id int64) error {
	return segment.WriteFileAtomic(d.fsys, d.root, sourceProducerFile, []byte(strconv.FormatInt(id, 10)+"\n"), d.fsync)
}

// sourceGuardFile latches the broker's refusal of a log whose source
// positions are ahead of the WAL (broker/source_guard.go): it holds the
// WAL position the log was found ahead of. The refusal must outlive a
// restart, since by then the WAL may have grown past the log's positions
// and a fresh comparison would pass.
const sourceGuardFile = "source-guard"

// SourceGuard reads the latched refusal: the WAL position the log was
// found ahead of; ok is false when there is none.
func (d *Dir) SourceGuard() (wal uint64, ok bool, err error) {
	path := filepath.Join(d.root, sourceGuardFile)
	b, err := vfs.ReadFile(d.fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read source guard: %w", err)
	}
	wal, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("read source guard: %s holds %q", path, b)
	}
	return wal, true, nil
}

// SetSourceGuard latches a refusal at WAL position wal, durably.
func (d *Dir) SetSourceGuard(wal uint64) error {
	return segment.WriteFileAtomic(d.fsys, d.root, sourceGuardFile, []byte(strconv.FormatUint(wal, 10)+"\n"), d.fsync)
}

// ClearSourceGuard removes the latch, durably.
func (d *Dir) ClearSourceGuard() error {
	if err := d.fsys.Remove(filepath.Join(d.root, sourceGuardFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("clear source guard: %w", err)
	}
	if d.fsync {
		return segment.SyncDir(d.fsys, d.root)
	}
	return nil
}

// PartitionDir is the directory of partition index of topic.
func (d *Dir) PartitionDir(topic string, index int32) string {
	return filepath.Join(d.root, fmt.Sprintf("%s-%d", topic, index))
}

// Prepared is what PreparePartition found (and did) at a partition's
// directory.
type Prepared int

const (
	PartitionCreated         Prepared = iota // missing: created with its marker
	PartitionKept                            // already the topic's
	PartitionAdopted                         // the topic's, made before markers: marked
	PartitionReplaced                        // empty and unmarked: recreated
	PartitionReplacedDropped                 // a dropped topic's with the same name: recreated
)

// PreparePartition makes sure the directory of partition index of topic
// (whose catalog identity is m) is the topic's before its log is opened:
// created (with its marker, durably) when missing, adopted when it
// predates markers, replaced when it is left from a topic cat.Dropped
// lists. Anything else is an error and nothing is deleted. On error the
// result is what was being attempted.
func (d *Dir) PreparePartition(ctx context.Context, topic string, index int32, m Marker, cat Catalog) (Prepared, error) {
	dir := d.PartitionDir(topic, index)
	found, marked, err := readDirMarker(d.fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return PartitionCreated, segment.CreateDir(d.fsys, dir, m.encode(), d.fsync)
	}
	if err != nil {
		return PartitionKept, err
	}
	// The caller opens partition index, so the topic has that many.
	want := &Topic{ID: m.TopicID, Name: topic, UUID: m.UUID, Partitions: int(index) + 1}
	verdict, why := claim(d.fsys, dir, want, int(index), found, marked)
	switch verdict {
	case dirKeep:
		return PartitionKept, nil
	case dirAdopt:
		return PartitionAdopted, segment.WriteMarker(d.fsys, dir, m.encode(), d.fsync)
	case dirRemove:
		if err := segment.RemoveMarkedDir(d.fsys, dir); err != nil {
			return PartitionReplaced, err
		}
		return PartitionReplaced, segment.CreateDir(d.fsys, dir, m.encode(), d.fsync)
	case dirCheckDropped:
		dropped, err := cat.Dropped(ctx, []Marker{found})
		if err != nil {
			return PartitionKept, err
		}
		if !dropped[found] {
			return PartitionKept, fmt.Errorf("%s holds %s, which the catalog neither has nor dropped; move it out of the data directory to let topic %q use the name", dir, found, topic)
		}
		if err := segment.RemoveMarkedDir(d.fsys, dir); err != nil {
			return PartitionReplacedDropped, err
		}
		return PartitionReplacedDropped, segment.CreateDir(d.fsys, dir, m.encode(), d.fsync)
	default:
		return PartitionKept, errors.New(why)
	}
}

// RemovePartition deletes the log of a dropped topic's partition, whose
// directory is dir and whose topic had uuid. As Kafka does, the directory
// is renamed first, so a crash mid-delete leaves an obviously dead
// directory, which the next Check removes; the marker goes last, so what
// is left is always recognisably kafgres's. It returns the directory it
// removed (or failed to).
func (d *Dir) RemovePartition(dir string, uuid [16]byte) (string, error) {
	dead := dir + "." + hex.EncodeToString(uuid[:]) + "-delete"
	if err := d.fsys.Rename(dir, dead); err != nil {
		dead = dir
	}
	return dead, segment.RemoveMarkedDir(d.fsys, dead)
}
