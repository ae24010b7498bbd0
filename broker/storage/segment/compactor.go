package segment

import "time"

// Compactor is the record-level part of a clean (the offset map, the
// transaction bookkeeping and the batch filter of Log.Clean) for a log
// kept elsewhere than in segment files: the table engine (issue #15)
// feeds it its batches in offset order and stores what it returns. The
// decisions are exactly those of Log.Clean.
//
// Use: NewCompactor; MapBatch over the batches from the first dirty
// offset until it says stop; Mapped; then FilterBatch over every batch
// from the log start below the offset Mapped returned, in order.
type Compactor struct {
	c          *cleaner
	aborted    []AbortedTxn
	mapTxns    *cleanTxns
	firstDirty int64
}

// NewCompactor starts a clean of the dirty range [firstDirty, upper).
// aborted are the aborted transactions with data below upper and their
// marker at or after the log start, by first offset; decompress reads
// compressed batches (o.Compress rewrites them).
func NewCompactor(o CleanOptions, firstDirty, upper int64, aborted []AbortedTxn, decompress Decompressor) *Compactor {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	c := newCleaner(o, decompress)
	c.upper = upper
	c.stats.FirstDirty, c.stats.End, c.stats.UpperBound = firstDirty, firstDirty, upper
	return &Compactor{c: c, aborted: aborted, mapTxns: newCleanTxns(aborted), firstDirty: firstDirty}
}

// MapBatch puts the keys of the batch h (bytes b) in the offset map; stop
// is true once the batch is at the upper bound or the map is full.
func (k *Compactor) MapBatch(h BatchHeader, b []byte) (stop bool, err error) {
	k.c.stats.BytesRead += int64(len(b))
	return k.c.mapBatch(k.mapTxns, k.firstDirty, h, b)
}

// Mapped ends the mapping and returns the end of the mapped offsets: the
// batches below it are then filtered. Stats().End is the new cleaner
// checkpoint.
func (k *Compactor) Mapped() int64 {
	end := k.c.mapped(k.firstDirty)
	k.c.txns = newCleanTxns(k.aborted)
	return end
}

// FilterBatch returns what replaces the batch h (bytes b): b itself when
// unchanged, a rebuilt batch with the same offsets and producer fields, an
// empty batch, or nil when the batch goes. next is the base offset of the
// unit of storage after the batch's (a leaf): the last batch of each is
// kept, as the last batch of each cleaned segment is.
func (k *Compactor) FilterBatch(h BatchHeader, b []byte, next int64) ([]byte, error) {
	k.c.groupEnd = next
	k.c.stats.BytesRead += int64(len(b))
	out, err := k.c.filterBatch(h, b)
	k.c.stats.BytesWritten += int64(len(out))
	return out, err
}

// Stats are the clean's statistics so far.
func (k *Compactor) Stats() CleanStats { return k.c.stats }
