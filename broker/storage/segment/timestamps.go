package segment

import (
	"errors"
	"fmt"
	"io"
)

// Decompressor opens the compressed record section in of a batch and calls
// fn with a reader of the plain records (Options.Decompress).
type Decompressor func(codec int8, in []byte, fn func(records io.Reader) error) error

// FindInBatch decodes the whole batch b, whose header is h, to find the
// first record at or after start whose timestamp satisfies match: the
// record-level step of a timestamp lookup, shared by every engine. Without
// a way to decompress (dec nil; b may then be nil), the batch's first
// offset from start and its max timestamp stand in; so they do if no
// record matches although the header said one would, unless records
// before start were skipped: then found is false.
func FindInBatch(dec Decompressor, b []byte, h BatchHeader, start int64, match func(int64) bool) (offset, ts int64, found bool, err error) {
	fallback := func() (int64, int64, bool, error) { return max(h.BaseOffset, start), h.MaxTimestamp, true, nil }
	if h.Compression() != 0 && dec == nil {
		return fallback()
	}
	err = batchRecords(dec, b, h, func(r *RecordReader) error {
		var ok bool
		offset, ts, ok, err = findRecord(h, r, func(o, t int64) bool { return o >= start && match(t) })
		switch {
		case err != nil:
			return err
		case ok:
			found = true
		case h.BaseOffset < start:
		default:
			offset, ts, found = h.BaseOffset, h.MaxTimestamp, true
		}
		return nil
	})
	if errors.Is(err, ErrRecordsTooLarge) {
		// Stored before produce bounded decompression, or the bound was
		// lowered since: the header answers, as without a decompressor.
		return fallback()
	}
	if err != nil {
		return 0, 0, false, err
	}
	return offset, ts, found, nil
}

// MaxFrom returns the largest timestamp among the records at or after
// start of the whole batch b (header h), which begins before start. A
// compressed batch that cannot be decompressed (dec nil; b may then be
// nil) answers with its header's max timestamp.
func MaxFrom(dec Decompressor, b []byte, h BatchHeader, start int64) (int64, error) {
	if h.Compression() != 0 && dec == nil {
		return h.MaxTimestamp, nil
	}
	best := int64(-1)
	err := batchRecords(dec, b, h, func(r *RecordReader) error {
		_, _, _, err := findRecord(h, r, func(o, t int64) bool {
			if o >= start {
				best = max(best, t)
			}
			return false
		})
		return err
	})
	if errors.Is(err, ErrRecordsTooLarge) {
		return h.MaxTimestamp, nil
	}
	return best, err
}

// batchRecords calls fn with a reader of the (decompressed) records of the
// whole batch b; callers check that it can be decompressed.
func batchRecords(dec Decompressor, b []byte, h BatchHeader, fn func(*RecordReader) error) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: batch at offset %d has %d bytes", ErrCorruptBatch, h.BaseOffset, len(b))
	}
	var r RecordReader
	records := b[HeaderSize:]
	codec := h.Compression()
	if codec == 0 {
		r.ResetBytes(records)
		return fn(&r)
	}
	err := dec(codec, records, func(src io.Reader) error {
		r.ResetReader(src)
		return fn(&r)
	})
	if err != nil {
		return fmt.Errorf("decompress batch at offset %d: %w", h.BaseOffset, err)
	}
	return nil
}
