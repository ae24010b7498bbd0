package segment

// Producer state snapshots, as Kafka's ProducerStateManager keeps them: a
// file <offset>.snapshot in the partition directory holds the state of
// every producer as of offset (the batches below it applied, none at or
// above), so that opening the log replays only the batches after the newest
// one instead of every batch from the log start.
//
// The bytes are Kafka's (ProducerSnapshot.json, version 1), so that Kafka's
// tools read them: int16 version, uint32 CRC32C of everything after it,
// int32 entry count, then per entry producer id (int64), epoch (int16), last
// sequence (int32), last offset (int64), offset delta (int32), timestamp
// (int64), coordinator epoch (int32) and first offset of the current
// transaction (int64, -1 when none). Kafka keeps one batch per producer in
// the file; a broker that remembers more (kafgres keeps the last five for
// duplicate detection) writes one entry per batch, oldest first, so that a
// reader that keeps the last entry per producer id, as Kafka's does, gets
// Kafka's state. An entry with last offset -1 has no batch: the producer's
// next one must start at sequence 0.
//
// This package places, lists and removes the files; what the entries mean
// is the caller's business.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

const (
	extProducerSnapshot = ".snapshot"

	producerSnapshotVersion = 1
	// version, CRC, entry count
	producerSnapshotHeader = 2 + 4 + 4
	producerSnapshotEntry  = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
)

// ErrCorruptSnapshot is a producer snapshot that does not parse or whose
// CRC does not match.
var ErrCorruptSnapshot = errors.New("corrupt producer snapshot")

// ProducerSnapshotEntry is one entry of a producer snapshot, with the
// fields of Kafka's ProducerSnapshot.ProducerEntry.
type ProducerSnapshotEntry struct {
	ProducerID            int64
	Epoch                 int16
	LastSequence          int32 // -1 when the entry has no batch
	LastOffset            int64 // last offset of the batch, -1 when none
	OffsetDelta           int32 // last offset minus first offset of the batch
	Timestamp             int64
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64 // -1 when no transaction is open
}

// EncodeProducerSnapshot returns the file content for entries.
func EncodeProducerSnapshot(entries []ProducerSnapshotEntry) []byte {
	b := make([]byte, producerSnapshotHeader, producerSnapshotHeader+len(entries)*producerSnapshotEntry)
	binary.BigEndian.PutUint16(b[0:], producerSnapshotVersion)
	binary.BigEndian.PutUint32(b[6:], uint32(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
		b = binary.BigEndian.AppendUint16(b, uint16(e.Epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(e.LastSequence))
		b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(e.OffsetDelta))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Timestamp))
		b = binary.BigEndian.AppendUint32(b, uint32(e.CoordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.CurrentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
	return b
}

// DecodeProducerSnapshot parses a snapshot file's content; anything that is
// not exactly a version 1 snapshot with a matching CRC is
// ErrCorruptSnapshot.
func DecodeProducerSnapshot(b []byte) ([]ProducerSnapshotEntry, error) {
	if len(b) < producerSnapshotHeader {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorruptSnapshot, len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != producerSnapshotVersion {
		return nil, fmt.Errorf("%w: version %d", ErrCorruptSnapshot, v)
	}
	if stored, computed := binary.BigEndian.Uint32(b[2:]), crc32.Checksum(b[6:], castagnoli); stored != computed {
		return nil, fmt.Errorf("%w: stored crc %d, computed %d", ErrCorruptSnapshot, stored, computed)
	}
	n := int32(binary.BigEndian.Uint32(b[6:]))
	body := b[producerSnapshotHeader:]
	if n < 0 || int64(n)*producerSnapshotEntry != int64(len(body)) {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrCorruptSnapshot, n, len(body))
	}
	entries := make([]ProducerSnapshotEntry, n)
	for i := range entries {
		e := body[i*producerSnapshotEntry:]
		entries[i] = ProducerSnapshotEntry{
			ProducerID:            int64(binary.BigEndian.Uint64(e[0:])),
			Epoch:                 int16(binary.BigEndian.Uint16(e[8:])),
			LastSequence:          int32(binary.BigEndian.Uint32(e[10:])),
			LastOffset:            int64(binary.BigEndian.Uint64(e[14:])),
			OffsetDelta:           int32(binary.BigEndian.Uint32(e[22:])),
			Timestamp:             int64(binary.BigEndian.Uint64(e[26:])),
			CoordinatorEpoch:      int32(binary.BigEndian.Uint32(e[34:])),
			CurrentTxnFirstOffset: int64(binary.BigEndian.Uint64(e[38:])),
		}
	}
	return entries, nil
}

func producerSnapshotName(offset int64) string {
	return fmt.Sprintf("%020d%s", offset, extProducerSnapshot)
}

// parseProducerSnapshotName reads the offset of "<20 digits>.snapshot".
func parseProducerSnapshotName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, extProducerSnapshot)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	var off int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		off = off*10 + int64(c-'0')
		if off < 0 {
			return 0, false
		}
	}
	return off, true
}

// producerSnapshotOffsets lists the offsets of the snapshots in dir,
// ascending.
func producerSnapshotOffsets(fsys vfs.FS, dir string) ([]int64, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list producer snapshots: %w", err)
	}
	var offs []int64
	for _, e := range entries {
		if off, ok := parseProducerSnapshotName(e.Name()); ok && !e.IsDir() {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	return offs, nil
}

// WriteProducerSnapshot writes the snapshot of the producer state as of
// offset, atomically (and durably when Options.Fsync is set), replacing one
// at the same offset. It works on a closed log too: the broker writes one at
// the log end on a clean shutdown, after the log is closed.
func (l *Log) WriteProducerSnapshot(offset int64, entries []ProducerSnapshotEntry) error {
	fsys := l.opts.FS
	return writeFileAtomic(fsys, l.opts.Dir, producerSnapshotName(offset), EncodeProducerSnapshot(entries), l.opts.Fsync)
}

// ProducerSnapshotOffsets lists the offsets of the partition's producer
// snapshots, ascending.
func (l *Log) ProducerSnapshotOffsets() ([]int64, error) {
	fsys := l.opts.FS
	return producerSnapshotOffsets(fsys, l.opts.Dir)
}

// LoadProducerSnapshot reads the newest producer snapshot between the log
// start and end offsets. One that cannot be read or is corrupt is deleted
// (Kafka's loadFromSnapshot) and the next older one tried; ok is false when
// none is left, and the caller rebuilds from the log start.
func (l *Log) LoadProducerSnapshot() (offset int64, entries []ProducerSnapshotEntry, ok bool) {
	fsys := l.opts.FS
	l.mu.RLock()
	start, end := l.start, l.end
	l.mu.RUnlock()
	offs, err := producerSnapshotOffsets(fsys, l.opts.Dir)
	if err != nil {
		l.logger.Warn("ignoring producer snapshots", "dir", l.opts.Dir, "error", err)
		return 0, nil, false
	}
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		if off < start || off > end {
			continue
		}
		path := filepath.Join(l.opts.Dir, producerSnapshotName(off))
		data, err := vfs.ReadFile(fsys, path)
		if err == nil {
			entries, err = DecodeProducerSnapshot(data)
		}
		if err == nil {
			return off, entries, true
		}
		l.logger.Warn("deleting unreadable producer snapshot", "file", path, "error", err)
		if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.logger.Warn("delete producer snapshot", "file", path, "error", err)
		}
	}
	return 0, nil, false
}

// removeProducerSnapshotsOutside deletes the snapshots below start (their
// segments are gone: Kafka deletes a segment's snapshot with it) and above
// end (a tail that recovery truncated). A failure is logged only: a stray
// snapshot is skipped or deleted again by the next Open.
func (l *Log) removeProducerSnapshotsOutside(start, end int64) {
	fsys := l.opts.FS
	offs, err := producerSnapshotOffsets(fsys, l.opts.Dir)
	if err != nil {
		l.logger.Warn("clean up producer snapshots", "dir", l.opts.Dir, "error", err)
		return
	}
	for _, off := range offs {
		if off >= start && off <= end {
			continue
		}
		if err := fsys.Remove(filepath.Join(l.opts.Dir, producerSnapshotName(off))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.logger.Warn("delete producer snapshot", "dir", l.opts.Dir, "offset", off, "error", err)
		}
	}
}
