/* kafgres 0.9.0 -> 0.10.0 */

\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.10.0'" to load this file. \quit

/*
 * kafgres.consumer_group: the durable state of each classic consumer group
 * (broker/coordinator/groups.go), what Kafka writes to __consumer_offsets
 * as the group's metadata record: its generation, selected protocol,
 * leader and members with their subscriptions and assignments, in Kafka's
 * GroupMetadataValue encoding (version 3). It is written when a rebalance
 * completes (before any member learns its assignment) and when the group
 * becomes Empty, and read when the broker starts, so that members keep
 * their ids, generation and assignment across a broker restart as they do
 * across a Kafka coordinator failover, and generations never go back.
 */
CREATE TABLE kafgres.consumer_group (
    group_id    bytea       PRIMARY KEY,
    metadata    bytea       NOT NULL,
    update_time timestamptz NOT NULL
);
COMMENT ON TABLE kafgres.consumer_group IS 'classic consumer groups as their coordinator last stored them (Kafka GroupMetadataValue v3)';
COMMENT ON COLUMN kafgres.consumer_group.group_id IS 'the group id exactly as the client sent it';
SELECT pg_catalog.pg_extension_config_dump('kafgres.consumer_group', '');

REVOKE ALL ON kafgres.consumer_group FROM PUBLIC;
