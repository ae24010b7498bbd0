#!/usr/bin/env bash
#
# tests/pgcluster.sh -- a throwaway or development PostgreSQL cluster
# running kafgres.  Used by "make run" and by the Go integration tests.
# The PostgreSQL is the one whose pg_config comes first in PATH (or $PGBIN):
# Debian's 15, or 18 (tests/pg18.sh, make run PG=18).
#
#   tests/pgcluster.sh start  DIR [PGPORT] [KAFKAPORT]
#   tests/pgcluster.sh init   DIR [initdb options...]
#   tests/pgcluster.sh stop   DIR
#   tests/pgcluster.sh status DIR
#   tests/pgcluster.sh psql   DIR [psql arguments...]
#
# start creates DIR/pgdata (initdb, trust authentication, superuser
# "postgres") if it does not exist, (re)writes DIR/pgdata/kafgres.conf with
# the settings below, starts the server -- or restarts it if it is already
# running, so that a freshly installed kafgres.so and kafgres-broker are
# picked up -- runs CREATE EXTENSION IF NOT EXISTS kafgres (and ALTER EXTENSION
# kafgres UPDATE, for a cluster made by an older kafgres) in database
# postgres and waits up to 30 s for the Kafka port to accept connections.
# Running it twice is harmless.  init only creates DIR/pgdata, the same
# way, and neither configures nor starts it: the empty cluster
# tests/pgupgrade.sh upgrades into.
#
# The server's Unix socket is in DIR/run, its log is DIR/postgres.log (the
# broker's output goes there too).  PGPORT defaults to 5432, KAFKAPORT to
# 9092.  Extra postgresql.conf lines can be passed in $KAFGRES_PG_CONF; they
# are appended to kafgres.conf.
#
# PostgreSQL refuses to run as root: when called as root the cluster belongs
# to the "postgres" OS user and the server commands run through runuser, so
# DIR and all its parent directories must be searchable by that user (note
# that Go's t.TempDir() is not: its parent is mode 0700).  When called as
# another user, the cluster belongs to that user.

set -euo pipefail

PGBIN=${PGBIN:-$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)}
PG_OS_USER=postgres

die() { echo "pgcluster.sh: $*" >&2; exit 1; }

usage() {
	sed -n '8,12p' "$0" | sed 's/^# *//' >&2
	exit 2
}

# run a server-side command as the cluster's owner
as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$PG_OS_USER" -- "$@"
	else
		"$@"
	fi
}

# read "name = value" back from the kafgres.conf we wrote
conf_value() {
	sed -n "s/^$1 = '\{0,1\}\([^']*\)'\{0,1\}\$/\1/p" "$PGDATA/kafgres.conf" 2>/dev/null | tail -n 1
}

port_open() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

is_running() {
	[ -f "$PGDATA/PG_VERSION" ] && as_owner "$PGBIN/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1
}

show_log() {
	echo "---- last lines of $LOG ----" >&2
	tail -n 40 "$LOG" >&2 || true
	echo "----" >&2
}

set_dir() {
	[ -n "${1:-}" ] || usage
	if [ "${2:-}" = create ]; then
		mkdir -p "$1"
	elif [ ! -d "$1" ]; then
		DIR=$1 PGDATA=$1/pgdata RUNDIR=$1/run LOG=$1/postgres.log
		return
	fi
	DIR=$(cd "$1" && pwd -P)
	PGDATA=$DIR/pgdata
	RUNDIR=$DIR/run
	LOG=$DIR/postgres.log
}

# DIR and DIR/run, owned by the OS user the server runs as
prepare_dir() {
	mkdir -p "$RUNDIR"
	if [ "$(id -u)" -eq 0 ]; then
		id "$PG_OS_USER" >/dev/null 2>&1 || die "OS user $PG_OS_USER does not exist (is postgresql-15 installed?)"
		chown "$PG_OS_USER:" "$DIR" "$RUNDIR"
		[ -e "$LOG" ] && chown "$PG_OS_USER:" "$LOG"
		runuser -u "$PG_OS_USER" -- test -w "$DIR" ||
			die "OS user $PG_OS_USER cannot reach $DIR; make every parent directory searchable (chmod o+x)"
	fi
}

# initdb, with extra initdb options in "$@"
create_cluster() {
	echo "pgcluster.sh: creating cluster in $PGDATA"
	as_owner "$PGBIN/initdb" -D "$PGDATA" --auth=trust -U postgres -E UTF8 \
		--locale=C.UTF-8 "$@" >"$DIR/initdb.log" 2>&1 ||
		{ cat "$DIR/initdb.log" >&2; die "initdb failed"; }
	# settings live in an included file so ALTER SYSTEM stays the user's
	echo "include_if_exists = 'kafgres.conf'" | as_owner tee -a "$PGDATA/postgresql.conf" >/dev/null
}

# an empty cluster, not started: what tests/pgupgrade.sh upgrades into
cmd_init() {
	set_dir "${1:-}" create
	shift
	[ ! -e "$PGDATA" ] || die "$PGDATA exists already"
	prepare_dir
	create_cluster "$@"
}

cmd_start() {
	set_dir "${1:-}" create
	local pgport=${2:-5432} kafkaport=${3:-9092}

	# a Unix socket path is limited to 107 bytes
	local sock="$RUNDIR/.s.PGSQL.$pgport"
	[ ${#sock} -le 107 ] || die "socket path $sock is too long (max 107 bytes); use a shorter DIR"

	prepare_dir
	if [ -f "$PGDATA/PG_VERSION" ]; then
		local major
		major=$("$PGBIN/postgres" --version | sed -n 's/^postgres (PostgreSQL) \([0-9]*\).*/\1/p')
		[ "$(cat "$PGDATA/PG_VERSION")" = "$major" ] ||
			die "$PGDATA is a PostgreSQL $(cat "$PGDATA/PG_VERSION") cluster and $PGBIN is PostgreSQL $major; use a DIR of its own, or upgrade it (docs/operations.md)"
	else
		create_cluster
	fi

	# rewritten on every start: ports and extra settings may change
	{
		echo "# written by tests/pgcluster.sh; changes are lost on its next start"
		echo "shared_preload_libraries = 'kafgres'"
		echo "wal_level = logical"
		echo "max_replication_slots = 10"
		echo "max_wal_senders = 10"
		echo "port = $pgport"
		echo "listen_addresses = '127.0.0.1'"
		echo "unix_socket_directories = '$RUNDIR'"
		echo "logging_collector = off"
		echo "log_line_prefix = '%m [%p] %q%a '"
		echo "kafgres.port = $kafkaport"
		# Builds from 15.19 on only decode through listed output plugins.
		# (grep without -q: with pipefail, an early exit would fail the pipe)
		if "$PGBIN/postgres" --describe-config 2>/dev/null | grep '^output_plugin_libraries' >/dev/null; then
			echo "output_plugin_libraries = 'pgoutput, test_decoding, kafgres'"
		fi
		if [ -n "${KAFGRES_PG_CONF:-}" ]; then
			echo "# from KAFGRES_PG_CONF"
			printf '%s\n' "$KAFGRES_PG_CONF"
		fi
	} | as_owner tee "$PGDATA/kafgres.conf" >/dev/null

	local restarted=no
	if is_running; then
		echo "pgcluster.sh: restarting the server in $PGDATA"
		if as_owner "$PGBIN/pg_ctl" -D "$PGDATA" -l "$LOG" -w -t 60 -m fast restart >/dev/null; then
			restarted=yes
		elif is_running; then
			show_log
			die "could not restart the server"
		fi
		# else the postmaster had just died (kill -9): start it afresh below
	fi
	if [ $restarted = no ]; then
		# a stray broker would make the wait below succeed for the wrong reason
		if port_open 127.0.0.1 "$kafkaport"; then
			die "port $kafkaport is already in use by another process; stop it or pick another KAFKAPORT"
		fi
		echo "pgcluster.sh: starting the server in $PGDATA"
		as_owner "$PGBIN/pg_ctl" -D "$PGDATA" -l "$LOG" -w -t 60 start >/dev/null ||
			{ show_log; die "could not start the server"; }
	fi

	PGOPTIONS="-c client_min_messages=warning" "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$RUNDIR" -p "$pgport" -U postgres -d postgres \
		-c "CREATE EXTENSION IF NOT EXISTS kafgres" -c "ALTER EXTENSION kafgres UPDATE" ||
		{ show_log; die "CREATE EXTENSION kafgres failed"; }

	local i
	for i in $(seq 1 150); do
		if port_open 127.0.0.1 "$kafkaport"; then
			echo "pgcluster.sh: PostgreSQL on port $pgport (socket $RUNDIR), Kafka on 127.0.0.1:$kafkaport"
			return 0
		fi
		sleep 0.2
	done
	show_log
	die "the kafgres broker did not open port $kafkaport within 30 s (see $LOG)"
}

cmd_stop() {
	set_dir "${1:-}"
	if is_running; then
		as_owner "$PGBIN/pg_ctl" -D "$PGDATA" -w -t 60 -m fast stop >/dev/null ||
			die "could not stop the server in $PGDATA"
		echo "pgcluster.sh: stopped the server in $PGDATA"
	else
		echo "pgcluster.sh: no server running in $PGDATA"
	fi
}

cmd_status() {
	set_dir "${1:-}"
	[ -f "$PGDATA/PG_VERSION" ] || { echo "no cluster in $PGDATA"; exit 3; }
	local kafkaport
	kafkaport=$(conf_value kafgres.port)
	if is_running; then
		echo "PostgreSQL running in $PGDATA, port $(conf_value port), socket $RUNDIR"
		if port_open 127.0.0.1 "${kafkaport:-9092}"; then
			echo "Kafka port 127.0.0.1:${kafkaport:-9092} is open"
		else
			echo "Kafka port 127.0.0.1:${kafkaport:-9092} is closed"
			exit 1
		fi
	else
		echo "PostgreSQL is not running in $PGDATA"
		exit 3
	fi
}

cmd_psql() {
	set_dir "${1:-}"
	shift || true
	[ -f "$PGDATA/kafgres.conf" ] || die "no cluster in $PGDATA (run start first)"
	PGHOST=$RUNDIR PGPORT=$(conf_value port) PGUSER=postgres PGDATABASE=${PGDATABASE:-postgres} \
		exec "$PGBIN/psql" -X "$@"
}

case "${1:-}" in
start)  shift; cmd_start "$@" ;;
init)   shift; cmd_init "$@" ;;
stop)   shift; cmd_stop "$@" ;;
status) shift; cmd_status "$@" ;;
psql)   shift; cmd_psql "$@" ;;
*)      usage ;;
esac
