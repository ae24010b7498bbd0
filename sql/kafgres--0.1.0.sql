/* sql/kafgres--0.1.0.sql */

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
REVOKE ALL ON FUNCTION kafgres_partition_offsets(text) FROM PUBLIC;

-- keep the metadata (and the sequences' positions) in pg_dump output
SELECT pg_catalog.pg_extension_config_dump('kafgres.topic', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.partition', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.topic_config', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.topic_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('kafgres.producer_id_seq', '');
