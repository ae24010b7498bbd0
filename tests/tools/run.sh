#!/usr/bin/env bash
# Runs every Kafka tool test (tests/tools/*.sh) against the broker at
# $BOOTSTRAP, one after the other, and reports the counts:
#   BOOTSTRAP=127.0.0.1:9092 tests/tools/run.sh [TEST...]
# e.g. `tests/tools/run.sh topics configs`. Exits non-zero when a check
# failed or a test did not finish. Needs java (17+), mvn and python3; the
# first run resolves Kafka's jars from Maven Central (bin/kafka-run-class.sh).
set -uo pipefail
: "${BOOTSTRAP:?set BOOTSTRAP=host:port of the broker under test}"
here=$(cd "$(dirname "$0")" && pwd)
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(topics configs get-offsets delete-records log-dirs features broker-api-versions console acls internal-topics transactions)

passed=0 failed=0 broken=()
for t in "${tests[@]}"; do
	out=$(bash "$here/$t.sh" 2>&1)
	rc=$?
	echo "$out"
	summary=$(grep -E "^# $t: [0-9]+ passed, [0-9]+ failed$" <<<"$out")
	if [ -z "$summary" ]; then
		broken+=("$t (exit $rc, no summary)")
		continue
	fi
	read -r p f <<<"$(sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"$summary")"
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && broken+=("$t (exit $rc)")
done
echo
echo "tools: $passed passed, $failed failed, ${#tests[@]} tests"
for b in "${broken[@]}"; do echo "did not finish: $b"; done
[ "$failed" -eq 0 ] && [ ${#broken[@]} -eq 0 ]
