package broker

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/kafgres/kafgres/broker/storage/segment"
)

// The log cleaner: Kafka's LogCleaner thread and LogCleanerManager for
// topics whose cleanup.policy contains compact. Every
// log.cleaner.backoff.ms (read again each round: it is dynamic) it
// measures each such partition whose log can be compacted
// (compactableLog: segment.Log.Cleanable) and cleans, dirtiest first,
// those whose dirty ratio exceeds min.cleanable.dirty.ratio or whose
// first dirty batch is older than max.compaction.lag.ms, never past the
// last stable offset, the active segment or min.compaction.lag.ms. The
// cleaning itself is segment.Log.Clean: it reads sealed segments and
// takes the log's lock only to swap a cleaned segment in, so produce and
// fetch go on. Its I/O (reads and writes together) is held to
// log.cleaner.io.max.bytes.per.second.
// One goroutine cleans one partition at a time, as Kafka's single
// default cleaner thread does.

// offsetMapEntryBytes is what one key takes in Kafka's offset map (a
// 16-byte MD5 digest and an 8-byte offset): log.cleaner.dedupe.buffer.size
// divided by it, times log.cleaner.io.buffer.load.factor, is how many keys
// one clean maps.
const offsetMapEntryBytes = 24

func (b *Broker) cleanLogs(ctx context.Context) {
	t := newThrottler()
	for {
		cs := b.brokerConfigs().CleanerSettings()
		timer := time.NewTimer(time.Duration(cs.BackoffMs) * time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case now := <-timer.C:
			if cs = b.brokerConfigs().CleanerSettings(); cs.Enable {
				t.setRate(cs.IOMaxBytesPerSecond)
				b.runCleaner(ctx, now, cs, t)
			}
		}
	}
}

// cleanCandidate is a partition the cleaner may clean (Kafka's LogToClean).
type cleanCandidate struct {
	t   *topic
	p   *partition
	log compactableLog
	s   kconfig.TopicSettings
	c   segment.Cleanable
}

// runCleaner cleans every partition due, dirtiest first.
func (b *Broker) runCleaner(ctx context.Context, now time.Time, cs kconfig.CleanerSettings, t *throttler) int {
	var due []cleanCandidate
	for _, tp := range b.catalog.topics() {
		s := b.topicSettings(tp)
		if !s.Compacted() {
			continue
		}
		for _, p := range tp.parts {
			l, ok := p.log.(compactableLog)
			if !ok || p.uncleanable.Load() {
				continue
			}
			c, err := l.Cleanable(l.CleanerCheckpoint(), p.lastStableOffset(), now, s.MinCompactionLagMs, s.MaxCompactionLagMs)
			if err != nil {
				if !errors.Is(err, segment.ErrClosed) {
					b.log.Warn("measure log for cleaning", "topic", tp.name, "partition", p.index, "err", err)
				}
				continue
			}
			if (c.MaxCompactionDelayMs > 0 && c.CleanableBytes > 0) || c.Ratio() > s.MinCleanableDirtyRatio {
				due = append(due, cleanCandidate{t: tp, p: p, log: l, s: s, c: c})
			}
		}
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].c.Ratio() > due[j].c.Ratio() })
	cleaned := 0
	for _, c := range due {
		if ctx.Err() != nil {
			break
		}
		if b.cleanPartition(ctx, c, now, cs, t) {
			cleaned++
		}
	}
	return cleaned
}

// cleanPartition cleans one partition. A clean that fails for any reason
// but the partition closing or the broker stopping marks the partition
// uncleanable, as Kafka does: a corrupt batch or a failing disk would fail
// every round again, reading the same segments each time.
func (b *Broker) cleanPartition(ctx context.Context, c cleanCandidate, now time.Time, cs kconfig.CleanerSettings, t *throttler) bool {
	maxKeys := int(math.Min(float64(cs.DedupeBufferSize)/offsetMapEntryBytes*cs.IOBufferLoadFactor, math.MaxInt32))
	st, err := c.log.Clean(segment.CleanOptions{
		FirstDirty:        c.c.FirstDirty,
		UpperBound:        c.c.FirstUncleanable,
		Now:               now,
		DeleteRetentionMs: c.s.DeleteRetentionMs,
		MaxGroupBytes:     c.s.SegmentBytes,
		MaxIndexBytes:     c.s.SegmentIndexBytes,
		MaxKeys:           max(maxKeys, 1),
		ActiveProducers:   c.p.lastRecordsOfProducers(),
		Compress:          compressRecords,
		Throttle:          func(n int) { t.throttle(ctx, n) },
		Aborted:           func() bool { return ctx.Err() != nil },
	})
	switch {
	case errors.Is(err, segment.ErrClosed), errors.Is(err, segment.ErrCleanAborted):
		return false // dropped meanwhile, or the broker is stopping
	case err != nil:
		c.p.uncleanable.Store(true)
		b.log.Warn("clean log failed: the partition is marked uncleanable until the broker restarts", "topic", c.t.name, "partition", c.p.index, "err", err)
		return false
	}
	b.log.Info("cleaned log", "topic", c.t.name, "partition", c.p.index,
		"first_dirty", st.FirstDirty, "end", st.End, "segments", st.Segments, "groups", st.Groups,
		"bytes_read", st.BytesRead, "bytes_written", st.BytesWritten,
		"records_read", st.RecordsRead, "records_retained", st.RecordsRetained)
	return true
}

// lastRecordsOfProducers is Kafka's lastRecordsOfActiveProducers: per producer
// the last offset of its last batch (or -1 when its last entry is a
// marker) and its epoch; the cleaner keeps that batch so that the
// producer's sequence and epoch survive in the log.
func (p *partition) lastRecordsOfProducers() map[int64]segment.LastRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]segment.LastRecord, len(p.producers))
	for pid, e := range p.producers {
		lr := segment.LastRecord{DataOffset: -1, Epoch: e.epoch}
		if n := len(e.batches); n > 0 {
			last := e.batches[n-1]
			lr.DataOffset = last.firstOffset + int64(uint32(last.lastSeq-last.firstSeq))
		}
		out[pid] = lr
	}
	return out
}

// throttler is Kafka's Throttler for the cleaner's I/O: it sleeps when
// the bytes counted since the start of its window would take longer than
// the time passed at the allowed rate.
type throttler struct {
	mu    sync.Mutex
	rate  float64 // bytes per second; +Inf or MaxFloat64: none
	start time.Time
	bytes float64
}

func newThrottler() *throttler { return &throttler{rate: math.MaxFloat64} }

func (t *throttler) setRate(rate float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rate != t.rate {
		t.rate, t.start, t.bytes = rate, time.Time{}, 0
	}
}

// throttle counts n bytes and waits as long as the rate asks (or until
// ctx ends).
func (t *throttler) throttle(ctx context.Context, n int) {
	t.mu.Lock()
	if t.rate <= 0 || t.rate >= math.MaxFloat64 {
		t.mu.Unlock()
		return
	}
	now := time.Now()
	if t.start.IsZero() || now.Sub(t.start) > 10*time.Second {
		t.start, t.bytes = now, 0
	}
	t.bytes += float64(n)
	wait := time.Duration(t.bytes/t.rate*float64(time.Second)) - now.Sub(t.start)
	t.mu.Unlock()
	if wait <= 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}
