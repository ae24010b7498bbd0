/* sql/kafgres--0.2.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION kafgres" to load this file. \quit

/*
 * Metadata of the kafgres broker.  The tables are the source of truth for
 * which topics exist; the broker keeps the records themselves in its segment
 * log and mirrors each partition's log start and end offsets back here.
 * See docs/architecture.md ("Metadata in Postgres") and docs/sql.md.
 */
CREATE SCHEMA kafgres;
COMMENT ON SCHEMA kafgres IS 'kafgres broker metadata';

-- ids are never reused, so a dropped topic's leftovers can never be taken
-- for a new topic's
CREATE SEQUENCE kafgres.topic_id_seq;
CREATE SEQUENCE kafgres.producer_id_seq;

CREATE TABLE kafgres.topic (
    topic_id    bigint      PRIMARY KEY DEFAULT nextval('kafgres.topic_id_seq'),
    name        text        NOT NULL CONSTRAINT topic_name_key UNIQUE,
    topic_uuid  uuid        NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    partitions  int         NOT NULL CHECK (partitions > 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);
ALTER SEQUENCE kafgres.topic_id_seq OWNED BY kafgres.topic.topic_id;
COMMENT ON TABLE kafgres.topic IS 'kafgres topics; topic_uuid is the Kafka topic id';

CREATE TABLE kafgres.partition (
    topic_id         bigint NOT NULL REFERENCES kafgres.topic ON DELETE CASCADE,
    partition        int    NOT NULL CHECK (partition >= 0),
    log_start_offset bigint NOT NULL DEFAULT 0,
    high_watermark   bigint NOT NULL DEFAULT 0,
    leader_epoch     int    NOT NULL DEFAULT 0,
    PRIMARY KEY (topic_id, partition)
);
COMMENT ON TABLE kafgres.partition IS 'kafgres partitions; offsets are mirrored from the broker''s log';

CREATE TABLE kafgres.topic_config (
    topic_id bigint NOT NULL REFERENCES kafgres.topic ON DELETE CASCADE,
    name     text   NOT NULL,
    value    text,
    PRIMARY KEY (topic_id, name)
);
COMMENT ON TABLE kafgres.topic_config IS 'per-topic configuration overrides';

/*
 * The broker LISTENs on kafgres_topics and reloads its topic cache, so that
 * topics created or dropped with plain SQL are served (or gone) at once.
 * Statement-level: one notification per statement is enough, and identical
 * notifications in one transaction are folded into one anyway.
 */
CREATE FUNCTION kafgres.notify_topics() RETURNS trigger
LANGUAGE plpgsql AS
$$
BEGIN
    PERFORM pg_catalog.pg_notify('kafgres_topics', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER topic_notify
    AFTER INSERT OR UPDATE OR DELETE ON kafgres.topic
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.notify_topics();
CREATE TRIGGER partition_notify
    AFTER INSERT ON kafgres.partition
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.notify_topics();
CREATE TRIGGER topic_config_notify
    AFTER INSERT OR UPDATE OR DELETE ON kafgres.topic_config
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.notify_topics();

/*
 * kafgres.topics adds each topic's log end offset (the sum of its
 * partitions' high watermarks).  It is a scalar subquery rather than a join
 * with GROUP BY so that the view stays automatically updatable.
 */
CREATE VIEW kafgres.topics AS
    SELECT t.topic_id, t.name, t.topic_uuid, t.partitions, t.created_at,
           (SELECT coalesce(sum(p.high_watermark), 0)::bigint
              FROM kafgres.partition p
             WHERE p.topic_id = t.topic_id) AS log_end_offset
      FROM kafgres.topic t;
COMMENT ON VIEW kafgres.topics IS 'kafgres topics with their total log end offset';

/*
 * kafgres_create_topic(name, partitions): create a topic with its partitions
 * and return its id.  Names follow Kafka's rules so that every topic created
 * here is also a topic a Kafka client can name.
 */
CREATE FUNCTION kafgres_create_topic(name text, partitions int DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_name       text := kafgres_create_topic.name;
    v_partitions int  := kafgres_create_topic.partitions;
    v_setting    text;
    v_topic_id   bigint;
BEGIN
    IF v_name IS NULL THEN
        RAISE EXCEPTION 'topic name must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_name = '' THEN
        RAISE EXCEPTION 'invalid topic name: the name is empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass a non-empty name as argument "name".';
    END IF;
    IF v_name IN ('.', '..') THEN
        RAISE EXCEPTION 'invalid topic name "%": "." and ".." are not allowed', v_name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.length(v_name) > 249 THEN
        RAISE EXCEPTION 'invalid topic name "%": the name is % characters long',
                        pg_catalog.left(v_name, 40) || '...', pg_catalog.length(v_name)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Topic names can be at most 249 characters long.';
    END IF;
    IF v_name !~ '^[a-zA-Z0-9._-]+$' THEN
        RAISE EXCEPTION 'invalid topic name "%"', v_name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Topic names may contain only ASCII letters, digits, ".", "_" and "-".';
    END IF;

    -- NULL: the server's kafgres.default_partitions, which does not exist
    -- when the library is not loaded, hence the fallback
    IF v_partitions IS NULL THEN
        v_setting := pg_catalog.current_setting('kafgres.default_partitions', true);
        v_partitions := coalesce(nullif(v_setting, '')::int, 1);
    END IF;
    IF v_partitions < 1 OR v_partitions > 10000 THEN
        RAISE EXCEPTION 'invalid number of partitions: %', v_partitions
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument "partitions" must be between 1 and 10000.';
    END IF;

    -- ON CONFLICT rather than a prior lookup: a concurrent creation of the
    -- same name waits for the other transaction and then reports it
    INSERT INTO kafgres.topic AS t (name, partitions)
    VALUES (v_name, v_partitions)
    ON CONFLICT ON CONSTRAINT topic_name_key DO NOTHING
    RETURNING t.topic_id INTO v_topic_id;

    IF v_topic_id IS NULL THEN
        RAISE EXCEPTION 'topic "%" already exists', v_name
            USING ERRCODE = 'duplicate_object';
    END IF;

    INSERT INTO kafgres.partition (topic_id, partition)
    SELECT v_topic_id, p
      FROM pg_catalog.generate_series(0, v_partitions - 1) AS p;

    RETURN v_topic_id;
END
$$;
COMMENT ON FUNCTION kafgres_create_topic(text, int) IS 'create a kafgres topic, returns its topic_id';

/*
 * kafgres_drop_topic(name): drop a topic; its partitions and configs go with
 * it, and the broker deletes its log when notified.
 */
CREATE FUNCTION kafgres_drop_topic(name text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM kafgres.topic AS t WHERE t.name = kafgres_drop_topic.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'topic "%" does not exist', kafgres_drop_topic.name
            USING ERRCODE = 'undefined_object';
    END IF;
END
$$;
COMMENT ON FUNCTION kafgres_drop_topic(text) IS 'drop a kafgres topic';

/*
 * kafgres_create_partitions(topic, partitions): grow a topic to a total of
 * "partitions" partitions, as kafka-topics.sh --alter --partitions does.
 * Kafka never shrinks a topic (keys would move between partitions), so
 * neither does this.
 */
CREATE FUNCTION kafgres_create_partitions(topic text, partitions int)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_topic_id bigint;
    v_current  int;
BEGIN
    IF partitions IS NULL THEN
        RAISE EXCEPTION 'argument "partitions" of kafgres_create_partitions must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- FOR UPDATE: two concurrent calls must not both insert partition N
    SELECT t.topic_id, t.partitions INTO v_topic_id, v_current
      FROM kafgres.topic AS t
     WHERE t.name = kafgres_create_partitions.topic
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'topic "%" does not exist', kafgres_create_partitions.topic
            USING ERRCODE = 'undefined_object';
    END IF;
    IF partitions < v_current THEN
        RAISE EXCEPTION 'topic "%" has % partitions, which is more than the requested count %',
                        kafgres_create_partitions.topic, v_current, partitions
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'The number of partitions of a topic can only be increased.';
    END IF;
    IF partitions = v_current THEN
        RAISE EXCEPTION 'topic "%" already has % partitions', kafgres_create_partitions.topic, v_current
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF partitions > 10000 THEN
        RAISE EXCEPTION 'invalid number of partitions: %', partitions
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument "partitions" must be between 1 and 10000.';
    END IF;

    UPDATE kafgres.topic AS t SET partitions = kafgres_create_partitions.partitions
     WHERE t.topic_id = v_topic_id;
    INSERT INTO kafgres.partition (topic_id, partition)
    SELECT v_topic_id, p
      FROM pg_catalog.generate_series(v_current, partitions - 1) AS p;
END
$$;
COMMENT ON FUNCTION kafgres_create_partitions(text, int) IS 'grow a kafgres topic to the given number of partitions';

/*
 * kafgres.broker_config: dynamic broker configuration set through Kafka's
 * AlterConfigs / IncrementalAlterConfigs (kafka-configs.sh --entity-type
 * brokers).  node_id NULL is the cluster-wide default (--entity-default),
 * otherwise the node the value is for (always 1: kafgres is one broker).
 * The broker validates names and values before writing; see
 * docs/configuration.md.
 */
CREATE TABLE kafgres.broker_config (
    node_id int,
    name    text NOT NULL,
    value   text NOT NULL,
    UNIQUE NULLS NOT DISTINCT (node_id, name)
);
COMMENT ON TABLE kafgres.broker_config IS 'dynamic broker configuration (node_id NULL: cluster default)';
CREATE TRIGGER broker_config_notify
    AFTER INSERT OR UPDATE OR DELETE ON kafgres.broker_config
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.notify_topics();

/*
 * kafgres.client_quota: client quotas set through AlterClientQuotas
 * (kafka-configs.sh --entity-type users/clients/ips).  entity maps each
 * entity type ("user", "client-id", "ip") to a name, or to null for that
 * type's default, as the protocol does.
 */
CREATE TABLE kafgres.client_quota (
    entity jsonb  NOT NULL CHECK (pg_catalog.jsonb_typeof(entity) = 'object'),
    key    text   NOT NULL,
    value  double precision NOT NULL,
    PRIMARY KEY (entity, key)
);
COMMENT ON TABLE kafgres.client_quota IS 'client quotas by entity';

/*
 * kafgres.feature: finalized feature levels (UpdateFeatures,
 * kafka-features.sh).  A feature without a row is at the level the broker
 * finalizes by default.
 */
CREATE TABLE kafgres.feature (
    name  text     PRIMARY KEY,
    level smallint NOT NULL CHECK (level >= 0)
);
COMMENT ON TABLE kafgres.feature IS 'finalized feature levels set with UpdateFeatures';

/*
 * kafgres_partition_offsets(topic): the offsets of each partition of a
 * topic, as last mirrored by the broker.
 */
CREATE FUNCTION kafgres_partition_offsets(topic text)
RETURNS TABLE (partition int, log_start_offset bigint, high_watermark bigint, leader_epoch int)
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_topic_id bigint;
BEGIN
    SELECT t.topic_id INTO v_topic_id
      FROM kafgres.topic AS t
     WHERE t.name = kafgres_partition_offsets.topic;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'topic "%" does not exist', kafgres_partition_offsets.topic
            USING ERRCODE = 'undefined_object';
    END IF;

    RETURN QUERY
        SELECT p.partition, p.log_start_offset, p.high_watermark, p.leader_epoch
          FROM kafgres.partition AS p
         WHERE p.topic_id = v_topic_id
         ORDER BY p.partition;
END
$$;
COMMENT ON FUNCTION kafgres_partition_offsets(text) IS 'log start, high watermark and leader epoch of each partition of a topic';

/*
 * kafgres.mapping: which tables' changes become records (CDC).  The output
 * plugin "kafgres" reads it during logical decoding, under the historic
 * snapshot, to decide whether a change is sent at all; that is only allowed
 * for catalog tables, hence user_catalog_table.  Rows are managed by the
 * mapping functions; the render expressions are evaluated by the broker.
 */
CREATE TABLE kafgres.mapping (
    mapping_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    source_relid oid  NOT NULL,
    topic        text NOT NULL,
    value_expr   text,
    key_expr     text,
    filter_expr  text,
    on_error     text NOT NULL DEFAULT 'dead_letter' CHECK (on_error IN ('dead_letter', 'stall')),
    owner_role   oid  NOT NULL,
    search_path  text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
) WITH (user_catalog_table = true);
-- the output plugin looks tables up by source_relid, once per table and
-- transaction
CREATE INDEX mapping_source_relid_idx ON kafgres.mapping (source_relid);
COMMENT ON TABLE kafgres.mapping IS 'tables whose committed changes the broker turns into records';

/*
 * kafgres.delivery: how far the broker has got.  applied_lsn is the WAL
 * position up to which every committed SQL-produced or CDC record is
 * durably in the broker's log.  One row, updated only by the broker.
 * Not dumped: a WAL position means nothing in another cluster.
 */
CREATE TABLE kafgres.delivery (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    applied_lsn pg_lsn  NOT NULL DEFAULT '0/0'
);
INSERT INTO kafgres.delivery DEFAULT VALUES;
COMMENT ON TABLE kafgres.delivery IS 'WAL position up to which committed records are in the broker''s log';

/*
 * kafgres_produce(topic, key, value, ...): produce a record from SQL.  It
 * is written to the WAL as a transactional logical message, so it reaches
 * the topic if and only if the calling transaction commits.  Returns the
 * message's LSN.  See docs/producing.md and docs/sql.md.
 *
 * Untyped literals pick the text form: kafgres_produce('t', 'k', 'v').
 */
CREATE FUNCTION kafgres_produce(topic text, key text, value text,
                                headers jsonb DEFAULT NULL, partition int DEFAULT NULL)
RETURNS pg_lsn
AS 'MODULE_PATHNAME', 'kafgres_produce_text'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION kafgres_produce(text, text, text, jsonb, int) IS 'produce a record with text key and value when the transaction commits';

CREATE FUNCTION kafgres_produce(topic text, key bytea, value bytea,
                                headers jsonb DEFAULT NULL, partition int DEFAULT NULL)
RETURNS pg_lsn
AS 'MODULE_PATHNAME', 'kafgres_produce_bytea'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION kafgres_produce(text, bytea, bytea, jsonb, int) IS 'produce a record with binary key and value when the transaction commits';

CREATE FUNCTION kafgres_produce(topic text, key bytea, value bytea,
                                header_keys text[], header_values bytea[],
                                partition int DEFAULT NULL)
RETURNS pg_lsn
AS 'MODULE_PATHNAME', 'kafgres_produce_arrays'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION kafgres_produce(text, bytea, bytea, text[], bytea[], int) IS 'produce a record with binary headers when the transaction commits';

/*
 * kafgres_wait_delivered(lsn, timeout): wait until the broker has every
 * record committed before this call durably in its log.  True when it has,
 * false on timeout.  Call it after the producing transaction committed, in
 * a new transaction.
 *
 * Why the target is greatest(lsn, insert position) rather than lsn: lsn is
 * where the message is, but a record is delivered only once its
 * transaction's commit record has been decoded, and that lies beyond lsn.
 * Any transaction that committed before this call has its commit record
 * below the WAL insert position taken now.  The broker advances
 * applied_lsn past a commit only after appending that transaction's
 * records, and past WAL without kafgres content from the walsender's
 * keepalives once it has caught up; so applied_lsn >= that position means
 * everything committed before the call is in the log.  greatest() keeps
 * a caller-supplied position beyond it meaningful.
 */
CREATE FUNCTION kafgres_wait_delivered(lsn pg_lsn, timeout interval DEFAULT '10 seconds')
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_target   pg_lsn;
    v_deadline timestamptz;
    v_applied  pg_lsn;
BEGIN
    IF lsn IS NULL THEN
        RAISE EXCEPTION 'argument "lsn" of kafgres_wait_delivered must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;

    -- a transaction that has written something may hold records of its
    -- own: they cannot be delivered before it commits, so waiting here
    -- would only run into the timeout (or, worse, succeed without them)
    IF pg_catalog.txid_current_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'kafgres_wait_delivered cannot be called in a transaction that has written data'
            USING ERRCODE = 'active_sql_transaction',
                  DETAIL = 'Records produced by this transaction are delivered only after it commits.',
                  HINT = 'Commit first, then call kafgres_wait_delivered in a new transaction.';
    END IF;

    -- each poll below needs a new snapshot to see the broker's updates
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'kafgres_wait_delivered cannot be called in a % transaction',
                        pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))
            USING ERRCODE = 'active_sql_transaction',
                  DETAIL = 'Its snapshot would never show the broker''s progress.',
                  HINT = 'Call it outside a transaction block, or in a READ COMMITTED transaction.';
    END IF;

    v_target := greatest(lsn, pg_catalog.pg_current_wal_insert_lsn());
    v_deadline := pg_catalog.clock_timestamp() + coalesce(timeout, interval '0');

    LOOP
        SELECT d.applied_lsn INTO v_applied FROM kafgres.delivery AS d;
        IF v_applied >= v_target THEN
            RETURN true;
        END IF;
        IF pg_catalog.clock_timestamp() >= v_deadline THEN
            RETURN false;
        END IF;
        PERFORM pg_catalog.pg_sleep(0.005);
    END LOOP;
END
$$;
COMMENT ON FUNCTION kafgres_wait_delivered(pg_lsn, interval) IS 'wait until records committed before the call are in the broker''s log';

/*
 * Privileges: nothing for PUBLIC.  Topics are created and dropped by the
 * superuser (or whoever it grants to, see docs/sql.md), and the broker's
 * role owns or is granted the rest.
 */
REVOKE ALL ON SCHEMA kafgres FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA kafgres FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA kafgres FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres.notify_topics() FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_create_topic(text, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_drop_topic(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_create_partitions(text, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_partition_offsets(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_produce(text, text, text, jsonb, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_produce(text, bytea, bytea, jsonb, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_produce(text, bytea, bytea, text[], bytea[], int) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_wait_delivered(pg_lsn, interval) FROM PUBLIC;

-- keep the metadata (and the sequences' positions) in pg_dump output
SELECT pg_catalog.pg_extension_config_dump('kafgres.topic', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.partition', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.topic_config', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.broker_config', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.client_quota', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.feature', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.mapping', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.mapping_mapping_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.topic_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.producer_id_seq', '');

/* ========================================================================
 * CDC mappings
 *
 * kafgres_add_mapping() and friends: the user-facing side of kafgres.mapping
 * (defined above).  The broker's mappings/ package renders each mapping's
 * expressions per change; see docs/producing.md ("CDC mappings") and
 * docs/sql.md.  Everything in this section is SECURITY INVOKER except the
 * two small helpers marked otherwise, so that a mapping author's own
 * privileges decide what a mapping may read.
 * ======================================================================== */

/*
 * kafgres_validate_expression(expr, argname): raise an error naming argname
 * unless expr is exactly one SQL expression (outputplugin/validate.c).  The
 * broker checks the same rules with pg_query before splicing an expression.
 * Pure (it reads no catalog), so it is left executable by everyone.
 */
CREATE FUNCTION kafgres_validate_expression(expr text, argname text DEFAULT 'expression')
RETURNS void
AS 'MODULE_PATHNAME', 'kafgres_validate_expression'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION kafgres_validate_expression(text, text) IS 'raise an error unless the text is exactly one SQL expression';

/* what the broker knows about each mapping; written by the broker only */
CREATE TABLE kafgres.mapping_status (
    mapping_id    bigint PRIMARY KEY REFERENCES kafgres.mapping ON DELETE CASCADE,
    status        text   NOT NULL DEFAULT 'pending',
    last_error    text,
    rendered      bigint NOT NULL DEFAULT 0,
    dead_lettered bigint NOT NULL DEFAULT 0,
    updated_at    timestamptz
);
COMMENT ON TABLE kafgres.mapping_status IS 'per mapping: pending, active, stalled or error, with counters; written by the broker';

/*
 * Changes a mapping could not render (on_error = 'dead_letter').  One row
 * per change and mapping: the unique key lets the broker insert again after
 * a crash or retry without duplicating.  Kept when the mapping is removed.
 */
CREATE TABLE kafgres.dead_letter (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    mapping_id   bigint,
    mapping_name text,
    lsn          pg_lsn,
    xid          bigint,
    op           text,
    error        text,
    new_row      jsonb,
    old_row      jsonb,
    created_at   timestamptz DEFAULT now(),
    UNIQUE (mapping_id, lsn)
);
COMMENT ON TABLE kafgres.dead_letter IS 'changes a CDC mapping failed to render';

/*
 * Snapshots started by kafgres_snapshot_mapping(), by transaction.  The
 * broker renders a snapshot row message (format 2) only if its transaction
 * has a row here, so that pg_logical_emit_message(), which anyone may call,
 * cannot be used to forge rows into a mapping's topic.
 */
CREATE TABLE kafgres.mapping_snapshot (
    mapping_id bigint NOT NULL REFERENCES kafgres.mapping ON DELETE CASCADE,
    xid        xid8   NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (mapping_id, xid)
);
COMMENT ON TABLE kafgres.mapping_snapshot IS 'transactions that emitted snapshot rows of a mapping';
-- a role may mark only its own transaction, and only for mappings it owns
ALTER TABLE kafgres.mapping_snapshot ENABLE ROW LEVEL SECURITY;
CREATE POLICY mapping_snapshot_owner ON kafgres.mapping_snapshot FOR INSERT
    WITH CHECK (xid = pg_catalog.pg_current_xact_id()
                AND EXISTS (SELECT 1 FROM kafgres.mapping AS m
                             WHERE m.mapping_id = mapping_snapshot.mapping_id
                               AND pg_catalog.pg_has_role(m.owner_role, 'MEMBER')));

/*
 * The broker creates one render function per mapping in kafgres_render,
 * owned by the mapping's owner (see mappings/render.go).  Nobody but the
 * broker uses the schema, and in particular owners get no USAGE on it: an
 * owner who could name its function could ALTER it to SECURITY INVOKER and
 * have the broker's superuser session run its expressions.
 */
CREATE SCHEMA kafgres_render;
COMMENT ON SCHEMA kafgres_render IS 'render functions of CDC mappings, created by the broker';
REVOKE ALL ON SCHEMA kafgres_render FROM PUBLIC;

/*
 * owner_role is always the role that wrote the row, whatever the row says:
 * the broker renders a mapping with its owner's privileges, so it must not
 * be possible to name someone else.  Deliberately not SECURITY DEFINER.
 */
CREATE FUNCTION kafgres.mapping_set_owner() RETURNS trigger
LANGUAGE plpgsql AS
$$
BEGIN
    NEW.owner_role := (SELECT r.oid FROM pg_catalog.pg_roles AS r
                        WHERE r.rolname = pg_catalog.current_user());
    RETURN NEW;
END
$$;
CREATE TRIGGER mapping_set_owner
    BEFORE INSERT OR UPDATE ON kafgres.mapping
    FOR EACH ROW EXECUTE FUNCTION kafgres.mapping_set_owner();

/* the broker LISTENs on kafgres_mappings and reloads its definitions */
CREATE FUNCTION kafgres.notify_mappings() RETURNS trigger
LANGUAGE plpgsql AS
$$
BEGIN
    PERFORM pg_catalog.pg_notify('kafgres_mappings', '');
    RETURN NULL;
END
$$;
CREATE TRIGGER mapping_notify
    AFTER INSERT OR UPDATE OR DELETE ON kafgres.mapping
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.notify_mappings();

/*
 * Authors may see every mapping but change or remove only their own (or
 * those of roles they are members of).  The broker and the output plugin
 * are not subject to this: the broker is a superuser, and the plugin's
 * catalog scans do not apply row security.
 */
ALTER TABLE kafgres.mapping ENABLE ROW LEVEL SECURITY;
CREATE POLICY mapping_read ON kafgres.mapping FOR SELECT USING (true);
CREATE POLICY mapping_add ON kafgres.mapping FOR INSERT WITH CHECK (true);
CREATE POLICY mapping_change ON kafgres.mapping FOR UPDATE
    USING (pg_catalog.pg_has_role(owner_role, 'MEMBER'));
CREATE POLICY mapping_remove ON kafgres.mapping FOR DELETE
    USING (pg_catalog.pg_has_role(owner_role, 'MEMBER'));

-- dead letters hold row images: show them only to the mapping's owner
ALTER TABLE kafgres.dead_letter ENABLE ROW LEVEL SECURITY;
CREATE POLICY dead_letter_owner ON kafgres.dead_letter FOR SELECT
    USING (EXISTS (SELECT 1 FROM kafgres.mapping AS m
                    WHERE m.mapping_id = dead_letter.mapping_id
                      AND pg_catalog.pg_has_role(m.owner_role, 'MEMBER')));

CREATE VIEW kafgres.mappings AS
    SELECT m.name,
           m.source_relid::regclass          AS source_table,
           m.topic,
           m.value_expr,
           m.key_expr,
           m.filter_expr,
           m.on_error,
           m.owner_role::regrole             AS owner,
           coalesce(s.status, 'pending')     AS status,
           s.last_error,
           coalesce(s.rendered, 0)           AS rendered,
           coalesce(s.dead_lettered, 0)      AS dead_lettered,
           m.created_at
      FROM kafgres.mapping AS m
      LEFT JOIN kafgres.mapping_status AS s USING (mapping_id);
COMMENT ON VIEW kafgres.mappings IS 'CDC mappings with the broker''s status and counters';

/*
 * kafgres.mapping_topic(topic): check that a mapping's topic exists, or
 * create it when kafgres.auto_create_topics is on (as the Kafka protocol
 * would on first use).  SECURITY DEFINER so that mapping authors need no
 * privileges on kafgres.topic; it creates nothing a Kafka client could not.
 */
CREATE FUNCTION kafgres.mapping_topic(topic text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_auto text;
BEGIN
    IF EXISTS (SELECT 1 FROM kafgres.topic AS t WHERE t.name = mapping_topic.topic) THEN
        RETURN;
    END IF;
    v_auto := current_setting('kafgres.auto_create_topics', true);
    IF lower(coalesce(v_auto, 'off')) IN ('on', 'true', 'yes', '1') THEN
        PERFORM public.kafgres_create_topic(mapping_topic.topic);
        RETURN;
    END IF;
    RAISE EXCEPTION 'topic "%" does not exist', mapping_topic.topic
        USING ERRCODE = 'undefined_object',
              HINT = 'Create it first with kafgres_create_topic().';
END
$$;

/*
 * kafgres_add_mapping(...): map a table's changes to a topic.  Returns the
 * mapping's id.  Errors name the argument; expressions are validated
 * (kafgres_validate_expression) and then probed as the caller, so unknown
 * columns, type errors and missing privileges are reported now, with
 * Postgres's own messages, rather than by the broker later.
 */
CREATE FUNCTION kafgres_add_mapping(mapping_name text, source_table regclass, topic text,
                                    value_expr text DEFAULT NULL, key_expr text DEFAULT NULL,
                                    filter_expr text DEFAULT NULL,
                                    on_error text DEFAULT 'dead_letter')
RETURNS bigint
LANGUAGE plpgsql
SECURITY INVOKER
AS $$
DECLARE
    v_name    text := kafgres_add_mapping.mapping_name;
    v_topic   text := kafgres_add_mapping.topic;
    v_rel     pg_catalog.pg_class%ROWTYPE;
    v_source  text;
    v_arg     text;
    v_expr    text;
    v_probe   text;
    v_id      bigint;
    v_state   text;
    v_msg     text;
    v_detail  text;
    v_hint    text;
BEGIN
    IF v_name IS NULL THEN
        RAISE EXCEPTION 'argument mapping_name must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_name !~ '^[a-zA-Z0-9._-]{1,200}$' THEN
        RAISE EXCEPTION 'invalid mapping name "%"', v_name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument mapping_name must be 1 to 200 ASCII letters, digits, ".", "_" or "-".';
    END IF;
    IF source_table IS NULL THEN
        RAISE EXCEPTION 'argument source_table must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO v_rel FROM pg_catalog.pg_class AS c WHERE c.oid = source_table;
    IF v_rel.relkind <> 'r' THEN
        RAISE EXCEPTION 'source_table % is not a table', source_table
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = CASE v_rel.relkind
                               WHEN 'p' THEN 'Changes of a partitioned table are decoded per partition; map each partition.'
                               ELSE 'Only ordinary tables have changes to map.' END;
    END IF;
    IF v_rel.relpersistence <> 'p' THEN
        RAISE EXCEPTION 'source_table % is not a permanent table', source_table
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = 'Changes of temporary and unlogged tables are not written to the WAL, so they cannot be decoded.';
    END IF;
    v_source := pg_catalog.format('%I.%I',
                    (SELECT n.nspname FROM pg_catalog.pg_namespace AS n WHERE n.oid = v_rel.relnamespace),
                    v_rel.relname);

    IF v_topic IS NULL THEN
        RAISE EXCEPTION 'argument topic must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_topic = '' OR v_topic IN ('.', '..') OR pg_catalog.length(v_topic) > 249
       OR v_topic !~ '^[a-zA-Z0-9._-]+$' THEN
        RAISE EXCEPTION 'invalid topic name "%"', v_topic
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument topic must follow Kafka''s topic name rules: 1 to 249 ASCII letters, digits, ".", "_" or "-", and not "." or "..".';
    END IF;
    IF on_error IS NULL OR on_error NOT IN ('dead_letter', 'stall') THEN
        RAISE EXCEPTION 'invalid on_error "%"', on_error
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument on_error must be ''dead_letter'' or ''stall''.';
    END IF;
    IF EXISTS (SELECT 1 FROM kafgres.mapping AS m WHERE m.name = v_name) THEN
        RAISE EXCEPTION 'mapping "%" already exists', v_name
            USING ERRCODE = 'duplicate_object';
    END IF;

    -- shape first (nothing is spliced before this), then meaning
    PERFORM kafgres_validate_expression(value_expr, 'value_expr');
    PERFORM kafgres_validate_expression(key_expr, 'key_expr');
    PERFORM kafgres_validate_expression(filter_expr, 'filter_expr');

    /*
     * Probe each expression as the caller, in the scope the broker renders
     * it in.  LIMIT 0 evaluates nothing, but the executor still checks
     * privileges on every table the expression reads.
     */
    FOREACH v_arg IN ARRAY ARRAY['value_expr', 'key_expr', 'filter_expr'] LOOP
        v_expr := CASE v_arg WHEN 'value_expr' THEN value_expr
                             WHEN 'key_expr' THEN key_expr
                             ELSE filter_expr END;
        CONTINUE WHEN v_expr IS NULL;
        -- the filter goes in a WHERE, which insists on boolean, not
        -- merely something castable to it (as an integer is)
        v_probe := pg_catalog.format(
            'SELECT %s FROM (VALUES (''I''::text, ''0/0''::pg_lsn, 0::bigint, pg_catalog.now()))'
            ' AS c(op, lsn, xid, commit_ts)'
            ' LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::%s, NULL::jsonb) AS new ON false'
            ' LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::%s, NULL::jsonb) AS old ON false'
            ' WHERE %s LIMIT 0',
            CASE WHEN v_arg = 'filter_expr' THEN '1' ELSE '(' || v_expr || ')' END,
            v_source, v_source,
            CASE WHEN v_arg = 'filter_expr' THEN '(' || v_expr || ')' ELSE 'true' END);
        BEGIN
            EXECUTE v_probe;
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT,
                                    v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
            v_detail := coalesce(nullif(v_detail, '') || ' ', '')
                        || 'In argument ' || v_arg || ' of mapping "' || v_name || '".';
            IF coalesce(v_hint, '') = '' THEN
                RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_msg, DETAIL = v_detail;
            END IF;
            RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_msg, DETAIL = v_detail, HINT = v_hint;
        END;
    END LOOP;

    PERFORM kafgres.mapping_topic(v_topic);

    -- owner_role is set by trigger mapping_set_owner; this value is only a placeholder
    INSERT INTO kafgres.mapping AS m (name, source_relid, topic, value_expr, key_expr,
                                      filter_expr, on_error, owner_role, search_path)
    VALUES (v_name, source_table, v_topic, value_expr, key_expr, filter_expr, on_error,
            0, pg_catalog.current_setting('search_path'))
    RETURNING m.mapping_id INTO v_id;

    PERFORM pg_catalog.pg_notify('kafgres_mappings', '');
    RETURN v_id;
EXCEPTION WHEN unique_violation THEN
    RAISE EXCEPTION 'mapping "%" already exists', v_name
        USING ERRCODE = 'duplicate_object';
END
$$;
COMMENT ON FUNCTION kafgres_add_mapping(text, regclass, text, text, text, text, text) IS 'map a table''s changes to a topic; returns the mapping id';

/* kafgres_remove_mapping(name): stop mapping; the broker drops its render function */
CREATE FUNCTION kafgres_remove_mapping(mapping_name text)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM kafgres.mapping AS m WHERE m.name = mapping_name) THEN
        RAISE EXCEPTION 'mapping "%" does not exist', mapping_name
            USING ERRCODE = 'undefined_object';
    END IF;
    DELETE FROM kafgres.mapping AS m WHERE m.name = mapping_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'must be owner of mapping "%"', mapping_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END
$$;
COMMENT ON FUNCTION kafgres_remove_mapping(text) IS 'remove a CDC mapping';

/*
 * kafgres_preview_mapping(name, limit): what the mapping would produce for
 * the table's current rows, rendered as inserts, as the caller and without
 * the broker.  Keys and values are shown as text (bytea in its text form).
 */
CREATE FUNCTION kafgres_preview_mapping(mapping_name text, "limit" int DEFAULT 10)
RETURNS TABLE (key text, value text)
LANGUAGE plpgsql
SECURITY INVOKER
AS $$
DECLARE
    v_m      kafgres.mapping%ROWTYPE;
    v_source text;
    v_path   text;
BEGIN
    SELECT * INTO v_m FROM kafgres.mapping AS m WHERE m.name = mapping_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'mapping "%" does not exist', mapping_name
            USING ERRCODE = 'undefined_object';
    END IF;
    PERFORM kafgres_validate_expression(v_m.value_expr, 'value_expr');
    PERFORM kafgres_validate_expression(v_m.key_expr, 'key_expr');
    PERFORM kafgres_validate_expression(v_m.filter_expr, 'filter_expr');
    SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) INTO v_source
      FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
     WHERE c.oid = v_m.source_relid;

    -- render in the search_path the mapping was made with, as the broker does
    v_path := pg_catalog.current_setting('search_path');
    PERFORM pg_catalog.set_config('search_path', v_m.search_path, true);
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT (%s)::text, (%s)::text'
        ' FROM (VALUES (''I''::text, ''0/0''::pg_lsn, 0::bigint, pg_catalog.now())) AS c(op, lsn, xid, commit_ts)'
        ' CROSS JOIN %s AS new'
        ' LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::%s, NULL::jsonb) AS old ON false'
        ' WHERE (%s)'
        ' LIMIT $1',
        coalesce(v_m.key_expr, 'NULL'),
        coalesce(v_m.value_expr, 'to_jsonb(new)'),
        v_source, v_source,
        coalesce(v_m.filter_expr, 'true'))
        USING "limit";
    PERFORM pg_catalog.set_config('search_path', v_path, true);
END
$$;
COMMENT ON FUNCTION kafgres_preview_mapping(text, int) IS 'render a mapping over the table''s current rows without producing';

/*
 * kafgres_snapshot_mapping(name): emit every current row of the source
 * table as a snapshot record (op 'R') through the broker's pipeline.
 * Returns the number of rows.
 *
 * LOCK ... IN SHARE MODE makes the snapshot exact: it waits for writers in
 * progress and blocks new ones until the caller's transaction ends, so no
 * change commits between the snapshot's read and its commit.  Changes that
 * committed before are delivered before the snapshot's rows, changes after
 * it after them: no gap and no overlap.  Each row is a transactional
 * logical message (format 2, docs/producing.md), so a rolled-back snapshot
 * emits nothing.
 */
CREATE FUNCTION kafgres_snapshot_mapping(mapping_name text)
RETURNS bigint
LANGUAGE plpgsql
SECURITY INVOKER
AS $$
DECLARE
    v_m      kafgres.mapping%ROWTYPE;
    v_source text;
    v_count  bigint;
BEGIN
    SELECT * INTO v_m FROM kafgres.mapping AS m WHERE m.name = mapping_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'mapping "%" does not exist', mapping_name
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(v_m.owner_role, 'MEMBER') THEN
        RAISE EXCEPTION 'must be owner of mapping "%"', mapping_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) INTO v_source
      FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
     WHERE c.oid = v_m.source_relid;

    EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE MODE', v_source);
    INSERT INTO kafgres.mapping_snapshot (mapping_id, xid)
    VALUES (v_m.mapping_id, pg_catalog.pg_current_xact_id())
    ON CONFLICT DO NOTHING;
    EXECUTE pg_catalog.format(
        'SELECT count(pg_catalog.pg_logical_emit_message(true, ''kafgres'','
        ' ''\x02''::bytea || pg_catalog.int8send($1)'
        ' || pg_catalog.convert_to(pg_catalog.to_jsonb(s)::text, ''UTF8''))) FROM %s AS s',
        v_source)
        INTO v_count USING v_m.mapping_id;
    RETURN v_count;
END
$$;
COMMENT ON FUNCTION kafgres_snapshot_mapping(text) IS 'emit the table''s current rows as snapshot records (op R) of a mapping';

-- nothing for PUBLIC except the pure validator; docs/sql.md lists the
-- grants a DBA gives a mapping author
REVOKE ALL ON ALL TABLES IN SCHEMA kafgres FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres.mapping_set_owner() FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres.notify_mappings() FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres.mapping_topic(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_add_mapping(text, regclass, text, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_remove_mapping(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_preview_mapping(text, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres_snapshot_mapping(text) FROM PUBLIC;

-- dead letters are data to keep across a dump; status and snapshot
-- markers are the broker's bookkeeping, rebuilt as it runs
SELECT pg_catalog.pg_extension_config_dump('kafgres.dead_letter', '');

/*
 * ---------------------------------------------------------------------
 * Consumer groups: committed offsets
 * ---------------------------------------------------------------------
 *
 * The broker writes a group's commits here synchronously (OffsetCommit is
 * acknowledged only once the row is committed), so committed offsets
 * survive broker and Postgres crashes, and lag is a plain query.
 */
CREATE TABLE kafgres.consumer_offset (
    group_id         text        NOT NULL,
    topic_id         bigint      NOT NULL REFERENCES kafgres.topic ON DELETE CASCADE,
    partition        int         NOT NULL,
    committed_offset bigint      NOT NULL,
    leader_epoch     int         NOT NULL DEFAULT -1,
    metadata         text,
    commit_time      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic_id, partition)
);
COMMENT ON TABLE kafgres.consumer_offset IS 'committed consumer group offsets (OffsetCommit)';
SELECT pg_catalog.pg_extension_config_dump('kafgres.consumer_offset', '');

/*
 * kafgres.consumer_lag: per group and partition, the committed offset, the
 * log end (mirrored from the broker within milliseconds) and the lag.
 */
CREATE VIEW kafgres.consumer_lag AS
    SELECT o.group_id, t.name AS topic, o.partition, o.committed_offset,
           p.high_watermark AS log_end_offset,
           greatest(p.high_watermark - o.committed_offset, 0) AS lag,
           o.commit_time
      FROM kafgres.consumer_offset o
      JOIN kafgres.topic t ON t.topic_id = o.topic_id
      JOIN kafgres.partition p ON p.topic_id = o.topic_id AND p.partition = o.partition;
COMMENT ON VIEW kafgres.consumer_lag IS 'consumer group lag: committed offset vs log end, per partition';

REVOKE ALL ON kafgres.consumer_offset, kafgres.consumer_lag FROM PUBLIC;
