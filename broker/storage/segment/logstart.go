package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// The log start offset is the first offset a reader may see. It starts as
// the first segment's base and only moves forward: DeleteRecordsBefore puts
// it anywhere up to the log end, retention moves it to the base of the first
// segment it keeps. Every move is recorded in the partition directory's
// checkpoint file before anything is deleted, so a crash can neither bring
// deleted records back nor lose the start (Kafka keeps one
// log-start-offset-checkpoint per log directory and flushes it
// periodically; one file per partition, written at once, keeps DeleteRecords
// durable when it is answered). Segments wholly below the start are deleted;
// the active segment never is: if the start reaches the end of a non-empty
// log, the log rolls first, as Kafka's deleteSegments does.
const (
	startCheckpointFile = "log-start-offset"
	startCheckpointTmp  = startCheckpointFile + ".tmp"
)

var errBadCheckpoint = errors.New("malformed log start offset checkpoint")

// writeStartCheckpoint records offset as the log start offset: version 0,
// then the offset, one per line.
func writeStartCheckpoint(fsys vfs.FS, dir string, offset int64, fsync bool) error {
	data := fmt.Appendf(nil, "0\n%d\n", offset)
	if err := writeFileAtomic(fsys, dir, startCheckpointFile, data, fsync); err != nil {
		return fmt.Errorf("write log start offset: %w", err)
	}
	return nil
}

// readStartCheckpoint returns the offset recorded in dir; ok is false if
// there is no checkpoint. A file that does not parse yields errBadCheckpoint.
func readStartCheckpoint(fsys vfs.FS, dir string) (offset int64, ok bool, err error) {
	path := filepath.Join(dir, startCheckpointFile)
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read log start offset: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) != 3 || lines[0] != "0" || lines[2] != "" {
		return 0, false, fmt.Errorf("%s: %w: %q", path, errBadCheckpoint, b)
	}
	offset, err = strconv.ParseInt(lines[1], 10, 64)
	if err != nil || offset < 0 {
		return 0, false, fmt.Errorf("%s: %w: %q", path, errBadCheckpoint, b)
	}
	return offset, true, nil
}

// loadStart sets the log start offset from the checkpoint once recovery has
// opened the segments. A checkpoint below the first segment says nothing
// new. One past the recovered log end means the records up to it were lost
// (a host crash without fsync, or files removed by hand) after they had been
// deleted: like Kafka's LogLoader, start over with an empty log at the
// checkpoint rather than serve deleted records again or hand out offsets
// below the start a second time.
func (l *Log) loadStart() (changed bool, err error) {
	fsys := l.opts.FS
	l.start = l.segs[0].base
	cp, ok, err := readStartCheckpoint(fsys, l.opts.Dir)
	if errors.Is(err, errBadCheckpoint) {
		l.logger.Warn("ignoring log start offset checkpoint", "dir", l.opts.Dir, "error", err)
		return false, nil
	}
	if err != nil || !ok || cp <= l.start {
		return false, err
	}
	end := l.active().st.end
	if cp <= end {
		l.start = cp
		return false, nil
	}
	l.logger.Warn("log ends before its start offset checkpoint; deleting all segments",
		"dir", l.opts.Dir, "log_end_offset", end, "log_start_offset", cp)
	if err := l.leaveCleanStop(); err != nil {
		return true, err
	}
	for _, s := range l.segs {
		_ = s.close()
		if err := removeSegmentFiles(fsys, l.opts.Dir, s.base); err != nil {
			return true, err
		}
	}
	l.segs = nil
	s, err := createSegment(fsys, l.opts.Dir, cp)
	if err != nil {
		return true, err
	}
	l.segs = append(l.segs, s)
	l.start = cp
	return true, nil
}

// trimToStart deletes at Open the segments wholly below the log start offset
// that a crash left behind between writing the checkpoint and deleting them.
func (l *Log) trimToStart() error {
	if l.start == l.end && l.active().st.size > 0 {
		if err := l.roll(); err != nil {
			return err
		}
	}
	return l.removeSegments(l.detachBelowStart())
}

// usable reports why the log cannot change, if it cannot. Callers hold mu.
func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	if l.err != nil {
		return fmt.Errorf("log failed earlier: %w", l.err)
	}
	return nil
}

// DeleteRecordsBefore advances the log start offset to offset (Kafka's
// DeleteRecords) and returns the new log start offset. An offset at or below
// the current start changes nothing; one past the log end fails with
// ErrOffsetOutOfRange (Kafka's limit is the high watermark, which callers
// enforce). The new start is durable (fsynced when Options.Fsync is set)
// before it is visible to readers and before the segments wholly below it
// are deleted (with Options.Archive, once archived: see MarkArchived). An error after the checkpoint was written (closing, or
// failing to roll or to remove files) leaves the start advanced.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	l.mu.RLock()
	start, end, err := l.start, l.end, l.usable()
	l.mu.RUnlock()
	if err != nil {
		return 0, fmt.Errorf("delete records in %s: %w", l.opts.Dir, err)
	}
	if offset <= start {
		return start, nil
	}
	if offset > end {
		return start, fmt.Errorf("delete records in %s before %d: %w: log is [%d, %d)",
			l.opts.Dir, offset, ErrOffsetOutOfRange, start, end)
	}
	if _, err := l.advanceStart(offset); err != nil {
		return offset, fmt.Errorf("delete records in %s before %d: %w", l.opts.Dir, offset, err)
	}
	return offset, nil
}

// advanceStart makes start (above the current start and at most the log
// end) the log start offset and deletes the segments wholly below it,
// returning how many. Callers hold startMu, which keeps the start from
// moving while the checkpoint is written outside mu.
func (l *Log) advanceStart(start int64) (deleted int, err error) {
	if err := writeStartCheckpoint(l.opts.FS, l.opts.Dir, start, l.opts.Fsync); err != nil {
		return 0, err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	l.start = max(l.start, start)
	var rollErr error
	if l.start == l.end && l.active().st.size > 0 {
		// The active segment cannot go; a new one takes its place.
		rollErr = l.roll()
	}
	doomed := l.detachBelowStart()
	l.mu.Unlock()
	l.logger.Info("advanced log start offset", "dir", l.opts.Dir, "log_start_offset", start, "segments_deleted", len(doomed))
	err = errors.Join(rollErr, l.removeSegments(doomed))
	l.removeProducerSnapshotsOutside(start, math.MaxInt64)
	return len(doomed), err
}

// detachBelowStart takes the segments that end at or below the log start
// offset out of the log and returns them; the active segment stays. Callers
// hold mu.
func (l *Log) detachBelowStart() []*segment {
	// Segments the archive has not taken stay, below the start or not
	// (archive.go): MarkArchived detaches them once it has.
	limit := min(l.start, l.reclaimLimit())
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].base <= limit {
		n++
	}
	if n == 0 {
		return nil
	}
	doomed := slices.Clone(l.segs[:n])
	l.segs = slices.Clone(l.segs[n:])
	return doomed
}

// removeSegments deletes the files of detached segments and drops the log's
// reference on them: readers still using them keep reading the unlinked
// files, and the last one closes them. Removal needs no directory fsync: if
// a crash undoes it, Open deletes the segments again from the checkpoint.
func (l *Log) removeSegments(doomed []*segment) error {
	fsys := l.opts.FS
	var errs []error
	for _, s := range doomed {
		s.pinIndexes()
		if err := removeSegmentFiles(fsys, l.opts.Dir, s.base); err != nil {
			errs = append(errs, err)
		}
		l.releaseSegment(s)
	}
	return errors.Join(errs...)
}

// removeSegmentFiles removes the log file first: index files left alone by
// a crash are removed as strays at the next Open, while a log file left
// alone would have its indexes rebuilt only to be deleted.
func removeSegmentFiles(fsys vfs.FS, dir string, base int64) error {
	for _, ext := range segmentExts {
		if err := fsys.Remove(segmentPath(dir, base, ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete segment: %w", err)
		}
	}
	return nil
}

// Retention is a topic's delete policy: retention.ms and retention.bytes.
// -1 (any negative value) means unlimited, as in Kafka.
type Retention struct {
	Ms    int64 // delete segments whose largest timestamp is older than this
	Bytes int64 // delete the oldest segments while the log stays at least this big without them
}

// ApplyRetention deletes the oldest segments that breach r at now, with
// Kafka's rules (UnifiedLog.deleteRetentionSizeBreachedSegments, then
// deleteRetentionMsBreachedSegments), and returns how many it deleted:
//
//   - by size: while the log's Size minus the oldest remaining segment is at
//     least r.Bytes, that segment goes (nothing goes while Size < r.Bytes);
//   - by time: then, oldest first, segments whose largest timestamp (the
//     file's modification time if no batch has a timestamp) is more than
//     r.Ms before now go, stopping at the first that is not.
//
// Only segments that end at or below DurableEnd (Kafka: the high watermark)
// qualify, and never an empty active segment. A breached active segment is
// rolled first so that it can go. The log start offset moves to the base of
// the first segment kept, durably (see DeleteRecordsBefore), before files
// are deleted.
func (l *Log) ApplyRetention(r Retention, now time.Time) (deleted int, err error) {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	l.mu.Lock()
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return 0, fmt.Errorf("apply retention to %s: %w", l.opts.Dir, err)
	}
	n, err := l.retentionBreached(r, now)
	if err == nil && n == len(l.segs) {
		// Kafka's deleteSegments: there must always be a segment.
		err = l.roll()
	}
	if err != nil || n == 0 {
		l.mu.Unlock()
		if err != nil {
			return 0, fmt.Errorf("apply retention to %s: %w", l.opts.Dir, err)
		}
		return 0, nil
	}
	// The start lies in the first segment, so this is above it.
	start := max(l.segs[n].base, l.start)
	l.mu.Unlock()
	deleted, err = l.advanceStart(start)
	if err != nil {
		return deleted, fmt.Errorf("apply retention to %s: %w", l.opts.Dir, err)
	}
	return deleted, nil
}

// retentionBreached returns how many leading segments r deletes at now.
// Callers hold mu.
func (l *Log) retentionBreached(r Retention, now time.Time) (int, error) {
	// Kafka's deletableSegments: segments are considered oldest first while
	// they are below the high watermark, and an empty last one never is.
	deletable := func(i int) bool {
		end := l.end
		if i+1 < len(l.segs) {
			end = l.segs[i+1].base
		}
		// With archiving, a segment the archive has not taken is kept too:
		// reclamation stops, as WAL recycling does while archiving fails.
		return end <= l.durable && end <= l.reclaimLimit() && !(i == len(l.segs)-1 && l.segs[i].st.size == 0)
	}
	n := 0
	if r.Bytes >= 0 {
		size := int64(0)
		for _, s := range l.segs {
			size += s.st.size
		}
		if diff := size - r.Bytes; diff >= 0 {
			for n < len(l.segs) && deletable(n) && diff-l.segs[n].st.size >= 0 {
				diff -= l.segs[n].st.size
				n++
			}
		}
	}
	if r.Ms >= 0 {
		for n < len(l.segs) && deletable(n) {
			ts, err := l.segs[n].largestTimestamp()
			if err != nil {
				return 0, err
			}
			if now.UnixMilli()-ts <= r.Ms {
				break
			}
			n++
		}
	}
	return n, nil
}

// largestTimestamp is Kafka's LogSegment.largestTimestamp: the largest
// batch timestamp, or the file's modification time if there is none. Callers
// hold Log.mu.
func (s *segment) largestTimestamp() (int64, error) {
	if s.st.maxTs >= 0 {
		return s.st.maxTs, nil
	}
	fi, err := s.log.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", s.log.Name(), err)
	}
	return fi.ModTime().UnixMilli(), nil
}
