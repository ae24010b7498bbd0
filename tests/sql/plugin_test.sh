#!/usr/bin/env bash
#
# tests/sql/plugin_test.sh -- checks of the "kafgres" output plugin and of
# kafgres_produce() against a running cluster, in plain SQL.
#
#   tests/sql/plugin_test.sh DIR        (a cluster started by tests/pgcluster.sh)
#
# The cluster needs max_prepared_transactions > 0 and "kafgres" in
# output_plugin_libraries, e.g.
#
#   KAFGRES_PG_CONF="max_prepared_transactions = 10
#   output_plugin_libraries = 'pgoutput, test_decoding, kafgres'" \
#       tests/pgcluster.sh start /tmp/kg 5471 9471
#
# The test reads its own slot, kafgres_plugin_test, so that it does not
# disturb (or get disturbed by) the broker reading slot "kafgres"; it creates
# slot "kafgres" only if it is missing, because kafgres_produce() insists on
# it, and drops what it created.  Tables it creates are in schema
# kafgres_plugin_test, dropped at the end.  Exit status 0 means all passed.

set -euo pipefail

DIR=${1:?usage: $0 CLUSTER_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
PSQL=("$HERE/../pgcluster.sh" psql "$DIR" -q -At -v ON_ERROR_STOP=1)

fail() { echo "plugin_test: FAIL: $*" >&2; exit 1; }

# frame kinds of the test slot, as one string (e.g. "BMCBIC")
kinds() {
	"${PSQL[@]}" -c "SELECT coalesce(string_agg(chr(get_byte(data, 1)), '' ORDER BY n), '')
	                   FROM kafgres_plugin_test.frames()"
}

cleanup() {
	local sql
	for sql in \
		"SELECT pg_drop_replication_slot('kafgres_plugin_test')" \
		"DELETE FROM kafgres.mapping WHERE name = 'kafgres_plugin_test'" \
		"DROP SCHEMA IF EXISTS kafgres_plugin_test CASCADE"
	do
		"${PSQL[@]}" -c "$sql" >/dev/null 2>&1 || true
	done
	if [ "$("${PSQL[@]}" -c "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'kafgres_plugin_test'" 2>/dev/null)" = 1 ]; then
		"${PSQL[@]}" -c "ROLLBACK PREPARED 'kafgres_plugin_test'" >/dev/null 2>&1 || true
	fi
	if [ "${CREATED_SLOT:-no}" = yes ]; then
		"${PSQL[@]}" -c "SELECT pg_drop_replication_slot('kafgres')" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

CREATED_SLOT=$("${PSQL[@]}" -c "SELECT CASE WHEN EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = 'kafgres') THEN 'no' ELSE 'yes' END")
if [ "$CREATED_SLOT" = yes ]; then
	"${PSQL[@]}" -c "SELECT pg_create_logical_replication_slot('kafgres', 'kafgres')" >/dev/null
fi

"${PSQL[@]}" >/dev/null <<'SQL'
CREATE SCHEMA kafgres_plugin_test;
SET search_path = kafgres_plugin_test;
CREATE TABLE mapped (id int PRIMARY KEY, name text, big text);
ALTER TABLE mapped ALTER big SET STORAGE EXTERNAL;
CREATE TABLE unmapped (id int PRIMARY KEY, v text);
-- the frames the test slot holds, in order: every message (a row of
-- pg_logical_slot_peek_binary_changes) is frames, each after its uint32
-- length (docs/producing.md, "Output plugin frames")
CREATE FUNCTION frames(OUT n bigint, OUT data bytea) RETURNS SETOF record
LANGUAGE sql AS $$
WITH RECURSIVE
msgs AS (SELECT m.data, m.n
           FROM pg_logical_slot_peek_binary_changes('kafgres_plugin_test', NULL, NULL)
                WITH ORDINALITY AS m(lsn, xid, data, n)),
f(msg, m, off, len) AS (
    SELECT data, n, 0, (get_byte(data, 0) << 24) | (get_byte(data, 1) << 16)
                       | (get_byte(data, 2) << 8) | get_byte(data, 3)
      FROM msgs
    UNION ALL
    SELECT msg, m, off + 4 + len,
           (get_byte(msg, off + 4 + len) << 24) | (get_byte(msg, off + 5 + len) << 16)
           | (get_byte(msg, off + 6 + len) << 8) | get_byte(msg, off + 7 + len)
      FROM f WHERE off + 4 + len < length(msg))
SELECT row_number() OVER (ORDER BY m, off), substr(msg, off + 5, len) FROM f
$$;
INSERT INTO kafgres.mapping (name, source_relid, topic, owner_role, search_path)
VALUES ('kafgres_plugin_test', 'kafgres_plugin_test.mapped'::regclass, 'kafgres_plugin_test', 10, 'public');
INSERT INTO mapped VALUES (1, 'one', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 200) g));
SELECT pg_create_logical_replication_slot('kafgres_plugin_test', 'kafgres');
SQL

# 1. messages: committed, rolled back, rolled-back savepoint, prepared
"${PSQL[@]}" >/dev/null <<'SQL'
SELECT kafgres_produce('kafgres_plugin_test', 'committed', 'v');
BEGIN; SELECT kafgres_produce('kafgres_plugin_test', 'rolledback', 'v'); ROLLBACK;
BEGIN;
SELECT kafgres_produce('kafgres_plugin_test', 'kept', 'v');
SAVEPOINT s; SELECT kafgres_produce('kafgres_plugin_test', 'rolledback', 'v'); ROLLBACK TO s;
COMMIT;
SQL
if [ "$("${PSQL[@]}" -c "SHOW max_prepared_transactions")" != 0 ]; then
	"${PSQL[@]}" >/dev/null <<-'SQL'
		BEGIN; SELECT kafgres_produce('kafgres_plugin_test', 'prepared', 'v');
		PREPARE TRANSACTION 'kafgres_plugin_test';
		COMMIT PREPARED 'kafgres_plugin_test';
	SQL
	expect=BMCBMCBMC
else
	echo "plugin_test: max_prepared_transactions = 0, skipping the prepared transaction" >&2
	expect=BMCBMC
fi
got=$(kinds)
[ "$got" = "$expect" ] || fail "messages: frames $got, expected $expect"
n=$("${PSQL[@]}" -c "SELECT count(*) FROM kafgres_plugin_test.frames()
                     WHERE position('rolledback'::bytea IN data) > 0")
[ "$n" = 0 ] || fail "a rolled back message was emitted"

# 1b. the M frames carry the record (format 1), not the signature around
#     it (format 3); a well-formed message written by hand is dropped,
#     counted once (by whichever slot decodes it first) and sends nothing
n=$("${PSQL[@]}" -c "SELECT count(*) FROM kafgres_plugin_test.frames()
                     WHERE get_byte(data, 1) = ascii('M') AND get_byte(data, 26) <> 1")
[ "$n" = 0 ] || fail "$n M frames do not start with format 1"
"${PSQL[@]}" -c "SELECT pg_replication_slot_advance('kafgres_plugin_test', pg_current_wal_insert_lsn())" >/dev/null
before=$("${PSQL[@]}" -c "SELECT kafgres_rejected_messages()")
"${PSQL[@]}" >/dev/null <<'SQL'
SELECT pg_logical_emit_message(true, 'kafgres',
       '\x010013'::bytea || convert_to('kafgres_plugin_test', 'UTF8')
       || '\xffffffffffffffff00000006666f726765640000'::bytea);
SQL
got=$(kinds)
[ -z "$got" ] || fail "a hand-written message was emitted: frames $got"
after=$("${PSQL[@]}" -c "SELECT kafgres_rejected_messages()")
[ "$after" = $((before + 1)) ] || fail "kafgres_rejected_messages() went from $before to $after, expected one more"

# 2. the returned LSN is the M frame's lsn (bytes 15..22 of the frame)
"${PSQL[@]}" -c "SELECT pg_replication_slot_advance('kafgres_plugin_test', pg_current_wal_insert_lsn())" >/dev/null
ok=$("${PSQL[@]}" <<'SQL'
SELECT kafgres_produce('kafgres_plugin_test', 'lsn', 'v') AS l \gset
SELECT bool_and(('x' || encode(substr(data, 15, 8), 'hex'))::bit(64)::bigint
                = (:'l'::pg_lsn - '0/0'::pg_lsn)::bigint)
  FROM kafgres_plugin_test.frames()
 WHERE get_byte(data, 1) = ascii('M');
SQL
)
[ "$ok" = t ] || fail "kafgres_produce's LSN differs from the M frame's"

# 3. changes: only the mapped table; unchanged TOAST (column "big", type
#    25, kind 'u'); truncate
"${PSQL[@]}" -c "SELECT pg_replication_slot_advance('kafgres_plugin_test', pg_current_wal_insert_lsn())" >/dev/null
"${PSQL[@]}" >/dev/null <<'SQL'
SET search_path = kafgres_plugin_test;
INSERT INTO unmapped SELECT g, 'x' FROM generate_series(1, 1000) g;
UPDATE unmapped SET v = 'y';
BEGIN; INSERT INTO mapped VALUES (2, 'two', NULL); ROLLBACK;
INSERT INTO mapped VALUES (2, 'two', NULL), (3, 'three', 'small');
UPDATE mapped SET name = 'uno' WHERE id = 1;
DELETE FROM mapped WHERE id = 3;
TRUNCATE unmapped;
TRUNCATE mapped, unmapped;
SQL
got=$(kinds)
[ "$got" = BIICBUCBDCBTC ] || fail "changes: frames $got, expected BIICBUCBDCBTC"
n=$("${PSQL[@]}" -c "SELECT count(*) FROM kafgres_plugin_test.frames()
                     WHERE get_byte(data, 1) = ascii('U') AND position('\x00036269670000001975'::bytea IN data) > 0")
[ "$n" = 1 ] || fail "the unchanged TOASTed column of the update is not sent as 'u'"

# 4. validation errors write nothing
"${PSQL[@]}" -c "SELECT pg_replication_slot_advance('kafgres_plugin_test', pg_current_wal_insert_lsn())" >/dev/null
for call in \
	"kafgres_produce(NULL, 'k', 'v')" \
	"kafgres_produce('a b', 'k', 'v')" \
	"kafgres_produce('kafgres_plugin_test', 'k', 'v', partition => -1)" \
	"kafgres_produce('kafgres_plugin_test', 'k', 'v', '[1]')" \
	"kafgres_produce('kafgres_plugin_test', 'k'::bytea, 'v'::bytea, ARRAY['a', 'b'], ARRAY['x'::bytea])" \
	"kafgres_produce('kafgres_plugin_test', 'k'::bytea, 'v'::bytea, ARRAY[NULL::text], ARRAY['x'::bytea])" \
	"kafgres_produce('kafgres_plugin_test', 'k', repeat('v', 2000000))"
do
	if "${PSQL[@]}" -c "SELECT $call" >/dev/null 2>&1; then
		fail "$call did not fail"
	fi
done
got=$(kinds)
[ -z "$got" ] || fail "failed calls wrote frames: $got"

# 5. kafgres_wait_delivered times out (false) for a position nothing can
# have reached — whether or not a broker is advancing kafgres.delivery.
t0=$(date +%s%N)
ok=$("${PSQL[@]}" -c "SELECT kafgres_wait_delivered('FFFFFFFF/FFFFFFF0', '200 ms')")
waited=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ok" = f ] || fail "kafgres_wait_delivered did not time out"
[ "$waited" -ge 150 ] || fail "kafgres_wait_delivered returned after ${waited} ms, before its 200 ms timeout"

echo "plugin_test: all checks passed"
