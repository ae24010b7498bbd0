--
-- drop_extension: DROP EXTENSION kafgres with the slot kept.  Changes from
-- before the drop that are decoded after it are not sent -- the mapping
-- definitions they would be rendered with are gone -- but messages are;
-- decoding goes on, and after CREATE EXTENSION new mappings apply from
-- their creation.  DROP EXTENSION waits for the slot to decode every
-- change of kafgres.mapping first (outputplugin/dropguard.c).  Runs last:
-- it drops everything the others used.
--
SET search_path = regress, public;
\set SHOW_CONTEXT never
CREATE TABLE kept (id int PRIMARY KEY);
SELECT kafgres_add_mapping('kept', 'kept', 'kept') > 0 AS added;

-- The slot has not decoded that change of kafgres.mapping: decoding it
-- after the drop would fail for good, so the drop is refused -- also in
-- the transaction that changed a mapping.
DROP EXTENSION kafgres;
BEGIN;
SELECT kafgres_remove_mapping('kept');
DROP EXTENSION kafgres;
ROLLBACK;

-- Once the slot has read past the change and its catalog_xmin has moved
-- past it, the drop goes ahead.  catalog_xmin moves at a running-
-- transactions record the slot reads and confirms, and only once the
-- candidate before has been taken up: two rounds are always enough.
CHECKPOINT;
SELECT * FROM decode();
CHECKPOINT;
SELECT * FROM decode();
INSERT INTO kept VALUES (1);
SELECT kafgres_produce('kept', 'before the drop', 'v') IS NOT NULL AS produced;
DROP EXTENSION kafgres;
INSERT INTO kept VALUES (2);
SELECT * FROM decode();

-- without the extension kafgres_produce is gone; the plugin sends nothing
-- of the changes
SELECT kafgres_produce('kept', 'k', 'v');
INSERT INTO kept VALUES (3);
SELECT * FROM decode();

CREATE EXTENSION kafgres;
SELECT kafgres_produce('kept', 'after create', 'v') IS NOT NULL AS produced;
INSERT INTO kept VALUES (4);
SELECT kafgres_add_mapping('kept', 'kept', 'kept') > 0 AS added;
INSERT INTO kept VALUES (5);
CHECKPOINT;
SELECT * FROM decode();
CHECKPOINT;
SELECT * FROM decode();

-- the update path ends at the same version, and works
DROP EXTENSION kafgres;
CREATE EXTENSION kafgres VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'kafgres';
ALTER EXTENSION kafgres UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'kafgres';
SELECT kafgres_produce('kept', 'after update', 'v') IS NOT NULL AS produced;
SELECT kafgres_add_mapping('kept', 'kept', 'kept') > 0 AS added;
INSERT INTO kept VALUES (6);
SELECT * FROM decode();

-- A mapping removed and not yet decoded: the drop is refused until the
-- slot has caught up, and decoding goes on after it.
SELECT kafgres_remove_mapping('kept');
DROP EXTENSION kafgres;
CHECKPOINT;
SELECT * FROM decode();
CHECKPOINT;
SELECT * FROM decode();
DROP EXTENSION kafgres;
INSERT INTO kept VALUES (7);
SELECT * FROM decode();

DROP TABLE kept;
SELECT pg_drop_replication_slot('kafgres');
