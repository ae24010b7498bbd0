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
	lsnMirror uint64 // what kafgres.delivery holds

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

func newMirror(pool *pgxpool.Pool, interval time.Duration, log *slog.Logger) *mirror {
	return &mirror{pool: pool, interval: interval, log: log, dirty: map[*partition]struct{}{}}
}

func (m *mirror) delivered(lsn uint64) {
	m.mu.Lock()
	m.lsn = max(m.lsn, lsn)
	m.mu.Unlock()
}

func (m *mirror) mark(p *partition) {
	m.mu.Lock()
	m.dirty[p] = struct{}{}
	m.mu.Unlock()
}

func (m *mirror) run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.flush(ctx)
	}
}

// flush writes every pending change; on failure the changes stay pending.
func (m *mirror) flush(ctx context.Context) {
	m.mu.Lock()
	dirty := m.dirty
	m.dirty = map[*partition]struct{}{}
	lsn := m.lsn
	m.mu.Unlock()
	if lsn > m.lsnMirror {
		if err := m.exec(ctx, sqlDelivered, lsnText(lsn)); err != nil {
			m.log.Warn("mirror delivered LSN into Postgres", "err", err)
		} else {
			m.lsnMirror = lsn
		}
	}
	if len(dirty) == 0 {
		return
	}
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
	}
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
