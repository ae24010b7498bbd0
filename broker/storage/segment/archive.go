package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// Segment archiving (kafgres.segment_archive_command) is, for the segment
// log, what WAL archiving is for Postgres: every sealed segment is handed
// to an archive before anything may reclaim it. This file keeps the log's
// side of it: which sealed segments the archive has not taken yet, the
// per-partition progress file that survives restarts, and the floor below
// which retention, DeleteRecords and the cleaner may delete or replace
// segment files. Running the command is the broker's job.
//
// The progress is one offset, the end of the last segment archived (the
// base of the next one): segments are archived in offset order, so every
// segment that ends at or below it has been taken. It is written
// atomically (temporary file, fsync, rename, directory fsync) after the
// archive command succeeded for all of a segment's files and before the
// segment may be reclaimed; a crash between the two runs the command again
// for that segment at the next start, as Postgres runs archive_command
// again for a WAL file whose .done it had not written.
const (
	archiveProgressFile = "archive-progress"
	archiveProgressTmp  = archiveProgressFile + tempSuffix
)

var errBadArchiveProgress = errors.New("malformed archive progress file")

// ArchiveSegment is a sealed segment the archive has not taken.
type ArchiveSegment struct {
	Base int64 // its first offset
	End  int64 // the next segment's base: the progress once it is archived
	Size int64 // bytes of its log file
	// Files are the paths of its files in the order they are to be
	// archived: the indexes first, the log last, so that an archive holding
	// a segment's .log holds the whole segment.
	Files []string
}

// archiveExts are a segment's files in archiving order (see ArchiveSegment).
var archiveExts = []string{extIndex, extTimeIndex, extTxnIndex, extLog}

// readArchiveProgress returns the progress recorded in dir; 0 if there is
// none (nothing archived yet).
func readArchiveProgress(fsys vfs.FS, dir string) (int64, error) {
	path := filepath.Join(dir, archiveProgressFile)
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read archive progress: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) != 3 || lines[0] != "0" || lines[2] != "" {
		return 0, fmt.Errorf("%s: %w: %q", path, errBadArchiveProgress, b)
	}
	off, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || off < 0 {
		return 0, fmt.Errorf("%s: %w: %q", path, errBadArchiveProgress, b)
	}
	return off, nil
}

// WriteArchiveProgress records end as dir's archive progress (version 0,
// then the offset, one per line), atomically. The restore command uses it
// to mark a restored log as archived already.
func WriteArchiveProgress(fsys vfs.FS, dir string, end int64, fsync bool) error {
	data := fmt.Appendf(nil, "0\n%d\n", end)
	if err := writeFileAtomic(fsys, dir, archiveProgressFile, data, fsync); err != nil {
		return fmt.Errorf("write archive progress: %w", err)
	}
	return nil
}

// loadArchiveProgress reads the progress at Open when archiving is on. A
// malformed file is an error rather than a reset to 0: starting over would
// hand every segment to the archive again, and ignoring it could let a
// segment be reclaimed unarchived.
func (l *Log) loadArchiveProgress() error {
	fsys := l.opts.FS
	if !l.opts.Archive {
		return nil
	}
	off, err := readArchiveProgress(fsys, l.opts.Dir)
	if err != nil {
		return err
	}
	l.archived = off
	return nil
}

// reclaimLimit is the offset below which segment files may be deleted or
// replaced: everything when archiving is off, else what the archive has
// taken. Callers hold mu.
func (l *Log) reclaimLimit() int64 {
	if !l.opts.Archive {
		return math.MaxInt64
	}
	return l.archived
}

// ArchivedOffset is the end of the last segment archived (0: none). Without
// Options.Archive it is meaningless and 0.
func (l *Log) ArchivedOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.archived
}

// PendingArchive lists the sealed segments the archive has not taken, in
// offset order. Their files stay in place until MarkArchived passes them:
// nothing reclaims them meanwhile (the active segment is never listed).
func (l *Log) PendingArchive() ([]ArchiveSegment, error) {
	fsys := l.opts.FS
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	var out []ArchiveSegment
	for i := 0; i < len(l.segs)-1; i++ {
		s, end := l.segs[i], l.segs[i+1].base
		if end <= l.archived {
			continue
		}
		as := ArchiveSegment{Base: s.base, End: end, Size: s.st.size}
		for _, ext := range archiveExts {
			p := segmentPath(l.opts.Dir, s.base, ext)
			if ext != extLog {
				if _, err := fsys.Stat(p); err != nil {
					continue // an index Kafka would build again; the log is what counts
				}
			}
			as.Files = append(as.Files, p)
		}
		out = append(out, as)
	}
	return out, nil
}

// MarkArchived records that the archive has taken every segment ending at
// or below end, durably, and then deletes the segments that were kept only
// because they were not archived (below a log start offset DeleteRecords
// or retention moved meanwhile).
func (l *Log) MarkArchived(end int64) error {
	if !l.opts.Archive {
		return errors.New("mark archived: archiving is off for this log")
	}
	l.startMu.Lock()
	defer l.startMu.Unlock()
	l.mu.RLock()
	err, cur := l.usable(), l.archived
	l.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("mark archived in %s: %w", l.opts.Dir, err)
	}
	if end <= cur {
		return nil
	}
	if err := WriteArchiveProgress(l.opts.FS, l.opts.Dir, end, l.opts.Fsync); err != nil {
		return fmt.Errorf("mark archived in %s: %w", l.opts.Dir, err)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.archived = end
	doomed := l.detachBelowStart()
	l.mu.Unlock()
	if len(doomed) > 0 {
		l.logger.Info("deleted archived segments below the log start offset", "dir", l.opts.Dir, "segments_deleted", len(doomed))
	}
	return l.removeSegments(doomed)
}

// Roll seals the active segment if it holds anything, making it one the
// archive may take; the restore command uses it so that appends after a
// restore go to a new segment, never to one the archive already has.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return fmt.Errorf("roll %s: %w", l.opts.Dir, err)
	}
	if l.active().st.size == 0 {
		return nil
	}
	return l.roll()
}
