/* sql/kafgres--0.5.0--0.6.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.6.0'" to load this file. \quit

/*
 * 0.6.0: Kafka transactions (issue #14).  The transaction coordinator's
 * state, which Kafka keeps in its __transaction_state topic, lives here:
 * one row per transactional id, written by the broker synchronously
 * before it acts on a transition or answers it (docs/architecture.md,
 * "Transactions").  Offsets committed inside a transaction
 * (TxnOffsetCommit) wait in kafgres.transaction_offset and move into
 * kafgres.consumer_offset in the database transaction that records the
 * commit; an abort deletes them.  Nothing else changes.
 */

/*
 * kafgres.transaction: a transactional id's producer and its transaction,
 * as Kafka's TransactionMetadata.  The partitions are parallel arrays of
 * kafgres.topic ids and partition numbers (a topic dropped mid-transaction
 * simply gets no marker).  Times are Kafka's milliseconds as timestamptz.
 */
CREATE TABLE kafgres.transaction (
    transactional_id     bytea       PRIMARY KEY,
    producer_id          bigint      NOT NULL,
    previous_producer_id bigint      NOT NULL DEFAULT -1,
    next_producer_id     bigint      NOT NULL DEFAULT -1,
    producer_epoch       smallint    NOT NULL,
    last_producer_epoch  smallint    NOT NULL DEFAULT -1,
    timeout_ms           int         NOT NULL,
    state                text        NOT NULL
        CHECK (state IN ('Empty', 'Ongoing', 'PrepareCommit', 'PrepareAbort',
                         'CompleteCommit', 'CompleteAbort', 'PrepareEpochFence', 'Dead')),
    topic_ids            bigint[]    NOT NULL DEFAULT '{}',
    partitions           int[]       NOT NULL DEFAULT '{}',
    group_ids            bytea[]     NOT NULL DEFAULT '{}',
    start_time           timestamptz,
    update_time          timestamptz NOT NULL,
    transaction_version  smallint    NOT NULL DEFAULT 0,
    CHECK (pg_catalog.cardinality(topic_ids) OPERATOR(pg_catalog.=) pg_catalog.cardinality(partitions))
);
COMMENT ON TABLE kafgres.transaction IS 'Kafka transaction coordinator state, one row per transactional id';
COMMENT ON COLUMN kafgres.transaction.transactional_id IS 'the transactional id exactly as the client sent it';
COMMENT ON COLUMN kafgres.transaction.topic_ids IS 'topic ids of the partitions in the transaction, with partitions';
COMMENT ON COLUMN kafgres.transaction.group_ids IS 'consumer groups whose offsets the transaction commits';
COMMENT ON COLUMN kafgres.transaction.transaction_version IS 'KIP-890 transaction version of the current or last transaction';
SELECT pg_catalog.pg_extension_config_dump('kafgres.transaction', '');

/*
 * kafgres.transaction_offset: offsets committed in a transaction not yet
 * ended (TxnOffsetCommit); OffsetFetch does not see them.
 */
CREATE TABLE kafgres.transaction_offset (
    transactional_id bytea       NOT NULL REFERENCES kafgres.transaction ON DELETE CASCADE,
    producer_id      bigint      NOT NULL,
    group_id         bytea       NOT NULL,
    topic_id         bigint      NOT NULL REFERENCES kafgres.topic ON DELETE CASCADE,
    partition        int         NOT NULL,
    committed_offset bigint      NOT NULL,
    leader_epoch     int         NOT NULL DEFAULT -1,
    metadata         bytea,
    commit_time      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (transactional_id, group_id, topic_id, partition)
);
COMMENT ON TABLE kafgres.transaction_offset IS 'offsets committed in transactions still in progress (TxnOffsetCommit)';
SELECT pg_catalog.pg_extension_config_dump('kafgres.transaction_offset', '');

REVOKE ALL ON kafgres.transaction, kafgres.transaction_offset FROM PUBLIC;

/*
 * Kafka's internal topics (__consumer_offsets, __transaction_state) are
 * kafgres topics since 0.6.0, created when a client first asks for the
 * group or transaction coordinator, as Kafka creates them.
 * kafgres.topic_is_internal(name) tells them by name (outputplugin/
 * topicname.c, which kafgres_produce asks to refuse them), and
 * kafgres.topics gains a column saying so.
 */
CREATE FUNCTION kafgres.topic_is_internal(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'kafgres_topic_is_internal'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION kafgres.topic_is_internal(text) IS 'whether Kafka treats a topic of this name as internal';

CREATE OR REPLACE VIEW kafgres.topics AS
    SELECT t.topic_id, t.name, t.topic_uuid, t.partitions, t.created_at,
           (SELECT coalesce(sum(p.high_watermark), 0)::bigint
              FROM kafgres.partition p
             WHERE p.topic_id = t.topic_id) AS log_end_offset,
           kafgres.topic_is_internal(t.name) AS internal
      FROM kafgres.topic t;
COMMENT ON VIEW kafgres.topics IS 'kafgres topics with their total log end offset, and whether Kafka treats them as internal';
