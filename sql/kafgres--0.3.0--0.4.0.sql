/* sql/kafgres--0.3.0--0.4.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.4.0'" to load this file. \quit

/*
 * 0.4.0: the WAL-to-log pipeline delivers every committed record exactly
 * once and no single mapping can stop it (issue #11).  As before there is
 * no separate install script: CREATE EXTENSION runs kafgres--0.1.0.sql and
 * the update chain.  docs/producing.md and docs/cdc.md describe the
 * behaviour the statements below implement.
 */

/* ---------------------------------------------------------------------
 * Section A: mapping lifecycle (dropped and altered tables, retired
 * definitions, TOAST)
 * --------------------------------------------------------------------- */

/*
 * A mapping's definition is fixed once written, and kept after the
 * mapping is removed for as long as changes it matched may still be on
 * their way: the output plugin matches each change against kafgres.mapping
 * as of the change's place in the WAL and tells the broker which mappings
 * matched (frame version 2), and the broker renders the change with
 * exactly those definitions, however long it took to get there
 * (docs/producing.md, "Which definition renders a change").
 */

/*
 * kafgres.mapping_retired: removed mappings' definitions, with when and
 * why.  Written by trigger mapping_retire; the broker records, when it
 * first sees a row, the transactions that may still carry changes the
 * mapping matched (drain_snapshot), then the WAL position after all of
 * them ended (drain_lsn), and deletes the row and the render function once
 * kafgres.delivery.applied_lsn has passed it.  Not dumped: it describes
 * this cluster's WAL.
 */
CREATE TABLE kafgres.mapping_retired (
    mapping_id     bigint      PRIMARY KEY,
    name           text        NOT NULL,
    source_relid   oid         NOT NULL,
    topic          text        NOT NULL,
    value_expr     text,
    key_expr       text,
    filter_expr    text,
    on_error       text        NOT NULL,
    owner_role     oid         NOT NULL,
    search_path    text        NOT NULL,
    created_at     timestamptz NOT NULL,
    retired_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
    reason         text        NOT NULL,
    drain_snapshot pg_snapshot,
    drain_lsn      pg_lsn
);
COMMENT ON TABLE kafgres.mapping_retired IS 'definitions of removed CDC mappings, kept until the changes they matched are delivered';
REVOKE ALL ON kafgres.mapping_retired FROM PUBLIC;

/*
 * Every removal of a mapping (kafgres_remove_mapping, a plain DELETE, the
 * event trigger below) keeps its definition.  SECURITY DEFINER: mapping
 * authors may delete their mappings but have no privileges on
 * kafgres.mapping_retired.
 */
CREATE FUNCTION kafgres.mapping_retire() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO kafgres.mapping_retired (mapping_id, name, source_relid, topic, value_expr, key_expr,
                                         filter_expr, on_error, owner_role, search_path, created_at, reason)
    VALUES (OLD.mapping_id, OLD.name, OLD.source_relid, OLD.topic, OLD.value_expr, OLD.key_expr,
            OLD.filter_expr, OLD.on_error, OLD.owner_role, OLD.search_path, OLD.created_at, 'removed')
    ON CONFLICT (mapping_id) DO NOTHING;
    RETURN OLD;
END
$$;
CREATE TRIGGER mapping_retire
    AFTER DELETE ON kafgres.mapping
    FOR EACH ROW EXECUTE FUNCTION kafgres.mapping_retire();

/*
 * Definitions are immutable: a change rendered later must find the
 * definition it matched, so a mapping is changed by removing it and adding
 * it again (which gives it a new mapping_id).
 */
CREATE FUNCTION kafgres.mapping_immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'mapping "%" cannot be changed', OLD.name
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = 'A mapping''s definition is fixed once written, so that every change is rendered with the definition it matched.',
              HINT = 'Remove it with kafgres_remove_mapping() and add it again with kafgres_add_mapping().';
END
$$;
CREATE TRIGGER mapping_immutable
    BEFORE UPDATE ON kafgres.mapping
    FOR EACH ROW EXECUTE FUNCTION kafgres.mapping_immutable();

/*
 * Snapshot markers of a removed mapping stay until its definition is
 * collected: its snapshot rows may still be on their way, and are rendered
 * only if their marker is there.
 */
ALTER TABLE kafgres.mapping_snapshot DROP CONSTRAINT mapping_snapshot_mapping_id_fkey;

/*
 * kafgres.mapping_source_dropped(): event trigger (sql_drop) removing the
 * mappings of dropped tables -- DROP TABLE, DROP SCHEMA ... CASCADE, DROP
 * OWNED -- with the reason kept in kafgres.mapping_retired.  It runs after
 * every DROP of anyone, so it must never make one fail: errors become a
 * WARNING, and the broker retires mappings whose table is gone when it
 * loads the definitions anyway (and for drops this trigger does not see,
 * e.g. with session_replication_role = replica).  SECURITY DEFINER: the
 * role dropping its table need not own the mapping.
 */
CREATE FUNCTION kafgres.mapping_source_dropped() RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rel record;
    v_m   record;
BEGIN
    FOR v_rel IN
        SELECT d.objid, d.object_identity
          FROM pg_catalog.pg_event_trigger_dropped_objects() AS d
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.objsubid OPERATOR(pg_catalog.=) 0
           AND EXISTS (SELECT 1 FROM kafgres.mapping AS m
                        WHERE m.source_relid OPERATOR(pg_catalog.=) d.objid)
    LOOP
        FOR v_m IN
            DELETE FROM kafgres.mapping AS m
             WHERE m.source_relid OPERATOR(pg_catalog.=) v_rel.objid
            RETURNING m.mapping_id, m.name
        LOOP
            UPDATE kafgres.mapping_retired AS r
               SET reason = pg_catalog.format('source table %s was dropped', v_rel.object_identity)
             WHERE r.mapping_id OPERATOR(pg_catalog.=) v_m.mapping_id;
            RAISE NOTICE 'mapping "%" removed: its source table % was dropped', v_m.name, v_rel.object_identity;
        END LOOP;
    END LOOP;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'could not remove the mappings of dropped tables: %', SQLERRM
        USING HINT = 'The kafgres broker removes them when it next loads the mapping definitions.';
END
$$;
CREATE EVENT TRIGGER kafgres_mapping_source_dropped ON sql_drop
    EXECUTE FUNCTION kafgres.mapping_source_dropped();

/*
 * kafgres.mapping_source_altered(): event trigger (ddl_command_end) telling
 * the broker that a mapped table was altered (renamed, moved, a column's
 * type changed) or a schema renamed, so that it reloads the definitions
 * and makes the render functions again for the table's new name and row
 * type.  Never fails the DDL.
 */
CREATE FUNCTION kafgres.mapping_source_altered() RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (TG_TAG OPERATOR(pg_catalog.=) 'ALTER SCHEMA' AND EXISTS (SELECT 1 FROM kafgres.mapping))
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger_ddl_commands() AS c
                    JOIN kafgres.mapping AS m ON m.source_relid OPERATOR(pg_catalog.=) c.objid
                   WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass) THEN
        PERFORM pg_catalog.pg_notify('kafgres_mappings', '');
    END IF;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'could not notify the kafgres broker of % on a mapped table: %', TG_TAG, SQLERRM;
END
$$;
CREATE EVENT TRIGGER kafgres_mapping_source_altered ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'ALTER SCHEMA')
    EXECUTE FUNCTION kafgres.mapping_source_altered();

REVOKE ALL ON FUNCTION kafgres.mapping_retire() FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres.mapping_immutable() FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres.mapping_source_dropped() FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres.mapping_source_altered() FROM PUBLIC;

/*
 * kafgres_add_mapping: as in 0.3.0, and
 * - partitioned tables can be mapped: the output plugin matches a change
 *   of any of its partitions, attached now or later, to the mappings of
 *   the partitioned table (and of its partitioned ancestors); privileges
 *   are checked on the table mapped, as a query through it would;
 * - a WARNING when an update may leave out a value the mapping cannot then
 *   render: a TOASTed value the update did not change is not in the WAL,
 *   and only REPLICA IDENTITY FULL puts it into the old image.
 */
CREATE OR REPLACE FUNCTION kafgres_add_mapping(mapping_name text, source_table regclass, topic text,
                                               value_expr text DEFAULT NULL, key_expr text DEFAULT NULL,
                                               filter_expr text DEFAULT NULL,
                                               on_error text DEFAULT 'dead_letter')
RETURNS bigint
LANGUAGE plpgsql
SECURITY INVOKER
AS $$
DECLARE
    v_path    pg_catalog.text := pg_catalog.current_setting('search_path');
    v_name    pg_catalog.text := kafgres_add_mapping.mapping_name;
    v_topic   pg_catalog.text := kafgres_add_mapping.topic;
    v_rel     pg_catalog.pg_class%ROWTYPE;
    v_source  pg_catalog.text;
    v_denial  pg_catalog.text;
    v_arg     pg_catalog.text;
    v_expr    pg_catalog.text;
    v_probe   pg_catalog.text;
    v_id      pg_catalog.int8;
    v_state   pg_catalog.text;
    v_msg     pg_catalog.text;
    v_detail  pg_catalog.text;
    v_hint    pg_catalog.text;
    v_toast   pg_catalog.text;
    v_fix     pg_catalog.text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

    IF v_name IS NULL THEN
        RAISE EXCEPTION 'argument mapping_name must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_name !~ '^[a-zA-Z0-9._-]{1,200}$' THEN
        RAISE EXCEPTION 'invalid mapping name "%"', v_name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument mapping_name must be 1 to 200 ASCII letters, digits, ".", "_" or "-".';
    END IF;
    IF source_table IS NULL THEN
        RAISE EXCEPTION 'argument source_table must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO v_rel FROM pg_catalog.pg_class AS c WHERE c.oid = source_table;
    IF v_rel.relkind <> 'r' AND v_rel.relkind <> 'p' THEN
        RAISE EXCEPTION 'source_table % is not a table', source_table
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = 'Only ordinary and partitioned tables have changes to map.';
    END IF;
    IF v_rel.relpersistence <> 'p' THEN
        RAISE EXCEPTION 'source_table % is not a permanent table', source_table
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = 'Changes of temporary and unlogged tables are not written to the WAL, so they cannot be decoded.';
    END IF;
    v_source := pg_catalog.format('%I.%I',
                    (SELECT n.nspname FROM pg_catalog.pg_namespace AS n WHERE n.oid = v_rel.relnamespace),
                    v_rel.relname);
    v_denial := kafgres.mapping_denial(v_rel.oid,
                    (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname = CURRENT_USER));
    IF v_denial IS NOT NULL THEN
        RAISE EXCEPTION 'permission denied to map table %', v_source
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.upper(pg_catalog.left(v_denial, 1)) || pg_catalog.substr(v_denial, 2) || '.',
                  HINT = 'A mapping publishes every change of its table: its owner must be able to SELECT every column, and to bypass row-level security if the table has it.';
    END IF;

    IF v_topic IS NULL THEN
        RAISE EXCEPTION 'argument topic must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF v_topic = '' OR v_topic = '.' OR v_topic = '..' OR pg_catalog.length(v_topic) > 249
       OR v_topic !~ '^[a-zA-Z0-9._-]+$' THEN
        RAISE EXCEPTION 'invalid topic name "%"', v_topic
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument topic must follow Kafka''s topic name rules: 1 to 249 ASCII letters, digits, ".", "_" or "-", and not "." or "..".';
    END IF;
    IF on_error IS NULL OR (on_error <> 'dead_letter' AND on_error <> 'stall') THEN
        RAISE EXCEPTION 'invalid on_error "%"', on_error
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument on_error must be ''dead_letter'' or ''stall''.';
    END IF;
    IF EXISTS (SELECT 1 FROM kafgres.mapping AS m WHERE m.name = v_name) THEN
        RAISE EXCEPTION 'mapping "%" already exists', v_name
            USING ERRCODE = 'duplicate_object';
    END IF;

    -- shape first (nothing is spliced before this), then meaning
    PERFORM public.kafgres_validate_expression(value_expr, 'value_expr');
    PERFORM public.kafgres_validate_expression(key_expr, 'key_expr');
    PERFORM public.kafgres_validate_expression(filter_expr, 'filter_expr');

    /*
     * Probe each expression as the caller, in the scope the broker renders
     * it in: the caller's search_path.  LIMIT 0 evaluates nothing, but the
     * executor still checks privileges on every table the expression reads.
     */
    FOREACH v_arg IN ARRAY ARRAY['value_expr', 'key_expr', 'filter_expr'] LOOP
        v_expr := CASE WHEN v_arg = 'value_expr' THEN value_expr
                       WHEN v_arg = 'key_expr' THEN key_expr
                       ELSE filter_expr END;
        CONTINUE WHEN v_expr IS NULL;
        -- the filter goes in a WHERE, which insists on boolean, not
        -- merely something castable to it (as an integer is)
        v_probe := pg_catalog.format(
            'SELECT %s FROM (VALUES (''I''::pg_catalog.text, ''0/0''::pg_catalog.pg_lsn, 0::pg_catalog.int8, pg_catalog.now()))'
            ' AS c(op, lsn, xid, commit_ts)'
            ' LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::%s, NULL::pg_catalog.jsonb) AS new ON false'
            ' LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::%s, NULL::pg_catalog.jsonb) AS old ON false'
            ' WHERE %s LIMIT 0',
            CASE WHEN v_arg = 'filter_expr' THEN '1' ELSE '(' || v_expr || ')' END,
            v_source, v_source,
            CASE WHEN v_arg = 'filter_expr' THEN '(' || v_expr || ')' ELSE 'true' END);
        BEGIN
            PERFORM pg_catalog.set_config('search_path', v_path, true);
            EXECUTE v_probe;
            PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT,
                                    v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
            v_detail := coalesce(nullif(v_detail, '') || ' ', '')
                        || 'In argument ' || v_arg || ' of mapping "' || v_name || '".';
            IF coalesce(v_hint, '') = '' THEN
                RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_msg, DETAIL = v_detail;
            END IF;
            RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_msg, DETAIL = v_detail, HINT = v_hint;
        END;
    END LOOP;

    PERFORM kafgres.mapping_topic(v_topic);

    -- owner_role is set by trigger mapping_set_owner; this value is only a placeholder
    INSERT INTO kafgres.mapping AS m (name, source_relid, topic, value_expr, key_expr,
                                      filter_expr, on_error, owner_role, search_path)
    VALUES (v_name, source_table, v_topic, value_expr, key_expr, filter_expr, on_error,
            0, v_path)
    RETURNING m.mapping_id INTO v_id;

    /*
     * Changes are decoded per leaf table, so each leaf's replica identity
     * counts.  A column that is not PLAIN may be stored out of line.
     */
    SELECT pg_catalog.string_agg(DISTINCT pg_catalog.quote_ident(a.attname), ', '),
           pg_catalog.string_agg(DISTINCT pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY FULL;',
                                                            c.oid::pg_catalog.regclass), ' ')
      INTO v_toast, v_fix
      FROM (SELECT v_rel.oid AS relid
            UNION
            SELECT t.relid FROM pg_catalog.pg_partition_tree(v_rel.oid) AS t WHERE t.isleaf) AS t
      JOIN pg_catalog.pg_class AS c ON c.oid = t.relid
      JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid
     WHERE c.relkind = 'r' AND c.relreplident <> 'f'
       AND a.attnum > 0 AND NOT a.attisdropped AND a.attstorage <> 'p';
    IF v_toast IS NOT NULL THEN
        RAISE WARNING 'mapping "%": table % has columns that may be stored out of line (TOASTed), and its replica identity is not FULL', v_name, v_source
            USING DETAIL = 'An update that leaves such a value unchanged does not write it to the WAL, so the mapping cannot render that update: it goes to kafgres.dead_letter (or stalls a mapping with on_error ''stall''). Columns: ' || v_toast || '.',
                  HINT = v_fix;
    END IF;

    PERFORM pg_catalog.pg_notify('kafgres_mappings', '');
    PERFORM pg_catalog.set_config('search_path', v_path, true);
    RETURN v_id;
EXCEPTION WHEN unique_violation THEN
    RAISE EXCEPTION 'mapping "%" already exists', v_name
        USING ERRCODE = 'duplicate_object';
END
$$;

/* ---------------------------------------------------------------------
 * Section B: placement and dead letters of the producer
 * --------------------------------------------------------------------- */

/*
 * kafgres.partition_epoch: from which source position (a transaction's
 * commit end LSN) on the broker placed a topic's records among how many
 * partitions.  A replay after a crash must place every record where the
 * first attempt did, and partitions may have been added in between;
 * written by the broker before it appends anything placed by the epoch
 * (producer/placement.go).  Not dumped: positions mean nothing in
 * another cluster.
 */
CREATE TABLE kafgres.partition_epoch (
    topic_id   bigint NOT NULL REFERENCES kafgres.topic ON DELETE CASCADE,
    from_lsn   pg_lsn NOT NULL,
    partitions int    NOT NULL CHECK (partitions > 0),
    PRIMARY KEY (topic_id, from_lsn)
);
COMMENT ON TABLE kafgres.partition_epoch IS 'partition counts the broker placed SQL-produced and CDC records by, per source position';
REVOKE ALL ON kafgres.partition_epoch FROM PUBLIC;

/*
 * kafgres.pipeline: how far the WAL-to-log pipeline has got, and what it
 * could not deliver.  Records that cannot be appended (their topic or
 * partition does not exist, too large, a message that does not parse) are
 * kept in kafgres.dead_letter with mapping_id NULL and counted here; rows
 * CDC mappings could not render are counted per mapping in
 * kafgres.mappings.
 */
CREATE VIEW kafgres.pipeline AS
    SELECT d.applied_lsn,
           pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), d.applied_lsn)::bigint AS lag_bytes,
           (SELECT pg_catalog.count(*) FROM kafgres.dead_letter AS l
             WHERE l.mapping_id IS NULL)                                              AS dead_lettered,
           (SELECT pg_catalog.max(l.created_at) FROM kafgres.dead_letter AS l
             WHERE l.mapping_id IS NULL)                                              AS last_dead_letter_at,
           public.kafgres_rejected_messages()                                         AS rejected_messages
      FROM kafgres.delivery AS d;
COMMENT ON VIEW kafgres.pipeline IS 'delivery position of SQL-produced and CDC records, and how many could not be appended';

/*
 * Mapping ids are never reused, not even by another installation of the
 * extension in the same database: frames carry the ids of the mappings a
 * change matched, and a change decoded after DROP EXTENSION and CREATE
 * EXTENSION must not find an unrelated new mapping under its old id.  New
 * ids therefore start at the installation's time in milliseconds, far
 * beyond any earlier installation's.
 */
DO $$
BEGIN
    EXECUTE pg_catalog.format('ALTER TABLE kafgres.mapping ALTER COLUMN mapping_id RESTART WITH %s',
                              (pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000)::bigint);
END
$$;

/* ---------------------------------------------------------------------
 * Section C: cost of kafgres_produce
 * --------------------------------------------------------------------- */
