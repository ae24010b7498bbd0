--
-- plugin: which row changes the output plugin sends, and how.  Only
-- changes of tables a mapping covers, as of the change's position in the
-- WAL; tuples with each column's name, type and text; an unchanged TOASTed
-- value as 'u'; old tuples as the replica identity provides them; TRUNCATE
-- listing the covered tables only.  Messages with prefix "kafgres" that
-- kafgres did not sign are dropped and counted.
--
SET search_path = regress, public;
\set SHOW_CONTEXT never
CREATE SCHEMA plugin;
CREATE TABLE plugin.mapped (id int PRIMARY KEY, name text, big text);
ALTER TABLE plugin.mapped ALTER big SET STORAGE EXTERNAL;
CREATE TABLE plugin.unmapped (id int PRIMARY KEY, v text);
-- the topic is created with the mapping (kafgres.auto_create_topics is on);
-- the warning is about column "big"
SELECT kafgres_add_mapping('m_mapped', 'plugin.mapped', 'mapped') > 0 AS added;
SELECT name, source_table, topic, owner, status FROM kafgres.mappings;
SELECT name, partitions FROM kafgres.topic;
INSERT INTO plugin.mapped VALUES (1, 'one', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 200) g));
SELECT * FROM decode();

-- unmapped tables cost nothing (more than 100 changes in a row, which
-- makes the plugin report progress), a rolled-back transaction neither;
-- TRUNCATE lists only the mapped tables, and TRUNCATE of only unmapped
-- ones sends nothing
INSERT INTO plugin.unmapped SELECT g, 'x' FROM generate_series(1, 1000) g;
UPDATE plugin.unmapped SET v = 'y';
BEGIN;
INSERT INTO plugin.mapped VALUES (2, 'two', NULL);
ROLLBACK;
INSERT INTO plugin.mapped VALUES (2, 'two', NULL), (3, 'three', 'small');
UPDATE plugin.mapped SET name = 'uno' WHERE id = 1;
DELETE FROM plugin.mapped WHERE id = 3;
UPDATE plugin.mapped SET id = 20 WHERE id = 2;
TRUNCATE plugin.unmapped;
TRUNCATE plugin.mapped, plugin.unmapped;
SELECT * FROM decode();

-- replica identity FULL: old tuples have every column; a changed TOASTed
-- value is sent in full
ALTER TABLE plugin.mapped REPLICA IDENTITY FULL;
INSERT INTO plugin.mapped VALUES (1, 'one', repeat('b', 10000));
UPDATE plugin.mapped SET name = 'uno';
UPDATE plugin.mapped SET big = 'short now';
DELETE FROM plugin.mapped;
SELECT * FROM decode();
-- NOTHING: never an old tuple
ALTER TABLE plugin.mapped REPLICA IDENTITY NOTHING;
INSERT INTO plugin.mapped VALUES (1, 'one', NULL);
UPDATE plugin.mapped SET id = 2;
DELETE FROM plugin.mapped;
ALTER TABLE plugin.mapped REPLICA IDENTITY DEFAULT;
SELECT * FROM decode();

-- types: each value is its type's text output; dropped columns are left
-- out; a table without primary key has no old tuple under DEFAULT identity
CREATE TABLE plugin.types (i int, n numeric, b bool, j jsonb, by bytea, arr int[],
                           gone text, d date, t text COLLATE "C");
ALTER TABLE plugin.types DROP COLUMN gone;
SELECT kafgres_add_mapping('m_types', 'plugin.types', 'types') > 0 AS added;
INSERT INTO plugin.types VALUES (1, 1.50, true, '{"b": 1, "a": [null]}', '\x00ff', '{1,NULL,3}', '2024-02-29', 'über'),
                                (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
UPDATE plugin.types SET n = n * 2 WHERE i = 1;
DELETE FROM plugin.types WHERE i IS NULL;
SELECT * FROM decode();

-- two mappings of one table: both ids, ascending; removing one leaves the
-- other
SELECT kafgres_add_mapping('m_types_2', 'plugin.types', 'types2', value_expr => 'new.i::text') > 0 AS added;
INSERT INTO plugin.types (i) VALUES (2);
SELECT kafgres_remove_mapping('m_types_2');
INSERT INTO plugin.types (i) VALUES (3);
SELECT * FROM decode();

-- messages and changes of one transaction keep their order
BEGIN;
SELECT kafgres_produce('mapped', 'before', 'v') IS NOT NULL AS produced;
INSERT INTO plugin.mapped VALUES (5, 'five', NULL);
SELECT kafgres_produce('mapped', 'after', 'v') IS NOT NULL AS produced;
INSERT INTO plugin.unmapped VALUES (5, 'five');
COMMIT;
SELECT * FROM decode();

-- partitioned tables: a mapping of the parent covers every leaf, attached
-- now or later, and sub-partitions; changes arrive for the leaf; a
-- detached partition is no longer covered; TRUNCATE of the parent lists
-- it and its leaves
CREATE TABLE plugin.parted (id int, region text, v text) PARTITION BY LIST (region);
CREATE TABLE plugin.parted_eu PARTITION OF plugin.parted FOR VALUES IN ('eu');
CREATE TABLE plugin.parted_us PARTITION OF plugin.parted FOR VALUES IN ('us')
    PARTITION BY RANGE (id);
CREATE TABLE plugin.parted_us_low PARTITION OF plugin.parted_us FOR VALUES FROM (0) TO (100);
SELECT kafgres_add_mapping('m_parted', 'plugin.parted', 'parted') > 0 AS added;
SELECT kafgres_add_mapping('m_parted_eu', 'plugin.parted_eu', 'parted-eu') > 0 AS added;
INSERT INTO plugin.parted VALUES (1, 'eu', 'a'), (2, 'us', 'b');
CREATE TABLE plugin.parted_asia (region text, v text, id int);
INSERT INTO plugin.parted_asia VALUES ('asia', 'before attach', 3);
ALTER TABLE plugin.parted ATTACH PARTITION plugin.parted_asia FOR VALUES IN ('asia');
INSERT INTO plugin.parted VALUES (4, 'asia', 'attached');
UPDATE plugin.parted SET v = 'moved' WHERE id = 1;
ALTER TABLE plugin.parted DETACH PARTITION plugin.parted_asia;
INSERT INTO plugin.parted_asia VALUES ('asia', 'detached', 5);
TRUNCATE plugin.parted;
SELECT * FROM decode();
-- attach and detach within one transaction
BEGIN;
INSERT INTO plugin.parted_asia VALUES ('asia', 'before attach', 6);
ALTER TABLE plugin.parted ATTACH PARTITION plugin.parted_asia FOR VALUES IN ('asia');
INSERT INTO plugin.parted_asia VALUES ('asia', 'attached', 7);
ALTER TABLE plugin.parted DETACH PARTITION plugin.parted_asia;
INSERT INTO plugin.parted_asia VALUES ('asia', 'detached', 8);
COMMIT;
SELECT * FROM decode();

-- which mappings cover a change is decided by kafgres.mapping as of the
-- change: within a transaction, a mapping added covers the changes after
-- it, not those before; a mapping removed still covers what was changed
-- before its removal, even if that is decoded after it
CREATE TABLE plugin.late (id int PRIMARY KEY);
BEGIN;
INSERT INTO plugin.late VALUES (1);
SELECT kafgres_add_mapping('m_late', 'plugin.late', 'late') > 0 AS added;
INSERT INTO plugin.late VALUES (2);
COMMIT;
INSERT INTO plugin.late VALUES (3);
SELECT kafgres_remove_mapping('m_late');
INSERT INTO plugin.late VALUES (4);
SELECT * FROM decode();
-- removing and adding it again in one transaction: the change in between
-- is not covered, the one after by the new mapping
SELECT kafgres_add_mapping('m_late', 'plugin.late', 'late') > 0 AS added;
BEGIN;
INSERT INTO plugin.late VALUES (5);
SELECT kafgres_remove_mapping('m_late');
INSERT INTO plugin.late VALUES (6);
SELECT kafgres_add_mapping('m_late', 'plugin.late', 'late') > 0 AS added;
INSERT INTO plugin.late VALUES (7);
COMMIT;
CREATE TEMP TABLE f AS SELECT n, frame FROM frames();
SELECT n, describe(frame) FROM f ORDER BY n;
-- both inserts are described as m_late; they are two different mappings
SELECT count(DISTINCT r.ids) AS mappings
  FROM f, relations(frame) AS r WHERE (header(frame)).kind = 'I';
DROP TABLE f;

-- the frames of a large transaction of changes
INSERT INTO plugin.mapped SELECT g, 'row ' || g, repeat('x', 100) FROM generate_series(1001, 3000) g;
CREATE TEMP TABLE f AS SELECT n, msg, frame FROM frames();
SELECT count(*) AS frames, count(DISTINCT msg) > 1 AS several_writes,
       frames_ok(array_agg(frame ORDER BY n))
  FROM f;
DROP TABLE f;
TRUNCATE plugin.mapped;
SELECT * FROM decode();

-- messages with prefix "kafgres" that kafgres did not sign are dropped and
-- counted once however often they are decoded; other prefixes are none of
-- the plugin's business
SELECT kafgres_rejected_messages() AS rejected_before \gset
-- a well-formed format-1 record, unsigned
SELECT 'emitted' FROM pg_logical_emit_message(true, 'kafgres',
       '\x010006'::bytea || convert_to('mapped', 'UTF8')
       || '\xffffffffffffffff00000006666f726765640000'::bytea);
-- signed with a MAC that does not match
SELECT 'emitted' FROM pg_logical_emit_message(true, 'kafgres',
       '\x03'::bytea || decode(repeat('00', 32), 'hex') || '\x010006'::bytea
       || convert_to('mapped', 'UTF8') || '\xffffffffffffffff00000006666f726765640000'::bytea);
-- not transactional
SELECT 'emitted' FROM pg_logical_emit_message(false, 'kafgres', '\x03'::bytea);
-- in a transaction with a real record, which goes out alone
BEGIN;
SELECT 'emitted' FROM pg_logical_emit_message(true, 'kafgres', 'junk'::bytea);
SELECT kafgres_produce('mapped', 'real', 'v') IS NOT NULL AS produced;
COMMIT;
SELECT 'emitted' FROM pg_logical_emit_message(true, 'kafgresx', 'not ours'::bytea);
SELECT 'emitted' FROM pg_logical_emit_message(true, 'other', 'not ours'::bytea);
SELECT * FROM decode(false);
SELECT * FROM decode(false);
SELECT kafgres_rejected_messages() - :rejected_before AS rejected;
SELECT * FROM decode();
SELECT kafgres_rejected_messages() - :rejected_before AS rejected;

-- dropping the tables removes their mappings
DROP SCHEMA plugin CASCADE;
SELECT count(*) FROM kafgres.mapping;
SELECT name, reason FROM kafgres.mapping_retired ORDER BY name, reason;
SELECT * FROM decode();
