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
    ADD COLUMN replayed_lsn pg_lsn;
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
 * kafgres.replay_request(mapping_id): the signed message (format 3) that
 * tells the broker where in the stream to deliver the dead letters this
 * transaction marked.
 */
CREATE FUNCTION kafgres.replay_request(mapping_id bigint)
RETURNS pg_lsn
AS 'MODULE_PATHNAME', 'kafgres_replay_request'
LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION kafgres.replay_request(bigint) IS 'ask the broker to deliver the dead letters this transaction marked for replay (only for members of the mapping''s owner role)';

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
BEGIN
    IF mapping_name IS NULL OR max_changes IS NULL THEN
        RAISE EXCEPTION 'arguments of kafgres_replay_dead_letters must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF max_changes < 1 OR max_changes > 1000000 THEN
        RAISE EXCEPTION 'invalid max_changes %', max_changes
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'Argument max_changes must be between 1 and 1000000.';
    END IF;
    SELECT * INTO v_m FROM kafgres.mapping AS m
     WHERE m.name OPERATOR(pg_catalog.=) kafgres_replay_dead_letters.mapping_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'mapping "%" does not exist', mapping_name
            USING ERRCODE = 'undefined_object';
    END IF;
    IF NOT pg_catalog.pg_has_role(v_m.owner_role, 'MEMBER') THEN
        RAISE EXCEPTION 'must be owner of mapping "%"', mapping_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- the oldest first: dead letters are written in the order of their
    -- changes, so id order is commit order
    WITH chosen AS (
        SELECT d.id FROM kafgres.dead_letter AS d
         WHERE d.mapping_id OPERATOR(pg_catalog.=) v_m.mapping_id
           -- not already on its way (a replay the broker has not
           -- delivered or failed yet)
           AND d.replay_xid IS NULL AND d.replayed_lsn IS NULL
           AND NOT coalesce(d.new_row OPERATOR(pg_catalog.?) 'unreadable_frame', false)
         ORDER BY d.id
         LIMIT max_changes
           FOR UPDATE)
    UPDATE kafgres.dead_letter AS d SET replay_xid = pg_catalog.pg_current_xact_id()
      FROM chosen WHERE d.id OPERATOR(pg_catalog.=) chosen.id;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count OPERATOR(pg_catalog.>) 0 THEN
        PERFORM kafgres.replay_request(v_m.mapping_id);
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
