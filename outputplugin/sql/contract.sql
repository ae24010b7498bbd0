--
-- contract: the frames the output plugin sends for every kind of change,
-- stated once.  expected/contract.out is read from both sides: here,
-- through the SQL frame decoder of setup.sql (regress.decode), and by the
-- broker's Go decoder in tests/integration/contract_test.go, which runs
-- these same statements on a real cluster, reads its own slot and must
-- describe every frame with the same line.  A frame one side accepts and
-- the other refuses, or reads differently, fails one of the two.
--
-- Each "SELECT * FROM decode();" ends a case; everything else is plain
-- SQL, one statement per line group ending in ";" (the Go side splits
-- there, so no statement may end a line with ";" inside a body).
--
-- The matrix: replica identity DEFAULT with and without a key, USING
-- INDEX, FULL and NOTHING, each through INSERT, UPDATE of a non-key
-- column, UPDATE of the key, DELETE and TRUNCATE; the built-in type
-- families, NULLs, an unchanged TOASTed value, generated and dropped
-- columns; a partition attached and detached mid-stream; records of
-- kafgres_produce between changes.
--
SET search_path = regress, public;
\set SHOW_CONTEXT never
CREATE SCHEMA contract;

-- replica identity DEFAULT on a table with a primary key: an update
-- carries the old key only when the key changed, a delete always does
CREATE TABLE contract.ri_pk (id int PRIMARY KEY, v text);
SELECT kafgres_add_mapping('c_ri_pk', 'contract.ri_pk', 'contract-ri') > 0 AS added;
INSERT INTO contract.ri_pk VALUES (1, 'a');
UPDATE contract.ri_pk SET v = 'b' WHERE id = 1;
UPDATE contract.ri_pk SET id = 2 WHERE id = 1;
DELETE FROM contract.ri_pk WHERE id = 2;
INSERT INTO contract.ri_pk VALUES (3, NULL);
TRUNCATE contract.ri_pk;
SELECT * FROM decode();

-- DEFAULT on a table without a primary key: never an old tuple, and a
-- delete carries no tuple at all (the broker renders it with old NULL)
CREATE TABLE contract.ri_nokey (a int, b text);
SELECT kafgres_add_mapping('c_ri_nokey', 'contract.ri_nokey', 'contract-ri') > 0 AS added;
INSERT INTO contract.ri_nokey VALUES (1, 'a');
UPDATE contract.ri_nokey SET b = 'b' WHERE a = 1;
UPDATE contract.ri_nokey SET a = 2 WHERE a = 1;
DELETE FROM contract.ri_nokey WHERE a = 2;
TRUNCATE contract.ri_nokey;
SELECT * FROM decode();

-- USING INDEX: the old tuple holds the index's columns, in column order
CREATE TABLE contract.ri_idx (id int, k2 int NOT NULL, k1 text NOT NULL, v text);
CREATE UNIQUE INDEX ri_idx_k ON contract.ri_idx (k1, k2);
ALTER TABLE contract.ri_idx REPLICA IDENTITY USING INDEX ri_idx_k;
SELECT kafgres_add_mapping('c_ri_idx', 'contract.ri_idx', 'contract-ri') > 0 AS added;
INSERT INTO contract.ri_idx VALUES (1, 10, 'x', 'a');
UPDATE contract.ri_idx SET v = 'b', id = 2;
UPDATE contract.ri_idx SET k2 = 11;
DELETE FROM contract.ri_idx;
TRUNCATE contract.ri_idx;
SELECT * FROM decode();

-- FULL: every update and delete carries the whole old row
CREATE TABLE contract.ri_full (id int PRIMARY KEY, v text, n int);
ALTER TABLE contract.ri_full REPLICA IDENTITY FULL;
SELECT kafgres_add_mapping('c_ri_full', 'contract.ri_full', 'contract-ri') > 0 AS added;
INSERT INTO contract.ri_full VALUES (1, 'a', NULL);
UPDATE contract.ri_full SET v = 'b';
UPDATE contract.ri_full SET id = 2;
DELETE FROM contract.ri_full;
TRUNCATE contract.ri_full;
SELECT * FROM decode();

-- NOTHING: never an old tuple; a delete carries no tuple at all
CREATE TABLE contract.ri_nothing (id int PRIMARY KEY, v text);
ALTER TABLE contract.ri_nothing REPLICA IDENTITY NOTHING;
SELECT kafgres_add_mapping('c_ri_nothing', 'contract.ri_nothing', 'contract-ri') > 0 AS added;
INSERT INTO contract.ri_nothing VALUES (1, 'a');
UPDATE contract.ri_nothing SET v = 'b';
UPDATE contract.ri_nothing SET id = 2;
DELETE FROM contract.ri_nothing;
TRUNCATE contract.ri_nothing;
SELECT * FROM decode();

-- every type family as its type's text output (the Go side sets the
-- DateStyle and TimeZone pg_regress runs with), NULLs, a generated
-- column, a dropped one left out, and an unchanged TOASTed value ('u')
CREATE TYPE contract.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN contract.posint AS int CHECK (VALUE > 0);
CREATE TYPE contract.pair AS (a int, b text);
CREATE TABLE contract.types (
    id int PRIMARY KEY,
    num numeric, f8 float8, txt text, vc varchar(10), ch char(3), bin bytea,
    js json, jb jsonb, ints int[], texts text[], r int4range, mr int4multirange,
    mood contract.mood, pos contract.posint, pair contract.pair,
    ip inet, net cidr, mac macaddr, pt point, bx box, circ circle,
    u uuid, d date, ts timestamptz, iv interval, bits varbit, flag bool,
    gone text,
    big text,
    twice int GENERATED ALWAYS AS (id * 2) STORED);
ALTER TABLE contract.types ALTER big SET STORAGE EXTERNAL;
ALTER TABLE contract.types DROP COLUMN gone;
SELECT kafgres_add_mapping('c_types', 'contract.types', 'contract-types') > 0 AS added;
INSERT INTO contract.types VALUES (1, 12.50, -1.5e-7, 'it''s "q"', 'vc', 'ab', '\x00ff',
    '{"b": 1,  "a": [null]}', '{"b": 1, "a": [null]}', '{1,NULL,3}', '{"a b",NULL,"c,d"}',
    '[1,5)', '{[1,3), [7,9)}', 'happy', 7, ROW(1, 'x y'),
    '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '(1,2)', '((0,0),(1,1))', '<(0,0),1>',
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29', '2024-02-29 12:00:00+00', '1 day 02:03:04',
    B'1011', true, repeat('0123456789', 1000));
INSERT INTO contract.types (id) VALUES (2);
UPDATE contract.types SET num = 'NaN', txt = 'über' WHERE id = 1;
UPDATE contract.types SET big = 'short' WHERE id = 1;
DELETE FROM contract.types WHERE id = 2;
SELECT * FROM decode();

-- a partition attached and then detached mid-stream: covered by the
-- parent's mapping only while attached; records of kafgres_produce keep
-- their place between the changes
CREATE TABLE contract.parted (id int, region text) PARTITION BY LIST (region);
CREATE TABLE contract.parted_eu PARTITION OF contract.parted FOR VALUES IN ('eu');
CREATE TABLE contract.parted_us (region text, id int);
SELECT kafgres_add_mapping('c_parted', 'contract.parted', 'contract-parted') > 0 AS added;
INSERT INTO contract.parted_us VALUES ('us', 1);
ALTER TABLE contract.parted ATTACH PARTITION contract.parted_us FOR VALUES IN ('us');
BEGIN;
INSERT INTO contract.parted VALUES (2, 'us'), (3, 'eu');
SELECT kafgres_produce('contract-parted', 'k', 'between') IS NOT NULL AS produced;
UPDATE contract.parted SET id = 4 WHERE id = 2;
COMMIT;
ALTER TABLE contract.parted DETACH PARTITION contract.parted_us;
INSERT INTO contract.parted_us VALUES ('us', 5);
DELETE FROM contract.parted;
SELECT * FROM decode();

DROP SCHEMA contract CASCADE;
SELECT * FROM decode();
