package broker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// mirror copies log start and end offsets of partitions that changed into
// kafgres.partition, so SQL sees them within milliseconds. It is deliberately
// off the produce path: asynchronous commit, one statement per interval for
// every changed partition, and a Postgres outage only delays it.
type mirror struct {
	pool     *pgxpool.Pool
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

	conn *pgx.Conn // dedicated, so its session keeps synchronous_commit=off
}

const sqlDelivered = `UPDATE kafgres.delivery SET applied_lsn = $1::text::pg_lsn WHERE applied_lsn OPERATOR(pg_catalog.<) $1::text::pg_lsn`

const sqlMirror = `
UPDATE kafgres.partition p
SET high_watermark = u.hw, log_start_offset = u.ls
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::int[]), pg_catalog.unnest($3::bigint[]),
               pg_catalog.unnest($4::bigint[])) AS u(topic_id, part, hw, ls)
WHERE p.topic_id OPERATOR(pg_catalog.=) u.topic_id AND p.partition OPERATOR(pg_catalog.=) u.part
  AND (p.high_watermark OPERATOR(pg_catalog.<>) u.hw OR p.log_start_offset OPERATOR(pg_catalog.<>) u.ls)`

// Every mirror write is a transaction the walsender decodes (and, for
// kafgres.delivery, one that moves the WAL the next keepalive reports, which
// would be mirrored again). While changes keep coming, each kind is
// therefore written at most once per gap: at once after a quiet spell, so a
// lone transaction is visible within one interval, and then no more often
// than the gap. A delivery position moved only by keepalives (no records)
// waits longer.
const (
	mirrorGap         = 50 * time.Millisecond
	mirrorProgressGap = 100 * time.Millisecond
	mirrorRetry       = 100 * time.Millisecond // after a failed write
)

func newMirror(pool *pgxpool.Pool, interval time.Duration, log *slog.Logger) *mirror {
	return &mirror{pool: pool, interval: interval, log: log, dirty: map[*partition]struct{}{}, kick: make(chan struct{}, 1)}
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
		if err := m.exec(ctx, sqlDelivered, lsnText(lsn)); err != nil {
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
		var ids []int64
		var parts []int32
		var hws, starts []int64
		for p := range dirty {
			ids = append(ids, p.topic.id)
			parts = append(parts, p.index)
			hws = append(hws, p.highWatermark())
			starts = append(starts, p.log.LogStartOffset())
		}
		if err := m.exec(ctx, sqlMirror, ids, parts, hws, starts); err != nil {
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

// lsnText formats an LSN the way pg_lsn reads it.
func lsnText(lsn uint64) string { return fmt.Sprintf("%X/%X", lsn>>32, uint32(lsn)) }

func (m *mirror) exec(ctx context.Context, sql string, args ...any) error {
	if m.conn == nil || m.conn.IsClosed() {
		c, err := pgx.ConnectConfig(ctx, m.pool.Config().ConnConfig.Copy())
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		if _, err := c.Exec(ctx, "SET synchronous_commit = off"); err != nil {
			c.Close(ctx)
			return fmt.Errorf("set synchronous_commit: %w", err)
		}
		m.conn = c
	}
	if _, err := m.conn.Exec(ctx, sql, args...); err != nil {
		m.conn.Close(ctx)
		m.conn = nil
		return err
	}
	return nil
}
