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
