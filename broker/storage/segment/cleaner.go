package segment

import (
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// Compaction (cleanup.policy=compact) as Kafka's log cleaner does it
// (Cleaner, LogCleanerManager, CleanedTransactionMetadata): a map from
// each key to its latest offset is built over the dirty part of the log
// (from the cleaner checkpoint to the first uncleanable offset), then the
// sealed segments below the map's last offset are rewritten in groups of
// at most segment.bytes, keeping per key only the record at the latest
// offset, tombstones until their batch's delete horizon, the last batch of
// every active producer (empty if need be, for its sequence state), and
// transaction markers until nothing of their transaction is left and their
// own horizon has passed; aborted records go. Offsets never change: a
// rewritten batch keeps its base and last offset, producer id, epoch and
// base sequence. Each group becomes one segment written as
// <base>.*.cleaned, renamed to <base>.*.swap (the log file last), then put
// in place of the group: Open completes a swap whose .log.swap exists and
// discards one that does not (finishCleaning).
const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"

	// CleanerCheckpointFile holds the partition's cleaner checkpoint: the
	// first offset not yet cleaned (Kafka keeps one cleaner-offset-checkpoint
	// per log directory; one per partition is written with the clean).
	CleanerCheckpointFile = "cleaner-offset-checkpoint"
	cleanerCheckpointTmp  = CleanerCheckpointFile + tempSuffix

	// cleanerMaxInflate bounds a compressed batch's records as the cleaner
	// reads them whole.
	cleanerMaxInflate = 256 << 20

	// DefaultMaxIndexBytes is Kafka's segment.index.bytes default.
	DefaultMaxIndexBytes = 10 << 20
)

// ErrCleanAborted: CleanOptions.Aborted asked the clean to stop.
var ErrCleanAborted = errors.New("cleaning aborted")

// errCleanerCrash is what the test hook that stops a clean part way
// returns: the files are left as a crash would leave them.
var errCleanerCrash = errors.New("cleaner stopped by test hook")

// LastRecord is what the cleaner must keep of an active producer (Kafka's
// LastRecord): the last offset of its last data batch, or -1 if its last
// entry is a transaction marker, and its epoch.
type LastRecord struct {
	DataOffset int64
	Epoch      int16
}

// CleanOptions are the inputs of one clean of a partition log.
type CleanOptions struct {
	// FirstDirty is the cleaner checkpoint: cleaning maps keys from here.
	// Below the log start offset or past the log end it means the log
	// start offset.
	FirstDirty int64
	// UpperBound is the first uncleanable offset (the last stable offset,
	// min.compaction.lag.ms); the active segment's base bounds it too.
	UpperBound int64
	Now        time.Time
	// DeleteRetentionMs is delete.retention.ms: how long a tombstone (and
	// a marker of a transaction that has nothing left) stays after the
	// clean that first kept it.
	DeleteRetentionMs int64
	// MaxGroupBytes is segment.bytes, MaxIndexBytes segment.index.bytes:
	// the bounds of a group of segments cleaned into one.
	MaxGroupBytes, MaxIndexBytes int64
	// MaxKeys bounds the offset map (log.cleaner.dedupe.buffer.size);
	// 0 means no bound. A full map ends the clean early, where it filled.
	MaxKeys int
	// ActiveProducers is the producer state: their last batch survives.
	ActiveProducers map[int64]LastRecord
	// Compress recompresses a rewritten batch's records with its codec.
	Compress func(codec int8, records []byte) ([]byte, error)
	// Throttle is called with every n bytes read or written, to bound the
	// I/O rate (log.cleaner.io.max.bytes.per.second); nil: no bound.
	Throttle func(n int)
	// Aborted, checked before every batch, stops the clean with
	// ErrCleanAborted (Kafka's checkDone): the broker is stopping. What
	// was swapped in stays; the group being written is deleted.
	Aborted func() bool
}

// CleanStats describes one clean.
type CleanStats struct {
	FirstDirty, End   int64 // the dirty range mapped: End is the new checkpoint
	Groups, Segments  int   // groups written and segments they replaced
	BytesRead         int64
	BytesWritten      int64
	RecordsRead       int64
	RecordsRetained   int64
	BatchesDiscarded  int64
	GroupsAbandoned   int // groups changed by retention meanwhile; left for the next clean
	KeysInMap         int
	OffsetMapWasFull  bool
	UpperBound        int64
	ActiveSegmentBase int64
}

// Cleanable is what the cleaner's scheduler needs of a log: Kafka's
// LogToClean.
type Cleanable struct {
	FirstDirty       int64 // the checkpoint, clamped to the log
	FirstUncleanable int64
	CleanBytes       int64 // segment bytes below FirstDirty
	CleanableBytes   int64 // segment bytes in [FirstDirty, FirstUncleanable)
	// MaxCompactionDelayMs is how long the first dirty batch is overdue for
	// max.compaction.lag.ms (0: not overdue).
	MaxCompactionDelayMs int64
}

// Ratio is the dirty ratio compared with min.cleanable.dirty.ratio.
func (c Cleanable) Ratio() float64 {
	total := c.CleanBytes + c.CleanableBytes
	if total == 0 {
		return 0
	}
	return float64(c.CleanableBytes) / float64(total)
}

// CleanerCheckpoint returns the partition's cleaner checkpoint, or the log
// start offset when there is none (or it does not parse).
func (l *Log) CleanerCheckpoint() int64 {
	fsys := l.opts.FS
	b, err := vfs.ReadFile(fsys, filepath.Join(l.opts.Dir, CleanerCheckpointFile))
	if err == nil {
		lines := strings.Split(string(b), "\n")
		if len(lines) == 3 && lines[0] == "0" && lines[2] == "" {
			if n, err := strconv.ParseInt(lines[1], 10, 64); err == nil && n >= 0 {
				return n
			}
		}
	}
	return l.LogStartOffset()
}

func (l *Log) writeCleanerCheckpoint(offset int64) error {
	fsys := l.opts.FS
	if err := writeFileAtomic(fsys, l.opts.Dir, CleanerCheckpointFile, fmt.Appendf(nil, "0\n%d\n", offset), l.opts.Fsync); err != nil {
		return fmt.Errorf("write cleaner checkpoint: %w", err)
	}
	return nil
}

// Cleanable measures the log for the cleaner's choice (Kafka's
// LogCleanerManager.cleanableOffsets and LogToClean): the first dirty
// offset from checkpoint, the first uncleanable one (the active segment's
// base, lso, and with minLagMs > 0 the first dirty sealed segment holding
// a record newer than now - minLagMs), the bytes either side, and whether
// the first dirty batch is older than maxLagMs.
func (l *Log) Cleanable(checkpoint, lso int64, now time.Time, minLagMs, maxLagMs int64) (Cleanable, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return Cleanable{}, ErrClosed
	}
	c := Cleanable{FirstDirty: checkpoint}
	if c.FirstDirty < l.start || c.FirstDirty > l.end {
		c.FirstDirty = l.start
	}
	nowMs := now.UnixMilli()
	active := l.active().base
	// A segment the archive has not taken is not cleaned: the archive gets
	// every segment as it was sealed (archive.go).
	c.FirstUncleanable = min(active, lso, l.reclaimLimit())
	sealed := l.segs[:len(l.segs)-1]
	if minLagMs > 0 {
		for _, s := range sealed {
			if s.st.end <= c.FirstDirty {
				continue
			}
			ts, err := s.largestTimestamp()
			if err != nil {
				return c, err
			}
			if ts > nowMs-minLagMs {
				c.FirstUncleanable = min(c.FirstUncleanable, s.base)
				break
			}
		}
	}
	c.FirstUncleanable = max(c.FirstUncleanable, c.FirstDirty)
	for i, s := range l.segs {
		next := l.end
		if i+1 < len(l.segs) {
			next = l.segs[i+1].base
		}
		switch {
		case next <= c.FirstDirty:
			c.CleanBytes += s.st.size
		case s.base < c.FirstUncleanable:
			c.CleanableBytes += s.st.size
		}
	}
	if maxLagMs > 0 && maxLagMs < math.MaxInt64 {
		for _, s := range sealed {
			if s.st.end <= c.FirstDirty || s.st.size == 0 {
				continue
			}
			h, err := firstBatchHeader(s)
			if err != nil {
				return c, err
			}
			if delay := nowMs - h.MaxTimestamp - maxLagMs; h.MaxTimestamp >= 0 && delay > 0 {
				c.MaxCompactionDelayMs = delay
			}
			break
		}
	}
	return c, nil
}

func firstBatchHeader(s *segment) (BatchHeader, error) {
	var b [HeaderSize]byte
	if _, err := s.log.ReadAt(b[:], 0); err != nil {
		return BatchHeader{}, closedErr(fmt.Errorf("read %s: %w", s.log.Name(), err))
	}
	return ParseBatchHeader(b[:])
}

// offsetMap is Kafka's OffsetMap: key digest -> latest offset.
type offsetMap struct {
	m      map[[md5.Size]byte]int64
	latest int64 // the largest offset put, -1 if none
	max    int
}

func (m *offsetMap) put(key []byte, offset int64) {
	m.m[md5.Sum(key)] = offset
	m.latest = max(m.latest, offset)
}

func (m *offsetMap) get(key []byte) int64 {
	if o, ok := m.m[md5.Sum(key)]; ok {
		return o
	}
	return -1
}

func (m *offsetMap) full() bool { return m.max > 0 && len(m.m) >= m.max }

// cleanTxns is Kafka's CleanedTransactionMetadata: which transactions are
// aborted (from the transaction indexes) and which data of them the clean
// has passed, to decide when a batch is aborted and when a marker may go.
type cleanTxns struct {
	aborted          []AbortedTxn // by first offset, consumed from the front
	ongoingAborted   map[int64]*abortedSeen
	ongoingCommitted map[int64]bool
	index            []byte // entries of the cleaned segment's .txnindex
	keepIndex        bool
}

type abortedSeen struct {
	txn      AbortedTxn
	observed bool
}

func newCleanTxns(aborted []AbortedTxn) *cleanTxns {
	return &cleanTxns{aborted: aborted, ongoingAborted: map[int64]*abortedSeen{}, ongoingCommitted: map[int64]bool{}}
}

func (t *cleanTxns) consumeUpTo(offset int64) {
	for len(t.aborted) > 0 && t.aborted[0].FirstOffset <= offset {
		a := t.aborted[0]
		t.aborted = t.aborted[1:]
		if _, ok := t.ongoingAborted[a.ProducerID]; !ok {
			t.ongoingAborted[a.ProducerID] = &abortedSeen{txn: a}
		}
	}
}

// onBatch reports whether the data batch h belongs to an aborted
// transaction.
func (t *cleanTxns) onBatch(h BatchHeader) bool {
	t.consumeUpTo(h.LastOffset())
	if !h.IsTransactional() {
		return false
	}
	if a, ok := t.ongoingAborted[h.ProducerID]; ok {
		a.observed = true
		return true
	}
	t.ongoingCommitted[h.ProducerID] = true
	return false
}

// onControl reports whether the control batch b (header h) may be
// discarded: an empty one, an ABORT whose transaction left no batch in
// this pass, a COMMIT of a transaction with no data passed.
func (t *cleanTxns) onControl(h BatchHeader, b []byte) bool {
	t.consumeUpTo(h.LastOffset())
	if h.NumRecords == 0 {
		return true
	}
	m, err := ParseMarker(b)
	if err != nil {
		return false // not a transaction marker: kept
	}
	if !m.Commit {
		a, ok := t.ongoingAborted[h.ProducerID]
		delete(t.ongoingAborted, h.ProducerID)
		if ok && a.observed {
			if t.keepIndex {
				t.index = appendTxnEntry(t.index, a.txn)
			}
			return false
		}
		return true
	}
	had := t.ongoingCommitted[h.ProducerID]
	delete(t.ongoingCommitted, h.ProducerID)
	return !had
}

// cleanRecord is one record of a batch being cleaned, with what a rewrite
// needs.
type cleanRecord struct {
	tsDelta     int64
	offsetDelta int32
	key, value  []byte // nil: null
	headers     []byte // header count and headers as stored
}

// parseCleanRecords decodes n records of a plain records section.
func parseCleanRecords(b []byte, n int32) ([]cleanRecord, error) {
	out := make([]cleanRecord, 0, n)
	fail := func(i int32, what string) error {
		return fmt.Errorf("%w: record %d: %s", ErrInvalidRecord, i, what)
	}
	for i := int32(0); i < n; i++ {
		size, k := binary.Varint(b)
		if k <= 0 || size < 6 || size > int64(len(b)-k) {
			return nil, fail(i, "length")
		}
		body := b[k : k+int(size)]
		b = b[k+int(size):]
		body = body[1:] // attributes
		var r cleanRecord
		v, k := binary.Varint(body)
		if k <= 0 {
			return nil, fail(i, "timestamp delta")
		}
		r.tsDelta, body = v, body[k:]
		v, k = binary.Varint(body)
		if k <= 0 || v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fail(i, "offset delta")
		}
		r.offsetDelta, body = int32(v), body[k:]
		for _, field := range []*[]byte{&r.key, &r.value} {
			v, k = binary.Varint(body)
			if k <= 0 || v > int64(len(body)-k) {
				return nil, fail(i, "key or value length")
			}
			body = body[k:]
			if v >= 0 {
				*field = body[:v:v]
				if v == 0 {
					*field = []byte{}
				}
				body = body[v:]
			}
		}
		r.headers = body
		out = append(out, r)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: bytes after the declared records", ErrInvalidRecord)
	}
	return out, nil
}

func appendNullable(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// cleaner holds one clean's state.
type cleaner struct {
	l *Log // nil for a Compactor
	o CleanOptions
	// decompress reads compressed batches' records.
	decompress Decompressor
	now        int64
	upper      int64
	m          offsetMap
	txns       *cleanTxns
	// groupEnd is the base of the segment after the group being cleaned.
	groupEnd int64
	stats    CleanStats
}

// Clean compacts the log once (Kafka's Cleaner.doClean) and records the
// new cleaner checkpoint. Appends, reads, retention and DeleteRecords go
// on meanwhile: the cleaner reads sealed segments only, writes new files
// beside them, and takes the log's lock only to put a cleaned segment in
// place; readers holding an old segment keep reading its files.
func (l *Log) Clean(o CleanOptions) (CleanStats, error) {
	if o.MaxGroupBytes <= 0 {
		o.MaxGroupBytes = l.opts.SegmentBytes
	}
	if o.MaxIndexBytes <= 0 {
		o.MaxIndexBytes = DefaultMaxIndexBytes
	}
	if o.Now.IsZero() {
		o.Now = l.opts.now()
	}
	views, start, end, err := l.snapshot(math.MinInt64)
	if err != nil {
		return CleanStats{}, err
	}
	defer l.release(views)
	c := newCleaner(o, l.opts.Decompress)
	c.l = l
	activeBase := views[len(views)-1].seg.base
	l.mu.RLock()
	c.upper = min(o.UpperBound, activeBase, l.reclaimLimit())
	l.mu.RUnlock()
	firstDirty := o.FirstDirty
	if firstDirty < start || firstDirty > end {
		firstDirty = start
	}
	c.stats.FirstDirty, c.stats.End, c.stats.UpperBound, c.stats.ActiveSegmentBase = firstDirty, firstDirty, c.upper, activeBase
	if firstDirty >= c.upper {
		return c.stats, nil
	}
	sealed := views[:len(views)-1]
	aborted, err := collectAborted(views, start, c.upper)
	if err != nil {
		return c.stats, fmt.Errorf("clean %s: %w", l.opts.Dir, err)
	}
	if err := c.buildMap(sealed, firstDirty, aborted); err != nil {
		if errors.Is(err, ErrCleanAborted) {
			return c.stats, err
		}
		return c.stats, fmt.Errorf("clean %s: build offset map: %w", l.opts.Dir, err)
	}
	endOffset := c.mapped(firstDirty)

	c.txns = newCleanTxns(aborted)
	c.txns.keepIndex = true
	var toClean []segView
	for _, v := range sealed {
		if v.seg.base < endOffset {
			toClean = append(toClean, v)
		}
	}
	for _, g := range c.groups(toClean, views) {
		if err := c.cleanGroup(g.segs, g.next); err != nil {
			if errors.Is(err, errCleanerCrash) || errors.Is(err, ErrCleanAborted) {
				return c.stats, err
			}
			return c.stats, fmt.Errorf("clean %s: %w", l.opts.Dir, err)
		}
	}
	if err := l.writeCleanerCheckpoint(c.stats.End); err != nil {
		return c.stats, fmt.Errorf("clean %s: %w", l.opts.Dir, err)
	}
	return c.stats, nil
}

// collectAborted lists every aborted transaction with data below upper
// and its marker at or after from, by first offset.
func collectAborted(views []segView, from, upper int64) ([]AbortedTxn, error) {
	var out []AbortedTxn
	for i := range views {
		v := &views[i]
		if v.txnN == 0 {
			continue
		}
		buf := make([]byte, v.txnN*txnEntrySize)
		if _, err := v.seg.txn.ReadAt(buf, 0); err != nil {
			return nil, closedErr(fmt.Errorf("read %s: %w", v.seg.txn.Name(), err))
		}
		entries, err := parseTxnEntries(buf, v.seg.base, v.end)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w: %s", v.seg.txn.Name(), ErrCorruptBatch, err)
		}
		for _, a := range entries {
			if a.LastOffset >= from && a.FirstOffset < upper {
				out = append(out, a)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out, nil
}

// eachBatch calls fn with every whole batch of the segment view (header,
// bytes, position), throttled.
func (c *cleaner) eachBatch(v *segView, from int64, fn func(h BatchHeader, b []byte) (stop bool, err error)) error {
	w, err := v.walkerFrom(from)
	if err != nil {
		return closedErr(err)
	}
	for {
		h, pos, err := w.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return closedErr(err)
		}
		if h.LastOffset() < from {
			continue
		}
		if c.o.Aborted != nil && c.o.Aborted() {
			return ErrCleanAborted
		}
		b, err := v.readBatch(h, pos)
		if err != nil {
			return err
		}
		if _, err := ValidateStoredBatch(b); err != nil {
			return fmt.Errorf("%s at %d: %w", v.seg.log.Name(), pos, err)
		}
		c.stats.BytesRead += int64(len(b))
		if c.o.Throttle != nil {
			c.o.Throttle(len(b))
		}
		if stop, err := fn(h, b); err != nil || stop {
			return err
		}
	}
}

// records decodes a batch's records, decompressing them if need be.
func (c *cleaner) records(h BatchHeader, b []byte) ([]cleanRecord, error) {
	section := b[HeaderSize:]
	if codec := h.Compression(); codec != 0 {
		if c.decompress == nil {
			return nil, fmt.Errorf("batch at offset %d: codec %d and no decompressor", h.BaseOffset, codec)
		}
		var plain []byte
		err := c.decompress(codec, section, func(r io.Reader) error {
			var err error
			plain, err = io.ReadAll(io.LimitReader(r, cleanerMaxInflate+1))
			if err == nil && len(plain) > cleanerMaxInflate {
				err = ErrRecordsTooLarge
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("decompress batch at offset %d: %w", h.BaseOffset, err)
		}
		section = plain
	}
	recs, err := parseCleanRecords(section, h.NumRecords)
	if err != nil {
		return nil, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
	}
	return recs, nil
}

// buildMap is Kafka's buildOffsetMap: the latest offset of every key in
// the dirty range, skipping control batches and aborted data, stopping
// when the map is full.
func (c *cleaner) buildMap(sealed []segView, firstDirty int64, aborted []AbortedTxn) error {
	txns := newCleanTxns(aborted)
	for i := range sealed {
		v := &sealed[i]
		if v.end <= firstDirty || v.seg.base >= c.upper {
			continue
		}
		err := c.eachBatch(v, max(firstDirty, v.seg.base), func(h BatchHeader, b []byte) (bool, error) {
			return c.mapBatch(txns, firstDirty, h, b)
		})
		if err != nil {
			return err
		}
		if c.stats.OffsetMapWasFull {
			return nil
		}
	}
	return nil
}

// newCleaner starts the state of one clean.
func newCleaner(o CleanOptions, decompress Decompressor) *cleaner {
	return &cleaner{o: o, decompress: decompress, now: o.Now.UnixMilli(),
		m: offsetMap{m: map[[md5.Size]byte]int64{}, latest: -1, max: o.MaxKeys}}
}

// mapBatch puts the keys of one batch of the dirty range in the offset
// map (control batches and aborted data put none); stop is true at the
// upper bound or when the map is full.
func (c *cleaner) mapBatch(txns *cleanTxns, firstDirty int64, h BatchHeader, b []byte) (stop bool, err error) {
	if h.BaseOffset >= c.upper {
		return true, nil
	}
	if h.IsControl() {
		txns.onControl(h, b)
		return false, nil
	}
	if txns.onBatch(h) {
		return false, nil
	}
	recs, err := c.records(h, b)
	if err != nil {
		return true, err
	}
	for _, r := range recs {
		off := h.BaseOffset + int64(r.offsetDelta)
		if r.key == nil || off < firstDirty {
			continue
		}
		if c.m.full() {
			c.stats.OffsetMapWasFull = true
			return true, nil
		}
		c.m.put(r.key, off)
	}
	return false, nil
}

// mapped ends the mapping: it records the new checkpoint in the stats and
// returns the end of the mapped offsets, below which batches are cleaned.
func (c *cleaner) mapped(firstDirty int64) int64 {
	c.stats.KeysInMap = len(c.m.m)
	endOffset := c.m.latest + 1
	c.stats.End = max(endOffset, firstDirty)
	if !c.stats.OffsetMapWasFull {
		// Everything up to the bound was mapped: markers and aborted data
		// after the last key are clean too.
		c.stats.End = c.upper
	}
	return endOffset
}

type cleanGroup struct {
	segs []segView
	next int64 // base of the segment after the group
}

// groups is Kafka's groupSegmentsBySize: consecutive segments whose log
// bytes stay within MaxGroupBytes and index bytes within MaxIndexBytes,
// and whose offsets fit the 32-bit relative offsets of one segment.
func (c *cleaner) groups(toClean, all []segView) []cleanGroup {
	nextBase := func(v segView) int64 {
		for i := range all {
			if all[i].seg == v.seg && i+1 < len(all) {
				return all[i+1].seg.base
			}
		}
		return c.upper
	}
	var out []cleanGroup
	for len(toClean) > 0 {
		g := []segView{toClean[0]}
		logBytes := toClean[0].size
		idxBytes := int64(toClean[0].idxN * offsetEntrySize)
		tidxBytes := int64(toClean[0].tidxN * timeEntrySize)
		toClean = toClean[1:]
		for len(toClean) > 0 {
			s := toClean[0]
			last := nextBase(s) - 1
			if logBytes+s.size > c.o.MaxGroupBytes ||
				idxBytes+int64(s.idxN*offsetEntrySize) > c.o.MaxIndexBytes ||
				tidxBytes+int64(s.tidxN*timeEntrySize) > c.o.MaxIndexBytes ||
				(s.size > 0 && last-g[0].seg.base > math.MaxInt32) {
				break
			}
			g = append(g, s)
			logBytes += s.size
			idxBytes += int64(s.idxN * offsetEntrySize)
			tidxBytes += int64(s.tidxN * timeEntrySize)
			toClean = toClean[1:]
		}
		out = append(out, cleanGroup{segs: g, next: nextBase(g[len(g)-1])})
	}
	return out
}

// batchRetention is Kafka's BatchRetention.
type batchRetention int

const (
	deleteBatch      batchRetention = iota // drop the batch whatever it holds
	deleteEmptyBatch                       // drop it if no record is kept
	retainEmptyBatch                       // keep at least its header
)

func deleteHorizon(h BatchHeader) (int64, bool) {
	if h.Attributes&attrDeleteHorizon != 0 {
		return h.BaseTimestamp, true
	}
	return 0, false
}

// filterBatch is Kafka's MemoryRecords.filterTo with the cleaner's filter
// for one batch: the bytes to write in its place (nil: none).
func (c *cleaner) filterBatch(h BatchHeader, b []byte) ([]byte, error) {
	canDiscard := false
	if h.IsControl() {
		canDiscard = c.txns.onControl(h, b)
	} else {
		canDiscard = c.txns.onBatch(h)
	}
	horizon, hasHorizon := deleteHorizon(h)
	discardRecords := canDiscard
	if h.IsControl() {
		discardRecords = canDiscard && hasHorizon && horizon <= c.now
	}
	hasProducer := h.ProducerID >= 0
	isLast := false
	if lr, ok := c.o.ActiveProducers[h.ProducerID]; ok && hasProducer {
		if lr.DataOffset >= 0 {
			isLast = h.LastOffset() == lr.DataOffset
		} else {
			isLast = h.IsControl() && h.ProducerEpoch == lr.Epoch
		}
	}
	retention := deleteEmptyBatch
	switch {
	case hasProducer && isLast:
		retention = retainEmptyBatch
	case h.LastOffset()+1 == c.upper, h.LastOffset()+1 == c.groupEnd:
		// The last batch of the round keeps the log's last offset (Kafka);
		// so does the last batch of each group (kafgres): a cleaned
		// segment then ends where the next begins, is never empty, and
		// the log end found by recovery never moves back if it becomes
		// the last segment.
		retention = retainEmptyBatch
	case discardRecords:
		retention = deleteBatch
	}
	markerForEmptyTxn := canDiscard && h.IsControl()
	c.stats.RecordsRead += int64(h.NumRecords)
	if retention == deleteBatch {
		c.stats.BatchesDiscarded++
		return nil, nil
	}

	var recs []cleanRecord
	if !discardRecords && h.NumRecords > 0 {
		var err error
		if recs, err = c.records(h, b); err != nil {
			return nil, err
		}
	}
	kept := recs[:0:0]
	tombstones := false
	for _, r := range recs {
		if !h.IsControl() && !c.retainRecord(h, r, hasHorizon, horizon) {
			continue
		}
		kept = append(kept, r)
		tombstones = tombstones || r.value == nil
	}
	c.stats.RecordsRetained += int64(len(kept))
	needHorizon := (tombstones || markerForEmptyTxn) && !hasHorizon
	switch {
	case len(kept) > 0 && len(kept) == int(h.NumRecords) && !needHorizon:
		return b, nil
	case len(kept) > 0:
		newHorizon := int64(-1)
		if hasHorizon {
			newHorizon = horizon
		} else if needHorizon {
			newHorizon = c.now + c.o.DeleteRetentionMs
		}
		return c.rebuild(h, kept, newHorizon)
	case retention == retainEmptyBatch:
		return emptyBatch(h), nil
	default:
		c.stats.BatchesDiscarded++
		return nil, nil
	}
}

// retainRecord is Kafka's Cleaner.shouldRetainRecord for a v2 batch.
func (c *cleaner) retainRecord(h BatchHeader, r cleanRecord, hasHorizon bool, horizon int64) bool {
	off := h.BaseOffset + int64(r.offsetDelta)
	if off > c.m.latest {
		return true
	}
	if r.key == nil {
		return false // a keyless record in a compacted log (Kafka counts it invalid)
	}
	latest := off >= c.m.get(r.key)
	retainDeletes := !hasHorizon || c.now < horizon
	return latest && (r.value != nil || retainDeletes)
}

// rebuild writes a batch holding kept of h's records, as Kafka's
// MemoryRecordsBuilder does for a filtered v2 batch: same base and last
// offset, producer fields, leader epoch, codec and timestamp type; the
// base timestamp is the delete horizon when there is one (attribute bit
// 6), else the first kept record's timestamp.
func (c *cleaner) rebuild(h BatchHeader, kept []cleanRecord, horizon int64) ([]byte, error) {
	ts := func(r cleanRecord) int64 {
		if h.HasLogAppendTime() {
			return h.MaxTimestamp
		}
		return h.BaseTimestamp + r.tsDelta
	}
	base := ts(kept[0])
	if horizon >= 0 {
		base = horizon
	}
	maxTs := int64(-1)
	var section []byte
	for _, r := range kept {
		t := ts(r)
		maxTs = max(maxTs, t)
		body := []byte{0}
		body = binary.AppendVarint(body, t-base)
		body = binary.AppendVarint(body, int64(r.offsetDelta))
		body = appendNullable(body, r.key)
		body = appendNullable(body, r.value)
		body = append(body, r.headers...)
		section = binary.AppendVarint(section, int64(len(body)))
		section = append(section, body...)
	}
	if h.HasLogAppendTime() {
		maxTs = h.MaxTimestamp
	}
	if codec := h.Compression(); codec != 0 {
		if c.o.Compress == nil {
			return nil, fmt.Errorf("batch at offset %d: codec %d and no compressor", h.BaseOffset, codec)
		}
		var err error
		if section, err = c.o.Compress(codec, section); err != nil {
			return nil, fmt.Errorf("recompress batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	attrs := h.Attributes & (attrCompressionMask | attrLogAppendTime | attrTransactional | attrControl)
	if horizon >= 0 {
		attrs |= attrDeleteHorizon
	}
	return encodeHeader(h, attrs, base, maxTs, int32(len(kept)), section), nil
}

// emptyBatch is Kafka's DefaultRecordBatch.writeEmptyHeader: h's offsets
// and producer fields, no records, no compression, both timestamps the
// batch's max timestamp.
func emptyBatch(h BatchHeader) []byte {
	attrs := h.Attributes & (attrLogAppendTime | attrTransactional | attrControl)
	return encodeHeader(h, attrs, h.MaxTimestamp, h.MaxTimestamp, 0, nil)
}

func encodeHeader(h BatchHeader, attrs int16, baseTs, maxTs int64, count int32, section []byte) []byte {
	be := binary.BigEndian
	b := make([]byte, HeaderSize, HeaderSize+len(section))
	be.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[offBatchLength:], uint32(HeaderSize-logOverhead+len(section)))
	be.PutUint32(b[offLeaderEpoch:], uint32(h.LeaderEpoch))
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], uint16(attrs))
	be.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[offBaseTimestamp:], uint64(baseTs))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[offRecordCount:], uint32(count))
	b = append(b, section...)
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// cleanedFiles are the files of a segment being written by the cleaner.
type cleanedFiles struct {
	fsys vfs.FS
	dir  string
	base int64
	seg  *segment // files named <base><ext>.cleaned
}

func createCleaned(fsys vfs.FS, dir string, base int64) (*cleanedFiles, error) {
	cf := &cleanedFiles{fsys: fsys, dir: dir, base: base, seg: newSegment(base)}
	for _, ext := range segmentExts {
		_ = fsys.Remove(segmentPath(dir, base, ext) + cleanedSuffix) // left by an earlier clean that failed
	}
	const create = os.O_RDWR | os.O_CREATE | os.O_EXCL
	f, err := fsys.OpenFile(segmentPath(dir, base, extLog)+cleanedSuffix, create, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create cleaned segment: %w", err)
	}
	cf.seg.log = f
	cf.seg.idx = newLazyFile(fsys, segmentPath(dir, base, extIndex)+cleanedSuffix, create)
	cf.seg.tidx = newLazyFile(fsys, segmentPath(dir, base, extTimeIndex)+cleanedSuffix, create)
	cf.seg.txn = newLazyFile(fsys, segmentPath(dir, base, extTxnIndex)+cleanedSuffix, create)
	return cf, nil
}

// remove closes and deletes the files, under either suffix.
func (cf *cleanedFiles) remove() {
	fsys := cf.fsys
	_ = cf.seg.close()
	for _, ext := range segmentExts {
		_ = fsys.Remove(segmentPath(cf.dir, cf.base, ext) + cleanedSuffix)
		_ = fsys.Remove(segmentPath(cf.dir, cf.base, ext) + swapSuffix)
	}
}

// cleanGroup rewrites the segments of g into one and swaps it in.
func (c *cleaner) cleanGroup(g []segView, next int64) error {
	fsys := c.l.opts.FS
	l := c.l
	base := g[0].seg.base
	cf, err := createCleaned(fsys, l.opts.Dir, base)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			cf.remove()
		}
	}()
	st := newSegState(base)
	c.txns.index = nil
	c.groupEnd = next
	for i := range g {
		v := &g[i]
		err := c.eachBatch(v, v.seg.base, func(h BatchHeader, b []byte) (bool, error) {
			out, err := c.filterBatch(h, b)
			if err != nil || out == nil {
				return false, err
			}
			nh, _ := ParseBatchHeader(out)
			if _, err := cf.seg.log.WriteAt(out, st.size); err != nil {
				return true, fmt.Errorf("write %s: %w", cf.seg.log.Name(), err)
			}
			st.addBatch(base, nh, st.size, l.opts.IndexIntervalBytes)
			c.stats.BytesWritten += int64(len(out))
			if c.o.Throttle != nil {
				c.o.Throttle(len(out))
			}
			return false, nil
		})
		if err != nil {
			return err
		}
	}
	st.addTimeEntry(base)
	st.end, st.alloc = next, st.size
	if err := cf.seg.writeIndexes(&st); err != nil {
		return err
	}
	if _, err := cf.seg.txn.WriteAt(c.txns.index, 0); err != nil {
		return fmt.Errorf("write %s: %w", cf.seg.txn.Name(), err)
	}
	st.txnN = len(c.txns.index) / txnEntrySize
	if l.opts.Fsync {
		if err := cf.seg.syncAll(); err != nil {
			return err
		}
	}
	if err := cf.seg.close(); err != nil {
		return err
	}
	// Kafka keeps the last modified time of the group's last segment.
	if fi, err := g[len(g)-1].seg.log.Stat(); err == nil {
		_ = fsys.Chtimes(segmentPath(l.opts.Dir, base, extLog)+cleanedSuffix, fi.ModTime(), fi.ModTime())
	}
	if err := l.cleanerHook("cleaned"); err != nil {
		done = true // as a crash leaves them
		return err
	}
	// Indexes first: a .log.swap means every file of the segment is there.
	for _, ext := range []string{extIndex, extTimeIndex, extTxnIndex, extLog} {
		p := segmentPath(l.opts.Dir, base, ext)
		if err := fsys.Rename(p+cleanedSuffix, p+swapSuffix); err != nil {
			return fmt.Errorf("rename cleaned segment: %w", err)
		}
	}
	if err := l.syncDirIf(); err != nil {
		return err
	}
	if err := l.cleanerHook("swap"); err != nil {
		done = true
		return err
	}
	swapped, err := l.swapIn(g, base, st)
	done = swapped
	if errors.Is(err, errCleanerCrash) {
		done = true
	}
	if err != nil {
		return err
	}
	if !swapped {
		c.stats.GroupsAbandoned++
		return nil
	}
	c.stats.Groups++
	c.stats.Segments += len(g)
	return nil
}

func (l *Log) syncDirIf() error {
	fsys := l.opts.FS
	if !l.opts.Fsync {
		return nil
	}
	return fsys.SyncDir(l.opts.Dir)
}

func (l *Log) cleanerHook(point string) error {
	if l.opts.cleanerStop != nil && l.opts.cleanerStop(point) {
		return fmt.Errorf("%w at %s", errCleanerCrash, point)
	}
	return nil
}

// swapIn replaces the segments of g by the cleaned segment at base whose
// files are <base>.*.swap: the other segments of the group are deleted
// first (then a crash finds the swap files and completes it), the swap
// files renamed over the first segment's, the log file last, and the
// in-memory list changed under the lock. startMu keeps retention and
// DeleteRecords from deleting the group meanwhile; if they deleted part of
// it before, the cleaned segment is dropped (swapped false).
func (l *Log) swapIn(g []segView, base int64, st segState) (swapped bool, err error) {
	fsys := l.opts.FS
	l.startMu.Lock()
	defer l.startMu.Unlock()
	l.mu.RLock()
	i := slices.Index(l.segs, g[0].seg)
	intact := !l.closed && l.err == nil && i >= 0 && i+len(g) < len(l.segs)
	for k := 0; intact && k < len(g); k++ {
		intact = l.segs[i+k] == g[k].seg
	}
	l.mu.RUnlock()
	if !intact {
		return false, nil
	}
	// The group's names go now: the first segment's to the cleaned one.
	for _, v := range g {
		v.seg.pinIndexes()
	}
	for _, v := range g[1:] {
		if err := removeSegmentFiles(fsys, l.opts.Dir, v.seg.base); err != nil {
			return false, err
		}
	}
	if len(g) > 1 {
		if err := l.syncDirIf(); err != nil {
			return false, err
		}
	}
	if err := l.cleanerHook("deleted"); err != nil {
		return false, err
	}
	for _, ext := range []string{extIndex, extTimeIndex, extTxnIndex, extLog} {
		p := segmentPath(l.opts.Dir, base, ext)
		if err := fsys.Rename(p+swapSuffix, p); err != nil {
			return true, fmt.Errorf("rename swap segment: %w", err)
		}
	}
	if err := l.syncDirIf(); err != nil {
		return true, err
	}
	s, err := openCleaned(fsys, l.opts.Dir, base, st)
	if err != nil {
		return true, err
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = s.close()
		return true, ErrClosed
	}
	segs := make([]*segment, 0, len(l.segs)-len(g)+1)
	segs = append(segs, l.segs[:i]...)
	segs = append(segs, s)
	segs = append(segs, l.segs[i+len(g):]...)
	l.segs = segs
	l.mu.Unlock()
	for _, v := range g {
		l.releaseSegment(v.seg)
	}
	l.logger.Info("cleaned segments", "dir", l.opts.Dir, "base_offset", base, "segments", len(g), "bytes", st.size)
	return true, nil
}

// openCleaned opens the files of a cleaned segment now in place.
func openCleaned(fsys vfs.FS, dir string, base int64, st segState) (*segment, error) {
	s := newSegment(base)
	var err error
	if s.log, err = vfs.Open(fsys, segmentPath(dir, base, extLog)); err != nil {
		return nil, fmt.Errorf("open cleaned segment: %w", err)
	}
	if _, err := openIndexes(fsys, s); err != nil {
		_ = s.close()
		return nil, err
	}
	st.idxMem, st.tidxMem, st.sealed = nil, nil, true
	s.st = st
	s.releaseIndexes()
	return s, nil
}

// finishCleaning runs first in recovery: it deletes what a clean was
// writing (*.cleaned) and completes or discards a swap. A swap whose
// .log.swap exists is complete: the segments it replaces (based after it
// and at or below its last offset) are deleted and its files renamed into
// place; index swaps without a log swap are discarded.
func (l *Log) finishCleaning() (changed bool, err error) {
	fsys := l.opts.FS
	dir := l.opts.Dir
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("list directory: %w", err)
	}
	swaps := map[int64]bool{} // base -> has .log.swap
	var logs []int64
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == cleanerCheckpointTmp, strings.HasSuffix(name, cleanedSuffix):
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return changed, fmt.Errorf("remove %s: %w", name, err)
			}
			// One line per interrupted clean (its log file), so that an
			// operator sees what recovery undid.
			if base, ext, ok := parseSegmentName(strings.TrimSuffix(name, cleanedSuffix)); ok && ext == extLog {
				l.logger.Info("discarding incomplete cleaned segment", "dir", dir, "base_offset", base)
			}
			changed = true
		case strings.HasSuffix(name, swapSuffix):
			if base, ext, ok := parseSegmentName(strings.TrimSuffix(name, swapSuffix)); ok {
				swaps[base] = swaps[base] || ext == extLog
			}
		default:
			if base, ext, ok := parseSegmentName(name); ok && ext == extLog {
				logs = append(logs, base)
			}
		}
	}
	bases := make([]int64, 0, len(swaps))
	for b := range swaps {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	for _, base := range bases {
		changed = true
		if !swaps[base] {
			l.logger.Warn("discarding incomplete cleaned segment", "dir", dir, "base_offset", base)
			for _, ext := range segmentExts {
				if err := fsys.Remove(segmentPath(dir, base, ext) + swapSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return changed, fmt.Errorf("remove swap file: %w", err)
				}
			}
			continue
		}
		last, err := lastOffsetOf(fsys, segmentPath(dir, base, extLog)+swapSuffix)
		if err != nil {
			return changed, err
		}
		l.logger.Info("completing swap of cleaned segment", "dir", dir, "base_offset", base, "last_offset", last)
		for _, b := range logs {
			if b > base && b <= last {
				if err := removeSegmentFiles(fsys, dir, b); err != nil {
					return changed, err
				}
			}
		}
		for _, ext := range []string{extIndex, extTimeIndex, extTxnIndex, extLog} {
			p := segmentPath(dir, base, ext)
			if err := fsys.Rename(p+swapSuffix, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return changed, fmt.Errorf("rename swap file: %w", err)
			}
		}
	}
	return changed, nil
}

// lastOffsetOf returns the last offset of the last batch in a segment
// file, or -1 if it has none.
func lastOffsetOf(fsys vfs.FS, path string) (int64, error) {
	f, err := vfs.Open(fsys, path)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	last := int64(-1)
	w := newHeaderWalker(f, 0, fi.Size())
	for {
		h, _, err := w.next()
		if err == io.EOF {
			return last, nil
		}
		if err != nil {
			return 0, fmt.Errorf("scan %s: %w", path, err)
		}
		last = h.LastOffset()
	}
}
