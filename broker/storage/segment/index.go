package segment

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

const (
	offsetEntrySize = 8  // relative offset uint32, position uint32
	timeEntrySize   = 12 // timestamp int64, relative offset uint32
)

// indexView is a read-only snapshot of an index. The active segment keeps its
// entries in memory as well (they are hit on every tail read and are bounded
// by the segment size); sealed segments are searched with pread so that a
// partition with a long history does not pin its indexes in memory.
type indexView struct {
	f     vfs.File
	mem   []byte // whole entries; nil when the index lives on disk only
	n     int    // number of entries
	width int
}

func (v indexView) entry(i int, buf []byte) ([]byte, error) {
	if v.mem != nil {
		return v.mem[i*v.width : (i+1)*v.width], nil
	}
	buf = buf[:v.width]
	if _, err := v.f.ReadAt(buf, int64(i*v.width)); err != nil {
		return nil, fmt.Errorf("read %s entry %d: %w", v.f.Name(), i, err)
	}
	return buf, nil
}

// search returns the number of leading entries for which below returns true;
// below must be monotonic (true then false), as entries are sorted.
func (v indexView) search(below func(e []byte) bool) (int, error) {
	var (
		buf  [timeEntrySize]byte
		rerr error
	)
	i := sort.Search(v.n, func(i int) bool {
		if rerr != nil {
			return true
		}
		e, err := v.entry(i, buf[:])
		if err != nil {
			rerr = err
			return true
		}
		return !below(e)
	})
	return i, rerr
}

// lookupPosition returns the file position from which to walk forward to
// find the batch containing rel (an offset relative to the segment base).
// Entries are keyed by a batch's last offset, as in Kafka, so the entry found
// marks a batch at or before the one wanted.
func (v indexView) lookupPosition(rel int64) (int64, error) {
	i, err := v.search(func(e []byte) bool { return int64(binary.BigEndian.Uint32(e)) <= rel })
	if err != nil || i == 0 {
		return 0, err
	}
	var buf [offsetEntrySize]byte
	e, err := v.entry(i-1, buf[:])
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint32(e[4:])), nil
}

// lookupBefore returns the last time index entry whose timestamp is below ts:
// every batch up to and including relOffset has a max timestamp below ts.
func (v indexView) lookupBefore(ts int64) (relOffset int64, found bool, err error) {
	i, err := v.search(func(e []byte) bool { return int64(binary.BigEndian.Uint64(e)) < ts })
	if err != nil || i == 0 {
		return 0, false, err
	}
	var buf [timeEntrySize]byte
	e, err := v.entry(i-1, buf[:])
	if err != nil {
		return 0, false, err
	}
	return int64(binary.BigEndian.Uint32(e[8:])), true, nil
}

// lookupOffsetBelow returns the last time index entry whose offset is below
// rel, i.e. the running maximum timestamp of the segment at that point.
func (v indexView) lookupOffsetBelow(rel int64) (ts, relOffset int64, found bool, err error) {
	i, err := v.search(func(e []byte) bool { return int64(binary.BigEndian.Uint32(e[8:])) < rel })
	if err != nil || i == 0 {
		return 0, 0, false, err
	}
	var buf [timeEntrySize]byte
	e, err := v.entry(i-1, buf[:])
	if err != nil {
		return 0, 0, false, err
	}
	return int64(binary.BigEndian.Uint64(e)), int64(binary.BigEndian.Uint32(e[8:])), true, nil
}

func appendOffsetEntry(b []byte, rel int64, pos int64) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(rel))
	return binary.BigEndian.AppendUint32(b, uint32(pos))
}

func appendTimeEntry(b []byte, ts int64, rel int64) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	return binary.BigEndian.AppendUint32(b, uint32(rel))
}

// headerWalker reads batch headers of a segment in order without reading the
// records in between when batches are large.
type headerWalker struct {
	r        io.ReaderAt
	name     string
	pos      int64 // position of the next batch
	end      int64 // bytes of the segment that may be read
	buf      []byte
	bufStart int64
	bufLen   int
}

const walkBufSize = 8 << 10

func newHeaderWalker(f vfs.File, pos, end int64) *headerWalker {
	return &headerWalker{r: f, name: f.Name(), pos: pos, end: end, buf: make([]byte, walkBufSize)}
}

// next returns the header at the current position and its position, or
// io.EOF at the end.
func (w *headerWalker) next() (BatchHeader, int64, error) {
	if w.pos >= w.end {
		return BatchHeader{}, 0, io.EOF
	}
	if w.end-w.pos < HeaderSize {
		return BatchHeader{}, 0, fmt.Errorf("%s at %d: %w: %d trailing bytes", w.name, w.pos, ErrCorruptBatch, w.end-w.pos)
	}
	if w.pos < w.bufStart || w.pos+HeaderSize > w.bufStart+int64(w.bufLen) {
		n := int(min(int64(len(w.buf)), w.end-w.pos))
		if _, err := w.r.ReadAt(w.buf[:n], w.pos); err != nil {
			return BatchHeader{}, 0, fmt.Errorf("read %s at %d: %w", w.name, w.pos, err)
		}
		w.bufStart, w.bufLen = w.pos, n
	}
	off := int(w.pos - w.bufStart)
	h, err := ParseBatchHeader(w.buf[off : off+HeaderSize])
	if err != nil {
		return BatchHeader{}, 0, fmt.Errorf("%s at %d: %w", w.name, w.pos, err)
	}
	if w.pos+int64(h.Length) > w.end {
		return BatchHeader{}, 0, fmt.Errorf("%s at %d: %w: batch of %d bytes runs past the end", w.name, w.pos, ErrCorruptBatch, h.Length)
	}
	pos := w.pos
	w.pos += int64(h.Length)
	return h, pos, nil
}
