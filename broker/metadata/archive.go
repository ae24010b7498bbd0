package metadata

import (
	"context"
	"fmt"
	"time"
)

// ArchiveStatus is what the segment archiver reports of one partition
// (kafgres.archive_status, read by kafgres_archive_status()).
type ArchiveStatus struct {
	TopicID         int64
	Partition       int32
	ArchivedOffset  int64     // end of the last archived segment
	LastSegment     string    // %f of the last segment's log file; "" none yet
	LastArchivedAt  time.Time // zero: none since the broker started
	Failed          int64     // failed commands since the broker started
	LastFailure     string
	LastFailedAt    time.Time
	BacklogSegments int
	BacklogBytes    int64
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Rows of partitions dropped meanwhile are skipped (the join), not an
// error: the table's foreign key would refuse them.
const sqlArchiveStatus = `
INSERT INTO kafgres.archive_status AS s
       (topic_id, partition, archived_offset, last_archived_segment, last_archived_at,
        failed_count, last_failure, last_failed_at, backlog_segments, backlog_bytes, updated_at)
SELECT u.topic_id, u.part, u.archived, u.seg, u.seg_at, u.failed, u.failure, u.failed_at,
       u.backlog, u.backlog_bytes, pg_catalog.now()
  FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::int[]), pg_catalog.unnest($3::bigint[]),
                  pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::timestamptz[]), pg_catalog.unnest($6::bigint[]),
                  pg_catalog.unnest($7::text[]), pg_catalog.unnest($8::timestamptz[]), pg_catalog.unnest($9::int[]),
                  pg_catalog.unnest($10::bigint[]))
       AS u(topic_id, part, archived, seg, seg_at, failed, failure, failed_at, backlog, backlog_bytes)
  JOIN kafgres.partition AS p
    ON p.topic_id OPERATOR(pg_catalog.=) u.topic_id AND p.partition OPERATOR(pg_catalog.=) u.part
ON CONFLICT (topic_id, partition) DO UPDATE
   SET archived_offset = excluded.archived_offset,
       last_archived_segment = COALESCE(excluded.last_archived_segment, s.last_archived_segment),
       last_archived_at = COALESCE(excluded.last_archived_at, s.last_archived_at),
       failed_count = excluded.failed_count,
       last_failure = COALESCE(excluded.last_failure, s.last_failure),
       last_failed_at = COALESCE(excluded.last_failed_at, s.last_failed_at),
       backlog_segments = excluded.backlog_segments,
       backlog_bytes = excluded.backlog_bytes,
       updated_at = excluded.updated_at`

const sqlClearArchiveStatus = `DELETE FROM kafgres.archive_status`

// ReportArchiveStatus writes the archiver's state of the partitions given.
func (s *Postgres) ReportArchiveStatus(ctx context.Context, st []ArchiveStatus) error {
	n := len(st)
	ids, parts, archived := make([]int64, n), make([]int32, n), make([]int64, n)
	segs, segAt, failed := make([]any, n), make([]any, n), make([]int64, n)
	failure, failedAt := make([]any, n), make([]any, n)
	backlog, backlogBytes := make([]int32, n), make([]int64, n)
	for i, a := range st {
		ids[i], parts[i], archived[i] = a.TopicID, a.Partition, a.ArchivedOffset
		segs[i], segAt[i], failed[i] = nullText(a.LastSegment), nullTime(a.LastArchivedAt), a.Failed
		failure[i], failedAt[i] = nullText(a.LastFailure), nullTime(a.LastFailedAt)
		backlog[i], backlogBytes[i] = int32(a.BacklogSegments), a.BacklogBytes
	}
	if _, err := s.pool.Exec(ctx, sqlArchiveStatus, ids, parts, archived, segs, segAt, failed, failure, failedAt, backlog, backlogBytes); err != nil {
		return fmt.Errorf("report archive status: %w", err)
	}
	return nil
}

// ClearArchiveStatus empties kafgres.archive_status, which the broker
// fills again from the partition directories: at start, so that no row
// outlives archiving being turned off.
func (s *Postgres) ClearArchiveStatus(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, sqlClearArchiveStatus); err != nil {
		return fmt.Errorf("clear archive status: %w", err)
	}
	return nil
}

// ReportArchiveStatus keeps the last report of each partition (tests).
func (m *Memory) ReportArchiveStatus(_ context.Context, st []ArchiveStatus) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.archive == nil {
		m.archive = map[TopicPartition]ArchiveStatus{}
	}
	for _, a := range st {
		m.archive[TopicPartition{a.TopicID, a.Partition}] = a
	}
	return nil
}

// ClearArchiveStatus forgets every report.
func (m *Memory) ClearArchiveStatus(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.archive)
	return nil
}

// ArchiveStatus is the last report of a partition (tests).
func (m *Memory) ArchiveStatus(topicID int64, partition int32) (ArchiveStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.archive[TopicPartition{topicID, partition}]
	return a, ok
}
