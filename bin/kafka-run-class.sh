#!/usr/bin/env bash
# Runs one of Apache Kafka 4.4.0's tool classes, for bin/kafka-*.sh:
#   kafka-run-class.sh MAIN_CLASS [ARGS...]
# The jars come from Maven Central through bin/kafka-tools.pom.xml; the
# resolved classpath is cached in ${XDG_CACHE_HOME:-~/.cache}/kafgres/ and
# rebuilt when the pom is newer. Needs java (17+) and mvn.
# Honours KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS and
# KAFKA_OPTS as Kafka's kafka-run-class.sh does.
set -euo pipefail
if [ $# -lt 1 ]; then
	echo "usage: $0 MAIN_CLASS [ARGS...]" >&2
	exit 2
fi
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
pom=$here/kafka-tools.pom.xml
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kafgres
cpfile=$cache/kafka-tools-4.4.0-classpath.txt

for tool in java mvn; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool not found; the Kafka tools need Java 17+ and Maven" >&2
		exit 127
	fi
done
if [ ! -s "$cpfile" ] || [ "$pom" -nt "$cpfile" ]; then
	mkdir -p "$cache"
	# written aside and renamed: other tools may read it concurrently
	mvn -B -q -f "$pom" dependency:build-classpath -Dmdep.outputFile="$cpfile.tmp.$$" >&2
	mv "$cpfile.tmp.$$" "$cpfile"
fi

main=$1
shift
# word splitting of the KAFKA_*_OPTS variables is intended, as in Kafka
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xmx512m} ${KAFKA_JVM_PERFORMANCE_OPTS:-} ${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$here/kafka-tools-log4j2.properties} \
	${KAFKA_OPTS:-} -cp "$(cat "$cpfile")" "$main" "$@"
