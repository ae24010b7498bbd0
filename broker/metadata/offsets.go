package metadata

import (
	"context"
	"fmt"
)

// CommittedOffset is a row of kafgres.consumer_offset.
type CommittedOffset struct {
	TopicID     int64
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
}

// TopicPartition names a partition by its topic's id.
type TopicPartition struct {
	TopicID   int64
	Partition int32
}

// Group ids are stored as bytea: Kafka allows any string, including NUL,
// which text cannot hold.
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

// OffsetGroups lists the groups that have committed offsets.
func (s *Postgres) OffsetGroups(ctx context.Context) ([]string, error) {
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

// CommitOffsets stores offs for group in one statement: all or none.
func (s *Postgres) CommitOffsets(ctx context.Context, group string, offs []CommittedOffset) error {
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
		ids[i], parts[i], values[i], epochs[i] = o.TopicID, o.Partition, o.Offset, o.LeaderEpoch
		if o.Metadata != nil {
			metas[i] = append([]byte{}, *o.Metadata...)
		}
	}
	if _, err := s.pool.Exec(ctx, sqlCommitOffsets, []byte(group), ids, parts, values, epochs, metas); err != nil {
		return fmt.Errorf("commit offsets of group %q: %w", group, err)
	}
	return nil
}

// FetchOffsets returns every offset group committed.
func (s *Postgres) FetchOffsets(ctx context.Context, group string) (map[TopicPartition]CommittedOffset, error) {
	rows, err := s.pool.Query(ctx, sqlFetchOffsets, []byte(group))
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %q: %w", group, err)
	}
	defer rows.Close()
	out := map[TopicPartition]CommittedOffset{}
	for rows.Next() {
		var (
			o    CommittedOffset
			meta []byte
		)
		if err := rows.Scan(&o.TopicID, &o.Partition, &o.Offset, &o.LeaderEpoch, &meta); err != nil {
			return nil, fmt.Errorf("scan offset of group %q: %w", group, err)
		}
		if meta != nil {
			m := string(meta)
			o.Metadata = &m
		}
		out[TopicPartition{o.TopicID, o.Partition}] = o
	}
	return out, rows.Err()
}

// DeleteGroupOffsets removes every offset of group.
func (s *Postgres) DeleteGroupOffsets(ctx context.Context, group string) error {
	if _, err := s.pool.Exec(ctx, sqlDeleteGroupOffsets, []byte(group)); err != nil {
		return fmt.Errorf("delete offsets of group %q: %w", group, err)
	}
	return nil
}

// DeleteOffsets removes group's offsets of the partitions tps.
func (s *Postgres) DeleteOffsets(ctx context.Context, group string, tps []TopicPartition) error {
	ids := make([]int64, len(tps))
	parts := make([]int32, len(tps))
	for i, tp := range tps {
		ids[i], parts[i] = tp.TopicID, tp.Partition
	}
	if _, err := s.pool.Exec(ctx, sqlDeleteOffsets, []byte(group), ids, parts); err != nil {
		return fmt.Errorf("delete offsets of group %q: %w", group, err)
	}
	return nil
}

// HasOffsets reports whether group committed any offset.
func (s *Postgres) HasOffsets(ctx context.Context, group string) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, sqlGroupHasOffsets, []byte(group)).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up offsets of group %q: %w", group, err)
	}
	return ok, nil
}
