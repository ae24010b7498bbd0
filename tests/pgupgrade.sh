#!/usr/bin/env bash
#
# tests/pgupgrade.sh -- move a kafgres cluster made by tests/pgcluster.sh
# (make run) to a newer PostgreSQL major with pg_upgrade, without losing or
# repeating a record: the procedure of docs/operations.md, "Upgrading
# PostgreSQL from 15 to 18", step by step.
#
#   tests/pgupgrade.sh OLD_DIR NEW_DIR [PGPORT] [KAFKAPORT]
#
# OLD_DIR's cluster must be running, with every writer stopped: no
# kafgres_produce, no writes to tables that have a CDC mapping, no Kafka
# producers (step 1 of the procedure).  NEW_DIR must not hold a cluster.
# The old server is $OLD_BINDIR (default: the pg_config first in PATH), the
# new one $NEW_BINDIR (default: PostgreSQL 18 from tests/pg18.sh, which
# installs kafgres into it); kafgres must be installed in both.  The new
# cluster is started with tests/pgcluster.sh start NEW_DIR PGPORT KAFKAPORT
# (and $KAFGRES_PG_CONF).  The old cluster's files are left in OLD_DIR
# (pg_upgrade copies), less the kafgres log, which is moved.

set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
PG_OS_USER=postgres

die() { echo "pgupgrade.sh: $*" >&2; exit 1; }
say() { echo "pgupgrade.sh: $*"; }

[ $# -ge 2 ] || { sed -n '8p' "$0" | sed 's/^# *//' >&2; exit 2; }
old=$1 new=$2 pgport=${3:-5432} kafkaport=${4:-9092}
OLD_BINDIR=${OLD_BINDIR:-$(pg_config --bindir)}
NEW_BINDIR=${NEW_BINDIR:-$("$here/pg18.sh" bindir)}

as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$PG_OS_USER" -- "$@"
	else
		"$@"
	fi
}
old_cluster() { PGBIN=$OLD_BINDIR bash "$here/pgcluster.sh" "$@"; }
new_cluster() { PGBIN=$NEW_BINDIR bash "$here/pgcluster.sh" "$@"; }
old_sql() { old_cluster psql "$old" -q -v ON_ERROR_STOP=1 -tA "$@"; }
major() { "$1/postgres" --version | sed -n 's/^postgres (PostgreSQL) \([0-9]*\).*/\1/p'; }

# ---- checks that change nothing
[ -f "$old/pgdata/PG_VERSION" ] || die "no cluster in $old/pgdata"
[ ! -e "$new/pgdata" ] || die "$new/pgdata exists already; the new cluster must be made by this script"
old_major=$(major "$OLD_BINDIR") new_major=$(major "$NEW_BINDIR")
[ "$(cat "$old/pgdata/PG_VERSION")" = "$old_major" ] || die "$old/pgdata is not a PostgreSQL $old_major cluster"
[ "$new_major" -gt "$old_major" ] || die "$NEW_BINDIR is PostgreSQL $new_major, not newer than $old_major"
[ -f "$("$NEW_BINDIR/pg_config" --pkglibdir)/kafgres.so" ] && [ -x "$NEW_BINDIR/kafgres-broker" ] ||
	die "kafgres is not installed in $NEW_BINDIR (tests/pg18.sh install)"
old_cluster status "$old" >/dev/null ||
	die "the old cluster must be running (stop its writers, not the server)"

# Where the log is: kafgres.data_directory, empty for pgdata/kafgres, else
# absolute or relative to pgdata.  Only a log inside pgdata has to move.
datadir=$(old_sql -c "SHOW kafgres.data_directory")
case $datadir in
"") datadir=kafgres ;;
/*) datadir= ;;
esac

# ---- 1. drain: everything committed is in the log.  The replication slot
# does not survive pg_upgrade (15's logical slots are not migrated), so a
# record committed but not yet delivered would be lost.
say "waiting until every committed record is in the log"
[ "$(old_sql -c "SELECT kafgres_wait_delivered(pg_current_wal_insert_lsn(), '5 minutes')")" = t ] ||
	die "the broker did not deliver everything committed within 5 minutes; see $old/postgres.log"
applied=$(old_sql -c "SELECT applied_lsn FROM kafgres.delivery")
say "delivered up to $applied"

# ---- 2. PostgreSQL 15.20 keeps attribute versions in attoptions
# (pg_attver=...); the pg_dump of an 18 that predates them (18.6, the
# wheel's) dumps them as options the 18 server rejects, and pg_upgrade stops.
# 18.6 has no attribute versions to carry them into, so they are dropped
# from the old catalogs, leaving every column as a column made before
# 15.20 is (a 15.20 server takes both).
if ! grep -aq pg_attver "$NEW_BINDIR/pg_dump"; then
	mapfile -t dbs < <(old_sql -d template1 -c "SELECT datname FROM pg_database WHERE datallowconn")
	for db in "${dbs[@]}"; do
		old_sql -d "$db" -c "SET allow_system_table_mods = on" \
			-c "UPDATE pg_catalog.pg_attribute
			      SET attoptions = NULLIF(ARRAY(SELECT o FROM pg_catalog.unnest(attoptions) AS o
			                                     WHERE o NOT LIKE 'pg_attver=%'), '{}')
			    WHERE attoptions::text LIKE '%pg_attver=%'" >/dev/null
	done
fi

# ---- 3. stop the old server cleanly; the broker stops with it
old_cluster stop "$old"

# Nothing produced after the drain: a kafgres_produce that ran anyway would
# be in the WAL beyond applied_lsn, and lost with the slot.  (Writes to
# CDC-mapped tables cannot be told apart from any other write here: the
# procedure's first step is what keeps them out.)
if as_owner "$OLD_BINDIR/pg_waldump" -p "$old/pgdata/pg_wal" -s "$applied" -r LogicalMessage 2>/dev/null |
	grep -q 'prefix "kafgres"'; then
	die "records were produced with kafgres_produce after the drain; start the old cluster again, stop every writer and rerun"
fi

# ---- 4. the new cluster: empty, with the old one's checksum setting
checksums=--no-data-checksums
if as_owner "$OLD_BINDIR/pg_controldata" "$old/pgdata" | grep -q '^Data page checksum version: *[1-9]'; then
	checksums=--data-checksums
fi
new_cluster init "$new" "$checksums"

# ---- 5. pg_upgrade, as the servers' owner, in a directory it can write
# (its sockets and logs go there).  The kafgres supervisor does not start
# in binary-upgrade mode, so no broker runs during the upgrade.
say "pg_upgrade from PostgreSQL $old_major to $new_major"
(cd "$new" && as_owner "$NEW_BINDIR/pg_upgrade" -b "$OLD_BINDIR" -B "$NEW_BINDIR" \
	-d "$old/pgdata" -D "$new/pgdata" -p 50432 -P 50433 >"$new/pg_upgrade.log" 2>&1) ||
	{ tail -n 30 "$new/pg_upgrade.log" >&2; die "pg_upgrade failed (the old cluster is intact; $new/pg_upgrade.log)"; }

# ---- 6. what pg_upgrade does not carry: the log (unless it lives outside
# pgdata), the key that signs SQL-produced records, ALTER SYSTEM settings
if [ -n "$datadir" ] && [ -e "$old/pgdata/$datadir" ]; then
	mkdir -p "$(dirname "$new/pgdata/$datadir")"
	mv "$old/pgdata/$datadir" "$new/pgdata/$datadir"
fi
cp -p "$old/pgdata/kafgres_message_key" "$new/pgdata/"
cp -p "$old/pgdata/postgresql.auto.conf" "$new/pgdata/"

# ---- 7. start the new cluster: the broker opens the moved log and makes
# a new slot, which starts beyond every LSN of the old cluster (pg_upgrade
# starts the new WAL after the old one's end)
new_cluster start "$new" "$pgport" "$kafkaport"
say "upgraded; the old cluster's files are still in $old/pgdata (less the kafgres log)"
