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
 * New in 0.5.0: Kafka ACLs (section C) and the role lookup of SASL
 * authentication (section D), issue #13.  Apart from them,
 * nothing changes: the same names are accepted and refused with the same
 * errors, and a mapping renders the same records.  Render functions
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

/* ---------------------------------------------------------------------
 * Section C: Kafka ACLs (issue #13); docs/security.md, "Authorization",
 * describes the behaviour, docs/sql.md the functions
 * --------------------------------------------------------------------- */

/*
 * kafgres.acl: one row per Kafka ACL binding, spelled with Kafka's enum
 * names (what kafka-acls.sh prints), so that the table reads as Kafka's
 * documentation does.  The CHECK constraints are the validity rules of
 * Kafka's controller (AclControlManager.validateNewAcl) and of the
 * CreateAcls handler (the CLUSTER name): a row the broker could not load
 * cannot be written.  The primary key is the whole binding: creating an
 * ACL that exists changes nothing, as in Kafka.
 *
 * Read by the broker (reloaded on NOTIFY kafgres_acls) and by
 * kafgres.acl_authorize, the SQL side's check.
 */
CREATE TABLE kafgres.acl (
    resource_type text NOT NULL
        CHECK (resource_type IN ('TOPIC', 'GROUP', 'CLUSTER', 'TRANSACTIONAL_ID',
                                 'DELEGATION_TOKEN', 'USER')),
    resource_name text NOT NULL
        CHECK (resource_name <> ''),
    pattern_type  text NOT NULL
        CHECK (pattern_type IN ('LITERAL', 'PREFIXED')),
    principal     text NOT NULL
        CHECK (pg_catalog.strpos(principal, ':') > 0),
    host          text NOT NULL,
    operation     text NOT NULL
        CHECK (operation IN ('ALL', 'READ', 'WRITE', 'CREATE', 'DELETE', 'ALTER',
                             'DESCRIBE', 'CLUSTER_ACTION', 'DESCRIBE_CONFIGS',
                             'ALTER_CONFIGS', 'IDEMPOTENT_WRITE', 'CREATE_TOKENS',
                             'DESCRIBE_TOKENS')),
    permission    text NOT NULL
        CHECK (permission IN ('ALLOW', 'DENY')),
    CONSTRAINT acl_cluster_name
        CHECK (resource_type <> 'CLUSTER' OR resource_name = 'kafka-cluster'),
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host,
                 operation, permission)
);
COMMENT ON TABLE kafgres.acl IS 'Kafka ACLs: who may do what to topics, groups, the cluster and transactional ids';
REVOKE ALL ON kafgres.acl FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('kafgres.acl', '');

/*
 * Every change, however made, tells the brokers, which swap in a new
 * authorizer within a second.
 */
CREATE FUNCTION kafgres.acl_notify() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_catalog.pg_notify('kafgres_acls', '');
    RETURN NULL;
END;
$$;
REVOKE ALL ON FUNCTION kafgres.acl_notify() FROM PUBLIC;
CREATE TRIGGER acl_notify
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON kafgres.acl
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.acl_notify();

/*
 * kafgres.acl_changed(): empties the ACL decision caches of the backends
 * running kafgres_produce (a relcache invalidation of kafgres.acl, sent at
 * commit; produce.c).
 */
CREATE FUNCTION kafgres.acl_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'kafgres_acl_changed'
LANGUAGE C;
REVOKE ALL ON FUNCTION kafgres.acl_changed() FROM PUBLIC;
CREATE TRIGGER acl_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON kafgres.acl
    FOR EACH STATEMENT EXECUTE FUNCTION kafgres.acl_changed();

/*
 * kafgres.acl_enabled(): whether the authorizer is on (kafgres.authorizer,
 * resolved in C so that "auto" means the same as for the broker).
 */
CREATE FUNCTION kafgres.acl_enabled() RETURNS boolean
AS 'MODULE_PATHNAME', 'kafgres_acl_enabled'
LANGUAGE C STABLE PARALLEL SAFE;

/*
 * kafgres.acl_authorize(principal, host, operation, resource_type, name):
 * Kafka's StandardAuthorizer decision, over kafgres.acl.  The rules are
 * the broker's (security/acl, Authorize):
 *
 *   - super users may do anything: the principals of kafgres.super_users,
 *     and User:<role> for every Postgres superuser;
 *   - the ACLs that apply to the resource are those of its type that are
 *     LITERAL with its name, LITERAL '*', or PREFIXED with a prefix of it;
 *   - of those, the ones for this principal or User:*, and this host or
 *     '*', decide: a DENY for the operation or ALL denies; else an ALLOW
 *     for it, for ALL, or for an operation implying it allows (READ,
 *     WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies
 *     DESCRIBE_CONFIGS);
 *   - otherwise allowed only when no ACL applies to the resource at all
 *     and kafgres.allow_everyone_if_no_acl_found is on.
 *
 * SECURITY DEFINER: kafgres.acl is nobody's business but the owner's; the
 * function answers only yes or no.
 */
CREATE FUNCTION kafgres.acl_authorize(principal text, host text, operation text,
                                      resource_type text, resource_name text)
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
WITH applicable AS (
    SELECT a.principal, a.host, a.operation, a.permission
      FROM kafgres.acl AS a
     WHERE a.resource_type OPERATOR(pg_catalog.=) $4
       AND ((a.pattern_type OPERATOR(pg_catalog.=) 'LITERAL'
             AND (a.resource_name OPERATOR(pg_catalog.=) $5
                  OR a.resource_name OPERATOR(pg_catalog.=) '*'))
            OR (a.pattern_type OPERATOR(pg_catalog.=) 'PREFIXED'
                AND pg_catalog.starts_with($5, a.resource_name)))
), mine AS (
    SELECT a.operation, a.permission
      FROM applicable AS a
     WHERE (a.principal OPERATOR(pg_catalog.=) $1 OR a.principal OPERATOR(pg_catalog.=) 'User:*')
       AND (a.host OPERATOR(pg_catalog.=) '*' OR a.host OPERATOR(pg_catalog.=) $2)
)
SELECT CASE
    WHEN $1 OPERATOR(pg_catalog.=) ANY (kafgres.acl_super_users()) THEN true
    WHEN EXISTS (SELECT FROM mine AS m
                  WHERE m.permission OPERATOR(pg_catalog.=) 'DENY'
                    AND m.operation OPERATOR(pg_catalog.=) ANY (ARRAY[$3, 'ALL'])) THEN false
    WHEN EXISTS (SELECT FROM mine AS m
                  WHERE m.permission OPERATOR(pg_catalog.=) 'ALLOW'
                    AND (m.operation OPERATOR(pg_catalog.=) ANY (ARRAY[$3, 'ALL'])
                         OR ($3 OPERATOR(pg_catalog.=) 'DESCRIBE'
                             AND m.operation OPERATOR(pg_catalog.=) ANY (ARRAY['READ', 'WRITE', 'DELETE', 'ALTER']))
                         OR ($3 OPERATOR(pg_catalog.=) 'DESCRIBE_CONFIGS'
                             AND m.operation OPERATOR(pg_catalog.=) 'ALTER_CONFIGS'))) THEN true
    WHEN EXISTS (SELECT FROM applicable) THEN false
    ELSE COALESCE(pg_catalog.current_setting('kafgres.allow_everyone_if_no_acl_found', true), 'off')
             OPERATOR(pg_catalog.=) ANY (ARRAY['on', 'true', 'yes', '1'])
END
$$;
COMMENT ON FUNCTION kafgres.acl_authorize(text, text, text, text, text) IS 'Kafka''s authorizer decision over kafgres.acl';
REVOKE ALL ON FUNCTION kafgres.acl_authorize(text, text, text, text, text) FROM PUBLIC;

/*
 * kafgres.acl_super_users(): the principals allowed everything: those of
 * kafgres.super_users (Kafka's super.users, ';'-separated) and User:<role>
 * of every Postgres superuser.  The broker loads the same list.
 */
CREATE FUNCTION kafgres.acl_super_users() RETURNS text[]
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT pg_catalog.array_agg(u)
  FROM (SELECT pg_catalog.btrim(s) AS u
          FROM pg_catalog.regexp_split_to_table(
                   COALESCE(pg_catalog.current_setting('kafgres.super_users', true), ''), ';') AS s
        UNION
        SELECT 'User:' OPERATOR(pg_catalog.||) r.rolname
          FROM pg_catalog.pg_roles AS r
         WHERE r.rolsuper) AS t
 WHERE u OPERATOR(pg_catalog.<>) ''
$$;
REVOKE ALL ON FUNCTION kafgres.acl_super_users() FROM PUBLIC;

/*
 * kafgres.acl_check(principal, operation, resource_type, name): the
 * decision for a SQL session, whose host is its client address (IPv4 as
 * Kafka prints it; '' over a Unix socket, so that only host '*' ACLs
 * apply).  kafgres_produce calls it from C by OID (no EXECUTE or USAGE
 * needed from the producing role); SECURITY DEFINER so that it reads
 * kafgres.acl whoever asks.
 */
CREATE FUNCTION kafgres.acl_check(principal text, operation text, resource_type text, resource_name text)
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT kafgres.acl_authorize($1, COALESCE(pg_catalog.host(pg_catalog.inet_client_addr()), ''), $2, $3, $4)
$$;
REVOKE ALL ON FUNCTION kafgres.acl_check(text, text, text, text) FROM PUBLIC;

/*
 * kafgres.acl_require(role, operation, resource_type, name): raise
 * insufficient_privilege unless User:<role> may, when the authorizer is
 * on.  The message is the one kafgres_produce raises (produce.c).
 */
CREATE FUNCTION kafgres.acl_require(role_name name, operation text, resource_type text, resource_name text)
RETURNS void
LANGUAGE plpgsql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_principal text := 'User:' OPERATOR(pg_catalog.||) role_name;
BEGIN
    IF NOT kafgres.acl_enabled() THEN
        RETURN;
    END IF;
    IF NOT kafgres.acl_check(v_principal, operation, resource_type, resource_name) THEN
        RAISE EXCEPTION 'permission denied for % "%"', pg_catalog.lower(resource_type), resource_name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.format('The Kafka ACLs do not allow principal %s %s on %s %s.',
                                             v_principal, operation, resource_type, resource_name),
                  HINT = pg_catalog.format('A superuser can grant it: SELECT kafgres_acl_grant(%L, %L, %L, %L);',
                                           v_principal, operation, resource_type, resource_name);
    END IF;
END;
$$;
REVOKE ALL ON FUNCTION kafgres.acl_require(name, text, text, text) FROM PUBLIC;

/*
 * kafgres.acl_word(value, what, allowed): value in upper case if it is
 * one of allowed, else a clear error.  Kafka's tools accept the names in
 * any case, so do the SQL functions.
 */
CREATE FUNCTION kafgres.acl_word(value text, what text, allowed text[])
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text := pg_catalog.upper(pg_catalog.replace(pg_catalog.btrim(value), '-', '_'));
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION '% must not be null', what USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT v OPERATOR(pg_catalog.=) ANY (allowed) THEN
        RAISE EXCEPTION 'invalid % "%"', what, value
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use one of ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(allowed, ', ') OPERATOR(pg_catalog.||) '.';
    END IF;
    RETURN v;
END;
$$;
REVOKE ALL ON FUNCTION kafgres.acl_word(text, text, text[]) FROM PUBLIC;

/*
 * kafgres_acl_grant(principal, operation, resource_type, resource_name,
 * pattern_type, permission, host): add an ACL, as kafka-acls.sh --add
 * does.  Returns false if it existed already (which, as in Kafka, is not
 * an error).
 */
CREATE FUNCTION kafgres_acl_grant(principal text, operation text, resource_type text,
                                  resource_name text, pattern_type text DEFAULT 'LITERAL',
                                  permission text DEFAULT 'ALLOW', host text DEFAULT '*')
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rt   text := kafgres.acl_word(resource_type, 'resource type',
                      ARRAY['TOPIC', 'GROUP', 'CLUSTER', 'TRANSACTIONAL_ID', 'DELEGATION_TOKEN', 'USER']);
    v_pt   text := kafgres.acl_word(pattern_type, 'pattern type', ARRAY['LITERAL', 'PREFIXED']);
    v_op   text := kafgres.acl_word(operation, 'operation',
                      ARRAY['ALL', 'READ', 'WRITE', 'CREATE', 'DELETE', 'ALTER', 'DESCRIBE',
                            'CLUSTER_ACTION', 'DESCRIBE_CONFIGS', 'ALTER_CONFIGS',
                            'IDEMPOTENT_WRITE', 'CREATE_TOKENS', 'DESCRIBE_TOKENS']);
    v_perm text := kafgres.acl_word(permission, 'permission', ARRAY['ALLOW', 'DENY']);
    v_n    bigint;
BEGIN
    IF kafgres_acl_grant.principal IS NULL OR pg_catalog.strpos(kafgres_acl_grant.principal, ':') = 0 THEN
        RAISE EXCEPTION 'invalid principal "%"', kafgres_acl_grant.principal
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A principal is written Type:name, e.g. User:alice, or User:* for everyone.';
    END IF;
    IF kafgres_acl_grant.host IS NULL OR kafgres_acl_grant.host = '' THEN
        RAISE EXCEPTION 'host must be an IP address or *' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF kafgres_acl_grant.resource_name IS NULL OR kafgres_acl_grant.resource_name = '' THEN
        RAISE EXCEPTION 'resource name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_rt = 'CLUSTER' AND kafgres_acl_grant.resource_name <> 'kafka-cluster' THEN
        RAISE EXCEPTION 'the only valid name for the CLUSTER resource is kafka-cluster'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO kafgres.acl (resource_type, resource_name, pattern_type, principal, host, operation, permission)
    VALUES (v_rt, kafgres_acl_grant.resource_name, v_pt, kafgres_acl_grant.principal,
            kafgres_acl_grant.host, v_op, v_perm)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n > 0;
END;
$$;
COMMENT ON FUNCTION kafgres_acl_grant(text, text, text, text, text, text, text) IS 'add a Kafka ACL; false if it existed';
REVOKE ALL ON FUNCTION kafgres_acl_grant(text, text, text, text, text, text, text) FROM PUBLIC;

/*
 * kafgres_acl_revoke(...): remove the ACLs matching the arguments, a null
 * argument matching anything (kafka-acls.sh --remove with a filter).
 * Returns how many were removed.
 */
CREATE FUNCTION kafgres_acl_revoke(principal text, operation text, resource_type text,
                                   resource_name text, pattern_type text DEFAULT 'LITERAL',
                                   permission text DEFAULT 'ALLOW', host text DEFAULT '*')
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rt   text;
    v_pt   text;
    v_op   text;
    v_perm text;
    v_n    bigint;
BEGIN
    IF resource_type IS NOT NULL THEN
        v_rt := kafgres.acl_word(resource_type, 'resource type',
                    ARRAY['TOPIC', 'GROUP', 'CLUSTER', 'TRANSACTIONAL_ID', 'DELEGATION_TOKEN', 'USER']);
    END IF;
    IF pattern_type IS NOT NULL THEN
        v_pt := kafgres.acl_word(pattern_type, 'pattern type', ARRAY['LITERAL', 'PREFIXED']);
    END IF;
    IF operation IS NOT NULL THEN
        v_op := kafgres.acl_word(operation, 'operation',
                    ARRAY['ALL', 'READ', 'WRITE', 'CREATE', 'DELETE', 'ALTER', 'DESCRIBE',
                          'CLUSTER_ACTION', 'DESCRIBE_CONFIGS', 'ALTER_CONFIGS',
                          'IDEMPOTENT_WRITE', 'CREATE_TOKENS', 'DESCRIBE_TOKENS']);
    END IF;
    IF permission IS NOT NULL THEN
        v_perm := kafgres.acl_word(permission, 'permission', ARRAY['ALLOW', 'DENY']);
    END IF;
    DELETE FROM kafgres.acl AS a
     WHERE (v_rt IS NULL OR a.resource_type = v_rt)
       AND (kafgres_acl_revoke.resource_name IS NULL OR a.resource_name = kafgres_acl_revoke.resource_name)
       AND (v_pt IS NULL OR a.pattern_type = v_pt)
       AND (kafgres_acl_revoke.principal IS NULL OR a.principal = kafgres_acl_revoke.principal)
       AND (kafgres_acl_revoke.host IS NULL OR a.host = kafgres_acl_revoke.host)
       AND (v_op IS NULL OR a.operation = v_op)
       AND (v_perm IS NULL OR a.permission = v_perm);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;
COMMENT ON FUNCTION kafgres_acl_revoke(text, text, text, text, text, text, text) IS 'remove the Kafka ACLs matching the arguments (null matches any); returns how many';
REVOKE ALL ON FUNCTION kafgres_acl_revoke(text, text, text, text, text, text, text) FROM PUBLIC;

/*
 * kafgres_acls(principal, resource_type, resource_name): the ACLs, those
 * matching the non-null arguments.
 */
CREATE FUNCTION kafgres_acls(principal text DEFAULT NULL, resource_type text DEFAULT NULL,
                             resource_name text DEFAULT NULL)
RETURNS TABLE (resource_type text, resource_name text, pattern_type text, principal text,
               host text, operation text, permission text)
LANGUAGE sql
STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission
  FROM kafgres.acl AS a
 WHERE ($1 IS NULL OR a.principal OPERATOR(pg_catalog.=) $1)
   AND ($2 IS NULL OR a.resource_type OPERATOR(pg_catalog.=) pg_catalog.upper($2))
   AND ($3 IS NULL OR a.resource_name OPERATOR(pg_catalog.=) $3)
 ORDER BY a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission
$$;
COMMENT ON FUNCTION kafgres_acls(text, text, text) IS 'list Kafka ACLs';
REVOKE ALL ON FUNCTION kafgres_acls(text, text, text) FROM PUBLIC;

/*
 * Mappings obey the ACLs: the mapping's owner needs WRITE on its topic
 * when the authorizer is on.  A trigger rather than a check inside
 * kafgres_add_mapping, so that a plain INSERT into kafgres.mapping is held
 * to the same rule; it fires after mapping_set_owner (triggers fire in
 * name order), which sets owner_role.  SECURITY DEFINER: the author needs
 * no right on the ACL functions.
 */
CREATE FUNCTION kafgres.mapping_topic_acl() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM kafgres.acl_require((SELECT r.rolname FROM pg_catalog.pg_roles AS r
                                  WHERE r.oid OPERATOR(pg_catalog.=) NEW.owner_role),
                                'WRITE', 'TOPIC', NEW.topic);
    RETURN NEW;
END;
$$;
REVOKE ALL ON FUNCTION kafgres.mapping_topic_acl() FROM PUBLIC;
CREATE TRIGGER mapping_topic_acl
    BEFORE INSERT ON kafgres.mapping
    FOR EACH ROW EXECUTE FUNCTION kafgres.mapping_topic_acl();

/* ---------------------------------------------------------------------
 * Section D: Kafka clients authenticate as Postgres roles (issue #13,
 * docs/security.md "Listeners, TLS and SASL")
 * --------------------------------------------------------------------- */

/*
 * kafgres.role_credential: what the broker needs to authenticate a SASL
 * client as a Postgres role, and to end the sessions of a role that may no
 * longer log in.  The broker may run as a role that cannot read pg_authid,
 * hence SECURITY DEFINER (the extension's owner, a superuser).  One row
 * per named role that exists.
 *
 * A superuser's verifier is returned only to a superuser: a non-superuser
 * broker role must not be able to take superusers' verifiers away for an
 * offline guess (so superusers cannot log in to such a broker).
 * is_member: the role is a member of client_role (directly or not, as
 * pg_has_role's MEMBER), or client_role is NULL or empty.  A client_role
 * that does not exist makes nobody a member.
 *
 * Not granted to PUBLIC: it hands out password verifiers.  The broker's
 * role needs EXECUTE when it is not a superuser (docs/sql.md).
 */
CREATE FUNCTION kafgres.role_credential(role_names text[], client_role text)
RETURNS TABLE (role_name text, verifier text, can_login boolean, valid_until timestamptz, is_member boolean)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a.rolname::text,
           CASE WHEN a.rolsuper AND NOT coalesce((SELECT s.rolsuper FROM pg_catalog.pg_authid AS s
                                                  WHERE s.rolname OPERATOR(pg_catalog.=) session_user), false)
                THEN NULL
                ELSE a.rolpassword END,
           a.rolcanlogin,
           a.rolvaliduntil,
           CASE WHEN client_role IS NULL OR client_role OPERATOR(pg_catalog.=) '' THEN true
                ELSE coalesce((SELECT pg_catalog.pg_has_role(a.oid, c.oid, 'MEMBER')
                               FROM pg_catalog.pg_authid AS c
                               WHERE c.rolname OPERATOR(pg_catalog.=) client_role::name), false) END
    FROM pg_catalog.pg_authid AS a
    WHERE a.rolname OPERATOR(pg_catalog.=) ANY (role_names::name[])
$$;
COMMENT ON FUNCTION kafgres.role_credential(text[], text) IS 'SCRAM verifier, LOGIN, VALID UNTIL and client-role membership of roles Kafka clients authenticate as';
REVOKE ALL ON FUNCTION kafgres.role_credential(text[], text) FROM PUBLIC;

/* ---------------------------------------------------------------------
 * SCRAM credentials through Kafka (DescribeUserScramCredentials,
 * AlterUserScramCredentials; broker/50_*, 51_*)
 * --------------------------------------------------------------------- */

/*
 * kafgres.scram_credentials(role_names, client_role): the roles with a
 * SCRAM-SHA-256 verifier and its iteration count, as Kafka describes a
 * user's credentials.  role_names NULL: every such role.  Only roles that
 * are members of client_role (as kafgres.role_credential's is_member) are
 * Kafka users.  SECURITY DEFINER to read pg_authid; it returns the
 * iteration count, never the verifier.  Not granted to PUBLIC: the
 * broker's role needs EXECUTE when it is not a superuser (docs/sql.md).
 */
CREATE FUNCTION kafgres.scram_credentials(role_names text[], client_role text)
RETURNS TABLE (role_name text, iterations bigint)
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a.rolname::text,
           pg_catalog.substring(a.rolpassword, '^SCRAM-SHA-256\$([0-9]{1,9}):')::bigint
      FROM pg_catalog.pg_authid AS a
     WHERE pg_catalog.substring(a.rolpassword, '^SCRAM-SHA-256\$([0-9]{1,9}):') IS NOT NULL
       AND (role_names IS NULL OR a.rolname OPERATOR(pg_catalog.=) ANY (role_names::name[]))
       AND (client_role IS NULL OR client_role OPERATOR(pg_catalog.=) ''
            OR coalesce((SELECT pg_catalog.pg_has_role(a.oid, c.oid, 'MEMBER')
                           FROM pg_catalog.pg_authid AS c
                          WHERE c.rolname OPERATOR(pg_catalog.=) client_role::name), false))
     ORDER BY 1
$$;
COMMENT ON FUNCTION kafgres.scram_credentials(text[], text) IS 'SCRAM-SHA-256 iteration counts of the roles Kafka clients authenticate as';
REVOKE ALL ON FUNCTION kafgres.scram_credentials(text[], text) FROM PUBLIC;

/*
 * kafgres.scram_alter(principal, host, client_role, role_name, verifier):
 * one AlterUserScramCredentials change.  verifier is a SCRAM-SHA-256
 * secret the broker computed from the client's salted password (set with
 * ALTER ROLE ... PASSWORD), or NULL to delete (ALTER ROLE ... PASSWORD
 * NULL).  Returns what happened, for the broker to answer with Kafka's
 * nearest error:
 *
 *   ok            done
 *   denied        the authorizer is off, or principal (from host) may not
 *                 ALTER the CLUSTER per kafgres.acl (super users may)
 *   unknown       no such role, or it is not a member of client_role:
 *                 Kafka creates users, kafgres does not create roles
 *   no_login      the role exists without LOGIN (upsertion)
 *   superuser     the role is a Postgres superuser and principal is not
 *                 User:<a superuser role>
 *   no_credential the role has no SCRAM-SHA-256 verifier (deletion)
 *
 * SECURITY DEFINER: ALTER ROLE ... PASSWORD needs CREATEROLE, which the
 * broker's role need not have.  The broker checks the ACLs itself before
 * calling; the check is repeated here so that the function does nothing
 * for a principal the ACLs do not allow, whoever calls it.  Not granted to
 * PUBLIC (any caller could name any principal): only the broker's role
 * gets EXECUTE (docs/sql.md).
 */
CREATE FUNCTION kafgres.scram_alter(principal text, host text, client_role text, role_name text, verifier text)
RETURNS text
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_oid oid;
    v_login boolean;
    v_super boolean;
    v_password text;
BEGIN
    IF NOT kafgres.acl_enabled()
       OR NOT kafgres.acl_authorize(principal, host, 'ALTER', 'CLUSTER', 'kafka-cluster') THEN
        RETURN 'denied';
    END IF;
    SELECT a.oid, a.rolcanlogin, a.rolsuper, a.rolpassword
      INTO v_oid, v_login, v_super, v_password
      FROM pg_catalog.pg_authid AS a
     WHERE a.rolname OPERATOR(pg_catalog.=) role_name::name;
    IF NOT FOUND THEN
        RETURN 'unknown';
    END IF;
    IF client_role IS NOT NULL AND client_role OPERATOR(pg_catalog.<>) ''
       AND NOT coalesce((SELECT pg_catalog.pg_has_role(v_oid, c.oid, 'MEMBER')
                           FROM pg_catalog.pg_authid AS c
                          WHERE c.rolname OPERATOR(pg_catalog.=) client_role::name), false) THEN
        RETURN 'unknown';
    END IF;
    IF v_super AND NOT EXISTS (SELECT FROM pg_catalog.pg_authid AS s
                                WHERE s.rolsuper
                                  AND 'User:' OPERATOR(pg_catalog.||) s.rolname OPERATOR(pg_catalog.=) principal) THEN
        RETURN 'superuser';
    END IF;
    IF verifier IS NULL THEN
        IF pg_catalog.substring(v_password, '^SCRAM-SHA-256\$') IS NULL THEN
            RETURN 'no_credential';
        END IF;
        EXECUTE pg_catalog.format('ALTER ROLE %I PASSWORD NULL', role_name);
        RETURN 'ok';
    END IF;
    IF NOT v_login THEN
        RETURN 'no_login';
    END IF;
    IF pg_catalog.substring(verifier, '^SCRAM-SHA-256\$[0-9]+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$') IS NULL THEN
        RAISE EXCEPTION 'not a SCRAM-SHA-256 verifier' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE pg_catalog.format('ALTER ROLE %I PASSWORD %L', role_name, verifier);
    RETURN 'ok';
END;
$$;
COMMENT ON FUNCTION kafgres.scram_alter(text, text, text, text, text) IS 'set or remove the SCRAM-SHA-256 verifier of a Kafka user''s role, for a principal the ACLs let ALTER the cluster';
REVOKE ALL ON FUNCTION kafgres.scram_alter(text, text, text, text, text) FROM PUBLIC;
