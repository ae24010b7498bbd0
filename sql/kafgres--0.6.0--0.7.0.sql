/* kafgres 0.6.0 -> 0.7.0: segment archiving (kafgres.segment_archive_command) */

\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.7.0'" to load this file. \quit

/*
 * kafgres.archive_status: what the broker's segment archiver last reported
 * for each partition (broker/archiver.go). The archive's own progress is a
 * file in each partition directory; this table is a copy for SQL, written
 * by the broker after every archived segment, failure and change of
 * backlog, with synchronous_commit off, so it may trail the files by a
 * moment and is rebuilt by the broker at start. Not dumped: a restored
 * database gets it again from the broker.
 */
CREATE TABLE kafgres.archive_status (
    topic_id              bigint      NOT NULL,
    partition             int         NOT NULL,
    archived_offset       bigint      NOT NULL DEFAULT 0,
    last_archived_segment text,
    last_archived_at      timestamptz,
    failed_count          bigint      NOT NULL DEFAULT 0,
    last_failure          text,
    last_failed_at        timestamptz,
    backlog_segments      int         NOT NULL DEFAULT 0,
    backlog_bytes         bigint      NOT NULL DEFAULT 0,
    updated_at            timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (topic_id, partition),
    FOREIGN KEY (topic_id, partition) REFERENCES kafgres.partition ON DELETE CASCADE
);
COMMENT ON TABLE kafgres.archive_status IS 'the segment archiver''s state per partition, as the broker last reported it';
REVOKE ALL ON kafgres.archive_status FROM PUBLIC;

/*
 * kafgres_archive_status(): one row per partition the archiver has
 * reported on: the end of what is archived (the next offset to archive),
 * the last segment archived (as %f names it), failures since the broker
 * started (and the last one), and the backlog of sealed segments not yet
 * archived. No rows while kafgres.segment_archive_command is empty.
 */
CREATE FUNCTION kafgres_archive_status()
RETURNS TABLE (topic text, partition int, archived_offset bigint, last_archived_segment text,
               last_archived_at timestamptz, failed_count bigint, last_failure text,
               last_failed_at timestamptz, backlog_segments int, backlog_bytes bigint,
               updated_at timestamptz)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.name, s.partition, s.archived_offset, s.last_archived_segment, s.last_archived_at,
           s.failed_count, s.last_failure, s.last_failed_at, s.backlog_segments, s.backlog_bytes,
           s.updated_at
      FROM kafgres.archive_status AS s
      JOIN kafgres.topic AS t ON t.topic_id OPERATOR(pg_catalog.=) s.topic_id
     ORDER BY t.name, s.partition
$$;
COMMENT ON FUNCTION kafgres_archive_status() IS 'segment archiving per partition: last archived segment, failures, backlog';
REVOKE ALL ON FUNCTION kafgres_archive_status() FROM PUBLIC;
