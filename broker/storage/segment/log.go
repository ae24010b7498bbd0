// Package segment stores a partition's record batches in Kafka's on-disk
// layout: segment files of v2 batches with sparse offset and time indexes
// and a transaction index of the aborted transactions (txnindex.go). It
// knows files and batches, nothing about Kafka requests.
package segment

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// Defaults applied by Open for zero Options fields.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMs          = 7 * 24 * 60 * 60 * 1000
	DefaultIndexIntervalBytes = 4096

	// preallocateBytes is how far the active segment's file is extended
	// with zeros at a time when Fsync is on (at most segment.bytes). Small
	// chunks spread the extensions over many syncs: with 1 MiB, the one
	// sync in 64 that carried a new MiB of zeros and the inode took over a
	// millisecond and set the paced produce p99 (performance.md, "Paced
	// p99").
	preallocateBytes = 64 << 10

	// bigSyncBytes is how much a Sync must find written since the one
	// before for the writes to its next one to go without zeros ahead:
	// writing the zeros costs a copy of every byte into the page cache,
	// and above this an fdatasync that writes the inode costs less
	// (performance.md, "Zeros ahead only for small syncs").
	bigSyncBytes = 256 << 10
)

// Options configures a Log.
type Options struct {
	Dir                string       // partition directory; created if missing
	TopicID            string       // written to partition.metadata; checked if present
	SegmentBytes       int64        // roll when the active segment would exceed this; default 1 GiB
	SegmentMs          int64        // roll when the active segment's first batch is older than this; 0 = 7 days
	IndexIntervalBytes int          // bytes of log between index entries; default 4096
	Fsync              bool         // if false, Sync only advances the durable offset without fsync
	Logger             *slog.Logger // may be nil
	FS                 vfs.FS       // the file system; nil: the operating system's (vfs.OS)

	// DropBehind lets the kernel drop the log's pages once durable but for
	// the newest CachedTail bytes, and read ahead of readers behind them
	// (pagecache.go). Off: the page cache keeps them as it likes, as
	// Kafka's does. Only with Fsync.
	DropBehind bool
	CachedTail int64

	// Archive: the segments are archived (kafgres.segment_archive_command):
	// none is deleted or cleaned before MarkArchived passes it (archive.go).
	Archive bool

	// Decompress opens the compressed record section in of a batch and
	// calls fn with a reader of the plain records, which fn reads as a
	// stream (a decompressed batch is never held whole). It is only needed
	// to find the exact record for timestamp lookups; without it, or when
	// it fails with ErrRecordsTooLarge, a compressed batch answers with its
	// base offset.
	Decompress Decompressor

	now         func() time.Time // test hook for segment rolling by age
	beforeFsync func()           // test hook: runs in Sync after it has chosen what to claim

	// afterSnapshot is a test hook that runs right after a reader has
	// taken (and referenced) its views.
	afterSnapshot func()

	// syncActiveLog is a test hook that replaces the fdatasync of the
	// active segment's file in Sync.
	syncActiveLog func(vfs.File) error

	// Test hooks for the order of durable writes in AppendSourced.
	beforeBatchWrite func(base int64)     // runs before a batch's bytes are written
	syncSourceIndex  func(vfs.File) error // replaces the source index fsync and fdatasync

	// cleanerStop is a test hook: Clean stops where it returns true
	// ("cleaned", "swap", "deleted"), leaving the files as a crash would.
	cleanerStop func(point string) bool

	// sourceIndexMaxBytes is the size above which the source index is
	// rewritten with only its tail; default defaultSourceIndexMaxBytes.
	sourceIndexMaxBytes int64
}

// Log is one partition's segment log. Append, Sync, the readers and the
// deleting calls (DeleteRecordsBefore, ApplyRetention) may be called
// concurrently.
type Log struct {
	opts   Options
	logger *slog.Logger

	// startMu serialises the calls that advance the log start offset, so
	// that the checkpoint can be written without holding mu.
	startMu sync.Mutex

	// syncMu serialises Sync and Close so that an fsync never races with the
	// files being closed, without holding mu (and blocking Append) while the
	// fsync runs.
	syncMu sync.Mutex

	mu        sync.RWMutex
	segs      []*segment // sorted by base offset; the last one is active
	start     int64      // log start offset: in the first segment, or its end
	end       int64      // next offset to assign
	durable   int64      // end of the last successful Sync
	dirGen    uint64     // bumped whenever a segment file is created
	dirSynced uint64     // dirGen covered by the last directory fsync
	txnGen    uint64     // bumped whenever a transaction index entry is written
	txnSynced uint64     // txnGen covered by the last Sync
	cleanHeld bool       // the clean stop's record is on disk and the active segment as it says (clean_stop.go)
	closed    bool
	err       error // sticky: after a failed write or fsync the files are suspect

	src sourceIndex // under mu

	archived int64 // under mu: end of the last archived segment (archive.go)

	zeros []byte // written ahead of the active segment's batches; under mu, never modified
	// unsynced counts the bytes appended since the last Sync began;
	// bigSyncs is whether that Sync found at least bigSyncBytes: then the
	// appends until the next one write no zeros ahead (preallocate).
	unsynced atomic.Int64
	bigSyncs atomic.Bool
}

type segment struct {
	base int64
	log  vfs.File
	idx  *lazyFile
	tidx *lazyFile
	txn  *lazyFile // transaction index, written through (txnindex.go)

	// refs is one for the Log while the segment is in Log.segs plus one per
	// reader (or Sync) using its files without holding Log.mu. Deleting the
	// segment drops the Log's reference; whoever drops the last one closes
	// the files, so a reader never finds them closed under it. Log.Close
	// drops the Log's references too: a reader holding a segment (a fetch
	// sending from its file descriptor, whose number must not be reused
	// meanwhile) closes it when done.
	refs atomic.Int32

	// st changes only while the segment is active, under Log.mu; readers
	// work on copies taken under the lock.
	st segState

	// dropped is how much of the file the page cache was told to drop
	// (pagecache.go); under Log.syncMu.
	dropped int64
}

type segState struct {
	size  int64 // bytes of valid batches: the logical end of the file
	alloc int64 // size of the file: size plus the zeros written ahead
	end   int64 // offset after the last batch

	// In-memory index entries of the active segment; nil once sealed, when
	// the files are complete.
	idxMem  []byte
	tidxMem []byte
	idxN    int
	tidxN   int
	txnN    int // transaction index entries, on disk for every segment

	lastIndexedTs int64 // timestamp of the last time index entry, -1 if none
	maxTs         int64 // largest batch max timestamp so far, -1 if none
	maxTsOffset   int64 // last offset of the first batch reaching maxTs
	sinceIndex    int   // bytes appended since the last index entry
	created       time.Time
	sealed        bool
}

func newSegment(base int64) *segment {
	s := &segment{base: base, st: newSegState(base)}
	s.refs.Store(1)
	return s
}

func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference and closes the files if it was the last one.
func (s *segment) release() error {
	if s.refs.Add(-1) == 0 {
		return s.close()
	}
	return nil
}

func newSegState(base int64) segState {
	return segState{end: base, lastIndexedTs: -1, maxTs: -1, maxTsOffset: -1}
}

// addBatch accounts for a batch written at pos. The index rules follow
// Kafka's LogSegment.append so that the files look like Kafka's: an offset
// entry (batch last offset, position) once IndexIntervalBytes have been
// written since the previous entry, and a time entry (running max timestamp,
// offset of the batch that set it) at the same moments when the maximum grew.
func (s *segState) addBatch(segBase int64, h BatchHeader, pos int64, interval int) {
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.LastOffset()
	}
	if s.sinceIndex >= interval {
		s.idxMem = appendOffsetEntry(s.idxMem, h.LastOffset()-segBase, pos)
		s.idxN++
		s.addTimeEntry(segBase)
		s.sinceIndex = 0
	}
	s.sinceIndex += int(h.Length)
	s.size = pos + int64(h.Length)
	s.alloc = max(s.alloc, s.size)
	s.end = h.LastOffset() + 1
}

func (s *segState) addTimeEntry(segBase int64) {
	if s.maxTs > s.lastIndexedTs {
		s.tidxMem = appendTimeEntry(s.tidxMem, s.maxTs, s.maxTsOffset-segBase)
		s.tidxN++
		s.lastIndexedTs = s.maxTs
	}
}

func segmentPath(dir string, base int64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, ext))
}

const (
	extLog       = ".log"
	extIndex     = ".index"
	extTimeIndex = ".timeindex"
)

// segmentExts are the files of a segment, the log first (see
// removeSegmentFiles).
var segmentExts = []string{extLog, extIndex, extTimeIndex, extTxnIndex}

// writeIndexes replaces the index files of s with the in-memory entries of st.
func (s *segment) writeIndexes(st *segState) error {
	for _, f := range []struct {
		f   *lazyFile
		mem []byte
	}{{s.idx, st.idxMem}, {s.tidx, st.tidxMem}} {
		if _, err := f.f.WriteAt(f.mem, 0); err != nil {
			return fmt.Errorf("write index %s: %w", f.f.Name(), err)
		}
		if err := f.f.Truncate(int64(len(f.mem))); err != nil {
			return fmt.Errorf("truncate index %s: %w", f.f.Name(), err)
		}
	}
	return nil
}

// cutZeros truncates the log file to its logical end, dropping the zeros
// written ahead, so that a sealed or cleanly closed segment is exactly
// Kafka's format.
func (s *segment) cutZeros() error {
	if s.st.alloc == s.st.size {
		return nil
	}
	if err := s.log.Truncate(s.st.size); err != nil {
		return fmt.Errorf("truncate %s to its end: %w", s.log.Name(), err)
	}
	s.st.alloc = s.st.size
	return nil
}

// releaseIndexes closes the index files until they are next used: a
// sealed segment's are only read by lookups into it.
func (s *segment) releaseIndexes() {
	for _, f := range []*lazyFile{s.idx, s.tidx, s.txn} {
		_ = f.release() // a close error loses nothing: the files were synced or are rebuilt
	}
}

// pinIndexes keeps the index files open until the segment's last reader
// is done: their names are about to go (see lazyFile.pin).
func (s *segment) pinIndexes() {
	for _, f := range []*lazyFile{s.idx, s.tidx, s.txn} {
		_ = f.pin() // readers then fail with ErrClosed rather than read another file
	}
}

func (s *segment) syncAll() error {
	for _, f := range []vfs.File{s.log, s.idx, s.tidx, s.txn} {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", f.Name(), err)
		}
	}
	return nil
}

func (s *segment) close() error {
	var errs []error
	if s.log != nil {
		if err := s.log.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.log.Name(), err))
		}
	}
	for _, f := range []*lazyFile{s.idx, s.tidx, s.txn} {
		if f != nil {
			if err := f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", f.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// createSegment creates empty files for a new segment at base.
func createSegment(fsys vfs.FS, dir string, base int64) (*segment, error) {
	s := newSegment(base)
	var err error
	// O_EXCL on the log: a segment file already at this offset would mean
	// the offsets bookkeeping is wrong, and overwriting it would lose data.
	if s.log, err = fsys.OpenFile(segmentPath(dir, base, extLog), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	// The indexes are created (empty, as Kafka's layout has them) and
	// closed: the active segment's are in memory until the roll.
	const create = os.O_RDWR | os.O_CREATE | os.O_TRUNC
	s.idx = newLazyFile(fsys, segmentPath(dir, base, extIndex), create)
	s.tidx = newLazyFile(fsys, segmentPath(dir, base, extTimeIndex), create)
	s.txn = newLazyFile(fsys, segmentPath(dir, base, extTxnIndex), create)
	for _, f := range []*lazyFile{s.idx, s.tidx, s.txn} {
		if err = f.ensure(); err != nil {
			break
		}
	}
	if err != nil {
		_ = s.close()
		for _, ext := range segmentExts {
			_ = fsys.Remove(segmentPath(dir, base, ext))
		}
		return nil, fmt.Errorf("create segment: %w", err)
	}
	s.releaseIndexes()
	return s, nil
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// Append writes one validated v2 batch, stamping its base offset and leader
// epoch into batch itself. It does not fsync; see Sync.
func (l *Log) Append(batch []byte, leaderEpoch int32) (int64, error) {
	h, err := AppendHeader(batch)
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", l.opts.Dir, err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	base, err := l.appendLocked(batch, h, leaderEpoch)
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", l.opts.Dir, err)
	}
	return base, nil
}

// AppendHeader parses the header of a batch about to be appended and checks
// what appending relies on, in any engine: that the header describes exactly
// these bytes and at least one offset.
func AppendHeader(batch []byte) (BatchHeader, error) {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return h, err
	}
	if int(h.Length) != len(batch) || h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("%w: %d bytes, header length %d, last offset delta %d",
			ErrCorruptBatch, len(batch), h.Length, h.LastOffsetDelta)
	}
	return h, nil
}

// writable reports why appending is impossible, if it is. Callers hold mu.
func (l *Log) writable() error {
	if l.closed {
		return ErrClosed
	}
	if l.err != nil {
		return fmt.Errorf("append to %s: log failed earlier: %w", l.opts.Dir, l.err)
	}
	return nil
}

// appendLocked writes batch (whose header is h) at the log end, rolling the
// segment first if needed, and returns its base offset, which is always the
// log end at the call: AppendSourced relies on that to know the offsets
// before writing. Callers hold mu and have checked writable.
func (l *Log) appendLocked(batch []byte, h BatchHeader, leaderEpoch int32) (int64, error) {
	if err := l.leaveCleanStop(); err != nil {
		return 0, err
	}
	now := l.opts.now()
	base := l.end
	h.BaseOffset = base
	if err := l.maybeRoll(h, now); err != nil {
		return 0, err
	}
	seg := l.active()
	pos := seg.st.size
	Stamp(batch, base, leaderEpoch)
	if l.opts.beforeBatchWrite != nil {
		l.opts.beforeBatchWrite(base)
	}
	end := pos + int64(len(batch))
	l.unsynced.Add(int64(len(batch)))
	if l.opts.Fsync && end > seg.st.alloc && !l.bigSyncs.Load() {
		if err := l.preallocate(seg, end); err != nil {
			return 0, err
		}
	}
	if _, err := seg.log.WriteAt(batch, pos); err != nil {
		// Cut a partial write (and the zeros ahead) so that the next batch
		// lands right after the last good one; if even that fails the file
		// can no longer be trusted until recovery.
		l.cutFailedWrite(seg, pos)
		return 0, fmt.Errorf("write %s: %w", seg.log.Name(), err)
	}
	if seg.st.size == 0 {
		seg.st.created = now
	}
	seg.st.addBatch(seg.base, h, pos, l.opts.IndexIntervalBytes)
	l.end = seg.st.end
	return base, nil
}

// preallocate extends the active segment's file with zeros from its current
// size to past end (preallocateBytes at a time, not beyond segment.bytes
// unless end is), so that the batches written next only overwrite blocks
// that are allocated and written: their fdatasync in Sync then has no size
// and no block allocation to write, only data (ext4 writes the inode on
// every fsync of a file that grew: 13 % of the broker's CPU). The zeros need
// no sync of their own: the fdatasync after the batch over them writes the
// new size and blocks too, because they changed. FALLOC_FL_ZERO_RANGE would
// leave unwritten extents whose conversion is metadata again. The zeros
// cost a copy of their own, which pays only when syncs are small (many
// fsyncs per byte): after a Sync that found bigSyncBytes or more, appends
// extend the file instead.
func (l *Log) preallocate(seg *segment, end int64) error {
	chunk := min(int64(preallocateBytes), l.opts.SegmentBytes)
	target := (end + chunk - 1) / chunk * chunk
	target = min(target, max(end, l.opts.SegmentBytes))
	// The batch itself covers [size, end).
	from := max(end, seg.st.alloc)
	if target <= from {
		return nil
	}
	if l.zeros == nil {
		l.zeros = make([]byte, preallocateBytes)
	}
	for pos := from; pos < target; {
		n := min(int64(len(l.zeros)), target-pos)
		if _, err := seg.log.WriteAt(l.zeros[:n], pos); err != nil {
			l.cutFailedWrite(seg, seg.st.size)
			return fmt.Errorf("extend %s: %w", seg.log.Name(), err)
		}
		pos += n
	}
	seg.st.alloc = target
	return nil
}

// cutFailedWrite truncates the active segment's file to pos after a failed
// write. If that fails too, the file cannot be trusted until recovery.
func (l *Log) cutFailedWrite(seg *segment, pos int64) {
	if err := seg.log.Truncate(pos); err != nil {
		l.err = fmt.Errorf("truncate %s after failed write: %w", seg.log.Name(), err)
		return
	}
	seg.st.alloc = pos
}

// maybeRoll starts a new segment if h (already carrying its base offset)
// should not go into the active one.
func (l *Log) maybeRoll(h BatchHeader, now time.Time) error {
	seg := l.active()
	if seg.st.size == 0 {
		return nil
	}
	full := seg.st.size+int64(h.Length) > l.opts.SegmentBytes
	old := now.Sub(seg.st.created) >= time.Duration(l.opts.SegmentMs)*time.Millisecond
	// Index entries hold offsets relative to the segment base in 32 bits.
	overflow := h.LastOffset()-seg.base > math.MaxInt32
	if !full && !old && !overflow {
		return nil
	}
	return l.roll()
}

// roll seals the active segment and starts a new one at the log end. The
// sealed segment is cut to its logical end and fsynced before the next file
// exists, because recovery only scans the last segment and trusts the ones
// before it (their size included).
func (l *Log) roll() error {
	if err := l.leaveCleanStop(); err != nil {
		return err
	}
	fsys := l.opts.FS
	seg := l.active()
	if err := seg.cutZeros(); err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	st := seg.st
	// A final time entry makes the last entry the segment's max timestamp,
	// which lets timestamp lookups skip whole segments.
	st.addTimeEntry(seg.base)
	if err := seg.writeIndexes(&st); err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	if err := seg.txn.ensure(); err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	if l.opts.Fsync {
		if err := seg.syncAll(); err != nil {
			l.err = err
			return fmt.Errorf("roll: %w", err)
		}
	}
	seg.releaseIndexes()
	next, err := createSegment(fsys, l.opts.Dir, l.end)
	if err != nil {
		return fmt.Errorf("roll: %w", err)
	}
	st.idxMem, st.tidxMem, st.sealed = nil, nil, true
	seg.st = st
	l.segs = append(l.segs, next)
	l.dirGen++
	l.logger.Debug("rolled segment", "dir", l.opts.Dir, "sealed_base", seg.base, "new_base", next.base, "sealed_bytes", st.size)
	return nil
}

// Sync makes everything appended before it started durable and returns the
// durable end offset (exclusive).
func (l *Log) Sync() (int64, error) {
	fsys := l.opts.FS
	l.syncMu.Lock()
	defer l.syncMu.Unlock()

	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, ErrClosed
	}
	if l.err != nil {
		err := l.err
		l.mu.RUnlock()
		return 0, fmt.Errorf("sync %s: log failed earlier: %w", l.opts.Dir, err)
	}
	target, durable, seg := l.end, l.durable, l.active()
	size := seg.st.size
	l.bigSyncs.Store(l.unsynced.Swap(0) >= bigSyncBytes)
	dirGen, dirSynced := l.dirGen, l.dirSynced
	txnGen, txnSynced := l.txnGen, l.txnSynced
	// The segment may be rolled and then deleted while it is fsynced.
	seg.acquire()
	l.mu.RUnlock()
	defer l.releaseSegment(seg)

	if target == durable && dirGen == dirSynced && txnGen == txnSynced {
		return durable, nil
	}
	if l.opts.beforeFsync != nil {
		l.opts.beforeFsync()
	}
	var err error
	if l.opts.Fsync {
		// Only the segment that was active at the start needs a sync:
		// segments rolled before were fsynced when they were sealed. The
		// active segment's indexes are rebuilt by recovery. fdatasync is
		// enough, as for the source index: it writes the file's size and
		// blocks whenever they changed, and only then the inode, which
		// between preallocations they do not.
		if target > durable {
			if serr := l.syncLog(seg.log); serr != nil {
				err = fmt.Errorf("fdatasync %s: %w", seg.log.Name(), serr)
			} else {
				l.dropDurable(seg, size)
			}
		}
		// Transaction index entries go with their markers. One written to
		// a segment rolled since was fsynced by the roll.
		if err == nil && txnGen != txnSynced {
			if serr := seg.txn.Datasync(); serr != nil {
				err = fmt.Errorf("fdatasync %s: %w", seg.txn.Name(), serr)
			}
		}
		if err == nil && dirGen != dirSynced {
			err = fsys.SyncDir(l.opts.Dir)
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		// After a failed fsync the kernel may have dropped the dirty pages,
		// so a later fsync succeeding proves nothing.
		l.err = err
		return l.durable, fmt.Errorf("sync %s: %w", l.opts.Dir, err)
	}
	l.durable = max(l.durable, target)
	l.dirSynced = max(l.dirSynced, dirGen)
	l.txnSynced = max(l.txnSynced, txnGen)
	return l.durable, nil
}

// syncLog makes the active segment's file durable: fdatasync, or the test
// hook that replaces it.
func (l *Log) syncLog(f vfs.File) error {
	if l.opts.syncActiveLog != nil {
		return l.opts.syncActiveLog(f)
	}
	return f.Datasync()
}

// LogStartOffset is the first offset that may be read: the base of the
// first segment, or later after DeleteRecordsBefore.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// LogEndOffset is the next offset to assign.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// DurableEnd is the end (exclusive) of what the last successful Sync made
// durable.
func (l *Log) DurableEnd() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.durable
}

// ActiveBase is the base offset of the active segment. A batch appended at
// that offset started the segment: the broker snapshots its producer state
// there, as Kafka does when it rolls.
func (l *Log) ActiveBase() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.active().base
}

// Segments returns the number of segment files.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// Size is the number of bytes in the log's segment files (the .log files,
// not the indexes), as Kafka reports a partition's size.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.st.size
	}
	return n
}

// segmentLimits applies the defaults and bounds of the roll limits.
func segmentLimits(segmentBytes, segmentMs int64) (int64, int64) {
	if segmentBytes <= 0 {
		segmentBytes = DefaultSegmentBytes
	}
	// Index entries store file positions in 32 bits.
	segmentBytes = min(segmentBytes, math.MaxInt32)
	if segmentMs <= 0 {
		segmentMs = DefaultSegmentMs
	}
	return segmentBytes, segmentMs
}

// SetSegmentLimits changes the roll limits (Kafka's segment.bytes and
// segment.ms) of an open log; values <= 0 mean the defaults. They apply from
// the next append on.
func (l *Log) SetSegmentLimits(segmentBytes, segmentMs int64) {
	segmentBytes, segmentMs = segmentLimits(segmentBytes, segmentMs)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts.SegmentBytes, l.opts.SegmentMs = segmentBytes, segmentMs
}

// Close writes the active segment's indexes, fsyncs it when Fsync is set and
// closes all files. Reads in flight fail with ErrClosed.
func (l *Log) Close() error { return l.close(false, nil) }

// CloseWithProducerSnapshot is Close that also writes the producer
// snapshot as of the log end (WriteProducerSnapshot), sharing the close's
// directory fsync: a broker stopping cleanly snapshots every partition.
func (l *Log) CloseWithProducerSnapshot(entries []ProducerSnapshotEntry) error {
	return l.close(true, entries)
}

func (l *Log) close(snapshot bool, entries []ProducerSnapshotEntry) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true

	var errs []error
	if l.err == nil {
		if err := l.closeActive(snapshot, entries); err != nil {
			errs = append(errs, err)
		}
	}
	// The log's references: a segment a reader still holds (a fetch
	// sending from its file) closes when that reader is done.
	for _, s := range l.segs {
		if err := s.release(); err != nil {
			errs = append(errs, err)
		}
	}
	// The source index needs no fsync here: with Fsync on, every write to
	// it was made durable (fdatasync) before its batches were written.
	if l.src.f != nil {
		if err := l.src.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", l.src.f.Name(), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close log %s: %w", l.opts.Dir, err)
	}
	return nil
}

// closeActive writes the active segment's indexes (and cuts the zeros
// ahead), which keeps the directory complete for tools that read Kafka's
// layout, and with Fsync makes them durable and records the clean stop, so
// that the next Open takes them as they are (clean_stop.go). A broker with
// 10,000 partitions closes them all within the supervisor's grace only if
// each close costs few fsyncs (performance.md, "10,000 partitions"): one
// for each file changed since the last Sync, one for the record and one
// for the directory, which covers the record's and the snapshot's names.
// Callers hold syncMu and mu.
func (l *Log) closeActive(snapshot bool, entries []ProducerSnapshotEntry) error {
	fsys, fsync := l.opts.FS, l.opts.Fsync
	wrote := false
	if snapshot {
		var err error
		if wrote, err = l.writeEndSnapshot(entries); err != nil {
			// Costs only a longer replay at the next open, as any
			// snapshot's failure does; the clean stop still counts.
			l.logger.Warn("write producer snapshot", "dir", l.opts.Dir, "offset", l.end, "error", err)
		}
	}
	if l.cleanHeld {
		// The active segment is as the record on disk says, and durable.
		if wrote && fsync {
			return fsys.SyncDir(l.opts.Dir)
		}
		return nil
	}
	seg := l.active()
	if err := seg.cutZeros(); err != nil {
		return err
	}
	if err := seg.writeIndexes(&seg.st); err != nil {
		return err
	}
	if !fsync {
		return nil
	}
	files := []vfs.File{seg.log, seg.idx, seg.tidx}
	if l.txnGen != l.txnSynced {
		files = append(files, seg.txn)
	}
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", f.Name(), err)
		}
	}
	// The record may say only what the disk has: the segment's names too.
	if l.dirGen != l.dirSynced {
		if err := fsys.SyncDir(l.opts.Dir); err != nil {
			return err
		}
	}
	if err := writeCleanStop(fsys, l.opts.Dir, seg); err != nil {
		return err
	}
	return fsys.SyncDir(l.opts.Dir)
}

// writeEndSnapshot writes the producer snapshot as of the log end, fsynced
// with Fsync but its name not yet (the caller fsyncs the directory), unless
// the same bytes are there already: a partition not written since the last
// stop has the same state to save.
func (l *Log) writeEndSnapshot(entries []ProducerSnapshotEntry) (wrote bool, err error) {
	fsys, name := l.opts.FS, producerSnapshotName(l.end)
	data := EncodeProducerSnapshot(entries)
	if old, err := vfs.ReadFile(fsys, filepath.Join(l.opts.Dir, name)); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	return true, renameWritten(fsys, l.opts.Dir, name, data, l.opts.Fsync)
}

// segView is a consistent copy of a segment's state for lock-free reading:
// bytes below size and index entries below the counts never change.
type segView struct {
	seg *segment
	segState
}

func (v *segView) offsetIndex() indexView {
	return indexView{f: v.seg.idx, mem: v.idxMem, n: v.idxN, width: offsetEntrySize}
}

func (v *segView) timeIndex() indexView {
	return indexView{f: v.seg.tidx, mem: v.tidxMem, n: v.tidxN, width: timeEntrySize}
}

// snapshot returns views of the segments from the one that would contain
// offset through the active one, plus the log start and end. The views hold
// references on their segments: callers must pass them to release.
func (l *Log) snapshot(offset int64) (views []segView, start, end int64, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil, 0, 0, ErrClosed
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	i = max(i, 0)
	views = make([]segView, 0, len(l.segs)-i)
	for _, s := range l.segs[i:] {
		s.acquire()
		views = append(views, segView{seg: s, segState: s.st})
	}
	start, end = l.start, l.end
	l.mu.RUnlock()
	if l.opts.afterSnapshot != nil {
		l.opts.afterSnapshot()
	}
	return views, start, end, nil
}

// release drops the references taken by snapshot.
func (l *Log) release(views []segView) {
	for i := range views {
		l.releaseSegment(views[i].seg)
	}
}

func (l *Log) releaseSegment(s *segment) {
	if err := s.release(); err != nil {
		// The segment was deleted; its files are unlinked already.
		l.logger.Warn("closing deleted segment", "dir", l.opts.Dir, "base_offset", s.base, "error", err)
	}
}
