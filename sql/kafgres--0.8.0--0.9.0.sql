/* kafgres 0.8.0 -> 0.9.0 */

\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.9.0'" to load this file. \quit

/* ---- compaction of table topics (issue #15; helper "compact") -------------
 *
 * The log cleaner compacts table topics too (broker/storage/table/clean.go):
 * it rewrites the batch of rows that shrank and deletes rows whose batch
 * goes, and keeps its checkpoint beside the log start.
 */

/*
 * kafgres.log_state.cleaner_checkpoint: the first offset the cleaner has
 * not cleaned (Kafka's cleaner-offset-checkpoint entry); NULL: never
 * cleaned, the log start offset.
 */
ALTER TABLE kafgres.log_state ADD COLUMN cleaner_checkpoint bigint;

/*
 * log_prepare_partition as in 0.8.0, and a broker that is not a superuser
 * is now also granted UPDATE and DELETE on the partition's table: the
 * cleaner's writes (it runs at every open, so partitions created before
 * get them too).
 */
CREATE OR REPLACE FUNCTION kafgres.log_prepare_partition(p_topic_id bigint, p_partition int)
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
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON kafgres.%I TO %I',
                       'log_batch_' || p_topic_id || '_' || p_partition, session_user);
    END IF;
END
$$;

/* ---- end of compaction of table topics ---------------------------------- */

/* ---- the storage engine of one topic (issue #15) --------------------------
 *
 * kafgres.storage_engine is the cluster-wide default; a topic created from
 * SQL may name its own. Kafka clients cannot: Kafka refuses a topic config
 * it does not know, and one kafgres added would show in every
 * DescribeConfigs (docs/operations.md, "Choosing a storage engine").
 */

/*
 * kafgres.create_topic(name, partitions, storage_engine): what both
 * kafgres_create_topic functions do, 0.5.0's body with the engine; NULL:
 * the column's default (kafgres.storage_engine). Not SECURITY DEFINER: the
 * caller needs INSERT on kafgres.topic and kafgres.partition, as before.
 */
CREATE FUNCTION kafgres.create_topic(p_name text, p_partitions int, p_storage_engine text)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_partitions int := p_partitions;
    v_problem    text;
    v_setting    text;
    v_topic_id   bigint;
BEGIN
    IF p_name IS NULL THEN
        RAISE EXCEPTION 'topic name must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_problem := kafgres.topic_name_problem(p_name);
    IF v_problem = 'the name is empty' THEN
        RAISE EXCEPTION 'invalid topic name: %', v_problem
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass a non-empty name as argument "name".';
    ELSIF v_problem = '"." and ".." are not allowed' THEN
        RAISE EXCEPTION 'invalid topic name "%": %', p_name, v_problem
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF v_problem LIKE 'topic names can be at most %' THEN
        RAISE EXCEPTION 'invalid topic name "%": the name is % characters long',
                        pg_catalog.left(p_name, 40) || '...', pg_catalog.length(p_name)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.upper(pg_catalog.left(v_problem, 1)) || pg_catalog.substr(v_problem, 2) || '.';
    ELSIF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'invalid topic name "%"', p_name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.upper(pg_catalog.left(v_problem, 1)) || pg_catalog.substr(v_problem, 2) || '.';
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

    IF p_storage_engine IS NOT NULL AND p_storage_engine NOT IN ('segment', 'table') THEN
        RAISE EXCEPTION 'invalid storage engine "%"', p_storage_engine
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument "storage_engine" must be segment or table; NULL takes the server''s kafgres.storage_engine.';
    END IF;

    -- ON CONFLICT rather than a prior lookup: a concurrent creation of the
    -- same name waits for the other transaction and then reports it. The
    -- engine's NULL is the column default, which an explicit NULL would
    -- not take.
    IF p_storage_engine IS NULL THEN
        INSERT INTO kafgres.topic AS t (name, partitions)
        VALUES (p_name, v_partitions)
        ON CONFLICT ON CONSTRAINT topic_name_key DO NOTHING
        RETURNING t.topic_id INTO v_topic_id;
    ELSE
        INSERT INTO kafgres.topic AS t (name, partitions, storage_engine)
        VALUES (p_name, v_partitions, p_storage_engine)
        ON CONFLICT ON CONSTRAINT topic_name_key DO NOTHING
        RETURNING t.topic_id INTO v_topic_id;
    END IF;

    IF v_topic_id IS NULL THEN
        RAISE EXCEPTION 'topic "%" already exists', p_name
            USING ERRCODE = 'duplicate_object';
    END IF;

    INSERT INTO kafgres.partition (topic_id, partition)
    SELECT v_topic_id, p
      FROM pg_catalog.generate_series(0, v_partitions - 1) AS p;

    RETURN v_topic_id;
END
$$;
COMMENT ON FUNCTION kafgres.create_topic(text, int, text) IS 'the body of kafgres_create_topic: create a topic, returns its topic_id';

/*
 * kafgres_create_topic(name, partitions): unchanged for its callers (and
 * its grants, which CREATE OR REPLACE keeps).
 */
CREATE OR REPLACE FUNCTION kafgres_create_topic(name text, partitions int DEFAULT NULL)
RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
RETURN kafgres.create_topic(name, partitions, NULL);

/*
 * kafgres_create_topic(name, partitions, storage_engine): a topic with its
 * own engine. Not an optional parameter of the function above: two
 * functions would then match a call with two arguments, and dropping that
 * one would lose the grants made on kafgres_create_topic(text, int).
 * Granted as that one is, by the administrator.
 */
CREATE FUNCTION kafgres_create_topic(name text, partitions int, storage_engine text)
RETURNS bigint
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
RETURN kafgres.create_topic(name, partitions, storage_engine);
COMMENT ON FUNCTION kafgres_create_topic(text, int, text) IS 'create a kafgres topic whose log is kept by storage_engine (segment or table; NULL: kafgres.storage_engine), returns its topic_id';
REVOKE ALL ON FUNCTION kafgres_create_topic(text, int, text) FROM PUBLIC;

/* ---- end of the storage engine of one topic ------------------------------ */
