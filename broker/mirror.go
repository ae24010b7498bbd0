package broker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kafgres/kafgres/broker/metadata"
)

// mirror copies log start and end offsets of partitions that changed into
// kafgres.partition, so SQL sees them within milliseconds. It is deliberately
// off the produce path: asynchronous commit, one statement per interval for
// every changed partition, and a Postgres outage only delays it.
type mirror struct {
	store    mirrorStore
	interval time.Duration
	log      *slog.Logger

	mu        sync.Mutex
	dirty     map[*partition]struct{}
	lsn       uint64 // highest delivered source LSN
	records   bool   // lsn advanced with records appended since the last write
	lsnMirror uint64 // what kafgres.delivery holds

	// when each kind was last written (flush's goroutine only)
	lastDelivery, lastOffsets time.Time

	// kick wakes run when something changed: an idle broker's mirror
	// sleeps instead of polling (a ticker every interval cost ~900
	// context switches a second doing nothing).
	kick chan struct{}
}

const (
	mirrorGap         = 50 * time.Millisecond
	mirrorProgressGap = 100 * time.Millisecond
	mirrorRetry       = 100 * time.Millisecond // after a failed write
)

// mirrorStore is where the mirror writes.
type mirrorStore interface {
	MirrorDelivered(ctx context.Context, lsn uint64) error
	MirrorLogEnds(ctx context.Context, ends []metadata.LogEnd) error
}

func newMirror(store mirrorStore, interval time.Duration, log *slog.Logger) *mirror {
	return &mirror{store: store, interval: interval, log: log, dirty: map[*partition]struct{}{}, kick: make(chan struct{}, 1)}
}

func (m *mirror) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *mirror) delivered(lsn uint64, records bool) {
	m.mu.Lock()
	if lsn > m.lsn {
		m.lsn = lsn
		m.records = m.records || records
	}
	m.mu.Unlock()
	m.wake()
}

func (m *mirror) mark(p *partition) {
	m.mu.Lock()
	m.dirty[p] = struct{}{}
	m.mu.Unlock()
	m.wake()
}

// run sleeps until something changes, lets changes gather for one
// interval, and then writes what is due, waking again only while something
// is pending.
func (m *mirror) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		}
		for wait := m.interval; wait > 0; wait = m.flush(ctx) {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
	}
}

// flush writes the pending changes whose gap has passed; on failure the
// changes stay pending. It returns how long until what is still pending is
// due, or 0 when nothing is.
func (m *mirror) flush(ctx context.Context) time.Duration {
	now := time.Now()
	m.mu.Lock()
	lsn, records := m.lsn, m.records
	gap := mirrorProgressGap
	if records {
		gap = mirrorGap
	}
	deliveryPending := lsn > m.lsnMirror
	writeDelivery := deliveryPending && now.Sub(m.lastDelivery) >= gap
	if writeDelivery {
		m.records = false
	}
	var dirty map[*partition]struct{}
	offsetsPending := len(m.dirty) > 0
	if offsetsPending && now.Sub(m.lastOffsets) >= mirrorGap {
		dirty = m.dirty
		m.dirty = map[*partition]struct{}{}
	}
	m.mu.Unlock()

	var next time.Duration
	due := func(d time.Duration) {
		d = max(d, m.interval)
		if next == 0 || d < next {
			next = d
		}
	}
	if writeDelivery {
		m.lastDelivery = now
		if err := m.store.MirrorDelivered(ctx, lsn); err != nil {
			m.log.Warn("mirror delivered LSN into Postgres", "err", err)
			m.mu.Lock()
			m.records = m.records || records
			m.mu.Unlock()
			due(mirrorRetry)
		} else {
			m.lsnMirror = lsn
		}
	} else if deliveryPending {
		due(gap - now.Sub(m.lastDelivery))
	}
	if offsetsPending && dirty == nil {
		due(mirrorGap - now.Sub(m.lastOffsets))
	}
	if len(dirty) > 0 {
		m.lastOffsets = now
		ends := make([]metadata.LogEnd, 0, len(dirty))
		for p := range dirty {
			ends = append(ends, metadata.LogEnd{TopicID: p.topic.id, Partition: p.index,
				HighWatermark: p.highWatermark(), LogStartOffset: p.log.LogStartOffset()})
		}
		if err := m.store.MirrorLogEnds(ctx, ends); err != nil {
			m.log.Warn("mirror log offsets into Postgres", "err", err)
			m.mu.Lock()
			for p := range dirty {
				m.dirty[p] = struct{}{}
			}
			m.mu.Unlock()
			due(mirrorRetry)
		}
	}
	// What changed while this pass wrote is caught by the kick it sent.
	return next
}
