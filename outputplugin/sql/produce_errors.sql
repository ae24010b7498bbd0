--
-- produce_errors: kafgres_produce refuses bad arguments with clear errors,
-- and a call that fails writes nothing.  Also: without a usable slot
-- "kafgres" it refuses rather than write a record nobody would deliver.
--
SET search_path = regress, public;
\set SHOW_CONTEXT never
SELECT kafgres_create_topic('e2', 2) > 0 AS created;

-- topic
SELECT kafgres_produce(NULL, 'k', 'v');
SELECT kafgres_produce('', 'k', 'v');
SELECT kafgres_produce('.', 'k', 'v');
SELECT kafgres_produce('..', 'k', 'v');
-- Kafka's internal topics take no records
SELECT kafgres_produce('__consumer_offsets', 'k', 'v');
SELECT kafgres_produce('__transaction_state', 'k', 'v');
SELECT kafgres_produce('a b', 'k', 'v');
SELECT kafgres_produce('bad/name', 'k'::bytea, 'v'::bytea);
SELECT kafgres_produce(repeat('t', 250), 'k', 'v');
-- partition
SELECT kafgres_produce('e2', 'k', 'v', partition => -1);
SELECT kafgres_produce('e2', 'k', 'v', partition => 2);
SELECT kafgres_produce('e2', 'k'::bytea, 'v'::bytea, ARRAY['h'], ARRAY['x'::bytea], 7);
SELECT kafgres_produce('not-yet', 'k', 'v', partition => 1);
-- headers as jsonb
SELECT kafgres_produce('e2', 'k', 'v', '[1]');
SELECT kafgres_produce('e2', 'k', 'v', '"scalar"');
SELECT kafgres_produce('e2', 'k', 'v', 'null');
-- headers as arrays
SELECT kafgres_produce('e2', 'k'::bytea, 'v'::bytea, ARRAY['a', 'b'], ARRAY['x'::bytea]);
SELECT kafgres_produce('e2', 'k'::bytea, 'v'::bytea, ARRAY[NULL::text], ARRAY['x'::bytea]);
SELECT kafgres_produce('e2', 'k'::bytea, 'v'::bytea, ARRAY[['a'], ['b']], ARRAY['x'::bytea, 'y']);
SELECT kafgres_produce('e2', 'k'::bytea, 'v'::bytea, ARRAY['a', 'b'], ARRAY[['x'::bytea], ['y'::bytea]]);
SELECT kafgres_produce('e2', 'k'::bytea, 'v'::bytea, ARRAY[repeat('h', 65536)], ARRAY['x'::bytea]);
-- at most 65535 headers
SELECT kafgres_produce('e2', 'k', 'v', (SELECT jsonb_object_agg(g::text, '') FROM generate_series(1, 65536) g));
SELECT kafgres_produce('e2', 'k'::bytea, 'v'::bytea, array_fill('h'::text, ARRAY[65536]), array_fill(''::bytea, ARRAY[65536]));
-- size: one byte more than the largest value of produce.sql
SELECT kafgres_produce('e2', NULL, repeat('v', 1048588 - 72 + 1));
SELECT kafgres_produce('e2', 'k', repeat('v', 2000000));
SELECT kafgres_produce('e2', 'k'::bytea, 'v'::bytea, ARRAY['h'], ARRAY[decode(repeat('00', 1048576), 'hex')]);
-- none of them wrote anything
SELECT * FROM decode();

-- kafgres.auto_create_topics off: the topic must exist (a reload reaches
-- a session only between its statements, a new one has it at once)
ALTER SYSTEM SET kafgres.auto_create_topics = off;
SELECT pg_reload_conf();
\c
SET search_path = regress, public;
SHOW kafgres.auto_create_topics;
SELECT kafgres_produce('nope', 'k', 'v');
SELECT kafgres_produce('e2', 'k', 'v', partition => 1) IS NOT NULL AS produced;
ALTER SYSTEM RESET kafgres.auto_create_topics;
SELECT pg_reload_conf();
\c
SET search_path = regress, public;
SHOW kafgres.auto_create_topics;
SELECT * FROM decode();

-- the slot: missing, physical, another plugin's, another database's
SELECT pg_drop_replication_slot('kafgres');
SELECT kafgres_produce('e2', 'k', 'v');
SELECT 'init' FROM pg_create_physical_replication_slot('kafgres');
SELECT kafgres_produce('e2', 'k', 'v');
SELECT pg_drop_replication_slot('kafgres');
SELECT 'init' FROM pg_create_logical_replication_slot('kafgres', 'test_decoding');
SELECT kafgres_produce('e2', 'k', 'v');
SELECT pg_drop_replication_slot('kafgres');
\set regress_db :DBNAME
CREATE DATABASE regress_other;
\c regress_other
SELECT 'init' FROM pg_create_logical_replication_slot('kafgres', 'kafgres');
\c :regress_db
SET search_path = regress, public;
SELECT kafgres_produce('e2', 'k', 'v');
\c regress_other
SELECT pg_drop_replication_slot('kafgres');
\c :regress_db
DROP DATABASE regress_other;
SET search_path = regress, public;
SELECT 'init' FROM pg_create_logical_replication_slot('kafgres', 'kafgres');
SELECT kafgres_produce('e2', 'k', 'after the slot is back') IS NOT NULL AS produced;
SELECT * FROM decode();

-- the output plugin takes no options, and its output is binary
SELECT * FROM pg_logical_slot_peek_binary_changes('kafgres', NULL, NULL, 'include-xids', '0');
SELECT * FROM pg_logical_slot_peek_changes('kafgres', NULL, NULL);

SELECT kafgres_drop_topic('e2');

-- a compacted topic refuses a record without a key, as Kafka refuses it:
-- the topic's cleanup.policy decides, else the broker's
-- log.cleanup.policy; keyed records go in
SELECT kafgres_create_topic('compacted', 1) > 0 AS created;
INSERT INTO kafgres.topic_config (topic_id, name, value)
    SELECT topic_id, 'cleanup.policy', 'compact,delete' FROM kafgres.topic WHERE name = 'compacted';
SELECT kafgres_produce('compacted', NULL, 'no key');
SELECT kafgres_produce('compacted', NULL::bytea, 'no key'::bytea);
SELECT kafgres_produce('compacted', 'k', 'keyed') IS NOT NULL AS produced;
SELECT kafgres_create_topic('plain', 1) > 0 AS created;
SELECT kafgres_produce('plain', NULL, 'no key') IS NOT NULL AS produced;
INSERT INTO kafgres.broker_config (node_id, name, value) VALUES (NULL, 'log.cleanup.policy', 'compact');
SELECT kafgres_produce('plain', NULL, 'no key');
-- this broker's own setting wins over the cluster default
INSERT INTO kafgres.broker_config (node_id, name, value) VALUES (1, 'log.cleanup.policy', 'delete');
SELECT kafgres_produce('plain', NULL, 'no key') IS NOT NULL AS produced;
DELETE FROM kafgres.broker_config;
SELECT * FROM decode();
SELECT kafgres_drop_topic('compacted'), kafgres_drop_topic('plain');
