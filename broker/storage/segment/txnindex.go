package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// The transaction index (Kafka's TransactionIndex, <base>.txnindex) lists
// the aborted transactions whose ABORT marker lies in the segment, in marker
// order, so that a read_committed fetch can tell its consumer which batches
// to drop. Unlike Kafka, which creates the file with its first entry, every
// segment has one (empty when nothing was aborted), as it has its .index and
// .timeindex: a sealed segment whose file is missing then lost it and gets
// it rebuilt. Entries are written through to the file when the marker is
// appended (not kept for the roll as the offset and time entries are) and
// fsynced with the segment's data by Sync; recovery rebuilds the active
// segment's file from its batches anyway, since a crash may have kept the
// marker and lost its entry.
const (
	extTxnIndex  = ".txnindex"
	txnEntrySize = 34 // version int16, producer id, first, last, last stable offset int64
)

// AbortedTxn is one entry of the transaction index.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64 // the transaction's first offset in this partition
	LastOffset  int64 // its ABORT marker's offset
	// LastStableOffset is the partition's last stable offset once the
	// marker was written: the first offset of the oldest transaction of
	// another producer still open then, or LastOffset+1. A fetch stops
	// looking for aborted transactions at the first entry reaching its
	// upper bound.
	LastStableOffset int64
}

func appendTxnEntry(b []byte, a AbortedTxn) []byte {
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(a.LastStableOffset))
}

// parseTxnEntries decodes a transaction index, failing on anything Kafka's
// TransactionIndex would not read back or that does not belong to the
// segment [base, end).
func parseTxnEntries(b []byte, base, end int64) ([]AbortedTxn, error) {
	if len(b)%txnEntrySize != 0 {
		return nil, fmt.Errorf("%d bytes, not a multiple of %d", len(b), txnEntrySize)
	}
	out := make([]AbortedTxn, 0, len(b)/txnEntrySize)
	be := binary.BigEndian
	for ; len(b) > 0; b = b[txnEntrySize:] {
		if v := int16(be.Uint16(b)); v != 0 {
			return nil, fmt.Errorf("entry version %d", v)
		}
		a := AbortedTxn{
			ProducerID:       int64(be.Uint64(b[2:])),
			FirstOffset:      int64(be.Uint64(b[10:])),
			LastOffset:       int64(be.Uint64(b[18:])),
			LastStableOffset: int64(be.Uint64(b[26:])),
		}
		if a.ProducerID < 0 || a.FirstOffset < 0 || a.FirstOffset > a.LastOffset ||
			a.LastOffset < base || a.LastOffset >= end || a.LastStableOffset < 0 {
			return nil, fmt.Errorf("entry %+v outside segment [%d, %d)", a, base, end)
		}
		if n := len(out); n > 0 && out[n-1].LastOffset >= a.LastOffset {
			return nil, fmt.Errorf("entry %+v out of order", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// AppendMarker appends the control batch of a transaction marker, as Append
// does, and with aborted (nil for a COMMIT, or an ABORT ending a transaction
// with no data here) the transaction index entry for it in the same segment.
// aborted.LastOffset must be the offset the marker gets: the log end offset,
// which callers read under the same lock that serialises their appends.
func (l *Log) AppendMarker(batch []byte, leaderEpoch int32, aborted *AbortedTxn) (int64, error) {
	h, err := AppendHeader(batch)
	if err != nil {
		return 0, fmt.Errorf("append marker to %s: %w", l.opts.Dir, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	if aborted != nil && aborted.LastOffset != l.end {
		return 0, fmt.Errorf("append marker to %s: aborted transaction ends at %d, marker would be at %d", l.opts.Dir, aborted.LastOffset, l.end)
	}
	base, err := l.appendLocked(batch, h, leaderEpoch)
	if err != nil {
		return 0, fmt.Errorf("append marker to %s: %w", l.opts.Dir, err)
	}
	if aborted == nil {
		return base, nil
	}
	// appendLocked rolls before writing, so the marker is in the active
	// segment.
	seg := l.active()
	entry := appendTxnEntry(make([]byte, 0, txnEntrySize), *aborted)
	if _, err := seg.txn.WriteAt(entry, int64(seg.st.txnN)*txnEntrySize); err != nil {
		// The marker is written but its entry is not: only recovery,
		// which rebuilds the index from the batches, can mend that.
		l.err = fmt.Errorf("write %s: %w", seg.txn.Name(), err)
		return 0, fmt.Errorf("append marker to %s: %w", l.opts.Dir, l.err)
	}
	seg.st.txnN++
	l.txnGen++
	return base, nil
}

// AbortedTxns returns the aborted transactions a read_committed reader of
// the records in [fetchOffset, upper) must know: the entries, from the
// segment holding fetchOffset on, with LastOffset >= fetchOffset and
// FirstOffset < upper, stopping after the first entry whose
// LastStableOffset reaches upper (nothing after it can begin below upper),
// as Kafka's LogSegment.collectAbortedTxns does.
func (l *Log) AbortedTxns(fetchOffset, upper int64) ([]AbortedTxn, error) {
	views, _, _, err := l.snapshot(fetchOffset)
	if err != nil {
		return nil, err
	}
	defer l.release(views)
	var out []AbortedTxn
	var buf []byte
	for i := range views {
		v := &views[i]
		if v.txnN == 0 {
			continue
		}
		n := v.txnN * txnEntrySize
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := v.seg.txn.ReadAt(buf, 0); err != nil {
			return nil, closedErr(fmt.Errorf("read %s: %w", v.seg.txn.Name(), err))
		}
		entries, err := parseTxnEntries(buf, v.seg.base, v.end)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w: %s", v.seg.txn.Name(), ErrCorruptBatch, err)
		}
		for _, a := range entries {
			if a.LastOffset >= fetchOffset && a.FirstOffset < upper {
				out = append(out, a)
			}
			if a.LastStableOffset >= upper {
				return out, nil
			}
		}
	}
	return out, nil
}

// txnTracker follows which producers have a transaction open while batch
// headers are replayed in offset order, to rebuild transaction indexes.
type txnTracker struct {
	ongoing map[int64]int64 // producer id -> first offset of its open transaction
}

// data accounts for a data batch.
func (t *txnTracker) data(h BatchHeader) {
	if h.IsTransactional() && h.ProducerID >= 0 {
		if _, ok := t.ongoing[h.ProducerID]; !ok {
			t.ongoing[h.ProducerID] = h.BaseOffset
		}
	}
}

// marker accounts for a marker at offset and returns the index entry it
// makes, if it aborts a transaction that wrote here.
func (t *txnTracker) marker(offset int64, m Marker) (AbortedTxn, bool) {
	first, ok := t.ongoing[m.ProducerID]
	delete(t.ongoing, m.ProducerID)
	if !ok || m.Commit {
		return AbortedTxn{}, false
	}
	lso := offset + 1
	for _, f := range t.ongoing {
		lso = min(lso, f)
	}
	return AbortedTxn{ProducerID: m.ProducerID, FirstOffset: first, LastOffset: offset, LastStableOffset: lso}, true
}

// replayTxns walks the batches of s below size through t, calling abort
// for each entry and reporting whether any ABORT marker was seen. Control
// batches are read whole (they are tiny); a control batch that is no
// transaction marker (or has no record left) changes nothing, as in Kafka.
func replayTxns(s *segment, size int64, t *txnTracker, abort func(AbortedTxn)) (aborts bool, err error) {
	w := newHeaderWalker(s.log, 0, size)
	for {
		h, pos, err := w.next()
		if err == io.EOF {
			return aborts, nil
		}
		if err != nil {
			return aborts, err
		}
		if h.ProducerID < 0 {
			continue
		}
		if !h.IsControl() {
			t.data(h)
			continue
		}
		b := make([]byte, h.Length)
		if _, err := s.log.ReadAt(b, pos); err != nil {
			return aborts, fmt.Errorf("read %s at %d: %w", s.log.Name(), pos, err)
		}
		m, err := ParseMarker(b)
		if err != nil {
			continue
		}
		aborts = aborts || !m.Commit
		if a, ok := t.marker(h.BaseOffset, m); ok && abort != nil {
			abort(a)
		}
	}
}

// rebuildTxnIndex recomputes the transaction index of s (the batches below
// size) and writes it to s's file. The transactions open where s begins
// come from the segments before it, which are only read when s holds an
// ABORT marker. It returns the number of entries.
func (l *Log) rebuildTxnIndex(s *segment, size int64, before []*segment) (int, error) {
	var entries []AbortedTxn
	collect := func(a AbortedTxn) { entries = append(entries, a) }
	t := &txnTracker{ongoing: map[int64]int64{}}
	aborts, err := replayTxns(s, size, t, collect)
	if err != nil {
		return 0, fmt.Errorf("rebuild transaction index: %w", err)
	}
	if aborts && len(before) > 0 {
		t = &txnTracker{ongoing: map[int64]int64{}}
		for _, p := range before {
			if _, err := replayTxns(p, p.st.size, t, nil); err != nil {
				return 0, fmt.Errorf("rebuild transaction index: %w", err)
			}
		}
		entries = entries[:0]
		if _, err := replayTxns(s, size, t, collect); err != nil {
			return 0, fmt.Errorf("rebuild transaction index: %w", err)
		}
	}
	var b []byte
	for _, a := range entries {
		b = appendTxnEntry(b, a)
	}
	if _, err := s.txn.WriteAt(b, 0); err != nil {
		return 0, fmt.Errorf("write %s: %w", s.txn.Name(), err)
	}
	if err := s.txn.Truncate(int64(len(b))); err != nil {
		return 0, fmt.Errorf("truncate %s: %w", s.txn.Name(), err)
	}
	return len(entries), nil
}

// openTxnIndex opens s's transaction index, creating it if missing; existed
// says whether it was there.
func openTxnIndex(fsys vfs.FS, s *segment, dir string) (existed bool, err error) {
	path := segmentPath(dir, s.base, extTxnIndex)
	s.txn = newLazyFile(fsys, path, os.O_RDWR|os.O_CREATE)
	if _, err := fsys.Stat(path); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("open transaction index: %w", err)
		}
		return false, s.txn.ensure()
	}
	return true, nil
}

// loadTxnIndex checks a sealed segment's transaction index and returns its
// number of entries; ok is false if it must be rebuilt.
func loadTxnIndex(s *segment, nextBase int64) (n int, ok bool, err error) {
	fi, err := s.txn.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("stat transaction index: %w", err)
	}
	b := make([]byte, fi.Size())
	if _, err := s.txn.ReadAt(b, 0); err != nil {
		return 0, false, fmt.Errorf("read %s: %w", s.txn.Name(), err)
	}
	entries, err := parseTxnEntries(b, s.base, nextBase)
	if err != nil {
		return 0, false, nil
	}
	return len(entries), true, nil
}
