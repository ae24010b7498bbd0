# Shared by the self-checking demos (sourced, not run): where kafgres is and
# how a demo checks what it sees.
#
#   BROKER   Kafka bootstrap address      (default 127.0.0.1:9092, `make run`)
#   PSQL     psql command for the database (default: the `make run` cluster)

examples_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BROKER=${BROKER:-127.0.0.1:9092}
PSQL=${PSQL:-bash $examples_dir/../tests/pgcluster.sh psql ${KAFGRES_HOME:-/var/lib/kafgres}}

fail() { echo "FAIL: $*" >&2; exit 1; }
show() { printf '\n$ %s\n' "$*"; }

# expect NAME EXPECTED ACTUAL: stop with a diff on the first difference.
expect() {
	if [ "$2" != "$3" ]; then
		printf 'FAIL: %s\n--- expected\n%s\n--- got\n%s\n' "$1" "$2" "$3" >&2
		diff <(echo "$2") <(echo "$3") >&2 || true
		exit 1
	fi
}

psql_q() { $PSQL -X -q -v ON_ERROR_STOP=1 "$@"; }
