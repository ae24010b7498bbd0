/* kafgres 0.10.0 -> 0.11.0: the pipeline never stops silently (issue #41) */

\echo Use "ALTER EXTENSION kafgres UPDATE TO '0.11.0'" to load this file. \quit

/*
 * kafgres.delivery gains the pipeline's state: whether SQL-produced and
 * CDC records flow, and if not, what holds them back.  Written by the
 * broker when the state changes (producer.PGStatus): 'stalled' when the
 * replication stream cannot be read past a transaction, or a mapping with
 * on_error 'stall' cannot render a change; 'flowing' again once delivery
 * has passed it.  skip_xid is written by kafgres_skip_transaction and read
 * by the broker's decoder when it meets that transaction again.  In
 * kafgres.delivery, so that a role that may wait for delivery
 * (SELECT on it, docs/sql.md) sees why it does not come.
 */
ALTER TABLE kafgres.delivery
    ADD COLUMN state           text        NOT NULL DEFAULT 'flowing' CHECK (state IN ('flowing', 'stalled')),
    ADD COLUMN since           timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN reason          text,
    ADD COLUMN stalled_lsn     pg_lsn,
    ADD COLUMN stalled_xid     bigint,
    ADD COLUMN stalled_end_lsn pg_lsn,
    ADD COLUMN skippable       boolean     NOT NULL DEFAULT false,
    ADD COLUMN skip_xid        bigint;
COMMENT ON COLUMN kafgres.delivery.state IS 'flowing, or stalled: reason, stalled_lsn and stalled_xid say what holds delivery back';

/* kafgres.pipeline gains the state: the columns are added at its end */
CREATE OR REPLACE VIEW kafgres.pipeline AS
    SELECT d.applied_lsn,
           pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), d.applied_lsn)::bigint AS lag_bytes,
           (SELECT pg_catalog.count(*) FROM kafgres.dead_letter AS l
             WHERE l.mapping_id IS NULL)                                              AS dead_lettered,
           (SELECT pg_catalog.max(l.created_at) FROM kafgres.dead_letter AS l
             WHERE l.mapping_id IS NULL)                                              AS last_dead_letter_at,
           public.kafgres_rejected_messages()                                         AS rejected_messages,
           (SELECT pg_catalog.format('log ahead of the WAL since %s: WAL at %s, log at %s (%s); '
                                     'see docs/operations.md "A log ahead of the WAL"',
                                     g.since, g.wal_lsn, g.log_lsn, g.partitions)
              FROM kafgres.source_guard AS g)                                         AS sql_source_refused,
           d.state,
           d.since                                                                    AS state_since,
           d.reason                                                                   AS stall_reason,
           d.stalled_lsn,
           d.stalled_xid,
           d.skippable                                                                AS stall_skippable
      FROM kafgres.delivery AS d;

/*
 * kafgres_wait_delivered: as before, but a timeout while the pipeline is
 * stalled before the target is an error naming the stall, not false: the
 * caller learns why, and what to do.  The stall may clear while it waits
 * (the mapping that stalled removed, a skip on its way), so it is only
 * reported at the deadline.
 */
CREATE OR REPLACE FUNCTION kafgres_wait_delivered(lsn pg_lsn, timeout interval DEFAULT '10 seconds')
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_target   pg_lsn;
    v_deadline timestamptz;
    v_d        kafgres.delivery;
BEGIN
    IF lsn IS NULL THEN
        RAISE EXCEPTION 'argument "lsn" of kafgres_wait_delivered must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;

    -- a transaction that has written something may hold records of its
    -- own: they cannot be delivered before it commits, so waiting here
    -- would only run into the timeout (or, worse, succeed without them)
    IF pg_catalog.txid_current_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'kafgres_wait_delivered cannot be called in a transaction that has written data'
            USING ERRCODE = 'active_sql_transaction',
                  DETAIL = 'Records produced by this transaction are delivered only after it commits.',
                  HINT = 'Commit first, then call kafgres_wait_delivered in a new transaction.';
    END IF;

    -- each poll below needs a new snapshot to see the broker's updates
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'kafgres_wait_delivered cannot be called in a % transaction',
                        pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))
            USING ERRCODE = 'active_sql_transaction',
                  DETAIL = 'Its snapshot would never show the broker''s progress.',
                  HINT = 'Call it outside a transaction block, or in a READ COMMITTED transaction.';
    END IF;

    v_target := greatest(lsn, pg_catalog.pg_current_wal_insert_lsn());
    v_deadline := pg_catalog.clock_timestamp() + coalesce(timeout, interval '0');

    LOOP
        SELECT * INTO v_d FROM kafgres.delivery AS d;
        IF v_d.applied_lsn >= v_target THEN
            RETURN true;
        END IF;
        IF pg_catalog.clock_timestamp() < v_deadline THEN
            PERFORM pg_catalog.pg_sleep(0.005);
            CONTINUE;
        END IF;
        -- out of time: if what holds delivery back lies before the target
        -- (and no skip of it is on its way), say what it is
        IF v_d.state = 'stalled' AND v_d.stalled_lsn < v_target
           AND v_d.skip_xid IS DISTINCT FROM v_d.stalled_xid THEN
            RAISE EXCEPTION 'the kafgres pipeline is stalled: %', v_d.reason
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = pg_catalog.format('Since %s, at WAL position %s%s; nothing committed after it is delivered.',
                                                 v_d.since, v_d.stalled_lsn,
                                                 coalesce(', in transaction ' || v_d.stalled_xid, '')),
                      HINT = CASE WHEN v_d.skippable
                                  THEN pg_catalog.format('Fix the cause, or skip that transaction with SELECT kafgres_skip_transaction(%s); see docs/operations.md, "A stalled pipeline".', v_d.stalled_xid)
                                  ELSE 'Fix the cause; see docs/operations.md, "A stalled pipeline".' END;
        END IF;
        RETURN false;
    END LOOP;
END
$$;

/*
 * kafgres_skip_transaction(xid): let the broker skip the transaction the
 * replication stream cannot be read past, keeping what it held in
 * kafgres.dead_letter with the reason (records of kafgres_produce and
 * unreadable messages without a mapping, changes under each mapping that
 * covered them).  Only that transaction, and only while the pipeline is
 * stalled on it: never a blind advance of the slot.  Returns the end of
 * the transaction's commit record, to wait for with kafgres_wait_delivered.
 */
CREATE FUNCTION kafgres_skip_transaction(xid bigint)
RETURNS pg_lsn
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_state kafgres.delivery;
BEGIN
    IF xid IS NULL THEN
        RAISE EXCEPTION 'argument "xid" of kafgres_skip_transaction must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO v_state FROM kafgres.delivery FOR UPDATE;
    IF v_state.state <> 'stalled' THEN
        RAISE EXCEPTION 'the kafgres pipeline is not stalled'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'kafgres.pipeline shows its state.';
    END IF;
    IF NOT v_state.skippable THEN
        RAISE EXCEPTION 'the kafgres pipeline is stalled by something kafgres_skip_transaction cannot skip: %', v_state.reason
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'A mapping that stalls is fixed or removed (kafgres_remove_mapping); see docs/operations.md, "A stalled pipeline".';
    END IF;
    IF v_state.stalled_xid IS DISTINCT FROM xid THEN
        RAISE EXCEPTION 'the kafgres pipeline is stalled on transaction %, not %', v_state.stalled_xid, xid
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE kafgres.delivery SET skip_xid = xid;
    RETURN coalesce(v_state.stalled_end_lsn, v_state.stalled_lsn);
END
$$;
COMMENT ON FUNCTION kafgres_skip_transaction(bigint) IS 'skip the transaction the pipeline is stalled on, dead-lettering what it held';
REVOKE ALL ON FUNCTION kafgres_skip_transaction(bigint) FROM PUBLIC;

/*
 * kafgres.mapping_status.status_since: when the status last changed, so
 * that 'error' says since when; kafgres.mappings shows it last.
 */
ALTER TABLE kafgres.mapping_status ADD COLUMN status_since timestamptz;
CREATE OR REPLACE VIEW kafgres.mappings AS
    SELECT m.name,
           m.source_relid::regclass          AS source_table,
           m.topic,
           m.value_expr,
           m.key_expr,
           m.filter_expr,
           m.on_error,
           m.owner_role::regrole             AS owner,
           coalesce(s.status, 'pending')     AS status,
           s.last_error,
           coalesce(s.rendered, 0)           AS rendered,
           coalesce(s.dead_lettered, 0)      AS dead_lettered,
           m.created_at,
           s.status_since
      FROM kafgres.mapping AS m
      LEFT JOIN kafgres.mapping_status AS s USING (mapping_id);

/*
 * Every way into kafgres.mapping is bounded: an expression the broker
 * cannot parse safely (longer than 64 KiB, more than 10,000 tokens) is
 * refused at the INSERT, whoever writes it and however
 * (outputplugin/validate.c; kafgres_add_mapping checks the rest of the
 * rules too).  UPDATE is refused already (mapping_immutable).
 */
CREATE FUNCTION kafgres.check_expression_bounds(expr text, argname text)
RETURNS void
AS 'MODULE_PATHNAME', 'kafgres_check_expression_bounds'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION kafgres.check_expression_bounds(text, text) IS 'raise an error unless the expression is within the bounds the broker parses';

CREATE FUNCTION kafgres.mapping_bounded() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM kafgres.check_expression_bounds(NEW.value_expr, 'value_expr');
    PERFORM kafgres.check_expression_bounds(NEW.key_expr, 'key_expr');
    PERFORM kafgres.check_expression_bounds(NEW.filter_expr, 'filter_expr');
    RETURN NEW;
END
$$;
CREATE TRIGGER mapping_bounded
    BEFORE INSERT ON kafgres.mapping
    FOR EACH ROW EXECUTE FUNCTION kafgres.mapping_bounded();

/*
 * kafgres.topic_compacts(topic): whether the topic's records are
 * compacted, as the broker decides it: the topic's cleanup.policy, else
 * the broker's log.cleanup.policy (this node's over the cluster default),
 * else Kafka's default, delete.  kafgres_produce asks it for a record
 * without a key, which a compacted topic refuses, as Kafka does
 * (outputplugin/produce.c); a topic not created yet takes the broker's.
 * plpgsql, so that its plans are kept per backend; SECURITY DEFINER, so
 * that a producing role needs no privilege on the config tables.
 */
CREATE FUNCTION kafgres.topic_compacts(topic text)
RETURNS boolean
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_policy text;
BEGIN
    SELECT c.value INTO v_policy
      FROM kafgres.topic AS t
      JOIN kafgres.topic_config AS c ON c.topic_id = t.topic_id
     WHERE t.name = topic_compacts.topic AND c.name = 'cleanup.policy';
    IF v_policy IS NULL THEN
        SELECT b.value INTO v_policy
          FROM kafgres.broker_config AS b
         WHERE b.name = 'log.cleanup.policy' AND (b.node_id IS NULL OR b.node_id = 1)
         ORDER BY b.node_id NULLS LAST
         LIMIT 1;
    END IF;
    RETURN 'compact' = ANY (string_to_array(replace(lower(coalesce(v_policy, 'delete')), ' ', ''), ','));
END
$$;
COMMENT ON FUNCTION kafgres.topic_compacts(text) IS 'whether the topic compacts (its cleanup.policy, else the broker''s log.cleanup.policy)';
REVOKE ALL ON FUNCTION kafgres.topic_compacts(text) FROM PUBLIC;
