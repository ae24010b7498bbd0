/* sql/kafgres--0.4.0--0.5.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.5.0'" to load this file. \quit

/*
 * 0.5.0: one rule, one place (issue #12).  Two rules were written out more
 * than once, and copies drift:
 *
 * - Kafka's topic name rule, in C (kafgres_produce) and twice in SQL
 *   (kafgres_create_topic, kafgres_add_mapping): now C alone
 *   (outputplugin/topicname.c), which SQL asks through
 *   kafgres.topic_name_problem(name);
 * - the query that renders a mapping, in the broker (its render functions
 *   and the probe it makes them after), in kafgres_add_mapping's probe and
 *   in kafgres_preview_mapping: now built by kafgres.render_query alone,
 *   which all of them ask.
 *
 * Nothing else changes: the same names are accepted and refused with the
 * same errors, and a mapping renders the same records.  Render functions
 * made by an older broker keep working (same arguments and results); the
 * broker makes each one again, from kafgres.render_query, the first time
 * it renders with it.
 */

/* ---------------------------------------------------------------------
 * Section A: the topic name rule
 * --------------------------------------------------------------------- */

/*
 * kafgres.topic_name_problem(name): NULL when Kafka accepts name as a topic
 * name, else the reason, one of
 *
 *   the name is empty
 *   "." and ".." are not allowed
 *   topic names can be at most 249 characters long
 *   topic names may contain only ASCII letters, digits, ".", "_" and "-"
 *
 * checked in that order, as Kafka does.  The C function kafgres_produce
 * checks its topic with, so SQL and C are one implementation
 * (outputplugin/topicname.c).  NULL for NULL.  Pure, so left executable
 * by everyone (it is reached only with USAGE on schema kafgres).
 */
CREATE FUNCTION kafgres.topic_name_problem(name text)
RETURNS text
AS 'MODULE_PATHNAME', 'kafgres_topic_name_problem'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION kafgres.topic_name_problem(text) IS 'why Kafka refuses a topic name, NULL if it does not';

/*
 * kafgres_create_topic: as in 0.1.0 (search_path pinned in 0.3.0), with
 * the name checked by kafgres.topic_name_problem; the messages are 0.1.0's.
 */
CREATE OR REPLACE FUNCTION kafgres_create_topic(name text, partitions int DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_name       text := kafgres_create_topic.name;
    v_partitions int  := kafgres_create_topic.partitions;
    v_problem    text;
    v_setting    text;
    v_topic_id   bigint;
BEGIN
    IF v_name IS NULL THEN
        RAISE EXCEPTION 'topic name must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_problem := kafgres.topic_name_problem(v_name);
    IF v_problem = 'the name is empty' THEN
        RAISE EXCEPTION 'invalid topic name: %', v_problem
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass a non-empty name as argument "name".';
    ELSIF v_problem = '"." and ".." are not allowed' THEN
        RAISE EXCEPTION 'invalid topic name "%": %', v_name, v_problem
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF v_problem LIKE 'topic names can be at most %' THEN
        RAISE EXCEPTION 'invalid topic name "%": the name is % characters long',
                        pg_catalog.left(v_name, 40) || '...', pg_catalog.length(v_name)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.upper(pg_catalog.left(v_problem, 1)) || pg_catalog.substr(v_problem, 2) || '.';
    ELSIF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'invalid topic name "%"', v_name
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.upper(pg_catalog.left(v_problem, 1)) || pg_catalog.substr(v_problem, 2) || '.';
    END IF;

    -- NULL: the server's kafgres.default_partitions, which does not exist
    -- when the library is not loaded, hence the fallback
    IF v_partitions IS NULL THEN
        v_setting := pg_catalog.current_setting('kafgres.default_partitions', true);
        v_partitions := coalesce(nullif(v_setting, '')::int, 1);
    END IF;
    IF v_partitions < 1 OR v_partitions > 10000 THEN
        RAISE EXCEPTION 'invalid number of partitions: %', v_partitions
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument "partitions" must be between 1 and 10000.';
    END IF;

    -- ON CONFLICT rather than a prior lookup: a concurrent creation of the
    -- same name waits for the other transaction and then reports it
    INSERT INTO kafgres.topic AS t (name, partitions)
    VALUES (v_name, v_partitions)
    ON CONFLICT ON CONSTRAINT topic_name_key DO NOTHING
    RETURNING t.topic_id INTO v_topic_id;

    IF v_topic_id IS NULL THEN
        RAISE EXCEPTION 'topic "%" already exists', v_name
            USING ERRCODE = 'duplicate_object';
    END IF;

    INSERT INTO kafgres.partition (topic_id, partition)
    SELECT v_topic_id, p
      FROM pg_catalog.generate_series(0, v_partitions - 1) AS p;

    RETURN v_topic_id;
END
$$;

/* ---------------------------------------------------------------------
 * Section B: the render query
 * --------------------------------------------------------------------- */

/*
 * kafgres.render_query(source, key_expr, value_expr, filter_expr, changes):
 * the text of the query that renders a mapping, giving for each change its
 * ordinal (ord), whether the filter passes (pass), and the key (k) and
 * value (v) the expressions make of it.  This is the one place where a
 * mapping's expressions are put into SQL, and everything that evaluates
 * them asks for it; changes says where the changes come from:
 *
 * - 'call': the arguments $1..$8 of a render function (ords, new images as
 *   record literals of the table's row type, old images likewise, snapshot
 *   rows as jsonb, op, lsn, xid, commit_ts); the broker wraps the query in
 *   the function (mappings/render.go);
 * - 'probe': one insert without images, to learn the expressions' types
 *   (the broker) or to check them and the privileges they need
 *   (kafgres_add_mapping, with LIMIT 0);
 * - 'table': every row of the table, as an insert (kafgres_preview_mapping).
 *
 * The expressions see new and old, of the table's row type (a NULL row
 * when the change has no such image, so that to_jsonb(new) of a delete is
 * NULL, a tombstone), and op, lsn, xid and commit_ts.  An image arrives as
 * the text of a record literal, a snapshot row as jsonb;
 * jsonb_populate_record(base, NULL) is base itself, so both meet in one
 * function scan.  The filter is the WHERE of a subquery of its own, which
 * gives a filter that is not boolean WHERE's error; it depends on each
 * change (c is never flattened into the query: OFFSET 0), so it is
 * evaluated once per change even when it reads nothing (random() < 0.1).
 * A NULL expression is the default: key NULL::bytea, value to_jsonb(new),
 * filter true.  Each expression is validated before it is spliced,
 * parenthesised; the table is schema-qualified, and nothing else in the
 * text depends on the search_path.  Pure text, so left executable by
 * everyone (it is reached only with USAGE on schema kafgres).
 */
CREATE FUNCTION kafgres.render_query(source regclass, key_expr text, value_expr text,
                                     filter_expr text, changes text)
RETURNS text
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_table pg_catalog.text;
    v_rows  pg_catalog.text;
BEGIN
    SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) INTO v_table
      FROM pg_catalog.pg_class AS c
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE c.oid OPERATOR(pg_catalog.=) render_query.source;
    IF v_table IS NULL THEN
        RAISE EXCEPTION 'relation with OID % does not exist', source::pg_catalog.oid
            USING ERRCODE = 'undefined_table';
    END IF;
    PERFORM public.kafgres_validate_expression(value_expr, 'value_expr');
    PERFORM public.kafgres_validate_expression(key_expr, 'key_expr');
    PERFORM public.kafgres_validate_expression(filter_expr, 'filter_expr');

    v_rows := CASE changes
        WHEN 'call' THEN
            'SELECT pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4),'
            ' pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8)'
        WHEN 'probe' THEN
            'SELECT 0, NULL::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.jsonb,'
            ' ''I''::pg_catalog.text, ''0/0''::pg_catalog.pg_lsn, 0::pg_catalog.int8, pg_catalog.now()'
        WHEN 'table' THEN
            -- the row's text is what its record literal would be
            pg_catalog.format(
                'SELECT 0, (kafgres_row.*)::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.jsonb,'
                ' ''I''::pg_catalog.text, ''0/0''::pg_catalog.pg_lsn, 0::pg_catalog.int8, pg_catalog.now()'
                ' FROM %s AS kafgres_row', v_table)
    END;
    IF v_rows IS NULL THEN
        RAISE EXCEPTION 'invalid changes "%"', changes
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument changes must be ''call'', ''probe'' or ''table''.';
    END IF;

    RETURN pg_catalog.format(
'SELECT c.kafgres_ord AS ord, kafgres_filter.kafgres_ord IS NOT NULL AS pass, %s AS k, %s AS v
  FROM (%s OFFSET 0) AS c(kafgres_ord, kafgres_new, kafgres_old, kafgres_new_json, op, lsn, xid, commit_ts)
  LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(c.kafgres_new::%s, c.kafgres_new_json) AS new
         ON c.kafgres_new IS NOT NULL OR c.kafgres_new_json IS NOT NULL
  LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(c.kafgres_old::%s, NULL::pg_catalog.jsonb) AS old
         ON c.kafgres_old IS NOT NULL
  LEFT JOIN LATERAL (SELECT c.kafgres_ord WHERE %s) AS kafgres_filter(kafgres_ord) ON true',
        coalesce('(' || key_expr || ')', 'NULL::pg_catalog.bytea'),
        coalesce('(' || value_expr || ')', 'pg_catalog.to_jsonb(new)'),
        v_rows, v_table, v_table,
        coalesce('(' || filter_expr || ')', 'true'));
END
$$;
COMMENT ON FUNCTION kafgres.render_query(regclass, text, text, text, text) IS 'the query that renders a mapping''s expressions';

/* ---------------------------------------------------------------------
 * Section C: the functions that asked for the render query
 * --------------------------------------------------------------------- */

/*
 * kafgres_add_mapping: as in 0.4.0, with the topic checked by
 * kafgres.topic_name_problem and each expression probed in
 * kafgres.render_query's query.
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
    IF kafgres.topic_name_problem(v_topic) IS NOT NULL THEN
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
     * it in (kafgres.render_query) and in the caller's search_path, the
     * other two left at their defaults so that an error is the argument's.
     * LIMIT 0 evaluates nothing, but the executor still checks privileges
     * on every table the expression reads.
     */
    FOREACH v_arg IN ARRAY ARRAY['value_expr', 'key_expr', 'filter_expr'] LOOP
        v_expr := CASE WHEN v_arg = 'value_expr' THEN value_expr
                       WHEN v_arg = 'key_expr' THEN key_expr
                       ELSE filter_expr END;
        CONTINUE WHEN v_expr IS NULL;
        v_probe := kafgres.render_query(v_rel.oid::pg_catalog.regclass,
                                        CASE WHEN v_arg = 'key_expr' THEN v_expr END,
                                        CASE WHEN v_arg = 'value_expr' THEN v_expr END,
                                        CASE WHEN v_arg = 'filter_expr' THEN v_expr END,
                                        'probe') || ' LIMIT 0';
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


/*
 * kafgres_preview_mapping: as in 0.3.0, rendering the table's rows with
 * kafgres.render_query's query, as the broker renders inserts: each row
 * goes through the text of its record literal, as a change's image does.
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
    -- kafgres.render_query validates the expressions first
    v_body := pg_catalog.format(
        'SELECT r.k::pg_catalog.text, r.v::pg_catalog.text FROM (%s) AS r WHERE r.pass LIMIT $1',
        kafgres.render_query(v_m.source_relid::pg_catalog.regclass, v_m.key_expr, v_m.value_expr,
                             v_m.filter_expr, 'table'));
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

