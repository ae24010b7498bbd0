package broker

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// offsetStore keeps committed consumer offsets in kafgres.consumer_offset.
// Commits are written synchronously (an acknowledged commit survives a
// crash of the broker or of Postgres), in one statement per request; reads
// go to Postgres too, since consumers fetch offsets only when they start or
// rebalance. Keeping them in a table is what makes lag queryable in SQL
// (kafgres.consumer_lag).
type offsetStore struct {
	pool *pgxpool.Pool
}

// committedOffset is one partition's commit.
type committedOffset struct {
	topicID     int64
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    *string
}

// Group ids and commit metadata are whatever bytes the client sent: a NUL
// byte or invalid UTF-8 is legal in a Kafka string but not in a Postgres
// text value, so both columns are bytea and every statement passes them as
// []byte. kafgres.consumer_lag shows group ids as text where they are.
const (
	sqlCommitOffsets = `
INSERT INTO kafgres.consumer_offset AS o (group_id, topic_id, partition, committed_offset, leader_epoch, metadata, commit_time)
SELECT $1::bytea, u.topic_id, u.part, u.off, u.epoch, u.meta, pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($2::bigint[]), pg_catalog.unnest($3::int[]), pg_catalog.unnest($4::bigint[]),
               pg_catalog.unnest($5::int[]), pg_catalog.unnest($6::bytea[])) AS u(topic_id, part, off, epoch, meta)
ON CONFLICT (group_id, topic_id, partition) DO UPDATE
SET committed_offset = excluded.committed_offset, leader_epoch = excluded.leader_epoch,
    metadata = excluded.metadata, commit_time = excluded.commit_time`
	sqlFetchOffsets = `
SELECT topic_id, partition, committed_offset, leader_epoch, metadata
FROM kafgres.consumer_offset WHERE group_id OPERATOR(pg_catalog.=) $1::bytea`
	sqlDeleteGroupOffsets = `DELETE FROM kafgres.consumer_offset WHERE group_id OPERATOR(pg_catalog.=) $1::bytea`
	sqlDeleteOffsets      = `
DELETE FROM kafgres.consumer_offset o
USING ROWS FROM (pg_catalog.unnest($2::bigint[]), pg_catalog.unnest($3::int[])) AS u(topic_id, part)
WHERE o.group_id OPERATOR(pg_catalog.=) $1::bytea AND o.topic_id OPERATOR(pg_catalog.=) u.topic_id
  AND o.partition OPERATOR(pg_catalog.=) u.part`
	sqlGroupHasOffsets = `SELECT EXISTS (SELECT 1 FROM kafgres.consumer_offset WHERE group_id OPERATOR(pg_catalog.=) $1::bytea)`
	sqlOffsetGroups    = `SELECT DISTINCT group_id FROM kafgres.consumer_offset`
)

// groups lists every group with committed offsets.
func (s *offsetStore) groups(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, sqlOffsetGroups)
	if err != nil {
		return nil, fmt.Errorf("list groups with offsets: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g []byte
		if err := rows.Scan(&g); err != nil {
			return nil, fmt.Errorf("scan group: %w", err)
		}
		out = append(out, string(g))
	}
	return out, rows.Err()
}

func (s *offsetStore) commit(ctx context.Context, group string, offs []committedOffset) error {
	if len(offs) == 0 {
		return nil
	}
	var (
		ids    = make([]int64, len(offs))
		parts  = make([]int32, len(offs))
		values = make([]int64, len(offs))
		epochs = make([]int32, len(offs))
		metas  = make([][]byte, len(offs)) // nil: NULL metadata
	)
	for i, o := range offs {
		ids[i], parts[i], values[i], epochs[i] = o.topicID, o.partition, o.offset, o.leaderEpoch
		if o.metadata != nil {
			metas[i] = append([]byte{}, *o.metadata...)
		}
	}
	if _, err := s.pool.Exec(ctx, sqlCommitOffsets, []byte(group), ids, parts, values, epochs, metas); err != nil {
		return fmt.Errorf("commit offsets of group %q: %w", group, err)
	}
	return nil
}

type topicPart struct {
	topicID   int64
	partition int32
}

// fetch returns every committed offset of group.
func (s *offsetStore) fetch(ctx context.Context, group string) (map[topicPart]committedOffset, error) {
	rows, err := s.pool.Query(ctx, sqlFetchOffsets, []byte(group))
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %q: %w", group, err)
	}
	defer rows.Close()
	out := map[topicPart]committedOffset{}
	for rows.Next() {
		var (
			o    committedOffset
			meta []byte
		)
		if err := rows.Scan(&o.topicID, &o.partition, &o.offset, &o.leaderEpoch, &meta); err != nil {
			return nil, fmt.Errorf("scan offset of group %q: %w", group, err)
		}
		if meta != nil {
			m := string(meta)
			o.metadata = &m
		}
		out[topicPart{o.topicID, o.partition}] = o
	}
	return out, rows.Err()
}

// deleteGroup removes every committed offset of group (DeleteGroups).
func (s *offsetStore) deleteGroup(ctx context.Context, group string) error {
	if _, err := s.pool.Exec(ctx, sqlDeleteGroupOffsets, []byte(group)); err != nil {
		return fmt.Errorf("delete offsets of group %q: %w", group, err)
	}
	return nil
}

// delete removes the given partitions' offsets of group (OffsetDelete).
func (s *offsetStore) delete(ctx context.Context, group string, tps []topicPart) error {
	ids := make([]int64, len(tps))
	parts := make([]int32, len(tps))
	for i, tp := range tps {
		ids[i], parts[i] = tp.topicID, tp.partition
	}
	if _, err := s.pool.Exec(ctx, sqlDeleteOffsets, []byte(group), ids, parts); err != nil {
		return fmt.Errorf("delete offsets of group %q: %w", group, err)
	}
	return nil
}

// hasOffsets reports whether group has committed anything.
func (s *offsetStore) hasOffsets(ctx context.Context, group string) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, sqlGroupHasOffsets, []byte(group)).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up offsets of group %q: %w", group, err)
	}
	return ok, nil
}
