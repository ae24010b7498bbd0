package metadata

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// LogEnd is what kafgres.partition mirrors of a partition's log, for SQL
// readers (kafgres.topics, kafgres_wait_delivered).
type LogEnd struct {
	TopicID        int64
	Partition      int32
	HighWatermark  int64
	LogStartOffset int64
}

const sqlDelivered = `UPDATE kafgres.delivery SET applied_lsn = $1::text::pg_lsn WHERE applied_lsn OPERATOR(pg_catalog.<) $1::text::pg_lsn`

// Only rows that changed are written: an unchanged row would still cost a
// new tuple version.
const sqlMirror = `
UPDATE kafgres.partition p
SET high_watermark = u.hw, log_start_offset = u.ls
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::int[]), pg_catalog.unnest($3::bigint[]),
               pg_catalog.unnest($4::bigint[])) AS u(topic_id, part, hw, ls)
WHERE p.topic_id OPERATOR(pg_catalog.=) u.topic_id AND p.partition OPERATOR(pg_catalog.=) u.part
  AND (p.high_watermark OPERATOR(pg_catalog.<>) u.hw OR p.log_start_offset OPERATOR(pg_catalog.<>) u.ls)`

// MirrorDelivered records that every source record up to lsn is in the
// log (kafgres.delivery, read by kafgres_wait_delivered).
func (s *Postgres) MirrorDelivered(ctx context.Context, lsn uint64) error {
	return s.mirror.exec(ctx, sqlDelivered, LSNText(lsn))
}

// MirrorLogEnds writes the log ends of the partitions given.
func (s *Postgres) MirrorLogEnds(ctx context.Context, ends []LogEnd) error {
	ids := make([]int64, len(ends))
	parts := make([]int32, len(ends))
	hws := make([]int64, len(ends))
	starts := make([]int64, len(ends))
	for i, e := range ends {
		ids[i], parts[i], hws[i], starts[i] = e.TopicID, e.Partition, e.HighWatermark, e.LogStartOffset
	}
	return s.mirror.exec(ctx, sqlMirror, ids, parts, hws, starts)
}

// LSNText formats a WAL position as Postgres does (pg_lsn's text).
func LSNText(lsn uint64) string { return fmt.Sprintf("%X/%X", lsn>>32, uint32(lsn)) }

// mirrorConn is a dedicated connection, so that its session keeps
// synchronous_commit=off: the mirror is a cache of the log, rebuilt from
// it, and must not wait for WAL flushes. It is used by one goroutine (the
// broker's mirror) at a time.
type mirrorConn struct {
	config *pgx.ConnConfig
	conn   *pgx.Conn
}

func (m *mirrorConn) exec(ctx context.Context, sql string, args ...any) error {
	if m.conn == nil || m.conn.IsClosed() {
		c, err := pgx.ConnectConfig(ctx, m.config.Copy())
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

func (m *mirrorConn) close() {
	if m.conn != nil {
		m.conn.Close(context.Background())
		m.conn = nil
	}
}
