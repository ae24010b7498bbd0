package segment

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// Open opens or creates the partition log in opts.Dir and recovers it: the
// active segment is checked batch by batch and a torn or corrupt tail is
// truncated, the log start offset is read back from its checkpoint (and
// segments wholly below it deleted), then the source index is cut to the
// recovered log. Everything on disk afterwards counts as durable.
func Open(opts Options) (*Log, error) {
	if opts.Dir == "" {
		return nil, errors.New("open log: no directory")
	}
	opts.SegmentBytes, opts.SegmentMs = segmentLimits(opts.SegmentBytes, opts.SegmentMs)
	if opts.IndexIntervalBytes <= 0 {
		opts.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.FS == nil {
		opts.FS = vfs.OS
	}
	fsys := opts.FS
	if opts.sourceIndexMaxBytes <= 0 {
		opts.sourceIndexMaxBytes = defaultSourceIndexMaxBytes
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := fsys.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	if err := checkTopicID(opts); err != nil {
		return nil, err
	}
	l := &Log{opts: opts, logger: logger}
	err := l.recover()
	if err == nil {
		l.end = l.active().st.end
		l.durable = l.end
		err = l.loadArchiveProgress()
	}
	if err == nil {
		err = l.trimToStart()
	}
	if err == nil {
		l.removeProducerSnapshotsOutside(l.start, l.end)
	}
	if err == nil {
		// The source index is checked against the recovered log end.
		err = l.recoverSourceIndex()
	}
	if err != nil {
		for _, s := range l.segs {
			_ = s.close()
		}
		if l.src.f != nil {
			_ = l.src.f.Close()
		}
		return nil, fmt.Errorf("open log %s: %w", opts.Dir, err)
	}
	return l, nil
}

func checkTopicID(opts Options) error {
	id, err := ReadPartitionMetadata(opts.FS, opts.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if opts.TopicID == "" {
			return nil
		}
		if err := writePartitionMetadata(opts.FS, opts.Dir, opts.TopicID, opts.Fsync); err != nil {
			return fmt.Errorf("open log %s: %w", opts.Dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("open log %s: %w", opts.Dir, err)
	case opts.TopicID != "" && id != opts.TopicID:
		return fmt.Errorf("open log %s: %w: directory has %s, want %s", opts.Dir, ErrTopicIDMismatch, id, opts.TopicID)
	}
	return nil
}

// parseSegmentName splits "<20 digits><ext>" for the segment file kinds.
func parseSegmentName(name string) (base int64, ext string, ok bool) {
	if len(name) <= 20 {
		return 0, "", false
	}
	ext = name[20:]
	if ext != extLog && ext != extIndex && ext != extTimeIndex && ext != extTxnIndex {
		return 0, "", false
	}
	for _, c := range name[:20] {
		if c < '0' || c > '9' {
			return 0, "", false
		}
	}
	base, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return base, ext, true
}

func (l *Log) recover() error {
	fsys := l.opts.FS
	dir := l.opts.Dir
	// A clean interrupted by a crash is finished or undone first, so that
	// what follows sees only whole segments.
	changed, err := l.finishCleaning()
	if err != nil {
		return err
	}
	clean, hadRecord, wasClean, err := readCleanStop(fsys, dir)
	if err != nil {
		return err
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list directory: %w", err)
	}
	var bases []int64
	hasLog := map[int64]bool{}
	var indexes []string
	for _, e := range entries {
		name := e.Name()
		if name == metadataTmp || name == startCheckpointTmp || name == archiveProgressTmp || name == epochCheckpointTmp ||
			strings.HasSuffix(name, extProducerSnapshot+tempSuffix) {
			// Left by a crash while writing; the real file is intact or absent.
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
			continue
		}
		base, ext, ok := parseSegmentName(name)
		if !ok || e.IsDir() {
			continue
		}
		if ext == extLog {
			bases = append(bases, base)
			hasLog[base] = true
		} else {
			indexes = append(indexes, name)
		}
	}
	for _, name := range indexes {
		if base, _, _ := parseSegmentName(name); !hasLog[base] {
			l.logger.Warn("removing index without segment", "dir", dir, "file", name)
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("remove stray index: %w", err)
			}
			changed = true
		}
	}
	slices.Sort(bases)

	// Empty segments hold nothing, and an empty one in the middle would
	// break the rule that each segment starts where the previous ends. One
	// is left behind by a crash right after a roll. Keep one only if the log
	// is empty, so the log start offset survives.
	var kept []int64
	sizes := map[int64]int64{}
	for _, base := range bases {
		fi, err := fsys.Stat(segmentPath(dir, base, extLog))
		if err != nil {
			return fmt.Errorf("stat segment: %w", err)
		}
		sizes[base] = fi.Size()
		if fi.Size() > 0 {
			kept = append(kept, base)
		}
	}
	allEmpty := len(kept) == 0 && len(bases) > 0
	if allEmpty {
		kept = bases[:1]
	}
	for i, base := range bases {
		if sizes[base] > 0 || (allEmpty && i == 0) {
			continue
		}
		l.logger.Info("removing empty segment", "dir", dir, "base_offset", base)
		for _, ext := range segmentExts {
			if err := fsys.Remove(segmentPath(dir, base, ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove empty segment: %w", err)
			}
		}
		changed = true
	}

	// The active segment: as the clean stop's record says, if nothing was
	// changed above and its files match the record; otherwise scanned.
	var active *segment
	if len(kept) > 0 {
		for i, base := range kept[:len(kept)-1] {
			s, rebuilt, err := l.openSealed(base, sizes[base], kept[i+1])
			if s != nil {
				l.segs = append(l.segs, s)
			}
			if err != nil {
				return err
			}
			changed = changed || rebuilt
		}
		if wasClean && !changed {
			if active, l.cleanHeld, err = l.openCleanActive(clean, kept[len(kept)-1], sizes[kept[len(kept)-1]]); err != nil {
				return err
			}
		}
	}
	// A record not trusted goes, durably, before anything below writes.
	if hadRecord && !l.cleanHeld {
		l.logger.Info("clean stop record not trusted (unreadable, or the files changed since); recovering the active segment", "dir", dir)
		if err := dropCleanStop(fsys, dir); err != nil {
			return err
		}
	}
	switch {
	case len(kept) == 0:
		active, err = createSegment(fsys, dir, 0)
		changed = true
	case !l.cleanHeld:
		last := kept[len(kept)-1]
		active, err = l.recoverActive(last, sizes[last])
		changed = true // the active indexes were rewritten
	}
	if active != nil {
		l.segs = append(l.segs, active)
	}
	if err != nil {
		return err
	}
	reset, err := l.loadStart()
	if err != nil {
		return err
	}
	if (changed || reset) && l.opts.Fsync {
		return fsys.SyncDir(dir)
	}
	return nil
}

// openIndexes opens the index files of s, creating the missing ones;
// txnExisted says whether the transaction index was there.
func openIndexes(fsys vfs.FS, s *segment) (txnExisted bool, err error) {
	dir := filepath.Dir(s.log.Name())
	s.idx = newLazyFile(fsys, segmentPath(dir, s.base, extIndex), os.O_RDWR|os.O_CREATE)
	s.tidx = newLazyFile(fsys, segmentPath(dir, s.base, extTimeIndex), os.O_RDWR|os.O_CREATE)
	return openTxnIndex(fsys, s, dir)
}

// openSealed opens a segment that is not the last one. Its data was fsynced
// when it was rolled, so it is trusted; its indexes are rebuilt only when
// they are missing or do not look like index files (the transaction index:
// when an entry does not parse or lies outside the segment). The segments
// before it are in l.segs already.
func (l *Log) openSealed(base, size, nextBase int64) (s *segment, rebuilt bool, err error) {
	fsys := l.opts.FS
	s = newSegment(base)
	if s.log, err = vfs.Open(fsys, segmentPath(l.opts.Dir, base, extLog)); err != nil {
		return nil, false, fmt.Errorf("open segment: %w", err)
	}
	txnExisted, err := openIndexes(fsys, s)
	if err != nil {
		return s, false, err
	}
	st, ok, err := loadSealedIndexes(s, size, nextBase)
	if err != nil {
		return s, false, err
	}
	if !ok {
		l.logger.Info("rebuilding indexes of sealed segment", "dir", l.opts.Dir, "base_offset", base)
		if st, err = l.rebuildSealed(s, size, nextBase); err != nil {
			return s, false, err
		}
		rebuilt = true
	}
	txnOK := false
	if txnExisted {
		if st.txnN, txnOK, err = loadTxnIndex(s, nextBase); err != nil {
			return s, false, err
		}
	}
	if !txnOK {
		l.logger.Info("rebuilding transaction index of sealed segment", "dir", l.opts.Dir, "base_offset", base)
		if st.txnN, err = l.rebuildTxnIndex(s, size, l.segs); err != nil {
			return s, false, err
		}
		if l.opts.Fsync {
			if err := s.txn.Sync(); err != nil {
				return s, false, fmt.Errorf("fsync %s: %w", s.txn.Name(), err)
			}
		}
		rebuilt = true
	}
	st.idxMem, st.tidxMem, st.sealed = nil, nil, true
	s.st = st
	s.releaseIndexes()
	return s, rebuilt, nil
}

func loadSealedIndexes(s *segment, size, nextBase int64) (segState, bool, error) {
	st := newSegState(s.base)
	st.size, st.alloc, st.end = size, size, nextBase
	idxInfo, err := s.idx.Stat()
	if err != nil {
		return st, false, fmt.Errorf("stat index: %w", err)
	}
	tidxInfo, err := s.tidx.Stat()
	if err != nil {
		return st, false, fmt.Errorf("stat time index: %w", err)
	}
	if idxInfo.Size() == 0 || idxInfo.Size()%offsetEntrySize != 0 ||
		tidxInfo.Size() == 0 || tidxInfo.Size()%timeEntrySize != 0 {
		return st, false, nil
	}
	st.idxN = int(idxInfo.Size() / offsetEntrySize)
	st.tidxN = int(tidxInfo.Size() / timeEntrySize)
	var e [timeEntrySize]byte
	if _, err := s.idx.ReadAt(e[:offsetEntrySize], idxInfo.Size()-offsetEntrySize); err != nil {
		return st, false, fmt.Errorf("read index %s: %w", s.idx.Name(), err)
	}
	rel, pos := int64(binary.BigEndian.Uint32(e[:])), int64(binary.BigEndian.Uint32(e[4:]))
	if rel >= nextBase-s.base || pos >= size {
		return st, false, nil
	}
	if _, err := s.tidx.ReadAt(e[:], tidxInfo.Size()-timeEntrySize); err != nil {
		return st, false, fmt.Errorf("read time index %s: %w", s.tidx.Name(), err)
	}
	ts, rel := int64(binary.BigEndian.Uint64(e[:])), int64(binary.BigEndian.Uint32(e[8:]))
	if rel >= nextBase-s.base {
		return st, false, nil
	}
	st.maxTs, st.maxTsOffset, st.lastIndexedTs = ts, s.base+rel, ts
	return st, true, nil
}

// rebuildSealed recreates a sealed segment's indexes from its batch headers.
func (l *Log) rebuildSealed(s *segment, size, nextBase int64) (segState, error) {
	st := newSegState(s.base)
	w := newHeaderWalker(s.log, 0, size)
	for {
		h, pos, err := w.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, fmt.Errorf("rebuild indexes: %w", err)
		}
		st.addBatch(s.base, h, pos, l.opts.IndexIntervalBytes)
	}
	st.addTimeEntry(s.base)
	if st.end != nextBase {
		l.logger.Warn("sealed segment does not end where the next begins",
			"dir", l.opts.Dir, "base_offset", s.base, "end_offset", st.end, "next_base_offset", nextBase)
	}
	st.end, st.alloc = nextBase, size
	if err := s.writeIndexes(&st); err != nil {
		return st, err
	}
	if l.opts.Fsync {
		if err := s.syncAll(); err != nil {
			return st, err
		}
	}
	return st, nil
}

// recoverActive scans the last segment, truncates it after the last batch
// that is whole, intact and in sequence, and rebuilds its indexes, the
// transaction index included (the segments before it are in l.segs).
func (l *Log) recoverActive(base, size int64) (*segment, error) {
	fsys := l.opts.FS
	s := newSegment(base)
	var err error
	if s.log, err = fsys.OpenFile(segmentPath(l.opts.Dir, base, extLog), os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("open segment: %w", err)
	}
	if _, err := openIndexes(fsys, s); err != nil {
		return s, err
	}
	st := newSegState(base)
	// Reads of 1 MiB, or of the whole segment when it is smaller: a start
	// with 10,000 small partitions spent a fifth of its CPU allocating and
	// clearing buffers of 1 MiB for segments of a few KiB.
	r := bufio.NewReaderSize(io.NewSectionReader(s.log, 0, size), int(min(size, 1<<20)))
	buf := make([]byte, HeaderSize)
	firstMaxTs := int64(-1)
	var reason error
	for st.size < size {
		if size-st.size < HeaderSize {
			reason = fmt.Errorf("partial header of %d bytes", size-st.size)
			break
		}
		if _, err := io.ReadFull(r, buf[:HeaderSize]); err != nil {
			return s, fmt.Errorf("read %s at %d: %w", s.log.Name(), st.size, err)
		}
		h, err := ParseBatchHeader(buf[:HeaderSize])
		if err != nil {
			reason = err
			break
		}
		// Check the length before reading so a garbage length cannot make
		// us allocate gigabytes.
		if int64(h.Length) > size-st.size {
			reason = fmt.Errorf("batch of %d bytes with %d bytes left", h.Length, size-st.size)
			break
		}
		buf = slices.Grow(buf[:HeaderSize], int(h.Length)-HeaderSize)[:h.Length]
		if _, err := io.ReadFull(r, buf[HeaderSize:]); err != nil {
			return s, fmt.Errorf("read %s at %d: %w", s.log.Name(), st.size, err)
		}
		// A segment the cleaner wrote may be the last one (the empty
		// active segment after it is dropped above): its batches may hold
		// fewer records than their offsets span, and leave gaps between
		// them, but never go backwards.
		if _, err := ValidateStoredBatch(buf); err != nil {
			reason = err
			break
		}
		if h.BaseOffset < st.end {
			reason = fmt.Errorf("batch base offset %d, expected at least %d", h.BaseOffset, st.end)
			break
		}
		if st.size == 0 {
			firstMaxTs = h.MaxTimestamp
		}
		st.addBatch(base, h, st.size, l.opts.IndexIntervalBytes)
	}
	st.alloc = st.size
	if st.size < size {
		// Zeros after the last batch are the space written ahead (see
		// Log.preallocate): a batch header of zeros is no batch, and the
		// log ends there. Keep them when they will be used again. Anything
		// else is cut, so that what lies ahead of the end is always zeros.
		zero := false
		if l.opts.Fsync {
			var err error
			if zero, err = allZero(s.log, st.size, size); err != nil {
				return s, err
			}
		}
		if zero {
			st.alloc = size
		} else {
			l.logger.Warn("truncating torn or corrupt segment tail",
				"dir", l.opts.Dir, "segment", filepath.Base(s.log.Name()), "position", st.size,
				"bytes_dropped", size-st.size, "reason", reason.Error())
			if err := s.log.Truncate(st.size); err != nil {
				return s, fmt.Errorf("truncate %s: %w", s.log.Name(), err)
			}
			if l.opts.Fsync {
				if err := s.log.Sync(); err != nil {
					return s, fmt.Errorf("fsync %s: %w", s.log.Name(), err)
				}
			}
		}
	}
	if st.size > 0 {
		// The wall clock of the first append is gone; like Kafka, age the
		// segment by its first batch's timestamp, but never from the future.
		now := l.opts.now()
		st.created = now
		if firstMaxTs > 0 {
			st.created = time.UnixMilli(firstMaxTs)
			if st.created.After(now) {
				st.created = now
			}
		}
	}
	if err := s.writeIndexes(&st); err != nil {
		return s, err
	}
	if st.txnN, err = l.rebuildTxnIndex(s, st.size, l.segs); err != nil {
		return s, err
	}
	// Rewritten and not yet durable: the next Sync or Close fsyncs it.
	l.txnGen++
	s.st = st
	s.releaseIndexes() // in memory until the roll; the txn index reopens at its next marker
	return s, nil
}
