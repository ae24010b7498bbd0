# Shared helpers of the Kafka tool tests (tests/tools/*.sh), sourced first.
#
# Every test runs bin/kafka-*.sh against the broker at $BOOTSTRAP, names
# its topics "$PREFIX-<something>" ($TOOLS_PREFIX, default "tools", plus the
# test's name and pid, so runs never share a topic), and ends with
# `finish`, which deletes those topics and prints "# NAME: P passed, F failed".
#
#   tool kafka-topics.sh --create ...   runs a tool with --bootstrap-server;
#                                       sets OUT, ERR and RC
#   run CMD...                          the same for any command
#   expect_rc 0 "what"                  checks RC of the last command
#   expect_contains "$OUT" "text" "what", expect_lacks, expect_equals,
#   expect_match "$OUT" 'ERE' "what"    (some line matches)
set -uo pipefail

: "${BOOTSTRAP:?set BOOTSTRAP=host:port of the broker under test}"
TOOLS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$TOOLS_ROOT/bin
TEST=$(basename "$0" .sh)
PREFIX=${TOOLS_PREFIX:-tools}-$TEST-$$
# these JVMs live for a second: the client compiler alone starts faster
export KAFKA_JVM_PERFORMANCE_OPTS=${KAFKA_JVM_PERFORMANCE_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kafgres-tools-$TEST.XXXXXX")
passed=0
failed=0
OUT='' ERR='' RC=0 CMD=''

# run CMD...: runs a command (stdin is the caller's), keeping its stdout in
# OUT, stderr in ERR, exit status in RC.
run() {
	CMD="$*"
	OUT=$("$@" 2>"$WORK/stderr")
	RC=$?
	ERR=$(cat "$WORK/stderr")
}

# tool NAME ARGS...: run bin/NAME --bootstrap-server $BOOTSTRAP ARGS...
tool() {
	local name=$1
	shift
	run "$BIN/$name" --bootstrap-server "$BOOTSTRAP" "$@"
}

pass() {
	passed=$((passed + 1))
	echo "ok - $TEST: $1"
}

fail() {
	failed=$((failed + 1))
	echo "FAIL - $TEST: $1"
	echo "    command: $CMD (exit $RC)"
	[ -n "$2" ] && printf '    %s\n' "$2"
	printf '    stdout: %s\n' "${OUT//$'\n'/$'\n            '}"
	printf '    stderr: %s\n' "$(tail -n 5 <<<"$ERR" | sed '2,$s/^/            /')"
}

expect_rc() {
	if [ "$RC" -eq "$1" ]; then pass "$2"; else fail "$2" "want exit $1"; fi
}

expect_contains() {
	if grep -qF -- "$2" <<<"$1"; then pass "$3"; else fail "$3" "want text: $2"; fi
}

expect_lacks() {
	if grep -qF -- "$2" <<<"$1"; then fail "$3" "unwanted text: $2"; else pass "$3"; fi
}

expect_match() {
	if grep -qE -- "$2" <<<"$1"; then pass "$3"; else fail "$3" "want a line matching: $2"; fi
}

expect_equals() {
	if [ "$1" == "$2" ]; then pass "$3"; else fail "$3" "got:  ${1//$'\n'/\\n}"$'\n'"    want: ${2//$'\n'/\\n}"; fi
}

# retry SECONDS CMD...: runs CMD every half second until it succeeds or
# the time is up (metadata changes reach the broker's caches a little
# after the admin call returns).
retry() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -ge $end ] && return 1
		sleep 0.5
	done
}

# now_ms: wall-clock time in milliseconds
now_ms() {
	date +%s%3N
}

finish() {
	# best effort: the test's topics go, whatever happened
	"$BIN/kafka-topics.sh" --bootstrap-server "$BOOTSTRAP" --delete --if-exists --topic "$PREFIX-.*" >/dev/null 2>&1
	rm -rf "$WORK"
	echo "# $TEST: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}
