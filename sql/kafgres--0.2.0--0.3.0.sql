/* sql/kafgres--0.2.0--0.3.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.3.0'" to load this file. \quit

/*
 * 0.3.0: safe to install in a production database (issue #10).  Like
 * 0.2.0 there is no separate install script: CREATE EXTENSION runs
 * kafgres--0.1.0.sql and the update chain, so fresh and updated
 * installations are built by the same statements.  docs/security.md says
 * what was checked and why each statement below is the way it is.
 */

/* ---------------------------------------------------------------------
 * Section A: mapping privileges, preview, render isolation
 * --------------------------------------------------------------------- */

/*
 * Every function below, and every older plpgsql function ALTERed at the
 * end of this section, runs with search_path pinned to pg_catalog,
 * pg_temp, so that nothing in it resolves through the caller's
 * search_path; names are qualified as well.  The exception is
 * kafgres_add_mapping, which needs the caller's search_path (it is stored
 * with the mapping) and so pins it itself, first thing.
 */

/*
 * kafgres.mapping_denial(source_relid, role): why role may not map the
 * table, or NULL when it may.  A mapping publishes every change of its
 * table, read from the WAL, so its owner must be able to read all of it:
 * SELECT on every column (on the table, or on each column), and, when the
 * table has row-level security, bypass it -- the WAL is not filtered by row
 * security -- as superusers, roles with BYPASSRLS and the table's owner
 * (unless FORCE ROW LEVEL SECURITY) do.  NULL for a table that does not
 * exist: there is nothing to read (the broker reports such a mapping as
 * broken).
 *
 * Used by kafgres_add_mapping, the mapping_set_owner trigger, the broker
 * (which pauses a mapping whose owner lost the right) and dead_letter's row
 * security.  It reads only what pg_class, pg_attribute, pg_roles and the
 * has_*_privilege functions tell everyone, so EXECUTE stays with PUBLIC.
 */
CREATE FUNCTION kafgres.mapping_denial(source_relid oid, role oid)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rel  pg_catalog.pg_class%ROWTYPE;
    v_role pg_catalog.pg_roles%ROWTYPE;
    v_cols pg_catalog.text[];
BEGIN
    SELECT * INTO v_rel FROM pg_catalog.pg_class AS c
     WHERE c.oid OPERATOR(pg_catalog.=) mapping_denial.source_relid;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO v_role FROM pg_catalog.pg_roles AS r
     WHERE r.oid OPERATOR(pg_catalog.=) mapping_denial.role;
    IF NOT FOUND THEN
        RETURN pg_catalog.format('role with OID %s does not exist', mapping_denial.role);
    END IF;
    IF v_role.rolsuper THEN
        RETURN NULL;
    END IF;

    IF NOT pg_catalog.has_table_privilege(v_role.oid, v_rel.oid, 'SELECT') THEN
        SELECT pg_catalog.array_agg(pg_catalog.quote_ident(a.attname) ORDER BY a.attnum) INTO v_cols
          FROM pg_catalog.pg_attribute AS a
         WHERE a.attrelid OPERATOR(pg_catalog.=) v_rel.oid
           AND a.attnum OPERATOR(pg_catalog.>) 0
           AND NOT a.attisdropped
           AND NOT pg_catalog.has_column_privilege(v_role.oid, v_rel.oid, a.attnum, 'SELECT');
        IF v_cols IS NOT NULL THEN
            RETURN pg_catalog.format('role "%s" may not SELECT %s %s of table %s', v_role.rolname,
                       CASE WHEN pg_catalog.cardinality(v_cols) OPERATOR(pg_catalog.=) 1
                            THEN 'column' ELSE 'columns' END,
                       pg_catalog.array_to_string(v_cols, ', '),
                       v_rel.oid::pg_catalog.regclass);
        END IF;
    END IF;

    IF v_rel.relrowsecurity AND NOT v_role.rolbypassrls
       AND NOT (pg_catalog.pg_has_role(v_role.oid, v_rel.relowner, 'USAGE') AND NOT v_rel.relforcerowsecurity) THEN
        RETURN pg_catalog.format('role "%s" does not bypass row-level security on table %s '
                                 '(changes decoded from the WAL are not filtered by it)',
                                 v_role.rolname, v_rel.oid::pg_catalog.regclass);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION kafgres.mapping_denial(oid, oid) IS 'why a role may not map a table (NULL if it may): SELECT on every column, and row security bypassed';

/*
 * owner_role is always the role that wrote the row (as before), and that
 * role must be allowed to map the table: a mapping inserted with plain SQL
 * is held to the same rule as kafgres_add_mapping.
 */
CREATE OR REPLACE FUNCTION kafgres.mapping_set_owner() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_denial pg_catalog.text;
BEGIN
    NEW.owner_role := (SELECT r.oid FROM pg_catalog.pg_roles AS r
                        WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER);
    v_denial := kafgres.mapping_denial(NEW.source_relid, NEW.owner_role);
    IF v_denial IS NOT NULL THEN
        RAISE EXCEPTION 'permission denied to map table %', NEW.source_relid::pg_catalog.regclass
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.upper(pg_catalog.left(v_denial, 1))
                           OPERATOR(pg_catalog.||) pg_catalog.substr(v_denial, 2) OPERATOR(pg_catalog.||) '.',
                  HINT = 'A mapping publishes every change of its table: its owner must be able to SELECT every column, and to bypass row-level security if the table has it.';
    END IF;
    RETURN NEW;
END
$$;

/*
 * kafgres_add_mapping: as in 0.1.0, plus the check above (before anything
 * else is looked at) and immunity to the caller's search_path.  It cannot
 * have a SET search_path clause, since it stores the caller's search_path
 * with the mapping and probes the expressions in it; instead it reads it,
 * pins pg_catalog, pg_temp with set_config(..., true) for its own
 * statements, switches back only around the probe, and restores it before
 * returning.  An error rolls the setting back with the (sub)transaction.
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
    IF v_rel.relkind <> 'r' THEN
        RAISE EXCEPTION 'source_table % is not a table', source_table
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = CASE WHEN v_rel.relkind = 'p'
                                THEN 'Changes of a partitioned table are decoded per partition; map each partition.'
                                ELSE 'Only ordinary tables have changes to map.' END;
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

    PERFORM pg_catalog.pg_notify('kafgres_mappings', '');
    PERFORM pg_catalog.set_config('search_path', v_path, true);
    RETURN v_id;
EXCEPTION WHEN unique_violation THEN
    RAISE EXCEPTION 'mapping "%" already exists', v_name
        USING ERRCODE = 'duplicate_object';
END
$$;

/*
 * kafgres_preview_mapping(name, limit): what the mapping would produce for
 * the table's current rows, rendered as inserts.  0.1.0 ran the mapping's
 * expressions as the caller: a superuser previewing someone's mapping ran
 * that someone's code as a superuser.  Now they run as the mapping's
 * owner, the way the broker runs them, whoever calls:
 *
 * - only members of the owner role may preview (superusers are members of
 *   every role);
 * - the expressions (validated, and with the default value qualified) are
 *   put into a temporary SECURITY DEFINER function with the mapping's
 *   search_path pinned, which is then given to the owner.  Postgres itself
 *   checks that the caller may do that (ALTER ... OWNER TO needs membership
 *   in the new owner), and refuses SET ROLE inside a security-definer
 *   function, so the expressions cannot get back to the caller's role;
 * - all of it happens in a subtransaction that is always rolled back, so
 *   no setting the expressions make (set_config with is_local true or
 *   false, search_path included) and not the function itself survives the
 *   call; prepared statements, which do not roll back, that the
 *   expressions made are deallocated.
 *
 * This needs a read-write transaction and the TEMP privilege on the
 * database (both the caller's and, unless the caller is a superuser, the
 * owner's), as any temporary object does.
 */
CREATE OR REPLACE FUNCTION kafgres_preview_mapping(mapping_name text, "limit" int DEFAULT 10)
RETURNS TABLE (key text, value text)
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_m       kafgres.mapping%ROWTYPE;
    v_owner   pg_catalog.name;
    v_source  pg_catalog.text;
    v_denial  pg_catalog.text;
    v_path    pg_catalog.text;
    v_fn      pg_catalog.text;
    v_body    pg_catalog.text;
    v_keys    pg_catalog.text[];
    v_values  pg_catalog.text[];
    v_stmt    pg_catalog.text;
    v_started pg_catalog.timestamptz := pg_catalog.statement_timestamp();
BEGIN
    SELECT * INTO v_m FROM kafgres.mapping AS m
     WHERE m.name OPERATOR(pg_catalog.=) kafgres_preview_mapping.mapping_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'mapping "%" does not exist', mapping_name
            USING ERRCODE = 'undefined_object';
    END IF;
    SELECT r.rolname INTO v_owner FROM pg_catalog.pg_roles AS r
     WHERE r.oid OPERATOR(pg_catalog.=) v_m.owner_role;
    IF v_owner IS NULL THEN
        RAISE EXCEPTION 'owner of mapping "%" (role with OID %) does not exist', mapping_name, v_m.owner_role
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(v_m.owner_role, 'MEMBER') THEN
        RAISE EXCEPTION 'must be owner of mapping "%"', mapping_name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('Only members of role "%s" may preview it.', v_owner);
    END IF;
    SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) INTO v_source
      FROM pg_catalog.pg_class AS c
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE c.oid OPERATOR(pg_catalog.=) v_m.source_relid;
    IF v_source IS NULL THEN
        RAISE EXCEPTION 'source table of mapping "%" does not exist', mapping_name
            USING ERRCODE = 'undefined_table',
                  HINT = 'Remove the mapping with kafgres_remove_mapping().';
    END IF;
    v_denial := kafgres.mapping_denial(v_m.source_relid, v_m.owner_role);
    IF v_denial IS NOT NULL THEN
        RAISE EXCEPTION 'mapping "%" is paused', mapping_name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.upper(pg_catalog.left(v_denial, 1)) OPERATOR(pg_catalog.||)
                           pg_catalog.substr(v_denial, 2) OPERATOR(pg_catalog.||) '.';
    END IF;
    PERFORM public.kafgres_validate_expression(v_m.value_expr, 'value_expr');
    PERFORM public.kafgres_validate_expression(v_m.key_expr, 'key_expr');
    PERFORM public.kafgres_validate_expression(v_m.filter_expr, 'filter_expr');

    v_body := pg_catalog.format(
        'SELECT (%s)::pg_catalog.text, (%s)::pg_catalog.text'
        ' FROM (VALUES (''I''::pg_catalog.text, ''0/0''::pg_catalog.pg_lsn, 0::pg_catalog.int8, pg_catalog.now()))'
        ' AS c(op, lsn, xid, commit_ts)'
        ' CROSS JOIN %s AS new'
        ' LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(NULL::%s, NULL::pg_catalog.jsonb) AS old ON false'
        ' WHERE (%s)'
        ' LIMIT $1',
        coalesce(v_m.key_expr, 'NULL'),
        coalesce(v_m.value_expr, 'pg_catalog.to_jsonb(new)'),
        v_source, v_source,
        coalesce(v_m.filter_expr, 'true'));
    -- the mapping's search_path, with pg_temp last so that the caller's
    -- temporary tables do not stand in for the tables it names
    v_path := CASE WHEN pg_catalog.btrim(v_m.search_path) OPERATOR(pg_catalog.=) '' THEN 'pg_temp'
                   ELSE v_m.search_path OPERATOR(pg_catalog.||) ', pg_temp' END;
    v_fn := pg_catalog.format('pg_temp.%I', 'kafgres_preview_' OPERATOR(pg_catalog.||) v_m.mapping_id);

    BEGIN
        -- SET ... FROM CURRENT: the stored search_path is never spliced
        PERFORM pg_catalog.set_config('search_path', v_path, true);
        EXECUTE pg_catalog.format(
            'CREATE FUNCTION %s(kafgres_limit pg_catalog.int4)'
            ' RETURNS TABLE (key pg_catalog.text, value pg_catalog.text)'
            ' LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS %L',
            v_fn, v_body);
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        EXECUTE pg_catalog.format('ALTER FUNCTION %s(pg_catalog.int4) OWNER TO %I', v_fn, v_owner);
        EXECUTE pg_catalog.format(
            'SELECT pg_catalog.array_agg(p.key ORDER BY p.n), pg_catalog.array_agg(p.value ORDER BY p.n)'
            '  FROM %s($1) WITH ORDINALITY AS p(key, value, n)', v_fn)
            INTO v_keys, v_values USING "limit";
        -- always roll back: nothing the expressions did may outlive them
        RAISE EXCEPTION USING ERRCODE = 'KG001';
    EXCEPTION
        WHEN SQLSTATE 'KG001' THEN
            NULL;
        WHEN OTHERS THEN
            FOR v_stmt IN SELECT s.name FROM pg_catalog.pg_prepared_statements AS s
                           WHERE s.from_sql AND s.prepare_time OPERATOR(pg_catalog.>=) v_started LOOP
                EXECUTE pg_catalog.format('DEALLOCATE %I', v_stmt);
            END LOOP;
            RAISE;
    END;
    FOR v_stmt IN SELECT s.name FROM pg_catalog.pg_prepared_statements AS s
                   WHERE s.from_sql AND s.prepare_time OPERATOR(pg_catalog.>=) v_started LOOP
        EXECUTE pg_catalog.format('DEALLOCATE %I', v_stmt);
    END LOOP;
    RETURN QUERY SELECT u.k, u.v FROM ROWS FROM (pg_catalog.unnest(v_keys), pg_catalog.unnest(v_values)) AS u(k, v);
END
$$;

/*
 * Dead letters hold row images: show them only to members of the
 * mapping's owner role who may, right now, read the whole table.  A
 * mapping whose owner lost that right is paused by the broker and its
 * changes are dead-lettered, so without the second condition the dead
 * letters would hand them to the owner anyway.
 */
DROP POLICY dead_letter_owner ON kafgres.dead_letter;
CREATE POLICY dead_letter_owner ON kafgres.dead_letter FOR SELECT
    USING (EXISTS (SELECT 1 FROM kafgres.mapping AS m
                    WHERE m.mapping_id OPERATOR(pg_catalog.=) dead_letter.mapping_id
                      AND pg_catalog.pg_has_role(m.owner_role, 'MEMBER')
                      AND kafgres.mapping_denial(m.source_relid,
                              (SELECT r.oid FROM pg_catalog.pg_roles AS r
                                WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)) IS NULL));

/*
 * The older plpgsql functions, mapping and topic alike: their bodies are
 * parsed when they run, in the caller's search_path, so a caller whose
 * search_path names a schema someone else can create in before pg_catalog
 * would run that someone's operators and functions.  Pinning search_path
 * makes every unqualified name in them resolve in pg_catalog (tables are
 * already qualified).  The C functions (kafgres_produce, ...) look
 * everything up by schema-qualified catalog access and need no pin.
 */
ALTER FUNCTION kafgres_remove_mapping(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION kafgres.notify_mappings() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION kafgres.notify_topics() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION kafgres_create_topic(text, int) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION kafgres_drop_topic(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION kafgres_partition_offsets(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION kafgres_create_partitions(text, int) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION kafgres_wait_delivered(pg_lsn, interval) SET search_path = pg_catalog, pg_temp;

/* ---------------------------------------------------------------------
 * Section B: authenticated produce messages
 * --------------------------------------------------------------------- */

/*
 * pg_logical_emit_message() is executable by PUBLIC, and the output plugin
 * used to deliver any transactional message with prefix "kafgres": any
 * role that could connect could produce to any topic.  Now kafgres_produce
 * and kafgres.snapshot_row sign their messages with a per-cluster key and
 * the plugin drops, counts and logs every other message
 * (outputplugin/auth.c; docs/security.md, "SQL produce: authenticated
 * messages").
 *
 * kafgres_rejected_messages(): how many it dropped since the server
 * started.  Like everything else, not for PUBLIC.
 */
CREATE FUNCTION kafgres_rejected_messages()
RETURNS bigint
AS 'MODULE_PATHNAME', 'kafgres_rejected_messages'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION kafgres_rejected_messages() IS 'messages with prefix kafgres the output plugin dropped as unauthenticated since the server started';
REVOKE ALL ON FUNCTION kafgres_rejected_messages() FROM PUBLIC;

/*
 * kafgres.snapshot_row(mapping_id, row_image): write one signed snapshot
 * row (format 2) of a mapping; kafgres_snapshot_mapping calls it per row.
 * It checks in C that the caller is a member of the mapping's owner role
 * (the rule of kafgres.mapping_snapshot's row security), so EXECUTE stays
 * with PUBLIC: kafgres_snapshot_mapping is SECURITY INVOKER, and its
 * callers reach this only with USAGE on schema kafgres, which mapping
 * authors have.
 */
CREATE FUNCTION kafgres.snapshot_row(mapping_id bigint, row_image jsonb)
RETURNS pg_lsn
AS 'MODULE_PATHNAME', 'kafgres_snapshot_row'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION kafgres.snapshot_row(bigint, jsonb) IS 'write a signed snapshot row of a mapping (only for members of its owner role)';

/*
 * kafgres_snapshot_mapping(name): as before, but the rows go through
 * kafgres.snapshot_row, since a bare pg_logical_emit_message is no longer
 * delivered.  The kafgres.mapping_snapshot marker stays: the broker still
 * renders a snapshot row only if its transaction has one.
 */
CREATE OR REPLACE FUNCTION kafgres_snapshot_mapping(mapping_name text)
RETURNS bigint
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_m      kafgres.mapping%ROWTYPE;
    v_source text;
    v_count  bigint;
BEGIN
    SELECT * INTO v_m FROM kafgres.mapping AS m
     WHERE m.name OPERATOR(pg_catalog.=) kafgres_snapshot_mapping.mapping_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'mapping "%" does not exist', mapping_name
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(v_m.owner_role, 'MEMBER') THEN
        RAISE EXCEPTION 'must be owner of mapping "%"', mapping_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) INTO v_source
      FROM pg_catalog.pg_class AS c
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE c.oid OPERATOR(pg_catalog.=) v_m.source_relid;
    IF v_source IS NULL THEN
        RAISE EXCEPTION 'source table of mapping "%" does not exist', mapping_name
            USING ERRCODE = 'undefined_table',
                  HINT = 'Remove the mapping with kafgres_remove_mapping().';
    END IF;

    EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE MODE', v_source);
    INSERT INTO kafgres.mapping_snapshot (mapping_id, xid)
    VALUES (v_m.mapping_id, pg_catalog.pg_current_xact_id())
    ON CONFLICT DO NOTHING;
    EXECUTE pg_catalog.format(
        'SELECT pg_catalog.count(kafgres.snapshot_row($1, pg_catalog.to_jsonb(s))) FROM %s AS s',
        v_source)
        INTO v_count USING v_m.mapping_id;
    RETURN v_count;
END
$$;

/* ---------------------------------------------------------------------
 * Section C: client bytes stored losslessly
 * --------------------------------------------------------------------- */

/*
 * A Kafka string is whatever bytes the client sent: a NUL byte or invalid
 * UTF-8 is legal in a group id or in commit metadata (librdkafka's own
 * tests commit "metadata\0"), but a text value can hold neither, and such a
 * commit used to fail in Postgres and reach the client as a retriable
 * error it retried forever.  Both columns are bytea now; existing rows
 * keep their bytes (they were valid text, so UTF-8).
 *
 * kafgres.client_text shows such bytes to people: the text itself when
 * the bytes are UTF-8 without NUL, otherwise bytea's escape form (NUL and
 * bytes above 0x7f as \nnn, backslash doubled), which decode(s, 'escape')
 * turns back into the bytes.  It only computes, so EXECUTE stays with
 * PUBLIC: SELECT on kafgres.consumer_lag is all a reader needs, as before.
 */
CREATE FUNCTION kafgres.client_text(bytes bytea) RETURNS text
    LANGUAGE plpgsql STABLE STRICT
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.position(bytes, '\x00'::bytea) OPERATOR(pg_catalog.=) 0 THEN
        BEGIN
            RETURN pg_catalog.convert_from(bytes, 'UTF8');
        EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
            NULL; -- not UTF-8, or not representable in the database encoding
        END;
    END IF;
    RETURN pg_catalog.encode(bytes, 'escape');
END
$$;
COMMENT ON FUNCTION kafgres.client_text(bytea) IS 'client-supplied bytes as text: the text if UTF-8 without NUL, else bytea escape form';

/*
 * The view reads the columns being retyped, so it first stops reading
 * them: CREATE OR REPLACE VIEW (unlike DROP and CREATE) keeps the grants
 * on it and whatever users built on top of it.  Its columns keep their
 * names and types.
 */
CREATE OR REPLACE VIEW kafgres.consumer_lag AS
    SELECT NULL::text AS group_id, t.name AS topic, o.partition, o.committed_offset,
           p.high_watermark AS log_end_offset,
           greatest(p.high_watermark - o.committed_offset, 0) AS lag,
           o.commit_time
      FROM kafgres.consumer_offset o
      JOIN kafgres.topic t ON t.topic_id = o.topic_id
      JOIN kafgres.partition p ON p.topic_id = o.topic_id AND p.partition = o.partition;

ALTER TABLE kafgres.consumer_offset
    ALTER COLUMN group_id TYPE bytea USING pg_catalog.convert_to(group_id, 'UTF8'),
    ALTER COLUMN metadata TYPE bytea USING pg_catalog.convert_to(metadata, 'UTF8');

CREATE OR REPLACE VIEW kafgres.consumer_lag AS
    SELECT kafgres.client_text(o.group_id) AS group_id, t.name AS topic, o.partition,
           o.committed_offset, p.high_watermark AS log_end_offset,
           GREATEST(p.high_watermark OPERATOR(pg_catalog.-) o.committed_offset, 0) AS lag,
           o.commit_time
      FROM kafgres.consumer_offset o
      JOIN kafgres.topic t ON t.topic_id OPERATOR(pg_catalog.=) o.topic_id
      JOIN kafgres.partition p ON p.topic_id OPERATOR(pg_catalog.=) o.topic_id
                              AND p.partition OPERATOR(pg_catalog.=) o.partition;
COMMENT ON COLUMN kafgres.consumer_offset.group_id IS 'the group id exactly as the client sent it';
COMMENT ON COLUMN kafgres.consumer_offset.metadata IS 'the commit metadata exactly as the client sent it (NULL: none)';

/*
 * kafgres.dropped_topic: every topic ever deleted from kafgres.topic (by
 * kafgres_drop_topic, DeleteTopics or plain SQL), recorded in the same
 * transaction by a row trigger.  At start the broker deletes a partition
 * directory only when this table proves the directory's topic was dropped;
 * a directory whose topic the catalog neither has nor dropped means the
 * log is ahead of the catalog (a database restored from an older backup,
 * or another database's data directory), and the broker refuses to start
 * rather than delete it (docs/security.md, "Data directory").  Topic ids
 * come from a sequence that can run ahead after recovery, so "id not above
 * the sequence" would not prove a drop.  The rows are a few dozen bytes
 * per dropped topic and dumped with the catalog.
 *
 * The trigger function is SECURITY DEFINER so that a role allowed to
 * delete topics needs no privilege on this table; it records only the
 * deleted row.
 */
CREATE TABLE kafgres.dropped_topic (
    topic_id   bigint      PRIMARY KEY,
    topic_uuid uuid        NOT NULL,
    name       text        NOT NULL,
    dropped_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE kafgres.dropped_topic IS 'topics deleted from kafgres.topic; proves to the broker that their logs may go';

CREATE FUNCTION kafgres.record_dropped_topic() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO kafgres.dropped_topic (topic_id, topic_uuid, name)
    VALUES (OLD.topic_id, OLD.topic_uuid, OLD.name)
    ON CONFLICT (topic_id) DO NOTHING;
    RETURN NULL;
END
$$;
CREATE TRIGGER topic_dropped
    AFTER DELETE ON kafgres.topic
    FOR EACH ROW EXECUTE FUNCTION kafgres.record_dropped_topic();

REVOKE ALL ON kafgres.dropped_topic FROM PUBLIC;
REVOKE ALL ON FUNCTION kafgres.record_dropped_topic() FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('kafgres.dropped_topic', '');
