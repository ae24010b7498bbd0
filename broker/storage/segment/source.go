package segment

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// The source index maps sourced batches to the position of the ordered
// source (a Postgres WAL LSN) they came from, so that a source replayed after
// a crash can skip what the log already holds. It is an append-only file of
// fixed-size entries (base offset int64, source uint64, big endian), in log
// order. Sources are never 0, so an all-zero entry marks the end.
//
// With Fsync on, the file is extended with zeros a chunk at a time and
// entries are made durable with fdatasync: between extensions the file's
// size and blocks do not change, so the sync writes no inode. That saves
// 40 % of the CPU of an index sync on ext4 (docs/performance.md), paid for
// every partition of every group of the SQL producer.
//
// The name deliberately does not end in ".index": Kafka's log loader takes
// every *.index file for a segment index named by its base offset.
const (
	sourceIndexFile = "source-index"
	sourceIndexTmp  = sourceIndexFile + ".tmp"
	sourceEntrySize = 16

	// defaultSourceIndexMaxBytes bounds the file: above it the index is
	// rewritten with only its tail (64Ki entries).
	defaultSourceIndexMaxBytes = 1 << 20

	// sourceIndexChunk is how far the file is extended with zeros at a
	// time when Fsync is on (4Ki entries).
	sourceIndexChunk = 64 << 10
)

// SourcedBatch is one batch from an ordered source, tagged with its position.
type SourcedBatch struct {
	Batch  []byte // one validated v2 batch, owned by the caller (offset and epoch are stamped into it)
	Source uint64 // source position; non-decreasing across calls
}

// sourceIndex is the Log's handle on the source index, under Log.mu.
type sourceIndex struct {
	f       vfs.File // nil until the first sourced append creates the file
	size    int64    // bytes of whole entries whose batches are in the log
	alloc   int64    // size of the file: size plus zeros written ahead
	applied uint64   // largest source among those entries, 0 if none
}

func appendSourceEntry(b []byte, offset int64, source uint64) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	return binary.BigEndian.AppendUint64(b, source)
}

func parseSourceEntry(e []byte) (offset int64, source uint64) {
	return int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint64(e[8:])
}

// AppendSourced appends batches in order and returns their base offsets.
// Before any of the batch bytes are written it records (base offset, source)
// for every batch in the partition's source index and — with Fsync on —
// fsyncs that index, so the log can never durably contain a sourced batch
// whose source the index does not know. (The reverse — an index entry whose
// batch was torn off by a crash — is dropped by recovery.)
//
// No other append interleaves with the batches. A source lower than
// SourceApplied is rejected with ErrSourceOrder. On an error, the returned
// offsets are those of the leading batches that did go into the log (and
// into SourceApplied); the rest did not.
func (l *Log) AppendSourced(batches []SourcedBatch, leaderEpoch int32) ([]int64, error) {
	hs := make([]BatchHeader, len(batches))
	for i, b := range batches {
		h, err := AppendHeader(b.Batch)
		if err != nil {
			return nil, fmt.Errorf("append to %s: batch %d: %w", l.opts.Dir, i, err)
		}
		if b.Source == 0 {
			// An all-zero entry is the end of the index.
			return nil, fmt.Errorf("append to %s: %w: batch %d has source 0", l.opts.Dir, ErrSourceOrder, i)
		}
		if i > 0 && b.Source < batches[i-1].Source {
			return nil, fmt.Errorf("append to %s: %w: batch %d has source %d after %d",
				l.opts.Dir, ErrSourceOrder, i, b.Source, batches[i-1].Source)
		}
		hs[i] = h
	}
	if len(batches) == 0 {
		return nil, nil
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	if batches[0].Source < l.src.applied {
		return nil, fmt.Errorf("append to %s: %w: source %d, log has %d",
			l.opts.Dir, ErrSourceOrder, batches[0].Source, l.src.applied)
	}

	// appendLocked gives each batch the log end as its base offset, and
	// nothing else appends while mu is held, so the offsets are known before
	// anything is written.
	bases := make([]int64, len(batches))
	entries := make([]byte, 0, len(batches)*sourceEntrySize)
	next := l.end
	for i, b := range batches {
		bases[i] = next
		entries = appendSourceEntry(entries, next, b.Source)
		next += int64(hs[i].LastOffsetDelta) + 1
	}
	start := l.src.size
	if err := l.writeSourceEntries(entries); err != nil {
		return nil, fmt.Errorf("append to %s: %w", l.opts.Dir, err)
	}

	for i, b := range batches {
		base, err := l.appendLocked(b.Batch, hs[i], leaderEpoch)
		if err == nil && base != bases[i] {
			// The index already names a different batch for this offset.
			err = fmt.Errorf("batch %d went to offset %d, source index says %d", i, base, bases[i])
			l.err = err
		}
		if err != nil {
			// The entries of the batches not written must go before anything
			// else takes their offsets, or recovery would credit those
			// batches to the source.
			if terr := l.truncateSourceIndex(start + int64(i)*sourceEntrySize); terr != nil {
				err = fmt.Errorf("%w; %w", err, terr)
			}
			return bases[:i], fmt.Errorf("append to %s: %w", l.opts.Dir, err)
		}
		l.src.applied = b.Source
	}
	if err := l.maybeCompactSourceIndex(); err != nil {
		return bases, fmt.Errorf("append to %s: %w", l.opts.Dir, err)
	}
	return bases, nil
}

// SourceApplied is the highest Source of a batch that is in the log, 0 if
// none. Like LogEndOffset it includes batches not yet made durable by Sync.
func (l *Log) SourceApplied() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.src.applied
}

// ForgetSourcesAbove drops the source index's entries whose source is
// above keep, durably, so that SourceApplied falls to the last source kept
// (0 if none) and sources from there on can be appended again. The batches
// stay in the log: only the claim that they came from those source
// positions goes. It is the way out when the log's positions belong to
// another history of the source than the one now feeding it (a database
// restored into a new cluster or to an earlier point); see
// broker/source_guard.go.
//
// Entries are in source order, so the cut is one truncation. A compacted
// index holds only its tail: when every entry left is above keep, the
// positions at or below keep are forgotten as well (SourceApplied 0), which
// can only make a replay append again what it would have skipped.
func (l *Log) ForgetSourcesAbove(keep uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if l.src.f == nil || l.src.applied <= keep {
		return nil
	}
	var (
		e       [sourceEntrySize]byte
		cut     int64
		applied uint64
	)
	for ; cut < l.src.size; cut += sourceEntrySize {
		if _, err := l.src.f.ReadAt(e[:], cut); err != nil {
			return fmt.Errorf("read %s at %d: %w", l.src.f.Name(), cut, err)
		}
		_, source := parseSourceEntry(e[:])
		if source > keep {
			break
		}
		applied = source
	}
	if err := l.truncateSourceIndex(cut); err != nil {
		return fmt.Errorf("forget source positions above %d in %s: %w", keep, l.opts.Dir, err)
	}
	l.src.applied = applied
	return nil
}

// sourceEntries is the number of entries in the source index.
func (l *Log) sourceEntries() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return int(l.src.size / sourceEntrySize)
}

func (l *Log) syncSource(f vfs.File) error { return l.syncSourceWith(f, vfs.File.Sync) }

// syncSourceWith makes the source index durable with sync (fsync or
// fdatasync), or with the test hook that replaces both.
func (l *Log) syncSourceWith(f vfs.File, sync func(vfs.File) error) error {
	var err error
	if l.opts.syncSourceIndex != nil {
		err = l.opts.syncSourceIndex(f)
	} else {
		err = sync(f)
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	return nil
}

// writeSourceEntries appends entries to the source index, creating it if
// needed, and makes them durable when Fsync is set. A failure marks the log
// failed: the file may hold part of the entries, and after a failed fsync
// nothing says which.
func (l *Log) writeSourceEntries(entries []byte) error {
	fsys := l.opts.FS
	if l.src.f == nil {
		path := filepath.Join(l.opts.Dir, sourceIndexFile)
		// O_EXCL: Open opens an existing file, so one appearing here would
		// mean the bookkeeping is wrong.
		f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("create source index: %w", err)
		}
		l.src.f = f
		if l.opts.Fsync {
			// Fsyncing the entries is worth nothing if the file itself can
			// vanish in a crash while the batches' segment survives.
			if err := fsys.SyncDir(l.opts.Dir); err != nil {
				l.err = err
				return fmt.Errorf("create source index: %w", err)
			}
		}
	}
	end := l.src.size + int64(len(entries))
	if l.opts.Fsync && end > l.src.alloc {
		// Zeros ahead of the entries, made durable with them, so that the
		// next writes only overwrite (see sourceIndexChunk).
		from := max(end, l.src.alloc)
		alloc := (end + sourceIndexChunk - 1) / sourceIndexChunk * sourceIndexChunk
		if _, err := l.src.f.WriteAt(make([]byte, alloc-from), from); err != nil {
			l.err = fmt.Errorf("extend %s: %w", l.src.f.Name(), err)
			return l.err
		}
		l.src.alloc = alloc
	}
	if _, err := l.src.f.WriteAt(entries, l.src.size); err != nil {
		l.err = fmt.Errorf("write %s: %w", l.src.f.Name(), err)
		return l.err
	}
	l.src.size = end
	l.src.alloc = max(l.src.alloc, end)
	if l.opts.Fsync {
		// fdatasync is enough: it also writes the file's size and blocks
		// when they changed (when the file grew, or grew before a restart
		// and is still not durable), and only then writes the inode.
		if err := l.syncSourceWith(l.src.f, vfs.File.Datasync); err != nil {
			l.err = err
			return err
		}
	}
	return nil
}

// truncateSourceIndex cuts the source index to size bytes, durably when
// Fsync is set. On failure the log is marked failed, so that no batch can
// take the offset of an entry that should have gone; recovery drops such
// entries, as they lie past the log end.
func (l *Log) truncateSourceIndex(size int64) error {
	if err := l.src.f.Truncate(size); err != nil {
		l.err = fmt.Errorf("truncate %s: %w", l.src.f.Name(), err)
		return l.err
	}
	l.src.size, l.src.alloc = size, size
	if l.opts.Fsync {
		if err := l.syncSource(l.src.f); err != nil {
			l.err = err
			return err
		}
	}
	return nil
}

// recoverSourceIndex loads the source index after the log has been
// recovered. It keeps the leading entries that are whole, in order and below
// the log end, and truncates the file after them: entries at or past the end
// belong to batches a crash tore off (or that were never written), and a
// later batch at the same offset must not be credited to their source.
func (l *Log) recoverSourceIndex() error {
	fsys := l.opts.FS
	dir := l.opts.Dir
	// Left by a crash while compacting; the real file is intact.
	if err := fsys.Remove(filepath.Join(dir, sourceIndexTmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", sourceIndexTmp, err)
	}
	f, err := fsys.OpenFile(filepath.Join(dir, sourceIndexFile), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open source index: %w", err)
	}
	l.src.f = f
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	size := fi.Size()

	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 64<<10)
	var (
		e       [sourceEntrySize]byte
		valid   int64
		prev    int64 = -1
		applied uint64
		reason  = "partial entry"
	)
	for valid+sourceEntrySize <= size {
		if _, err := io.ReadFull(r, e[:]); err != nil {
			return fmt.Errorf("read %s at %d: %w", f.Name(), valid, err)
		}
		offset, source := parseSourceEntry(e[:])
		if source == 0 {
			// The end of the entries: zeros written ahead (or, before
			// this, zeros from a file extended by a write that did not
			// reach the disk).
			reason = "zeros"
			break
		}
		if offset >= l.end {
			reason = fmt.Sprintf("entry for offset %d at or past the log end %d", offset, l.end)
			break
		}
		// Appends keep offsets increasing and sources non-decreasing;
		// anything else is garbage, say zeros from a file extended by a
		// write that did not reach the disk.
		if offset <= prev || source < applied {
			reason = fmt.Sprintf("entry (offset %d, source %d) out of order", offset, source)
			break
		}
		prev, applied = offset, source
		valid += sourceEntrySize
	}
	alloc := size
	if valid < size {
		// Zeros after the entries are the space written ahead: keep them.
		// Anything else is cut, so that what lies ahead is zeros.
		zero, err := allZero(f, valid, size)
		if err != nil {
			return err
		}
		if !zero {
			l.logger.Warn("truncating source index", "dir", dir, "position", valid,
				"bytes_dropped", size-valid, "reason", reason)
			if err := f.Truncate(valid); err != nil {
				return fmt.Errorf("truncate %s: %w", f.Name(), err)
			}
			if l.opts.Fsync {
				if err := l.syncSource(f); err != nil {
					return err
				}
			}
			alloc = valid
		}
	}
	l.src.size, l.src.alloc, l.src.applied = valid, alloc, applied
	return l.maybeCompactSourceIndex()
}

// allZero says whether f holds only zero bytes in [from, to).
func allZero(f vfs.File, from, to int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for from < to {
		n := min(int64(len(buf)), to-from)
		if _, err := f.ReadAt(buf[:n], from); err != nil {
			return false, fmt.Errorf("read %s at %d: %w", f.Name(), from, err)
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		from += n
	}
	return true, nil
}

// maybeCompactSourceIndex rewrites the source index with only its tail once
// it has grown past the limit. The tail starts at the last entry whose batch
// is durable: a crash can still tear off the batches after it, and recovery
// then falls back on that entry. At Open everything is durable, so the tail
// is the last entry.
//
// Failing before the new file replaces the old one costs nothing (the old
// one stays, and a later call tries again), so it is only logged; failing
// after marks the log failed.
func (l *Log) maybeCompactSourceIndex() error {
	if l.src.size <= l.opts.sourceIndexMaxBytes {
		return nil
	}
	dir := l.opts.Dir
	tail, err := l.sourceTail()
	if err == nil && int64(len(tail)) == l.src.size {
		return nil // every entry is still needed
	}
	if err == nil {
		err = l.replaceSourceIndex(tail)
	}
	if err != nil {
		if l.err != nil {
			return err
		}
		l.logger.Warn("could not compact source index", "dir", dir, "error", err)
		return nil
	}
	l.logger.Debug("compacted source index", "dir", dir, "entries_kept", len(tail)/sourceEntrySize)
	return nil
}

// sourceTail returns the entries from the last one below the durable end on.
func (l *Log) sourceTail() ([]byte, error) {
	var e [sourceEntrySize]byte
	from := l.src.size - sourceEntrySize
	for ; from > 0; from -= sourceEntrySize {
		if _, err := l.src.f.ReadAt(e[:], from); err != nil {
			return nil, fmt.Errorf("read %s at %d: %w", l.src.f.Name(), from, err)
		}
		if offset, _ := parseSourceEntry(e[:]); offset < l.durable {
			break
		}
	}
	tail := make([]byte, l.src.size-from)
	if _, err := l.src.f.ReadAt(tail, from); err != nil {
		return nil, fmt.Errorf("read %s at %d: %w", l.src.f.Name(), from, err)
	}
	return tail, nil
}

// replaceSourceIndex atomically replaces the source index with tail: a crash
// leaves either the old file or the new one, and both are valid.
func (l *Log) replaceSourceIndex(tail []byte) error {
	fsys := l.opts.FS
	dir := l.opts.Dir
	tmp := filepath.Join(dir, sourceIndexTmp)
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("compact source index: %w", err)
	}
	_, err = f.Write(tail)
	if err == nil && l.opts.Fsync {
		err = l.syncSource(f)
	}
	if err == nil {
		err = fsys.Rename(tmp, filepath.Join(dir, sourceIndexFile))
	}
	if err != nil {
		_ = f.Close()
		_ = fsys.Remove(tmp)
		return fmt.Errorf("compact source index: %w", err)
	}
	// The open descriptor followed the file through the rename; the old
	// file is unlinked, so a failure closing it loses nothing.
	_ = l.src.f.Close()
	l.src.f, l.src.size, l.src.alloc = f, int64(len(tail)), int64(len(tail))
	if l.opts.Fsync {
		if err := fsys.SyncDir(dir); err != nil {
			l.err = err
			return fmt.Errorf("compact source index: %w", err)
		}
	}
	return nil
}
