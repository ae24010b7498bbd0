--
-- setup: the extension, slot "kafgres" and, in schema regress, the frame
-- decoder every later test reads the output plugin with.  It runs first
-- (REGRESS in the Makefile); the others rely on what it creates.
--
-- No broker runs in this instance (regress.conf), so slot "kafgres", which
-- kafgres_produce insists on, is made and read here.  The frames are
-- decoded in SQL into stable text: no LSN, xid, OID, timestamp or mapping
-- id, which differ from run to run, is ever shown; the tests compare them
-- with each other instead (regress.frames_ok).  The format is in
-- docs/producing.md, "Output plugin frames".
--
-- Every test sets SHOW_CONTEXT never: errors are compared by message,
-- detail and hint, not by the line of the PL/pgSQL function that raised
-- them, which moves with every edit of the function.
--
\set SHOW_CONTEXT never
CREATE EXTENSION kafgres;
SELECT extversion FROM pg_extension WHERE extname = 'kafgres';
SELECT 'init' FROM pg_create_logical_replication_slot('kafgres', 'kafgres');

-- loaded through shared_preload_libraries: the settings, the message key
-- and the supervisor (which has no broker to start here)
SHOW kafgres.max_message_bytes;
SHOW kafgres.auto_create_topics;
SELECT kafgres_rejected_messages();
SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'kafgres supervisor';

CREATE SCHEMA regress;
SET search_path = regress, public;

-- big-endian integers at a 0-based offset, as get_byte counts
CREATE FUNCTION i16(b bytea, o int) RETURNS int
LANGUAGE sql IMMUTABLE STRICT
AS $$ SELECT (get_byte(b, o) << 8) | get_byte(b, o + 1) $$;
CREATE FUNCTION i32(b bytea, o int) RETURNS int
LANGUAGE sql IMMUTABLE STRICT
AS $$ SELECT ('x' || encode(substr(b, o + 1, 4), 'hex'))::bit(32)::int $$;
CREATE FUNCTION i64(b bytea, o int) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT
AS $$ SELECT ('x' || encode(substr(b, o + 1, 8), 'hex'))::bit(64)::bigint $$;
CREATE FUNCTION lsn(b bytea, o int) RETURNS pg_lsn
LANGUAGE sql IMMUTABLE STRICT
AS $$ SELECT '0/0'::pg_lsn + i64(b, o)::numeric $$;

-- string16 and int32-length bytes (-1: NULL) at o, and the offset after them
CREATE FUNCTION str16(b bytea, o int, OUT val text, OUT next int)
LANGUAGE sql IMMUTABLE STRICT
AS $$ SELECT convert_from(substr(b, o + 3, i16(b, o)), 'UTF8'), o + 2 + i16(b, o) $$;
CREATE FUNCTION bytes32(b bytea, o int, OUT val bytea, OUT next int)
LANGUAGE sql IMMUTABLE STRICT
AS $$
SELECT CASE WHEN i32(b, o) >= 0 THEN substr(b, o + 5, i32(b, o)) END,
       o + 4 + greatest(i32(b, o), 0)
$$;

-- bytes for people: NULL, text when they are short printable UTF-8, else
-- hex when short, else their size
CREATE FUNCTION show(b bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    t text;
BEGIN
    IF b IS NULL THEN
        RETURN 'NULL';
    ELSIF length(b) > 40 THEN
        RETURN '<' || length(b) || ' bytes>';
    END IF;
    BEGIN
        t := convert_from(b, 'UTF8');
    EXCEPTION WHEN character_not_in_repertoire THEN
        t := NULL;
    END;
    IF t IS NULL OR t ~ '[[:cntrl:]]' THEN
        RETURN '\x' || encode(b, 'hex');
    END IF;
    RETURN quote_literal(t);
END
$$;

-- the name of a mapping by id, current or retired: ids change every run
CREATE FUNCTION mapping_name(id bigint) RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_name text;
BEGIN
    IF to_regclass('kafgres.mapping') IS NOT NULL THEN
        EXECUTE 'SELECT name FROM kafgres.mapping WHERE mapping_id = $1
                 UNION ALL
                 SELECT name FROM kafgres.mapping_retired WHERE mapping_id = $1'
           INTO v_name USING id;
    END IF;
    RETURN coalesce(v_name, '#unknown');
END
$$;

-- every frame in the slot, in order: each row of
-- pg_logical_slot_*_binary_changes holds frames, each after its uint32
-- length; consume = false only peeks
CREATE FUNCTION frames(consume boolean DEFAULT true, slot name DEFAULT 'kafgres')
RETURNS TABLE (n int, msg int, frame bytea)
LANGUAGE plpgsql
AS $$
DECLARE
    m record;
    off int;
BEGIN
    n := 0;
    FOR m IN EXECUTE format('SELECT c.data, c.i::int AS i
                               FROM %s($1, NULL, NULL) WITH ORDINALITY AS c(lsn, xid, data, i)
                              ORDER BY c.i',
                            CASE WHEN consume THEN 'pg_logical_slot_get_binary_changes'
                                 ELSE 'pg_logical_slot_peek_binary_changes' END)
             USING slot
    LOOP
        off := 0;
        WHILE off < length(m.data) LOOP
            n := n + 1;
            msg := m.i;
            frame := substr(m.data, off + 5, i32(m.data, off));
            RETURN NEXT;
            off := off + 4 + i32(m.data, off);
        END LOOP;
    END LOOP;
END
$$;

-- the common header, and the position every kind has next: commit_lsn
-- for B and C, the change's or message's lsn for the others
CREATE FUNCTION header(f bytea, OUT version int, OUT kind text,
                       OUT commit_end_lsn pg_lsn, OUT xid bigint, OUT lsn pg_lsn)
LANGUAGE sql IMMUTABLE STRICT
AS $$
SELECT get_byte(f, 0), chr(get_byte(f, 1)), lsn(f, 2), i32(f, 10)::bigint & 4294967295, lsn(f, 14)
$$;

-- mapping_ids at o: the ids, and the offset after them
CREATE FUNCTION mapping_ids(f bytea, o int, OUT ids bigint[], OUT next int)
LANGUAGE sql IMMUTABLE STRICT
AS $$
SELECT coalesce((SELECT array_agg(i64(f, o + 2 + 8 * i) ORDER BY i)
                   FROM generate_series(0, i16(f, o) - 1) AS i), '{}'),
       o + 2 + 8 * i16(f, o)
$$;

-- a tuple at o, as (name:type=value, ...), and the offset after it
CREATE FUNCTION tuple(f bytea, o int, OUT val text, OUT next int)
LANGUAGE plpgsql IMMUTABLE STRICT
AS $$
DECLARE
    ncols int := i16(f, o);
    cols text[] := '{}';
    name text;
    typid oid;
    kind text;
    b bytea;
BEGIN
    next := o + 2;
    FOR i IN 1 .. ncols LOOP
        SELECT s.val, s.next INTO name, next FROM str16(f, next) AS s;
        typid := i32(f, next)::bigint & 4294967295;
        kind := chr(get_byte(f, next + 4));
        next := next + 5;
        IF kind = 't' THEN
            SELECT s.val, s.next INTO b, next FROM bytes32(f, next) AS s;
            cols := cols || format('%s:%s=%s', name, typid::regtype,
                                   CASE WHEN length(b) > 40 THEN '<' || length(b) || ' bytes>'
                                        ELSE convert_from(b, 'UTF8') END);
        ELSIF kind = 'n' THEN
            cols := cols || format('%s:%s NULL', name, typid::regtype);
        ELSIF kind = 'u' THEN
            cols := cols || format('%s:%s UNCHANGED-TOAST', name, typid::regtype);
        ELSE
            cols := cols || format('%s:%s kind %s?', name, typid::regtype, kind);
        END IF;
    END LOOP;
    val := '(' || array_to_string(cols, ', ') || ')';
END
$$;

-- the relations an I, U, D or T frame names, with their mapping ids; for
-- I, U and D also the new and old tuples
CREATE FUNCTION relations(f bytea)
RETURNS TABLE (relid oid, relname text, ids bigint[], new_tuple text, old_tuple text)
LANGUAGE plpgsql IMMUTABLE STRICT
AS $$
DECLARE
    kind text := chr(get_byte(f, 1));
    o int := 22;
    nrels int := 1;
    schema text;
    tbl text;
BEGIN
    IF kind = 'T' THEN
        nrels := i16(f, 22);
        o := 24;
    END IF;
    FOR i IN 1 .. nrels LOOP
        relid := i32(f, o)::bigint & 4294967295;
        SELECT s.val, s.next INTO schema, o FROM str16(f, o + 4) AS s;
        SELECT s.val, s.next INTO tbl, o FROM str16(f, o) AS s;
        relname := quote_ident(schema) || '.' || quote_ident(tbl);
        SELECT m.ids, m.next INTO ids, o FROM mapping_ids(f, o) AS m;
        new_tuple := NULL;
        old_tuple := NULL;
        IF kind <> 'T' THEN
            o := o + 1;
            IF get_byte(f, o - 1) = 1 THEN
                SELECT t.val, t.next INTO new_tuple, o FROM tuple(f, o) AS t;
            END IF;
            o := o + 1;
            IF get_byte(f, o - 1) = 1 THEN
                SELECT t.val, t.next INTO old_tuple, o FROM tuple(f, o) AS t;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;

-- the record of an M frame: format 1 (kafgres_produce) or 2 (a snapshot row)
CREATE FUNCTION message(f bytea) RETURNS text
LANGUAGE plpgsql STABLE STRICT
AS $$
DECLARE
    p bytea := substr(f, 27, i32(f, 22));
    o int;
    topic text;
    part int;
    k bytea;
    v bytea;
    nheaders int;
    hk text;
    hv bytea;
    headers text[] := '{}';
BEGIN
    IF get_byte(p, 0) = 2 THEN
        RETURN format('snapshot of %s: %s', mapping_name(i64(p, 1)),
                      convert_from(substr(p, 10), 'UTF8'));
    ELSIF get_byte(p, 0) <> 1 THEN
        RETURN 'format ' || get_byte(p, 0) || '?';
    END IF;
    SELECT s.val, s.next INTO topic, o FROM str16(p, 1) AS s;
    part := i32(p, o);
    SELECT b.val, b.next INTO k, o FROM bytes32(p, o + 4) AS b;
    SELECT b.val, b.next INTO v, o FROM bytes32(p, o) AS b;
    nheaders := i16(p, o);
    o := o + 2;
    FOR i IN 1 .. nheaders LOOP
        SELECT s.val, s.next INTO hk, o FROM str16(p, o) AS s;
        SELECT b.val, b.next INTO hv, o FROM bytes32(p, o) AS b;
        headers := headers || (quote_literal(hk) || '=' || show(hv));
    END LOOP;
    RETURN format('topic=%s partition=%s key=%s value=%s', topic, part, show(k), show(v))
        || CASE WHEN nheaders > 0 THEN ' headers=' || array_to_string(headers, ',') ELSE '' END
        || CASE WHEN o <> length(p) THEN ' (' || (length(p) - o) || ' bytes left over)' ELSE '' END;
END
$$;

-- one frame as a line of text, with nothing in it that changes between runs
CREATE FUNCTION describe(f bytea) RETURNS text
LANGUAGE plpgsql STABLE STRICT
AS $$
DECLARE
    kind text := chr(get_byte(f, 1));
    r record;
    parts text[] := '{}';
    names text;
BEGIN
    IF get_byte(f, 0) <> 3 THEN
        RETURN 'frame version ' || get_byte(f, 0) || '?';
    ELSIF kind IN ('B', 'C') THEN
        RETURN kind;
    ELSIF kind = 'M' THEN
        RETURN 'M ' || message(f);
    END IF;
    FOR r IN SELECT * FROM relations(f) LOOP
        SELECT string_agg(mapping_name(id), ',' ORDER BY ord) INTO names
          FROM unnest(r.ids) WITH ORDINALITY AS u(id, ord);
        parts := parts || (r.relname || ' [' || coalesce(names, '') || ']'
                           || CASE WHEN to_regclass(r.relname) <> r.relid THEN ' (relid mismatch)' ELSE '' END
                           || coalesce(' new' || r.new_tuple, '')
                           || coalesce(' old' || r.old_tuple, ''));
    END LOOP;
    RETURN kind || ' ' || array_to_string(parts, ', ');
END
$$;

-- what must hold for any sequence of frames (docs/producing.md): version
-- 3; transactions B, at least one M/I/U/D/T, C, in commit order; within
-- one, the same commit_end_lsn and xid throughout, B and C with the same
-- commit_lsn and commit time, everything before commit_lsn, which is
-- before commit_end_lsn; mapping ids at least one, strictly ascending.
-- 'ok', or the first thing wrong.
CREATE FUNCTION frames_ok(fs bytea[]) RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    h record;
    b record;
    f bytea;
    i int := 0;
    in_txn boolean := false;
    content int;
    last_end pg_lsn := '0/0';
    r record;
BEGIN
    FOREACH f IN ARRAY coalesce(fs, '{}') LOOP
        i := i + 1;
        h := header(f);
        IF h.version <> 3 THEN
            RETURN format('frame %s: version %s', i, h.version);
        END IF;
        IF h.kind = 'B' THEN
            IF in_txn THEN
                RETURN format('frame %s: B inside a transaction', i);
            END IF;
            IF h.commit_end_lsn <= last_end THEN
                RETURN format('frame %s: transaction out of commit order', i);
            END IF;
            IF h.lsn >= h.commit_end_lsn THEN
                RETURN format('frame %s: commit_lsn not before commit_end_lsn', i);
            END IF;
            in_txn := true;
            content := 0;
            b := h;
            b.lsn := h.lsn;
            CONTINUE;
        END IF;
        IF NOT in_txn THEN
            RETURN format('frame %s: %s outside a transaction', i, h.kind);
        END IF;
        IF h.commit_end_lsn <> b.commit_end_lsn OR h.xid <> b.xid THEN
            RETURN format('frame %s: commit_end_lsn or xid differs from its B', i);
        END IF;
        IF h.kind = 'C' THEN
            IF content = 0 THEN
                RETURN format('frame %s: empty transaction', i);
            END IF;
            IF h.lsn <> b.lsn OR i64(f, 22) <> i64(fs[i - content - 1], 22) THEN
                RETURN format('frame %s: C differs from B in commit_lsn or commit_time', i);
            END IF;
            in_txn := false;
            last_end := h.commit_end_lsn;
            CONTINUE;
        END IF;
        content := content + 1;
        IF h.kind NOT IN ('M', 'I', 'U', 'D', 'T') THEN
            RETURN format('frame %s: kind %s', i, h.kind);
        END IF;
        IF h.lsn > b.lsn THEN
            RETURN format('frame %s: %s after its commit', i, h.kind);
        END IF;
        IF h.kind <> 'M' THEN
            FOR r IN SELECT * FROM relations(f) LOOP
                IF cardinality(r.ids) = 0 THEN
                    RETURN format('frame %s: %s without mapping ids', i, r.relname);
                END IF;
                IF EXISTS (SELECT FROM generate_subscripts(r.ids, 1) AS j
                            WHERE j > 1 AND r.ids[j] <= r.ids[j - 1]) THEN
                    RETURN format('frame %s: mapping ids of %s not ascending', i, r.relname);
                END IF;
            END LOOP;
        END IF;
    END LOOP;
    IF in_txn THEN
        RETURN 'the last transaction has no C';
    END IF;
    RETURN 'ok';
END
$$;

-- the usual look at what the slot holds: consumes it, one line per frame,
-- then whether the frames were well-formed
CREATE FUNCTION decode(consume boolean DEFAULT true)
RETURNS TABLE (n int, frame text)
LANGUAGE plpgsql
AS $$
DECLARE
    fs bytea[];
BEGIN
    SELECT array_agg(f.frame ORDER BY f.n) INTO fs FROM frames(consume) AS f;
    RETURN QUERY SELECT u.n::int, describe(u.f) FROM unnest(fs) WITH ORDINALITY AS u(f, n);
    n := coalesce(cardinality(fs), 0) + 1;
    frame := 'frames_ok: ' || frames_ok(fs);
    RETURN NEXT;
END
$$;

-- empty so far
SELECT * FROM decode();
