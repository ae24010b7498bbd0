package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
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
	views, start, end, err := l.snapshot(offset)
	if err != nil {
		return nil, err
	}
	if offset < start || offset > end {
		return nil, fmt.Errorf("read %s at %d: %w: log is [%d, %d)", l.opts.Dir, offset, ErrOffsetOutOfRange, start, end)
	}
	if offset == end {
		return nil, nil
	}

	type span struct {
		f      *os.File
		pos, n int64
	}
	var (
		spans []span
		total int64
		done  bool
	)
	for i := range views {
		v := &views[i]
		from := max(offset, v.seg.base)
		w, err := v.walkerFrom(from)
		if err != nil {
			return nil, closedErr(fmt.Errorf("read %s at %d: %w", l.opts.Dir, offset, err))
		}
		sp := span{f: v.seg.log, pos: -1}
		for !done {
			h, pos, err := w.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, closedErr(fmt.Errorf("read %s at %d: %w", l.opts.Dir, offset, err))
			}
			switch {
			case h.LastOffset() < from:
				continue
			case h.BaseOffset >= limit, total > 0 && total+int64(h.Length) > int64(maxBytes):
				done = true
				continue
			}
			if sp.pos < 0 {
				sp.pos = pos
			}
			sp.n += int64(h.Length)
			total += int64(h.Length)
		}
		if sp.n > 0 {
			spans = append(spans, sp)
		}
		if done {
			break
		}
	}
	if total == 0 {
		return nil, nil
	}
	out := make([]byte, total)
	n := int64(0)
	for _, sp := range spans {
		if _, err := sp.f.ReadAt(out[n:n+sp.n], sp.pos); err != nil {
			return nil, closedErr(fmt.Errorf("read %s at %d: %w", sp.f.Name(), sp.pos, err))
		}
		n += sp.n
	}
	return out, nil
}

// readBatch reads the whole batch h found at pos.
func (v *segView) readBatch(h BatchHeader, pos int64) ([]byte, error) {
	b := make([]byte, h.Length)
	if _, err := v.seg.log.ReadAt(b, pos); err != nil {
		return nil, closedErr(fmt.Errorf("read %s at %d: %w", v.seg.log.Name(), pos, err))
	}
	return b, nil
}

// findInBatch decodes the batch h at pos to find the first record whose
// timestamp satisfies match. Without a way to decompress, or if no record
// matches although the header said one would, the batch's base offset and
// max timestamp stand in.
func (l *Log) findInBatch(v *segView, h BatchHeader, pos int64, match func(int64) bool) (int64, int64, error) {
	codec := h.Compression()
	if codec != 0 && l.opts.Decompress == nil {
		return h.BaseOffset, h.MaxTimestamp, nil
	}
	b, err := v.readBatch(h, pos)
	if err != nil {
		return 0, 0, err
	}
	records := b[HeaderSize:]
	if codec != 0 {
		if records, err = l.opts.Decompress(codec, records); err != nil {
			return 0, 0, fmt.Errorf("decompress batch at offset %d: %w", h.BaseOffset, err)
		}
	}
	offset, ts, ok, err := findRecord(h, records, match)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return h.BaseOffset, h.MaxTimestamp, nil
	}
	return offset, ts, nil
}

// OffsetForTimestamp returns the offset and timestamp of the first record
// (by offset) whose timestamp is at least ts, among batches whose base offset
// is below limit. ok is false if there is none.
func (l *Log) OffsetForTimestamp(ts int64, limit int64) (offset int64, timestamp int64, ok bool, err error) {
	views, _, _, err := l.snapshot(math.MinInt64)
	if err != nil {
		return 0, 0, false, err
	}
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
		from := v.seg.base
		rel, found, err := v.timeIndex().lookupBefore(ts)
		if err != nil {
			return 0, 0, false, closedErr(fmt.Errorf("offset for timestamp in %s: %w", l.opts.Dir, err))
		}
		if found {
			from = v.seg.base + rel + 1
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
				offset, timestamp, err := l.findInBatch(v, h, pos, func(t int64) bool { return t >= ts })
				if err != nil {
					return 0, 0, false, fmt.Errorf("offset for timestamp in %s: %w", l.opts.Dir, err)
				}
				return offset, timestamp, true, nil
			}
		}
	}
	return 0, 0, false, nil
}

// prefixMax returns the largest batch max timestamp among the segment's
// batches with base offset below limit, and the last offset of the first
// batch that has it.
func (v *segView) prefixMax(limit int64) (ts, lastOffset int64, found bool, err error) {
	// The running maximum answers directly when its batch is below limit:
	// no batch before it is larger, and batches after it are not larger.
	if v.maxTs < 0 || v.maxTsOffset < limit {
		return v.maxTs, v.maxTsOffset, v.maxTs >= 0, nil
	}
	// Otherwise start from the last time index entry below limit: it is the
	// running maximum at its offset. Only batches after it need reading.
	ts, lastOffset = -1, -1
	from := v.seg.base
	t, rel, ok, err := v.timeIndex().lookupOffsetBelow(limit - v.seg.base)
	if err != nil {
		return 0, 0, false, err
	}
	if ok {
		ts, lastOffset = t, v.seg.base+rel
		from = lastOffset + 1
	}
	w, err := v.walkerFrom(from)
	if err != nil {
		return 0, 0, false, err
	}
	for {
		h, _, err := w.next()
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
		if h.MaxTimestamp > ts {
			ts, lastOffset = h.MaxTimestamp, h.LastOffset()
		}
	}
	return ts, lastOffset, ts >= 0, nil
}

// MaxTimestamp returns the offset and timestamp of the first record with the
// largest timestamp among batches whose base offset is below limit (Kafka's
// ListOffsets MAX_TIMESTAMP). ok is false if no batch carries a timestamp.
func (l *Log) MaxTimestamp(limit int64) (offset int64, timestamp int64, ok bool, err error) {
	views, _, _, err := l.snapshot(math.MinInt64)
	if err != nil {
		return 0, 0, false, err
	}
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
		ts, off, found, err := v.prefixMax(limit)
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
	offset, timestamp, err = l.findInBatch(best, h, pos, func(t int64) bool { return t == h.MaxTimestamp })
	if err != nil {
		return 0, 0, false, fmt.Errorf("max timestamp in %s: %w", l.opts.Dir, err)
	}
	return offset, timestamp, true, nil
}

// ScanBatches calls fn with the header of every batch whose last offset is
// at least from, in offset order, reading only headers. It stops at the
// first error fn returns and returns it.
func (l *Log) ScanBatches(from int64, fn func(h BatchHeader) error) error {
	views, _, _, err := l.snapshot(from)
	if err != nil {
		return err
	}
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
