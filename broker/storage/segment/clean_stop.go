package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// A clean stop. Recovery reads the active segment batch by batch because
// after a crash its tail may be torn; after a clean stop it is not, and
// reading every active segment made a start with 26 GB of logs take 43 s
// (performance.md, "10,000 partitions"). As Kafka does with its
// .kafka_cleanshutdown, Close records the active segment's state in a file
// once its data, indexes and directory are durable, and the next Open
// takes that state instead of scanning, if the files still match it. The
// file is removed, durably, before anything changes the active segment
// (leaveCleanStop), so a crash after that finds none and recovers in full;
// a log closed with the file still in place has nothing to write. Only
// with Fsync: without it nothing says the data reached the disk.

// cleanStopFile is the record of a clean stop in a partition directory.
const cleanStopFile = "kafgres.clean-stop"

// cleanStopMagic starts the file: a name and a version.
var cleanStopMagic = [8]byte{'k', 'g', 'c', 'l', 'e', 'a', 'n', 1}

// cleanStop is what recovery would otherwise learn from the active
// segment's batches.
type cleanStop struct {
	base, size, end int64
	idxN, tidxN     int64
	lastIndexedTs   int64
	maxTs           int64
	maxTsOffset     int64
	sinceIndex      int64
	created         int64 // Unix nanoseconds; 0 when the segment is empty
}

func (c *cleanStop) fields() []*int64 {
	return []*int64{&c.base, &c.size, &c.end, &c.idxN, &c.tidxN, &c.lastIndexedTs, &c.maxTs, &c.maxTsOffset, &c.sinceIndex, &c.created}
}

func (c *cleanStop) encode() []byte {
	b := append([]byte(nil), cleanStopMagic[:]...)
	for _, f := range c.fields() {
		b = binary.BigEndian.AppendUint64(b, uint64(*f))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var errBadCleanStop = errors.New("clean stop record does not parse")

func decodeCleanStop(b []byte) (cleanStop, error) {
	var c cleanStop
	fs := c.fields()
	if len(b) != len(cleanStopMagic)+8*len(fs)+4 || [8]byte(b[:8]) != cleanStopMagic ||
		crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return c, errBadCleanStop
	}
	for i, f := range fs {
		*f = int64(binary.BigEndian.Uint64(b[8+8*i:]))
	}
	return c, nil
}

func cleanStopOf(s *segment) cleanStop {
	st := &s.st
	c := cleanStop{
		base: s.base, size: st.size, end: st.end,
		idxN: int64(st.idxN), tidxN: int64(st.tidxN),
		lastIndexedTs: st.lastIndexedTs, maxTs: st.maxTs, maxTsOffset: st.maxTsOffset,
		sinceIndex: int64(st.sinceIndex),
	}
	if !st.created.IsZero() {
		c.created = st.created.UnixNano()
	}
	return c
}

// writeCleanStop records the active segment s of a log whose files are all
// durable; the caller has just fsynced them and the directory. The record
// is written in place and fsynced, with no rename and no directory fsync:
// if a crash loses it, or tears it (its checksum then fails), the next
// Open scans as after any crash. Stopping a broker writes one for every
// partition, so it costs one fsync each.
func writeCleanStop(fsys vfs.FS, dir string, s *segment) error {
	c := cleanStopOf(s)
	path := filepath.Join(dir, cleanStopFile)
	if err := writeFileSynced(fsys, path, c.encode(), true); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readCleanStop reads the record of a clean stop, if there is one
// (present); ok says whether it parses.
func readCleanStop(fsys vfs.FS, dir string) (c cleanStop, present, ok bool, err error) {
	path := filepath.Join(dir, cleanStopFile)
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, false, nil
	}
	if err != nil {
		return c, false, false, fmt.Errorf("read %s: %w", path, err)
	}
	c, err = decodeCleanStop(b)
	return c, true, err == nil, nil
}

// dropCleanStop removes the record durably: from here on the active
// segment may change.
func dropCleanStop(fsys vfs.FS, dir string) error {
	path := filepath.Join(dir, cleanStopFile)
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// leaveCleanStop is called under mu before anything changes the active
// segment's files: it drops the record that vouches for them, if the log
// still holds it. Until then the record stays, so that a log opened from
// it and closed (or killed) without a change costs no fsync at either end:
// most of a broker's 10,000 partitions are not written between a start and
// the next stop. A failure is sticky, as a failed fsync is: the record may
// still be on disk, so nothing may be written.
func (l *Log) leaveCleanStop() error {
	if !l.cleanHeld {
		return nil
	}
	if err := dropCleanStop(l.opts.FS, l.opts.Dir); err != nil {
		l.err = err
		return err
	}
	l.cleanHeld = false
	return nil
}

// openCleanActive opens the last segment as a clean stop left it, without
// reading its batches; ok is false when its files do not match the record
// (then nothing is left open and recovery scans it as after a crash).
func (l *Log) openCleanActive(c cleanStop, base, size int64) (s *segment, ok bool, err error) {
	if c.base != base || c.size != size || c.end < base || c.idxN < 0 || c.tidxN < 0 {
		return nil, false, nil
	}
	fsys := l.opts.FS
	s = newSegment(base)
	if s.log, err = fsys.OpenFile(segmentPath(l.opts.Dir, base, extLog), os.O_RDWR, 0); err != nil {
		return nil, false, fmt.Errorf("open segment: %w", err)
	}
	st := newSegState(base)
	st.size, st.alloc, st.end = c.size, c.size, c.end
	st.lastIndexedTs, st.maxTs, st.maxTsOffset, st.sinceIndex = c.lastIndexedTs, c.maxTs, c.maxTsOffset, int(c.sinceIndex)
	if c.created != 0 {
		st.created = time.Unix(0, c.created)
	}
	// ok stays false unless every index file matches the record (a
	// missing transaction index does not).
	txnExisted, err := openIndexes(fsys, s)
	if err == nil && txnExisted {
		st.idxMem, ok, err = readWhole(s.idx, c.idxN*offsetEntrySize)
	}
	if err == nil && ok {
		st.tidxMem, ok, err = readWhole(s.tidx, c.tidxN*timeEntrySize)
	}
	if err == nil && ok {
		st.txnN, ok, err = loadTxnIndex(s, c.end)
	}
	if err != nil || !ok {
		_ = s.close()
		return nil, false, err
	}
	st.idxN, st.tidxN = int(c.idxN), int(c.tidxN)
	s.st = st
	s.releaseIndexes()
	return s, true, nil
}

// readWhole reads f if it is exactly size bytes long.
func readWhole(f *lazyFile, size int64) ([]byte, bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if fi.Size() != size {
		return nil, false, nil
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, false, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return b, true, nil
}
