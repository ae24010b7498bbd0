package broker

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/broker/storage"
	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/storage/table"
)

// partition is one topic partition: its log, the idempotent-producer window,
// its transactions (txn_state.go) and the fetchers waiting for it to grow.
type partition struct {
	topic *topic
	index int32
	dir   string
	epoch int32 // leader epoch of this broker incarnation

	// log stores the batches: the segment engine's today (partition_log.go).
	log partitionLog

	// mu serializes appends so sequence checks and offset assignment agree.
	mu        sync.Mutex
	producers producerWindow
	txns      partitionTxns

	// unstable is what lastStableOffset needs of txns, replaced under mu
	// whenever a transaction begins or ends; nil when there is none.
	unstable atomic.Pointer[[]txnSpan]

	// hw is the high watermark: the end of the last durable append. Only
	// records below it are served.
	hw atomic.Int64

	watchMu  sync.Mutex
	watchers map[chan struct{}]struct{}

	// epochs is Kafka's leader epoch cache: where each leader epoch's
	// batches start, oldest first, ending with this incarnation's epoch at
	// the log end it found; kept in leader-epoch-checkpoint
	// (producer_state.go). Immutable after open: every later append is in
	// the last epoch.
	epochs []epochStart
	// epochsUnsaved: the checkpoint does not yet hold the last epoch, which
	// saveEpochs writes before the first batch stamped with it. Under mu.
	epochsUnsaved bool

	// uncleanable: a clean of this partition failed, and the cleaner
	// skips it for as long as this broker runs (Kafka's
	// markPartitionUncleanable); a dropped and recreated topic has new
	// partitions and starts cleanable.
	uncleanable atomic.Bool

	logger  *slog.Logger
	scanned int  // batch headers read by the open (tests)
	closed  bool // under mu
}

type epochStart struct {
	epoch int32
	start int64
}

// openPartition opens (creating it if needed) the log of partition index
// of t; see storage.Dir.PreparePartition for what may be in the way.
func (c *catalog) openPartition(ctx context.Context, t *topic, index int32, epoch int32) (*partition, error) {
	b := c.b
	dir, err := c.preparePartitionDir(ctx, t, index)
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", t.name, index, err)
	}
	logger := b.log.With("topic", t.name, "partition", index)
	var l partitionLog
	if t.tableEngine {
		l, err = c.openTableLog(ctx, t, index)
	} else {
		l, err = c.openSegmentLog(t, dir, logger)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", t.name, index, err)
	}
	p := &partition{topic: t, index: index, dir: dir, epoch: epoch, log: l, logger: logger,
		producers: producerWindow{}, watchers: map[chan struct{}]struct{}{}}
	p.hw.Store(l.DurableEnd())
	if p.scanned, err = p.loadState(b.cfg.ProducerIDExpiration, time.Now()); err != nil {
		l.Close()
		return nil, fmt.Errorf("rebuild producer state of %s-%d: %w", t.name, index, err)
	}
	// What kafgres.partition holds may predate the last changes before a
	// crash (the mirror writes behind the log): bring it up to date.
	b.mirror.mark(p)
	return p, nil
}

// openSegmentLog opens the segment engine's log in dir.
func (c *catalog) openSegmentLog(t *topic, dir string, logger *slog.Logger) (*segment.Log, error) {
	b := c.b
	opts := segment.Options{
		Dir:          dir,
		FS:           b.data.FS(),
		TopicID:      hex.EncodeToString(t.uuid[:]),
		SegmentBytes: b.cfg.SegmentBytes,
		Fsync:        b.cfg.Fsync,
		DropBehind:   b.cfg.LogCachedTail >= 0,
		CachedTail:   b.cfg.LogCachedTail,
		Logger:       logger,
		Decompress:   b.decompressStored,
		Archive:      b.cfg.SegmentArchiveCommand != "",
	}
	// The marker says the directory is t's, so a different topic id in
	// partition.metadata is damage, not a leftover: an error, nothing
	// deleted.
	return segment.Open(opts)
}

// openTableLog opens the table engine's log of partition index of t, in
// the database the broker's catalog is in.
func (c *catalog) openTableLog(ctx context.Context, t *topic, index int32) (*table.Log, error) {
	b := c.b
	pool, err := b.logPool(ctx)
	if err != nil {
		return nil, err
	}
	return table.Open(ctx, table.Options{
		Pool:         pool,
		TopicID:      t.id,
		Partition:    index,
		SegmentBytes: b.cfg.SegmentBytes,
		AsyncCommit:  !b.cfg.Fsync,
		Decompress:   b.decompressStored,
	})
}

// appendResult is what a produce learns from one partition.
type appendResult struct {
	baseOffset int64
	err        error // a *kerr.Error for the client, or a storage failure
}

// append validates batch against the producer window and appends it. A
// duplicate of a recent batch returns the original offset and appends
// nothing, as Kafka does. batch must be memory the caller owns: the base
// offset and leader epoch are stamped into it.
func (p *partition) append(batch []byte, h segment.BatchHeader) appendResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	dup, err := p.producers.check(h)
	if err != nil {
		return appendResult{err: err}
	}
	if dup != nil {
		return appendResult{baseOffset: dup.firstOffset}
	}
	if err := p.saveEpochs(); err != nil {
		return appendResult{err: err}
	}
	active := p.activeBase()
	base, err := p.log.Append(batch, p.epoch)
	if err != nil {
		if errors.Is(err, segment.ErrClosed) {
			return appendResult{err: kerr.UnknownTopicOrPartition}
		}
		return appendResult{err: fmt.Errorf("append to %s-%d: %w", p.topic.name, p.index, err)}
	}
	p.snapshotIfRolled(active, base)
	if _, open := p.txns.open[h.ProducerID]; h.IsTransactional() && !open {
		p.applyBatch(h, base)
		p.refreshUnstable()
	} else {
		p.applyBatch(h, base)
	}
	return appendResult{baseOffset: base}
}

// publish moves the high watermark to durableEnd and wakes fetchers.
func (p *partition) publish(durableEnd int64) {
	// The committer (wire produce) and the SQL producer both publish, so
	// the watermark only moves forward, whichever of them stores last.
	for {
		hw := p.hw.Load()
		if durableEnd <= hw {
			return
		}
		if p.hw.CompareAndSwap(hw, durableEnd) {
			break
		}
	}
	p.notify()
}

// notify wakes the fetchers waiting for the partition: its high watermark
// or last stable offset moved.
func (p *partition) notify() {
	p.watchMu.Lock()
	for ch := range p.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.watchMu.Unlock()
}

// watch registers ch (buffered, capacity ≥ 1) to be signalled when the high
// watermark moves; the returned func unregisters it.
func (p *partition) watch(ch chan struct{}) func() {
	p.watchMu.Lock()
	p.watchers[ch] = struct{}{}
	p.watchMu.Unlock()
	return func() {
		p.watchMu.Lock()
		delete(p.watchers, ch)
		p.watchMu.Unlock()
	}
}

func (p *partition) highWatermark() int64 { return p.hw.Load() }

// close closes the log and, as Kafka does on a clean shutdown, snapshots
// the producer state at the log end, so that the next open replays nothing.
func (p *partition) close() error { return p.closeLog(true) }

// discard closes the log of a dropped partition. It writes no producer
// snapshot: nothing will open the log again, and a table topic's snapshot
// row would refer to a partition row that is already deleted (a foreign
// key error in the Postgres log and a warning in the broker's, for every
// partition of every table topic dropped).
func (p *partition) discard() error { return p.closeLog(false) }

func (p *partition) closeLog(snapshot bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if snapshot {
		return p.log.CloseWithProducerSnapshot(p.producers.snapshotEntries())
	}
	return p.log.Close()
}

// removeDir deletes a dropped partition's log (storage.Dir.RemovePartition);
// a failure is logged, and what is left the next start removes.
func (p *partition) removeDir(data *storage.Dir, log *slog.Logger) {
	if dead, err := data.RemovePartition(p.dir, p.topic.uuid); err != nil {
		log.Warn("remove log of dropped topic", "dir", dead, "err", err)
	}
}

// epochAt is the leader epoch stamped on the batch holding offset, or the
// current epoch when there is none below limit.
func (p *partition) epochAt(offset, limit int64) int32 {
	data, err := p.log.Read(offset, 1, limit)
	if err != nil || len(data) == 0 {
		return p.epoch
	}
	h, err := segment.ParseBatchHeader(data)
	if err != nil {
		return p.epoch
	}
	return h.LeaderEpoch
}

// endOffsetForEpoch answers OffsetForLeaderEpoch as Kafka's
// LeaderEpochFileCache.endOffsetFor does: the end of the requested epoch is
// where the next higher epoch starts (the log end for the current epoch),
// reported with the largest epoch not above the requested one; an epoch
// above every known one is undefined (-1, -1).
func (p *partition) endOffsetForEpoch(requested int32) (int32, int64) {
	last := p.epochs[len(p.epochs)-1]
	switch {
	case requested < 0 || requested > last.epoch:
		return -1, -1
	case requested == last.epoch:
		return last.epoch, p.log.LogEndOffset()
	}
	i := sort.Search(len(p.epochs), func(i int) bool { return p.epochs[i].epoch > requested })
	if i == 0 {
		return requested, p.epochs[0].start
	}
	return p.epochs[i-1].epoch, p.epochs[i].start
}
