/* kafgres 0.7.0 -> 0.8.0: the table storage engine (issue #15), the source guard */

\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.8.0'" to load this file. \quit

/*
 * kafgres.log_batch: the record batches of the partitions the table engine
 * stores (broker/storage/table; docs/architecture.md, "Table engine"), byte
 * for byte as a segment file holds them, one row a batch, so that the WAL,
 * base backups and streaming replicas carry the log.
 *
 * Three levels: per topic kafgres.log_batch_<topic_id> (by partition), per
 * partition kafgres.log_batch_<topic_id>_<partition> (by segment_base), and
 * the leaves kafgres.log_batch_<topic_id>_<partition>_<segment_base>, the
 * engine's segments: each holds the offsets from its segment_base up to the
 * next leaf's. LIST on the range's start, not RANGE, because the active
 * leaf's end is not known until it rolls and a range bound cannot change
 * in place. Retention drops whole leaves; no row is ever deleted.
 *
 * The header columns copy the batch's header, so that the engine's scans
 * (producer state, timestamps, sizes) never read batch. The key ends in
 * last_offset: every lookup asks for the first batch whose last offset
 * reaches an offset, and batches do not overlap. STORAGE EXTERNAL: the
 * batches are compressed by their producers already, and an uncompressed
 * TOAST value's length is known without reading it.
 */
CREATE TABLE kafgres.log_batch (
    topic_id               bigint   NOT NULL,
    partition              int      NOT NULL,
    segment_base           bigint   NOT NULL,
    base_offset            bigint   NOT NULL,
    last_offset            bigint   NOT NULL,
    max_timestamp          bigint   NOT NULL,
    producer_id            bigint   NOT NULL,
    producer_epoch         smallint NOT NULL,
    base_sequence          int      NOT NULL,
    attributes             smallint NOT NULL,
    leader_epoch           int      NOT NULL,
    source_lsn             pg_lsn,
    txn_first_offset       bigint,
    txn_last_stable_offset bigint,
    batch                  bytea    NOT NULL,
    PRIMARY KEY (topic_id, partition, segment_base, last_offset)
) PARTITION BY LIST (topic_id);
ALTER TABLE kafgres.log_batch ALTER COLUMN batch SET STORAGE EXTERNAL;
/*
 * The transaction index: the ABORT markers of transactions with data in
 * the partition, which read_committed fetches look up (AbortedTxns). Each
 * leaf gets its own when it is attached.
 */
CREATE INDEX log_batch_aborted ON kafgres.log_batch (topic_id, partition, last_offset)
    WHERE txn_first_offset IS NOT NULL;
COMMENT ON TABLE kafgres.log_batch IS 'record batches of the topics the table engine stores, one row a batch';
REVOKE ALL ON kafgres.log_batch FROM PUBLIC;

/*
 * kafgres.log_state: what the table engine keeps per partition beside its
 * batches (the segment engine keeps it in small files): the log start
 * offset, moved by DeleteRecords and retention before any leaf is dropped;
 * the largest source position (SQL producer LSN) of the batches dropped so
 * far, so that the exactly-once position outlives them; the leader epoch
 * entries (Kafka's leader-epoch-checkpoint; NULL: never written).
 */
CREATE TABLE kafgres.log_state (
    topic_id            bigint   NOT NULL,
    partition           int      NOT NULL,
    log_start_offset    bigint   NOT NULL DEFAULT 0,
    source_applied      pg_lsn,
    leader_epochs       int[],
    leader_epoch_starts bigint[],
    PRIMARY KEY (topic_id, partition),
    FOREIGN KEY (topic_id, partition) REFERENCES kafgres.partition ON DELETE CASCADE
);
COMMENT ON TABLE kafgres.log_state IS 'the table engine''s state per partition: log start offset, source position, leader epochs';
REVOKE ALL ON kafgres.log_state FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('kafgres.log_state', '');

/*
 * kafgres.log_producer_snapshot: the producer state snapshots of the table
 * engine's partitions (Kafka's .snapshot file bytes), committed with the
 * batches they describe; those below the log start are deleted with it.
 */
CREATE TABLE kafgres.log_producer_snapshot (
    topic_id        bigint NOT NULL,
    partition       int    NOT NULL,
    snapshot_offset bigint NOT NULL,
    snapshot        bytea  NOT NULL,
    PRIMARY KEY (topic_id, partition, snapshot_offset),
    FOREIGN KEY (topic_id, partition) REFERENCES kafgres.partition ON DELETE CASCADE
);
COMMENT ON TABLE kafgres.log_producer_snapshot IS 'producer state snapshots of the table engine''s partitions';
REVOKE ALL ON kafgres.log_producer_snapshot FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('kafgres.log_producer_snapshot', '');

/*
 * kafgres.log_prepare_partition(topic_id, partition): creates the
 * partition's table under kafgres.log_batch (and its topic's) and its
 * kafgres.log_state row, unless they exist. The broker calls it when it
 * opens a partition of the table engine. SECURITY DEFINER so that the
 * tables belong to the extension's owner whatever role the broker is; a
 * broker that is not a superuser (kafgres.role) is granted what it does
 * on them: reading and appending through the partition's table (its rows
 * reach the leaves by routing, which checks no privilege on them).
 */
CREATE FUNCTION kafgres.log_prepare_partition(p_topic_id bigint, p_partition int)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE format('CREATE TABLE IF NOT EXISTS kafgres.%I PARTITION OF kafgres.log_batch'
                   ' FOR VALUES IN (%s) PARTITION BY LIST (partition)',
                   'log_batch_' || p_topic_id, p_topic_id);
    EXECUTE format('CREATE TABLE IF NOT EXISTS kafgres.%I PARTITION OF kafgres.%I'
                   ' FOR VALUES IN (%s) PARTITION BY LIST (segment_base)',
                   'log_batch_' || p_topic_id || '_' || p_partition, 'log_batch_' || p_topic_id, p_partition);
    INSERT INTO kafgres.log_state (topic_id, partition) VALUES (p_topic_id, p_partition)
        ON CONFLICT DO NOTHING;
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) THEN
        EXECUTE format('GRANT SELECT, INSERT ON kafgres.%I TO %I',
                       'log_batch_' || p_topic_id || '_' || p_partition, session_user);
    END IF;
END
$$;
COMMENT ON FUNCTION kafgres.log_prepare_partition(bigint, int) IS 'creates a partition''s table of the table engine';
REVOKE ALL ON FUNCTION kafgres.log_prepare_partition(bigint, int) FROM PUBLIC;

/*
 * kafgres.log_add_segment(topic_id, partition, segment_base): creates the
 * leaf whose offsets start at segment_base and attaches it. Created apart
 * and attached, because CREATE TABLE ... PARTITION OF would take ACCESS
 * EXCLUSIVE on the partition's table and stall its readers, where ATTACH
 * takes SHARE UPDATE EXCLUSIVE. Insert-only, so no vacuum is triggered by
 * inserts (anti-wraparound vacuum still runs).
 */
CREATE FUNCTION kafgres.log_add_segment(p_topic_id bigint, p_partition int, p_segment_base bigint)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    parent text := 'log_batch_' || p_topic_id || '_' || p_partition;
    leaf text := parent || '_' || p_segment_base;
BEGIN
    EXECUTE format('CREATE TABLE kafgres.%I (LIKE kafgres.log_batch INCLUDING DEFAULTS INCLUDING STORAGE)'
                   ' WITH (autovacuum_vacuum_insert_threshold = -1, toast.autovacuum_vacuum_insert_threshold = -1)',
                   leaf);
    EXECUTE format('ALTER TABLE kafgres.%I ATTACH PARTITION kafgres.%I FOR VALUES IN (%s)',
                   parent, leaf, p_segment_base);
END
$$;
COMMENT ON FUNCTION kafgres.log_add_segment(bigint, int, bigint) IS 'adds a segment (a leaf table) to a partition of the table engine';
REVOKE ALL ON FUNCTION kafgres.log_add_segment(bigint, int, bigint) FROM PUBLIC;

/*
 * kafgres.log_drop_segment(topic_id, partition, segment_base): drops a
 * leaf, once the broker has committed a log start offset at or past its
 * end (retention, DeleteRecords). Dropping a partition takes ACCESS
 * EXCLUSIVE on the partition's table for an instant; DETACH PARTITION
 * CONCURRENTLY would not, but it cannot run inside a function.
 */
CREATE FUNCTION kafgres.log_drop_segment(p_topic_id bigint, p_partition int, p_segment_base bigint)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS kafgres.%I',
                   'log_batch_' || p_topic_id || '_' || p_partition || '_' || p_segment_base);
END
$$;
COMMENT ON FUNCTION kafgres.log_drop_segment(bigint, int, bigint) IS 'drops a segment (a leaf table) of a partition of the table engine';
REVOKE ALL ON FUNCTION kafgres.log_drop_segment(bigint, int, bigint) FROM PUBLIC;

/*
 * kafgres.source_guard: the broker's refusal to append SQL-produced and CDC
 * records because its log holds source positions (commit LSNs) beyond this
 * server's WAL insert position: the database is older than the log or
 * belongs to another cluster (pg_dump/pg_restore, point-in-time recovery,
 * a new cluster on an old data directory), and new transactions ending at
 * or below those positions would be skipped as already appended
 * (broker/source_guard.go, docs/operations.md "A log ahead of the WAL").
 * One row while the broker refuses, written by it; rebase_to is the
 * operator's confirmation (kafgres_rebase_source_positions). The Kafka
 * side keeps serving. Not dumped: positions mean nothing in another
 * cluster.
 */
CREATE TABLE kafgres.source_guard (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    wal_lsn    pg_lsn      NOT NULL,
    log_lsn    pg_lsn      NOT NULL,
    partitions text        NOT NULL,
    since      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    rebase_to  pg_lsn
);
COMMENT ON TABLE kafgres.source_guard IS 'the broker''s refusal of a log whose source positions are ahead of the WAL';
REVOKE ALL ON kafgres.source_guard FROM PUBLIC;

/*
 * kafgres_rebase_source_positions(log_lsn, keep_upto): the way out of the
 * refusal above, once the operator has made sure the log's positions
 * belong to another history of the database. log_lsn must repeat the
 * refusal's log_lsn, as a confirmation of what is forgotten. The broker
 * then commits the SQL source's Kafka transaction if one was left open and
 * makes every partition forget its source positions above keep_upto (the
 * records stay), and appends again. keep_upto: 0/0 (the default) after a
 * dump and restore or on a new cluster, where no position of the log means
 * anything; after a point-in-time recovery, the recovery target's LSN
 * (positions up to it are the same history), or 0/0 to err towards
 * appending a record twice rather than losing it.
 */
CREATE FUNCTION kafgres_rebase_source_positions(log_lsn pg_lsn, keep_upto pg_lsn DEFAULT '0/0')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g kafgres.source_guard;
BEGIN
    SELECT * INTO g FROM kafgres.source_guard FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the broker is not refusing a log ahead of the WAL: there are no source positions to rebase';
    END IF;
    IF log_lsn IS DISTINCT FROM g.log_lsn THEN
        RAISE EXCEPTION 'log_lsn % does not match the refusal''s log_lsn %', log_lsn, g.log_lsn
              USING HINT = 'SELECT * FROM kafgres.source_guard shows what the broker refuses.';
    END IF;
    IF keep_upto IS NULL OR keep_upto > g.wal_lsn THEN
        RAISE EXCEPTION 'keep_upto % must be at most the WAL position % the log was found ahead of', keep_upto, g.wal_lsn;
    END IF;
    UPDATE kafgres.source_guard SET rebase_to = keep_upto;
END
$$;
COMMENT ON FUNCTION kafgres_rebase_source_positions(pg_lsn, pg_lsn) IS 'confirm that the broker may forget the log''s source positions ahead of the WAL';
REVOKE ALL ON FUNCTION kafgres_rebase_source_positions(pg_lsn, pg_lsn) FROM PUBLIC;

/*
 * kafgres.pipeline gains sql_source_refused: NULL while SQL-produced and
 * CDC records flow, else why the broker does not append them.
 */
CREATE OR REPLACE VIEW kafgres.pipeline AS
    SELECT d.applied_lsn,
           pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), d.applied_lsn)::bigint AS lag_bytes,
           (SELECT pg_catalog.count(*) FROM kafgres.dead_letter AS l
             WHERE l.mapping_id IS NULL)                                              AS dead_lettered,
           (SELECT pg_catalog.max(l.created_at) FROM kafgres.dead_letter AS l
             WHERE l.mapping_id IS NULL)                                              AS last_dead_letter_at,
           public.kafgres_rejected_messages()                                         AS rejected_messages,
           (SELECT pg_catalog.format('log ahead of the WAL since %s: WAL at %s, log at %s (%s); '
                                     'see docs/operations.md "A log ahead of the WAL"',
                                     g.since, g.wal_lsn, g.log_lsn, g.partitions)
              FROM kafgres.source_guard AS g)                                         AS sql_source_refused
      FROM kafgres.delivery AS d;

/*
 * kafgres.topic.storage_engine: which engine keeps the topic's batches,
 * fixed when the topic is created (its batches do not migrate). Existing
 * topics are segment topics; new ones take kafgres.storage_engine, the
 * cluster-wide default, as it is when the row is inserted — by
 * kafgres_create_topic, CreateTopics or auto-creation alike.
 */
ALTER TABLE kafgres.topic ADD COLUMN storage_engine text NOT NULL DEFAULT 'segment'
    CONSTRAINT topic_storage_engine_check CHECK (storage_engine IN ('segment', 'table'));
ALTER TABLE kafgres.topic ALTER COLUMN storage_engine
    SET DEFAULT COALESCE(NULLIF(pg_catalog.current_setting('kafgres.storage_engine', true), ''), 'segment');
COMMENT ON COLUMN kafgres.topic.storage_engine IS 'segment or table: the storage engine of the topic''s log, fixed at creation';

/*
 * A dropped topic's log tables go in the transaction that drops it: atomic
 * with the catalog, nothing left to remove later (the segment engine's
 * directories are removed by the broker once it sees the drop).
 */
CREATE OR REPLACE FUNCTION kafgres.record_dropped_topic() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO kafgres.dropped_topic (topic_id, topic_uuid, name)
    VALUES (OLD.topic_id, OLD.topic_uuid, OLD.name)
    ON CONFLICT (topic_id) DO NOTHING;
    IF pg_catalog.to_regclass(format('kafgres.%I', 'log_batch_' || OLD.topic_id)) IS NOT NULL THEN
        EXECUTE format('DROP TABLE kafgres.%I', 'log_batch_' || OLD.topic_id);
    END IF;
    RETURN NULL;
END
$$;

/*
 * A topic's engine never changes (its batches do not migrate), and the
 * internal topics (__consumer_offsets, __transaction_state) are segment
 * topics whatever kafgres.storage_engine says: they are compacted, and the
 * table engine does not compact yet.
 */
CREATE FUNCTION kafgres.topic_storage_engine() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW.storage_engine IS DISTINCT FROM OLD.storage_engine THEN
            RAISE EXCEPTION 'the storage engine of topic "%" cannot change', OLD.name
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'A topic''s batches do not move between engines: create a topic with the other engine and copy them.';
        END IF;
    ELSIF kafgres.topic_is_internal(NEW.name) THEN
        NEW.storage_engine := 'segment';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER topic_storage_engine
    BEFORE INSERT OR UPDATE OF storage_engine ON kafgres.topic
    FOR EACH ROW EXECUTE FUNCTION kafgres.topic_storage_engine();
REVOKE ALL ON FUNCTION kafgres.topic_storage_engine() FROM PUBLIC;

/*
 * kafgres.log_session_origin(): marks the calling session's changes with a
 * replication origin of its own, kafgres_log_<n> (created on first use;
 * PostgreSQL lets one session at a time use an origin), and returns its
 * name, or NULL when none is free (max_replication_slots bounds the
 * origins in use). The table engine's connections call it when they
 * connect, so that the output plugin can drop the log writer's changes
 * before decoding them (filter_by_origin_cb): the log rows are never
 * mapped, and decoding them would cost the walsender as much as the
 * produce. SECURITY DEFINER: the origin functions are for superusers.
 */
CREATE FUNCTION kafgres.log_session_origin()
RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    origin text;
BEGIN
    FOR n IN 0 .. 63 LOOP
        origin := 'kafgres_log_' || n;
        BEGIN
            IF pg_replication_origin_oid(origin) IS NULL THEN
                PERFORM pg_replication_origin_create(origin);
            END IF;
            PERFORM pg_replication_origin_session_setup(origin);
            RETURN origin;
        EXCEPTION
            WHEN object_in_use OR unique_violation THEN
                NULL;   -- another connection has it: try the next
            WHEN configuration_limit_exceeded THEN
                RETURN NULL;
        END;
    END LOOP;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION kafgres.log_session_origin() IS 'gives the table engine''s connection a replication origin, so that its log rows are not decoded';
REVOKE ALL ON FUNCTION kafgres.log_session_origin() FROM PUBLIC;
