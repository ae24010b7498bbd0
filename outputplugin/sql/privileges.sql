--
-- privileges: nothing of kafgres is granted to PUBLIC but the pure
-- validator and kafgres.snapshot_row (which checks for itself); the grants
-- of docs/sql.md let a role produce, or manage its own mappings, and no
-- more.
--
SET search_path = regress, public;
\set SHOW_CONTEXT never
CREATE ROLE regress_nobody;
CREATE ROLE regress_app;
CREATE ROLE regress_alice;
CREATE ROLE regress_bob;
SELECT kafgres_create_topic('priv', 1) > 0 AS created;

-- a role without grants
SELECT kafgres_rejected_messages() AS rejected_before \gset
SET ROLE regress_nobody;
SELECT kafgres_produce('priv', 'k', 'v');
SELECT kafgres_produce('priv', 'k'::bytea, 'v'::bytea);
SELECT kafgres_produce('priv', 'k'::bytea, 'v'::bytea, ARRAY['h'], ARRAY['v'::bytea]);
SELECT kafgres_create_topic('mine', 1);
SELECT kafgres_drop_topic('priv');
SELECT kafgres_create_partitions('priv', 2);
SELECT * FROM kafgres_partition_offsets('priv');
SELECT * FROM kafgres_archive_status();
SELECT * FROM kafgres.archive_status;
SELECT kafgres_rebase_source_positions('0/0');
SELECT kafgres_rejected_messages();
SELECT kafgres_wait_delivered('0/0', '0');
SELECT kafgres_add_mapping('m', 'pg_class', 'priv');
SELECT * FROM kafgres.topic;
SELECT * FROM kafgres.mappings;
-- the validator is for everyone
SELECT kafgres_validate_expression('new.id');
-- anyone can write a logical message with kafgres's prefix, but it is
-- dropped: only kafgres_produce signs
SELECT 'emitted' FROM pg_logical_emit_message(true, 'kafgres',
       '\x010004'::bytea || convert_to('priv', 'UTF8')
       || '\xffffffffffffffff00000006666f726765640000'::bytea);
RESET ROLE;
SELECT * FROM decode();
SELECT kafgres_rejected_messages() - :rejected_before AS rejected;

-- a role that may produce (docs/sql.md) needs nothing on kafgres.topic
GRANT EXECUTE ON FUNCTION kafgres_produce(text, text, text, jsonb, int),
                          kafgres_produce(text, bytea, bytea, jsonb, int),
                          kafgres_produce(text, bytea, bytea, text[], bytea[], int)
      TO regress_app;
SET ROLE regress_app;
SELECT kafgres_produce('priv', 'k', 'from app') IS NOT NULL AS produced;
SELECT kafgres_produce('priv', 'k'::bytea, 'from app'::bytea, ARRAY['h'], ARRAY['v'::bytea]) IS NOT NULL AS produced;
SELECT kafgres_produce('nope', 'k', 'v', partition => 3);
SELECT * FROM kafgres.topic;
SELECT kafgres_wait_delivered('0/0', '0');
RESET ROLE;
GRANT USAGE ON SCHEMA kafgres TO regress_app;
GRANT SELECT ON kafgres.delivery TO regress_app;
GRANT EXECUTE ON FUNCTION kafgres_wait_delivered(pg_lsn, interval) TO regress_app;
SET ROLE regress_app;
SELECT kafgres_wait_delivered('0/0', '0');
RESET ROLE;
SELECT * FROM decode();

-- mapping authors (docs/sql.md, "Privileges for mapping authors")
CREATE SCHEMA authors;
GRANT USAGE ON SCHEMA authors TO regress_alice, regress_bob;
CREATE TABLE authors.alice_t (id int PRIMARY KEY, v text);
ALTER TABLE authors.alice_t OWNER TO regress_alice;
CREATE TABLE authors.bob_t (id int PRIMARY KEY, v text);
ALTER TABLE authors.bob_t OWNER TO regress_bob;
CREATE TABLE authors.partly (id int PRIMARY KEY, secret text);
GRANT SELECT (id) ON authors.partly TO regress_alice;
CREATE TABLE authors.guarded (id int PRIMARY KEY);
GRANT SELECT ON authors.guarded TO regress_alice;
ALTER TABLE authors.guarded ENABLE ROW LEVEL SECURITY;
CREATE TABLE authors.lookup (id int, label text);
INSERT INTO authors.alice_t VALUES (1, 'a'), (2, 'b');
INSERT INTO authors.bob_t VALUES (1, 'x');
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['regress_alice', 'regress_bob'] LOOP
        EXECUTE format('GRANT USAGE ON SCHEMA kafgres TO %I', r);
        EXECUTE format('GRANT SELECT, INSERT, DELETE ON kafgres.mapping TO %I', r);
        EXECUTE format('GRANT SELECT ON kafgres.mappings, kafgres.dead_letter TO %I', r);
        EXECUTE format('GRANT INSERT ON kafgres.mapping_snapshot TO %I', r);
        EXECUTE format('GRANT EXECUTE ON FUNCTION kafgres_add_mapping(text, regclass, text, text, text, text, text),
                                                   kafgres_remove_mapping(text),
                                                   kafgres_preview_mapping(text, int),
                                                   kafgres_snapshot_mapping(text),
                                                   kafgres.mapping_topic(text) TO %I', r);
    END LOOP;
END
$$;

SET ROLE regress_alice;
SELECT kafgres_add_mapping('alice', 'authors.alice_t', 'priv') > 0 AS added;
-- she must be able to read all of a table she maps, bypassing row security
SELECT kafgres_add_mapping('alice_bob', 'authors.bob_t', 'priv');
SELECT kafgres_add_mapping('alice_partly', 'authors.partly', 'priv');
SELECT kafgres_add_mapping('alice_guarded', 'authors.guarded', 'priv');
-- and whatever her expressions read
SELECT kafgres_add_mapping('alice_lookup', 'authors.alice_t', 'priv',
           value_expr => '(SELECT label FROM authors.lookup l WHERE l.id = new.id)');
-- nor can plain SQL get round it, or name someone else as owner
INSERT INTO kafgres.mapping (name, source_relid, topic, owner_role, search_path)
VALUES ('alice_bob', 'authors.bob_t'::regclass, 'priv', 10, 'public');
INSERT INTO kafgres.mapping (name, source_relid, topic, owner_role, search_path)
VALUES ('alice_sql', 'authors.alice_t'::regclass, 'priv', (SELECT oid FROM pg_roles WHERE rolname = 'regress_bob'), 'public');
-- topics: checked (or auto-created) for her, no grant on kafgres.topic
SELECT kafgres_add_mapping('alice_new_topic', 'authors.alice_t', 'alice-topic') > 0 AS added;
RESET ROLE;
SELECT name, owner FROM kafgres.mappings ORDER BY name;
SELECT name FROM kafgres.topic WHERE name LIKE 'alice%' ORDER BY name;

SET ROLE regress_bob;
SELECT kafgres_add_mapping('bob', 'authors.bob_t', 'priv') > 0 AS added;
-- everyone sees every mapping, changes only their own
SELECT name, owner FROM kafgres.mappings ORDER BY name;
SELECT kafgres_remove_mapping('alice');
SELECT * FROM kafgres_preview_mapping('alice');
SELECT kafgres_snapshot_mapping('alice');
WITH d AS (DELETE FROM kafgres.mapping WHERE name = 'alice' RETURNING 1)
SELECT count(*) AS deleted FROM d;
-- kafgres.snapshot_row, executable by PUBLIC, checks the owner itself
\set VERBOSITY sqlstate
SELECT kafgres.snapshot_row(mapping_id, '{"id": 1}') FROM kafgres.mapping WHERE name = 'alice';
\set VERBOSITY default
SELECT * FROM kafgres_preview_mapping('bob');
SELECT kafgres_snapshot_mapping('bob');
RESET ROLE;

SET ROLE regress_alice;
SELECT * FROM kafgres_preview_mapping('alice');
SELECT kafgres_snapshot_mapping('alice');
SELECT kafgres_remove_mapping('alice_new_topic');
RESET ROLE;
-- a member of the owner role counts as owner
GRANT regress_alice TO regress_bob;
SET ROLE regress_bob;
SELECT * FROM kafgres_preview_mapping('alice', 1);
RESET ROLE;
REVOKE regress_alice FROM regress_bob;
SELECT * FROM decode();

-- dead letters hold row images: each owner sees those of its own mappings
INSERT INTO kafgres.dead_letter (mapping_id, mapping_name, op, error, new_row)
SELECT mapping_id, name, 'I', 'regress', '{"id": 1}' FROM kafgres.mapping WHERE name IN ('alice', 'bob');
SET ROLE regress_alice;
SELECT mapping_name, new_row FROM kafgres.dead_letter;
SET ROLE regress_bob;
SELECT mapping_name, new_row FROM kafgres.dead_letter;
RESET ROLE;

-- an owner who loses the right to read the table: preview says the
-- mapping is paused, and its dead letters are no longer shown
ALTER TABLE authors.bob_t OWNER TO CURRENT_USER;
SET ROLE regress_bob;
SELECT * FROM kafgres_preview_mapping('bob');
SELECT mapping_name, new_row FROM kafgres.dead_letter;
RESET ROLE;
DELETE FROM kafgres.dead_letter;

DROP SCHEMA authors CASCADE;
SELECT kafgres_drop_topic('priv'), kafgres_drop_topic('alice-topic');
REVOKE ALL ON SCHEMA kafgres FROM regress_app, regress_alice, regress_bob;
REVOKE ALL ON ALL TABLES IN SCHEMA kafgres FROM regress_app, regress_alice, regress_bob;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA kafgres FROM regress_app, regress_alice, regress_bob;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM regress_app, regress_alice, regress_bob;
DROP ROLE regress_nobody, regress_app, regress_alice, regress_bob;
SELECT * FROM decode();
