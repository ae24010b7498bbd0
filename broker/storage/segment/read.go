package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// closedErr turns a read on a file closed by a concurrent Close into
// ErrClosed.
func closedErr(err error) error {
	if errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// walkerFrom returns a walker positioned at or before the batch containing
// offset; callers skip batches whose last offset is below it.
func (v *segView) walkerFrom(offset int64) (*headerWalker, error) {
	var pos int64
	if offset > v.seg.base {
		var err error
		if pos, err = v.offsetIndex().lookupPosition(offset - v.seg.base); err != nil {
			return nil, err
		}
		if pos > v.size {
			return nil, fmt.Errorf("%s: %w: index points at %d beyond the end %d", v.seg.idx.Name(), ErrCorruptBatch, pos, v.size)
		}
	}
	return newHeaderWalker(v.seg.log, pos, v.size), nil
}

// findBatch returns the header and position of the first batch of the
// segment whose last offset is at least offset.
func (v *segView) findBatch(offset int64) (BatchHeader, int64, error) {
	w, err := v.walkerFrom(offset)
	if err != nil {
		return BatchHeader{}, 0, err
	}
	for {
		h, pos, err := w.next()
		if err != nil {
			return BatchHeader{}, 0, err
		}
		if h.LastOffset() >= offset {
			return h, pos, nil
		}
	}
}

// Read returns whole batches starting with the one containing offset, taking
// only batches whose base offset is below limit. The first qualifying batch
// is returned even if it is larger than maxBytes; after it, reading stops
// before maxBytes would be exceeded.
func (l *Log) Read(offset int64, maxBytes int, limit int64) ([]byte, error) {
	return l.ReadAppend(nil, offset, maxBytes, limit)
}

// ReadAppend is Read appending to dst, whose spare capacity it uses: a
// caller that reuses buffers saves the allocation (and its zeroing) of
// every read.
func (l *Log) ReadAppend(dst []byte, offset int64, maxBytes int, limit int64) ([]byte, error) {
	views, sp, err := l.readSpans(offset, maxBytes, limit)
	if err != nil {
		return nil, err
	}
	defer l.release(views)
	if sp.total == 0 {
		return nil, nil
	}
	return sp.appendTo(dst[:0])
}

// span is a run of whole batches in one segment file.
type span struct {
	f      vfs.File
	pos, n int64
}

// spans are what a read found: the runs of batches, their bytes and the
// last offset of the last batch.
type spans struct {
	runs       []span
	total      int64
	lastOffset int64
}

// appendTo reads the spans' bytes onto dst.
func (sp *spans) appendTo(dst []byte) ([]byte, error) {
	at := len(dst)
	out := slices.Grow(dst, int(sp.total))[:at+int(sp.total)]
	for _, r := range sp.runs {
		if _, err := r.f.ReadAt(out[at:at+int(r.n)], r.pos); err != nil {
			return nil, closedErr(fmt.Errorf("read %s at %d: %w", r.f.Name(), r.pos, err))
		}
		at += int(r.n)
	}
	return out, nil
}

// readSpans finds the batches Read returns, holding the segments they are
// in (views, which the caller releases).
func (l *Log) readSpans(offset int64, maxBytes int, limit int64) ([]segView, spans, error) {
	views, start, end, err := l.snapshot(offset)
	if err != nil {
		return nil, spans{}, err
	}
	if offset < start || offset > end {
		l.release(views)
		return nil, spans{}, fmt.Errorf("read %s at %d: %w: log is [%d, %d)", l.opts.Dir, offset, ErrOffsetOutOfRange, start, end)
	}
	sp := spans{lastOffset: -1}
	done := offset == end
	for i := 0; i < len(views) && !done; i++ {
		v := &views[i]
		from := max(offset, v.seg.base)
		w, err := v.walkerFrom(from)
		if err != nil {
			l.release(views)
			return nil, spans{}, closedErr(fmt.Errorf("read %s at %d: %w", l.opts.Dir, offset, err))
		}
		run := span{f: v.seg.log, pos: -1}
		for !done {
			h, pos, err := w.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				l.release(views)
				return nil, spans{}, closedErr(fmt.Errorf("read %s at %d: %w", l.opts.Dir, offset, err))
			}
			switch {
			case h.LastOffset() < from:
				continue
			case h.BaseOffset >= limit, sp.total > 0 && sp.total+int64(h.Length) > int64(maxBytes):
				done = true
				continue
			}
			if run.pos < 0 {
				run.pos = pos
			}
			run.n += int64(h.Length)
			sp.total += int64(h.Length)
			sp.lastOffset = h.LastOffset()
		}
		if run.n > 0 {
			sp.runs = append(sp.runs, run)
			l.hintRead(v, run, i == len(views)-1)
		}
	}
	return views, sp, nil
}

// FileRecords are the batches a read found, left in the segment files for
// the caller to send from there (sendfile(2)) rather than through memory.
// The segments stay open, whatever deletes or replaces them meanwhile,
// until Release.
type FileRecords struct {
	l     *Log
	views []segView
	sp    spans
}

// FileRegion is a run of whole batches at Pos in the file whose
// descriptor is Fd.
type FileRegion struct {
	Fd       uintptr
	Pos, Len int64
}

// ReadFile is Read leaving the bytes in the files. ok is false when the
// log's files have no descriptors to send from (a file system other than
// the operating system's); then nothing is held.
func (l *Log) ReadFile(offset int64, maxBytes int, limit int64) (r *FileRecords, ok bool, err error) {
	views, sp, err := l.readSpans(offset, maxBytes, limit)
	if err != nil {
		return nil, true, err
	}
	for _, run := range sp.runs {
		if _, isOS := run.f.(interface{ Fd() uintptr }); !isOS {
			l.release(views)
			return nil, false, nil
		}
	}
	return &FileRecords{l: l, views: views, sp: sp}, true, nil
}

// Len is the records' size in bytes; LastOffset the last offset of their
// last batch (-1: none).
func (r *FileRecords) Len() int          { return int(r.sp.total) }
func (r *FileRecords) LastOffset() int64 { return r.sp.lastOffset }

// Regions are where the records are, in order.
func (r *FileRecords) Regions() []FileRegion {
	out := make([]FileRegion, len(r.sp.runs))
	for i, run := range r.sp.runs {
		out[i] = FileRegion{Fd: run.f.(interface{ Fd() uintptr }).Fd(), Pos: run.pos, Len: run.n}
	}
	return out
}

// AppendTo reads the records onto dst, for a destination sendfile cannot
// reach.
func (r *FileRecords) AppendTo(dst []byte) ([]byte, error) { return r.sp.appendTo(dst) }

// Release lets the segments go; r is not to be used after.
func (r *FileRecords) Release() {
	if r.views != nil {
		r.l.release(r.views)
		r.views = nil
	}
}

// readBatch reads the whole batch h found at pos.
func (v *segView) readBatch(h BatchHeader, pos int64) ([]byte, error) {
	b := make([]byte, h.Length)
	if _, err := v.seg.log.ReadAt(b, pos); err != nil {
		return nil, closedErr(fmt.Errorf("read %s at %d: %w", v.seg.log.Name(), pos, err))
	}
	return b, nil
}

// findInBatch reads the batch h at pos and finds in it the first record at
// or after start whose timestamp satisfies match (FindInBatch). A
// compressed batch the log cannot decompress is not read: its header
// answers.
func (l *Log) findInBatch(v *segView, h BatchHeader, pos, start int64, match func(int64) bool) (offset, ts int64, found bool, err error) {
	var b []byte
	if h.Compression() == 0 || l.opts.Decompress != nil {
		if b, err = v.readBatch(h, pos); err != nil {
			return 0, 0, false, err
		}
	}
	return FindInBatch(l.opts.Decompress, b, h, start, match)
}

// maxFrom reads the batch h at pos, which begins before start, and returns
// the largest timestamp among its records at or after start (MaxFrom).
func (l *Log) maxFrom(v *segView, h BatchHeader, pos, start int64) (int64, error) {
	var b []byte
	if h.Compression() == 0 || l.opts.Decompress != nil {
		var err error
		if b, err = v.readBatch(h, pos); err != nil {
			return 0, err
		}
	}
	return MaxFrom(l.opts.Decompress, b, h, start)
}

// OffsetForTimestamp returns the offset and timestamp of the first record
// (by offset) whose timestamp is at least ts, among the records from the log
// start offset on in batches whose base offset is below limit. ok is false
// if there is none.
func (l *Log) OffsetForTimestamp(ts int64, limit int64) (offset int64, timestamp int64, ok bool, err error) {
	views, start, _, err := l.snapshot(math.MinInt64)
	if err != nil {
		return 0, 0, false, err
	}
	defer l.release(views)
	for i := range views {
		v := &views[i]
		if v.seg.base >= limit {
			break
		}
		// maxTs covers the whole segment, so this only skips segments that
		// cannot match.
		if v.maxTs < ts {
			continue
		}
		from := max(v.seg.base, start)
		rel, found, err := v.timeIndex().lookupBefore(ts)
		if err != nil {
			return 0, 0, false, closedErr(fmt.Errorf("offset for timestamp in %s: %w", l.opts.Dir, err))
		}
		if found {
			from = max(from, v.seg.base+rel+1)
		}
		w, err := v.walkerFrom(from)
		if err != nil {
			return 0, 0, false, closedErr(fmt.Errorf("offset for timestamp in %s: %w", l.opts.Dir, err))
		}
		for {
			h, pos, err := w.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, 0, false, closedErr(fmt.Errorf("offset for timestamp in %s: %w", l.opts.Dir, err))
			}
			if h.LastOffset() < from {
				continue
			}
			if h.BaseOffset >= limit {
				return 0, 0, false, nil
			}
			if h.MaxTimestamp >= ts {
				offset, timestamp, found, err := l.findInBatch(v, h, pos, start, func(t int64) bool { return t >= ts })
				if err != nil {
					return 0, 0, false, closedErr(fmt.Errorf("offset for timestamp in %s: %w", l.opts.Dir, err))
				}
				if found {
					return offset, timestamp, true, nil
				}
			}
		}
	}
	return 0, 0, false, nil
}

// rangeMax returns the largest timestamp among the segment's records at or
// after from in batches with base offset below limit, and the last offset of
// the first batch that has it.
func (l *Log) rangeMax(v *segView, from, limit int64) (ts, lastOffset int64, found bool, err error) {
	if v.maxTs < 0 {
		return 0, 0, false, nil
	}
	// The running maximum answers directly when its batch is below limit
	// and does not begin before from: no batch before it is larger, and
	// batches after it are not larger.
	if v.maxTsOffset < limit {
		if from <= v.seg.base {
			return v.maxTs, v.maxTsOffset, true, nil
		}
		h, _, err := v.findBatch(v.maxTsOffset)
		if err != nil {
			return 0, 0, false, err
		}
		if h.BaseOffset >= from {
			return v.maxTs, v.maxTsOffset, true, nil
		}
	}
	ts, lastOffset = -1, -1
	if from <= v.seg.base {
		// Start from the last time index entry below limit: it is the
		// running maximum at its offset. Only batches after it need reading.
		t, rel, ok, err := v.timeIndex().lookupOffsetBelow(limit - v.seg.base)
		if err != nil {
			return 0, 0, false, err
		}
		if ok {
			ts, lastOffset = t, v.seg.base+rel
			from = lastOffset + 1
		}
	}
	w, err := v.walkerFrom(from)
	if err != nil {
		return 0, 0, false, err
	}
	for {
		h, pos, err := w.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, false, err
		}
		if h.LastOffset() < from {
			continue
		}
		if h.BaseOffset >= limit {
			break
		}
		bts := h.MaxTimestamp
		if h.BaseOffset < from && bts > ts {
			// Only the records from from on count.
			if bts, err = l.maxFrom(v, h, pos, from); err != nil {
				return 0, 0, false, err
			}
		}
		if bts > ts {
			ts, lastOffset = bts, h.LastOffset()
		}
	}
	return ts, lastOffset, ts >= 0, nil
}

// MaxTimestamp returns the offset and timestamp of the first record with the
// largest timestamp among the records from the log start offset on in
// batches whose base offset is below limit (Kafka's ListOffsets
// MAX_TIMESTAMP). ok is false if no such record carries a timestamp.
func (l *Log) MaxTimestamp(limit int64) (offset int64, timestamp int64, ok bool, err error) {
	views, start, _, err := l.snapshot(math.MinInt64)
	if err != nil {
		return 0, 0, false, err
	}
	defer l.release(views)
	var (
		best       *segView
		bestTs     int64 = -1
		bestOffset int64
	)
	for i := range views {
		v := &views[i]
		if v.seg.base >= limit {
			break
		}
		ts, off, found, err := l.rangeMax(v, max(v.seg.base, start), limit)
		if err != nil {
			return 0, 0, false, closedErr(fmt.Errorf("max timestamp in %s: %w", l.opts.Dir, err))
		}
		if found && ts > bestTs {
			best, bestTs, bestOffset = v, ts, off
		}
	}
	if best == nil {
		return 0, 0, false, nil
	}
	h, pos, err := best.findBatch(bestOffset)
	if err != nil {
		return 0, 0, false, closedErr(fmt.Errorf("max timestamp in %s: %w", l.opts.Dir, err))
	}
	offset, timestamp, found, err := l.findInBatch(best, h, pos, start, func(t int64) bool { return t == bestTs })
	if err != nil {
		return 0, 0, false, closedErr(fmt.Errorf("max timestamp in %s: %w", l.opts.Dir, err))
	}
	if !found {
		// Not reached: bestTs came from these records.
		return max(h.BaseOffset, start), bestTs, true, nil
	}
	return offset, timestamp, true, nil
}

// ScanBatches calls fn with the header of every batch whose last offset is
// at least from and at least the log start offset, in offset order, reading
// only headers. It stops at the first error fn returns and returns it.
func (l *Log) ScanBatches(from int64, fn func(h BatchHeader) error) error {
	views, start, _, err := l.snapshot(from)
	if err != nil {
		return err
	}
	defer l.release(views)
	from = max(from, start)
	for i := range views {
		v := &views[i]
		w, err := v.walkerFrom(max(from, v.seg.base))
		if err != nil {
			return closedErr(fmt.Errorf("scan %s: %w", l.opts.Dir, err))
		}
		for {
			h, _, err := w.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return closedErr(fmt.Errorf("scan %s: %w", l.opts.Dir, err))
			}
			if h.LastOffset() < from {
				continue
			}
			if err := fn(h); err != nil {
				return err
			}
		}
	}
	return nil
}
