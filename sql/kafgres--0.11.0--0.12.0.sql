/* kafgres 0.11.0 -> 0.12.0: errors a user can act on, dead letters replayed (issue #41) */

\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.12.0'" to load this file. \quit

/*
 * kafgres.dead_letter gains:
 *   expression   which of the mapping's expressions failed (value_expr,
 *                key_expr, filter_expr), NULL when none did (the row could
 *                not be rendered at all, or the record not appended);
 *   replay_xid   the transaction of kafgres_replay_dead_letters that asked
 *                for it to be rendered again;
 *   replayed_lsn where it was delivered by that replay (the end of that
 *                transaction): the broker removes the row once delivery has
 *                passed it, and until then it is what keeps the change from
 *                being delivered a second time should the broker read the
 *                change again.
 */
ALTER TABLE kafgres.dead_letter
    ADD COLUMN expression   text,
    ADD COLUMN replay_xid   xid8,
    ADD COLUMN replayed_lsn pg_lsn,
    ADD COLUMN held         boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN kafgres.dead_letter.held IS 'a change held while its mapping was paused by a schema change, delivered when it resumes';
COMMENT ON COLUMN kafgres.dead_letter.expression IS 'the expression that failed: value_expr, key_expr or filter_expr';
COMMENT ON COLUMN kafgres.dead_letter.replay_xid IS 'the kafgres_replay_dead_letters transaction that asked to render it again';
COMMENT ON COLUMN kafgres.dead_letter.replayed_lsn IS 'delivered by a replay ending there; removed once delivery has passed it';

/*
 * A member of a mapping's owner role may mark its dead letters for replay
 * in its own transaction, and nothing else: UPDATE of replay_xid only
 * (the column privilege is granted with kafgres_replay_dead_letters, see
 * docs/sql.md), on rows it may see, to its own transaction id.
 */
CREATE POLICY dead_letter_replay ON kafgres.dead_letter FOR UPDATE
    USING (EXISTS (SELECT 1 FROM kafgres.mapping AS m
                    WHERE m.mapping_id OPERATOR(pg_catalog.=) dead_letter.mapping_id
                      AND pg_catalog.pg_has_role(m.owner_role, 'MEMBER')
                      AND kafgres.mapping_denial(m.source_relid,
                              (SELECT r.oid FROM pg_catalog.pg_roles AS r
                                WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)) IS NULL))
    WITH CHECK (replay_xid OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id());

/*
 * kafgres.mapping_request(mapping_id, request, first_id, last_id): the
 * signed message (format 3) that tells the broker, at its point in the
 * stream, to deliver the dead letters first_id to last_id this
 * transaction marked ('r'), to hold the mapping's changes ('p'), or to
 * deliver what it held and hold no more ('s').  Only for members of the
 * mapping's owner role; the broker acts only on what kafgres.dead_letter
 * and kafgres.mapping_pause agree with.
 */
CREATE FUNCTION kafgres.mapping_request(mapping_id bigint, request "char", first_id bigint, last_id bigint)
RETURNS pg_lsn
AS 'MODULE_PATHNAME', 'kafgres_mapping_request'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION kafgres.mapping_request(bigint, "char", bigint, bigint) IS 'a signed request to the broker about one mapping at this point of the stream (only for members of the mapping''s owner role)';

/*
 * kafgres.owned_mapping(mapping_name): the mapping, if the caller is a
 * member of its owner role; an error saying which is not so otherwise.
 */
CREATE FUNCTION kafgres.owned_mapping(mapping_name text)
RETURNS kafgres.mapping
LANGUAGE plpgsql
STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_m kafgres.mapping%ROWTYPE;
BEGIN
    SELECT * INTO v_m FROM kafgres.mapping AS m
     WHERE m.name OPERATOR(pg_catalog.=) owned_mapping.mapping_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'mapping "%" does not exist', mapping_name
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(v_m.owner_role, 'MEMBER') THEN
        RAISE EXCEPTION 'must be owner of mapping "%"', mapping_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN v_m;
END
$$;

/*
 * kafgres_replay_dead_letters(mapping_name, max_changes): render the
 * mapping's dead letters again with its current definition, oldest first,
 * at most max_changes of them.  Those that render are delivered in their
 * original order, where this transaction commits, exactly once, and leave
 * kafgres.dead_letter; those that fail again stay, with the new error.
 * Nothing happens unless the transaction commits.  Returns how many were
 * asked for.
 *
 * Dead letters of changes whose frame could not be read hold no row to
 * render and are left alone, as are records that could not be appended
 * (mapping_id NULL).  Row images are read by column name against the
 * table as it is now.
 */
CREATE FUNCTION kafgres_replay_dead_letters(mapping_name text, max_changes int DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_m     kafgres.mapping%ROWTYPE;
    v_count pg_catalog.int8;
    v_first pg_catalog.int8;
    v_last  pg_catalog.int8;
BEGIN
    IF mapping_name IS NULL OR max_changes IS NULL THEN
        RAISE EXCEPTION 'arguments of kafgres_replay_dead_letters must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF max_changes < 1 OR max_changes > 100000 THEN
        RAISE EXCEPTION 'invalid max_changes %', max_changes
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument max_changes must be between 1 and 100000.';
    END IF;
    v_m := kafgres.owned_mapping(mapping_name);
    -- the oldest first: dead letters are written in the order of their
    -- changes, so id order is commit order; after those a call before in
    -- this transaction asked for, so that each request's range is its own
    WITH chosen AS (
        SELECT d.id FROM kafgres.dead_letter AS d
         WHERE d.mapping_id OPERATOR(pg_catalog.=) v_m.mapping_id
           -- not already on its way (a replay the broker has not
           -- delivered or failed yet), nor held for a paused mapping
           AND d.replay_xid IS NULL AND d.replayed_lsn IS NULL AND NOT d.held
           AND NOT coalesce(d.new_row OPERATOR(pg_catalog.?) 'unreadable_frame', false)
           AND d.id OPERATOR(pg_catalog.>) coalesce(
                   (SELECT pg_catalog.max(e.id) FROM kafgres.dead_letter AS e
                     WHERE e.mapping_id OPERATOR(pg_catalog.=) v_m.mapping_id
                       AND e.replay_xid OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id()), 0)
         ORDER BY d.id
         LIMIT max_changes
           FOR UPDATE),
    marked AS (
        UPDATE kafgres.dead_letter AS d SET replay_xid = pg_catalog.pg_current_xact_id()
          FROM chosen WHERE d.id OPERATOR(pg_catalog.=) chosen.id
        RETURNING d.id)
    SELECT pg_catalog.count(*), pg_catalog.min(marked.id), pg_catalog.max(marked.id)
      INTO v_count, v_first, v_last FROM marked;
    IF v_count OPERATOR(pg_catalog.>) 0 THEN
        PERFORM kafgres.mapping_request(v_m.mapping_id, 'r', v_first, v_last);
    END IF;
    RETURN v_count;
END
$$;
COMMENT ON FUNCTION kafgres_replay_dead_letters(text, int) IS 'deliver a mapping''s dead letters again, rendered with its current definition, in order, exactly once';
REVOKE ALL ON FUNCTION kafgres_replay_dead_letters(text, int) FROM PUBLIC;

/*
 * kafgres.render_query: the 'call' form takes a ninth array, the old
 * images as jsonb (rows replayed from kafgres.dead_letter keep their images
 * as JSON, read by column name), as new ones could be.
 */
CREATE OR REPLACE FUNCTION kafgres.render_query(source regclass, key_expr text, value_expr text,
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
            ' pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8),'
            ' pg_catalog.unnest($9)'
        WHEN 'probe' THEN
            'SELECT 0, NULL::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.jsonb,'
            ' ''I''::pg_catalog.text, ''0/0''::pg_catalog.pg_lsn, 0::pg_catalog.int8, pg_catalog.now(),'
            ' NULL::pg_catalog.jsonb'
        WHEN 'table' THEN
            -- the row's text is what its record literal would be
            pg_catalog.format(
                'SELECT 0, (kafgres_row.*)::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.jsonb,'
                ' ''I''::pg_catalog.text, ''0/0''::pg_catalog.pg_lsn, 0::pg_catalog.int8, pg_catalog.now(),'
                ' NULL::pg_catalog.jsonb'
                ' FROM %s AS kafgres_row', v_table)
    END;
    IF v_rows IS NULL THEN
        RAISE EXCEPTION 'invalid changes "%"', changes
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument changes must be ''call'', ''probe'' or ''table''.';
    END IF;

    RETURN pg_catalog.format(
'SELECT c.kafgres_ord AS ord, kafgres_filter.kafgres_ord IS NOT NULL AS pass, %s AS k, %s AS v
  FROM (%s OFFSET 0) AS c(kafgres_ord, kafgres_new, kafgres_old, kafgres_new_json, op, lsn, xid, commit_ts, kafgres_old_json)
  LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(c.kafgres_new::%s, c.kafgres_new_json) AS new
         ON c.kafgres_new IS NOT NULL OR c.kafgres_new_json IS NOT NULL
  LEFT JOIN LATERAL pg_catalog.jsonb_populate_record(c.kafgres_old::%s, c.kafgres_old_json) AS old
         ON c.kafgres_old IS NOT NULL OR c.kafgres_old_json IS NOT NULL
  LEFT JOIN LATERAL (SELECT c.kafgres_ord WHERE %s) AS kafgres_filter(kafgres_ord) ON true',
        coalesce('(' || key_expr || ')', 'NULL::pg_catalog.bytea'),
        coalesce('(' || value_expr || ')', 'pg_catalog.to_jsonb(new)'),
        v_rows, v_table, v_table,
        coalesce('(' || filter_expr || ')', 'true'));
END
$$;

/* ---------------------------------------------------------------------
 * Schema changes pause a mapping rather than poison it
 * --------------------------------------------------------------------- */

/*
 * kafgres.expression_columns(expr): the columns an expression names through
 * new or old (new.a, old.b, (new).c); a whole row names none.
 */
CREATE FUNCTION kafgres.expression_columns(expr text)
RETURNS text[]
AS 'MODULE_PATHNAME', 'kafgres_expression_columns'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION kafgres.expression_columns(text) IS 'the columns of the mapped table an expression names through new or old';

/*
 * kafgres.mapping.used_columns: the columns the mapping's expressions name,
 * with their types when the definition was written ({"a": "integer"}).
 * The event trigger compares them with the table after ALTER TABLE.
 * Written by the trigger below, whatever the writer says.
 */
ALTER TABLE kafgres.mapping ADD COLUMN used_columns jsonb;
COMMENT ON COLUMN kafgres.mapping.used_columns IS 'the columns the expressions name, with their types when written';

CREATE OR REPLACE FUNCTION kafgres.mapping_bounded() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM kafgres.check_expression_bounds(NEW.value_expr, 'value_expr');
    PERFORM kafgres.check_expression_bounds(NEW.key_expr, 'key_expr');
    PERFORM kafgres.check_expression_bounds(NEW.filter_expr, 'filter_expr');
    NEW.used_columns := (
        SELECT pg_catalog.jsonb_object_agg(a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod))
          FROM pg_catalog.unnest(coalesce(kafgres.expression_columns(NEW.value_expr), '{}')
                                 OPERATOR(pg_catalog.||) coalesce(kafgres.expression_columns(NEW.key_expr), '{}')
                                 OPERATOR(pg_catalog.||) coalesce(kafgres.expression_columns(NEW.filter_expr), '{}')) AS u(name)
          JOIN pg_catalog.pg_attribute AS a
            ON a.attrelid OPERATOR(pg_catalog.=) NEW.source_relid AND a.attname OPERATOR(pg_catalog.=) u.name
           AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped);
    RETURN NEW;
END
$$;
DROP TRIGGER mapping_bounded ON kafgres.mapping;
CREATE TRIGGER mapping_bounded
    BEFORE INSERT OR UPDATE ON kafgres.mapping
    FOR EACH ROW EXECUTE FUNCTION kafgres.mapping_bounded();

/*
 * A definition's expressions, on_error and search_path may be changed
 * (kafgres_alter_mapping); what it maps (name, table, topic) may not.  The
 * owner becomes the role that changes it (mapping_set_owner), as with
 * kafgres_add_mapping: expressions run with their writer's privileges.
 */
CREATE OR REPLACE FUNCTION kafgres.mapping_immutable() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.mapping_id IS DISTINCT FROM OLD.mapping_id OR NEW.name IS DISTINCT FROM OLD.name
       OR NEW.source_relid IS DISTINCT FROM OLD.source_relid OR NEW.topic IS DISTINCT FROM OLD.topic
       OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'mapping "%" cannot be changed so', OLD.name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'A mapping''s name, table and topic are fixed once written; its expressions, on_error and search_path may change.',
                  HINT = 'Change expressions with kafgres_alter_mapping(); for another table or topic, remove the mapping and add it again.';
    END IF;
    RETURN NEW;
END
$$;

-- the mappings there are: their columns as of now (not their owner)
ALTER TABLE kafgres.mapping DISABLE TRIGGER mapping_set_owner;
UPDATE kafgres.mapping SET used_columns = NULL;
ALTER TABLE kafgres.mapping ENABLE TRIGGER mapping_set_owner;

/*
 * The pause of a mapping whose expressions a schema change broke.  Changes
 * of the mapping committed after paused_lsn (the pause request, written
 * by the DDL's transaction) are held in kafgres.dead_letter (held) until
 * the broker meets the resume request of the transaction resume_xid
 * (kafgres_alter_mapping); there it delivers them, in order, and writes
 * resumed_end_lsn, the end of that transaction, after which nothing is
 * held.  The broker removes the row once delivery has passed it.
 */
CREATE TABLE kafgres.mapping_pause (
    mapping_id      bigint      PRIMARY KEY REFERENCES kafgres.mapping ON DELETE CASCADE,
    reason          text        NOT NULL,
    since           timestamptz NOT NULL DEFAULT now(),
    paused_lsn      pg_lsn      NOT NULL,
    resume_xid      xid8,
    resumed_end_lsn pg_lsn
);
COMMENT ON TABLE kafgres.mapping_pause IS 'mappings paused by a schema change that broke them';
REVOKE ALL ON kafgres.mapping_pause FROM PUBLIC;

/*
 * kafgres.mapping_source_altered(): as in 0.4.0 (tell the broker), and
 * pause every mapping of an altered table whose expressions name a column
 * that is gone (renamed or dropped) or has another type now.  Never fails
 * the DDL.
 */
CREATE OR REPLACE FUNCTION kafgres.mapping_source_altered() RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_m      record;
    v_col    record;
    v_now    pg_catalog.text;
    v_broken pg_catalog.text;
    v_lsn    pg_catalog.pg_lsn;
BEGIN
    IF (TG_TAG OPERATOR(pg_catalog.=) 'ALTER SCHEMA' AND EXISTS (SELECT 1 FROM kafgres.mapping))
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger_ddl_commands() AS c
                    JOIN kafgres.mapping AS m ON m.source_relid OPERATOR(pg_catalog.=) c.objid
                   WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass) THEN
        PERFORM pg_catalog.pg_notify('kafgres_mappings', '');
    END IF;
    IF TG_TAG OPERATOR(pg_catalog.<>) 'ALTER TABLE' THEN
        RETURN;
    END IF;
    FOR v_m IN SELECT DISTINCT m.mapping_id, m.name, m.source_relid, m.used_columns
                 FROM pg_catalog.pg_event_trigger_ddl_commands() AS c
                 JOIN kafgres.mapping AS m ON m.source_relid OPERATOR(pg_catalog.=) c.objid
                WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                  AND m.used_columns IS NOT NULL LOOP
        v_broken := NULL;
        FOR v_col IN SELECT u.key AS name, u.value AS type FROM pg_catalog.jsonb_each_text(v_m.used_columns) AS u LOOP
            SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) INTO v_now
              FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid OPERATOR(pg_catalog.=) v_m.source_relid
               AND a.attname OPERATOR(pg_catalog.=) v_col.name
               AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped;
            IF NOT FOUND THEN
                v_broken := coalesce(v_broken || '; ', '')
                            || pg_catalog.format('column %I (%s) is gone: renamed or dropped', v_col.name, v_col.type);
            ELSIF v_now OPERATOR(pg_catalog.<>) v_col.type THEN
                v_broken := coalesce(v_broken || '; ', '')
                            || pg_catalog.format('column %I changed type from %s to %s', v_col.name, v_col.type, v_now);
            END IF;
        END LOOP;
        CONTINUE WHEN v_broken IS NULL;
        CONTINUE WHEN EXISTS (SELECT 1 FROM kafgres.mapping_pause AS p
                               WHERE p.mapping_id OPERATOR(pg_catalog.=) v_m.mapping_id
                                 AND p.resumed_end_lsn IS NULL AND p.resume_xid IS NULL);
        v_broken := pg_catalog.format('table %s altered: %s; fix the expressions with kafgres_alter_mapping()',
                                      v_m.source_relid::pg_catalog.regclass, v_broken);
        v_lsn := kafgres.mapping_request(v_m.mapping_id, 'p', 0, 0);
        INSERT INTO kafgres.mapping_pause AS p (mapping_id, reason, paused_lsn)
        VALUES (v_m.mapping_id, v_broken, v_lsn)
        ON CONFLICT (mapping_id) DO UPDATE
           SET reason = excluded.reason, since = pg_catalog.now(), paused_lsn = excluded.paused_lsn,
               resume_xid = NULL, resumed_end_lsn = NULL;
        RAISE NOTICE 'kafgres mapping "%" paused: %', v_m.name, v_broken;
    END LOOP;
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'could not tell the kafgres broker of % on a mapped table: %', TG_TAG, SQLERRM;
END
$$;

/*
 * A paused mapping whose definition is changed (kafgres_alter_mapping, or
 * an UPDATE its owner may make) resumes: the changes held are delivered
 * where the changing transaction commits, with the new definition.
 */
CREATE FUNCTION kafgres.mapping_resume() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM kafgres.mapping_pause AS p
                WHERE p.mapping_id OPERATOR(pg_catalog.=) NEW.mapping_id
                  AND p.resumed_end_lsn IS NULL AND p.resume_xid IS NULL) THEN
        UPDATE kafgres.mapping_pause AS p SET resume_xid = pg_catalog.pg_current_xact_id()
         WHERE p.mapping_id OPERATOR(pg_catalog.=) NEW.mapping_id;
        PERFORM kafgres.mapping_request(NEW.mapping_id, 's', 0, 0);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER mapping_resume
    AFTER UPDATE ON kafgres.mapping
    FOR EACH ROW EXECUTE FUNCTION kafgres.mapping_resume();
REVOKE ALL ON FUNCTION kafgres.mapping_resume() FROM PUBLIC;

/*
 * kafgres.probe_expressions: kafgres_add_mapping's probe, for
 * kafgres_alter_mapping: each expression planned as the caller, in the
 * caller's search_path, in the scope the broker renders it in, the other
 * two at their defaults so that an error is the argument's.
 */
CREATE FUNCTION kafgres.probe_expressions(source regclass, mapping_name text, search_path text,
                                          value_expr text, key_expr text, filter_expr text)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
AS $$
DECLARE
    v_arg    pg_catalog.text;
    v_expr   pg_catalog.text;
    v_probe  pg_catalog.text;
    v_state  pg_catalog.text;
    v_msg    pg_catalog.text;
    v_detail pg_catalog.text;
    v_hint   pg_catalog.text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    PERFORM public.kafgres_validate_expression(value_expr, 'value_expr');
    PERFORM public.kafgres_validate_expression(key_expr, 'key_expr');
    PERFORM public.kafgres_validate_expression(filter_expr, 'filter_expr');
    FOREACH v_arg IN ARRAY ARRAY['value_expr', 'key_expr', 'filter_expr'] LOOP
        v_expr := CASE WHEN v_arg = 'value_expr' THEN value_expr
                       WHEN v_arg = 'key_expr' THEN key_expr
                       ELSE filter_expr END;
        CONTINUE WHEN v_expr IS NULL;
        v_probe := kafgres.render_query(source,
                                        CASE WHEN v_arg = 'key_expr' THEN v_expr END,
                                        CASE WHEN v_arg = 'value_expr' THEN v_expr END,
                                        CASE WHEN v_arg = 'filter_expr' THEN v_expr END,
                                        'probe') || ' LIMIT 0';
        BEGIN
            PERFORM pg_catalog.set_config('search_path', probe_expressions.search_path, true);
            EXECUTE v_probe;
            PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT,
                                    v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
            v_detail := coalesce(nullif(v_detail, '') || ' ', '')
                        || 'In argument ' || v_arg || ' of mapping "' || mapping_name || '".';
            IF coalesce(v_hint, '') = '' THEN
                RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_msg, DETAIL = v_detail;
            END IF;
            RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_msg, DETAIL = v_detail, HINT = v_hint;
        END;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION kafgres.probe_expressions(regclass, text, text, text, text, text) FROM PUBLIC;

/*
 * kafgres_alter_mapping(mapping_name, value_expr, key_expr, filter_expr,
 * on_error): write the mapping's definition anew, as kafgres_add_mapping
 * would (NULL is the default: to_jsonb(new), no key, every change), probed
 * the same way; the caller becomes its owner.  Every change not rendered
 * yet when this commits is rendered with the new definition.  A mapping
 * paused by a schema change resumes: what it held is delivered where this
 * commits, in order, exactly once.
 */
CREATE FUNCTION kafgres_alter_mapping(mapping_name text, value_expr text DEFAULT NULL, key_expr text DEFAULT NULL,
                                      filter_expr text DEFAULT NULL, on_error text DEFAULT 'dead_letter')
RETURNS bigint
LANGUAGE plpgsql
SECURITY INVOKER
AS $$
DECLARE
    v_path   pg_catalog.text := pg_catalog.current_setting('search_path');
    v_m      kafgres.mapping%ROWTYPE;
    v_denial pg_catalog.text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    IF mapping_name IS NULL THEN
        RAISE EXCEPTION 'argument mapping_name must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_m := kafgres.owned_mapping(mapping_name);
    IF on_error IS NULL OR (on_error OPERATOR(pg_catalog.<>) 'dead_letter' AND on_error OPERATOR(pg_catalog.<>) 'stall') THEN
        RAISE EXCEPTION 'invalid on_error "%"', on_error
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument on_error must be ''dead_letter'' or ''stall''.';
    END IF;
    v_denial := kafgres.mapping_denial(v_m.source_relid,
                    (SELECT r.oid FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER));
    IF v_denial IS NOT NULL THEN
        RAISE EXCEPTION 'permission denied to map table %', v_m.source_relid::pg_catalog.regclass
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = pg_catalog.upper(pg_catalog.left(v_denial, 1)) || pg_catalog.substr(v_denial, 2) || '.';
    END IF;
    PERFORM kafgres.probe_expressions(v_m.source_relid::pg_catalog.regclass, mapping_name, v_path,
                                      value_expr, key_expr, filter_expr);
    UPDATE kafgres.mapping AS m
       SET value_expr = kafgres_alter_mapping.value_expr, key_expr = kafgres_alter_mapping.key_expr,
           filter_expr = kafgres_alter_mapping.filter_expr, on_error = kafgres_alter_mapping.on_error,
           search_path = v_path
     WHERE m.mapping_id OPERATOR(pg_catalog.=) v_m.mapping_id;
    PERFORM pg_catalog.set_config('search_path', v_path, true);
    RETURN v_m.mapping_id;
END
$$;
COMMENT ON FUNCTION kafgres_alter_mapping(text, text, text, text, text) IS 'write a mapping''s expressions anew; a paused mapping resumes, delivering what it held';
REVOKE ALL ON FUNCTION kafgres_alter_mapping(text, text, text, text, text) FROM PUBLIC;

/* ---------------------------------------------------------------------
 * One host form for ACLs (issue #42, item 8)
 * --------------------------------------------------------------------- */

/*
 * kafgres.kafka_host(addr): a client address as Kafka matches ACL hosts
 * against it, which is how the broker prints one (acl.HostAddress): IPv4
 * dotted, an IPv4-mapped IPv6 address as IPv4, any other IPv6 address as
 * eight lowercase hexadecimal groups without compression or leading zeros
 * ("0:0:0:0:0:0:0:1", never "::1").  host() prints the compressed form, so
 * a DENY for 0:0:0:0:0:0:0:1 was not applied to SQL sessions over ::1.
 */
CREATE FUNCTION kafgres.kafka_host(addr inet)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_h     pg_catalog.text := pg_catalog.host(addr);
    v_quad  pg_catalog.text[];
    v_left  pg_catalog.text[];
    v_right pg_catalog.text[];
    v_g     pg_catalog.text[];
BEGIN
    IF pg_catalog.family(addr) OPERATOR(pg_catalog.=) 4 THEN
        RETURN v_h;
    END IF;
    IF v_h OPERATOR(pg_catalog.~*) '^::ffff:[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$' THEN
        RETURN pg_catalog.substr(v_h, 8);
    END IF;
    -- a trailing dotted quad is the last two groups
    v_quad := pg_catalog.regexp_match(v_h, '([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)$');
    IF v_quad IS NOT NULL THEN
        v_h := pg_catalog.regexp_replace(v_h, '[0-9.]+$', '')
               OPERATOR(pg_catalog.||) pg_catalog.to_hex(v_quad[1]::pg_catalog.int4 OPERATOR(pg_catalog.*) 256 OPERATOR(pg_catalog.+) v_quad[2]::pg_catalog.int4)
               OPERATOR(pg_catalog.||) ':'
               OPERATOR(pg_catalog.||) pg_catalog.to_hex(v_quad[3]::pg_catalog.int4 OPERATOR(pg_catalog.*) 256 OPERATOR(pg_catalog.+) v_quad[4]::pg_catalog.int4);
    END IF;
    IF pg_catalog.strpos(v_h, '::') OPERATOR(pg_catalog.>) 0 THEN
        v_left := pg_catalog.string_to_array(NULLIF(pg_catalog.split_part(v_h, '::', 1), ''), ':');
        v_right := pg_catalog.string_to_array(NULLIF(pg_catalog.split_part(v_h, '::', 2), ''), ':');
        v_left := coalesce(v_left, '{}');
        v_right := coalesce(v_right, '{}');
        v_g := v_left OPERATOR(pg_catalog.||) pg_catalog.array_fill('0'::pg_catalog.text,
                   ARRAY[8 OPERATOR(pg_catalog.-) pg_catalog.cardinality(v_left) OPERATOR(pg_catalog.-) pg_catalog.cardinality(v_right)])
               OPERATOR(pg_catalog.||) v_right;
    ELSE
        v_g := pg_catalog.string_to_array(v_h, ':');
    END IF;
    RETURN (SELECT pg_catalog.string_agg(coalesce(NULLIF(pg_catalog.ltrim(pg_catalog.lower(u.x), '0'), ''), '0'), ':' ORDER BY u.n)
              FROM pg_catalog.unnest(v_g) WITH ORDINALITY AS u(x, n));
END
$$;
COMMENT ON FUNCTION kafgres.kafka_host(inet) IS 'a client address as Kafka matches ACL hosts against it';

CREATE OR REPLACE FUNCTION kafgres.acl_check(principal text, operation text, resource_type text, resource_name text)
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
SELECT kafgres.acl_authorize($1, COALESCE(kafgres.kafka_host(pg_catalog.inet_client_addr()), ''), $2, $3, $4)
$$;
