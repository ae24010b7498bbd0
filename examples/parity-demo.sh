#!/usr/bin/env bash
#
# examples/parity-demo.sh -- run the same client commands against kafgres
# and a reference Apache Kafka 4.4.0 broker and diff what they print.
#
# It starts both brokers itself, on free ports, with the conformance
# runner (tests/conformance/runner: Kafka from Maven Central, kafgres through
# tests/pgcluster.sh), and stops them at the end. Needs `make install`,
# kcat, Java 17 and Maven. Prints "N/N checks identical" and exits non-zero
# on any difference. The full gate is `make conformance`.

set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export PATH=/usr/local/go/bin:$PATH

work=$repo/tests/conformance/.work/demo
mkdir -p "$work"
# the runner is in the tests module (tests/go.mod)
(cd tests && go build -o "$work/runner" ./conformance/runner)
runner() { "$work/runner" -work "$work" "$@"; }

echo "kafgres parity demo"
echo
REF=$(runner reference start | sed -n 's/^bootstrap=//p')
trap 'runner reference stop >/dev/null 2>&1 || true' EXIT
KAF=$(runner kafgres start | sed -n 's/^bootstrap=//p')
trap 'runner reference stop >/dev/null 2>&1 || true; runner kafgres stop >/dev/null 2>&1 || true' EXIT
echo "  Left:  kafgres, a Kafka broker inside PostgreSQL, on $KAF"
echo "  Right: Apache Kafka 4.4.0 (reference), on $REF"
echo "  Every check runs the identical command against both and diffs the output;"
echo "  only the broker address is normalized (the two listen on different ports)."

topic=parity-demo
prefix=parity
topics=("$topic:3" "$prefix-unknown-topic-metadata-0:1")
for c in sarama kafka-python; do
	[ -x "tests/conformance/clients/$c/run" ] && topics+=("$prefix-$c-produce-consume-none-0:3" "$prefix-$c-group-consume-commit-0:3")
done
runner topics reference "${topics[@]}"
runner topics kafgres "${topics[@]}"

cp=$(cat tests/conformance/.work/cache/reference-classpath.txt)
export CONFORMANCE_CACHE=$repo/tests/conformance/.work/cache

# Kafka's own tool, as kafka-get-offsets.sh runs it
get_offsets() {
	java -Dlog4j2.configurationFile="$repo/tests/conformance/clients/java/log4j2.properties" -cp "$cp" \
		org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$1" --topic "$topic" 2>/dev/null | sort
}
kcat_produce_consume() {
	printf 'erin:{"amt":120}\nken:{"amt":80}\nalice:{"amt":210}\nbob:{"amt":5}\ncarol:{"amt":42}\ndave:{"amt":7}\n' |
		kcat -b "$1" -t "$topic" -K: -P
	kcat -b "$1" -t "$topic" -C -e -q -o beginning -f '%p:%o %k -> %s\n' | sort
}
kcat_metadata() { kcat -b "$1" -L -t "$topic"; }
group=parity-demo-group
kcat_group() { kcat -b "$1" -G "$group" "$topic" -e -q -o beginning -c 6 -f '%p:%o %k -> %s\n' | sort; }
# Kafka's own tool, as kafka-consumer-groups.sh runs it
consumer_groups() {
	local addr=${!#}
	java -Dlog4j2.configurationFile="$repo/tests/conformance/clients/java/log4j2.properties" -cp "$cp" \
		org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$addr" "${@:1:$#-1}" 2>/dev/null | sed '/^$/d'
}
groups_describe() { consumer_groups --describe --group "$group" "$1"; }
# Kafka's admin tools (kafka-topics.sh, kafka-configs.sh); topic ids differ
# per cluster and are masked
kafka_tool() {
	local class=$1 addr=${!#}
	java -Dlog4j2.configurationFile="$repo/tests/conformance/clients/java/log4j2.properties" -cp "$cp" \
		"$class" --bootstrap-server "$addr" "${@:2:$#-2}" 2>&1 | sed -e '/^$/d' -e 's/TopicId: [A-Za-z0-9_-]*/TopicId: <id>/'
}
topics_tool() { kafka_tool org.apache.kafka.tools.TopicCommand "$@"; }
configs_tool() { kafka_tool org.apache.kafka.tools.ConfigCommand "$@"; }
admin_topic=parity-admin
topics_lifecycle() {
	topics_tool --create --topic "$admin_topic" --partitions 2 --config retention.ms=86400000 "$1"
	topics_tool --alter --topic "$admin_topic" --partitions 4 "$1"
	topics_tool --describe --topic "$admin_topic" "$1"
	topics_tool --delete --topic "$admin_topic" "$1"
}
topics_describe() { topics_tool --describe --topic "$topic" "$1"; }
topics_list() { topics_tool --list "$1" | grep -x "$topic"; }
configs_describe() { configs_tool --describe --all --entity-type topics --entity-name "$topic" "$1"; }
configs_alter() {
	configs_tool --alter --entity-type topics --entity-name "$topic" --add-config retention.ms=3600000,max.message.bytes=2000 "$1"
	configs_tool --describe --entity-type topics --entity-name "$topic" "$1"
	configs_tool --alter --entity-type topics --entity-name "$topic" --add-config retention.ms=abc "$1" | grep -m1 Exception
}
groups_list() { consumer_groups --list "$1" | grep -x "$group"; }
unknown_topic() { tests/conformance/clients/java/run --bootstrap "$1" --prefix "$prefix" --scenarios unknown-topic-metadata 2>/dev/null; }
client_scenario() {
	# a conformance client's scenario; its topic is per client
	tests/conformance/clients/$2/run --bootstrap "$1" --prefix "$prefix-$2" --scenarios "$3" 2>/dev/null | sort
}

checks=0 same=0
# check TITLE COMMAND...: run COMMAND with each broker's address appended and
# compare the outputs, with the address itself replaced.
check() {
	local title=$1
	shift
	local left right
	left=$("$@" "$KAF" 2>&1 | sed "s/$KAF/<broker>/g") || true
	right=$("$@" "$REF" 2>&1 | sed "s/$REF/<broker>/g") || true
	checks=$((checks + 1))
	if [ "$left" = "$right" ] && [ -n "$left" ]; then
		same=$((same + 1))
		printf '  ✓ %-58s identical\n' "$title"
	else
		printf '  ✗ %-58s DIFFERENT\n' "$title"
		diff <(echo "$left") <(echo "$right") | sed 's/^/      /' || true
	fi
}
# client NAME SCENARIO ADDR: the argument order check needs
client() { client_scenario "$3" "$1" "$2"; }

echo
echo "Produce and consume (librdkafka / kcat)"
check "kcat -P then -C, 6 keyed records over 3 partitions" kcat_produce_consume
check "kcat -L metadata" kcat_metadata
echo
echo "Kafka's tooling (the Java client, unmodified)"
check "kafka-get-offsets.sh" get_offsets
check "unknown topic returns the same error code" unknown_topic
echo
echo "Independent clients (no shared code with librdkafka or Java)"
for c in sarama kafka-python; do
	if [ -x "tests/conformance/clients/$c/run" ]; then
		check "$c - produce, consume" client "$c" produce-consume-none
		check "$c - consumer group, commit" client "$c" group-consume-commit
	else
		echo "  - $c: no client program yet"
	fi
done
echo
echo "Consumer groups"
check "kcat -G, 6 records, offsets committed" kcat_group
check "kafka-consumer-groups.sh --describe (lag, offsets)" groups_describe
check "kafka-consumer-groups.sh --list" groups_list
echo
echo "Admin tools"
check "kafka-topics.sh --describe" topics_describe
check "kafka-topics.sh --list" topics_list
check "kafka-topics.sh --create/--alter/--describe/--delete" topics_lifecycle
check "kafka-configs.sh --describe --all (values, sources, synonyms)" configs_describe
check "kafka-configs.sh --alter, then an invalid value" configs_alter
echo
if [ "$same" -eq "$checks" ]; then
	echo "$same/$checks checks identical ✓"
else
	echo "$same/$checks checks identical ✗"
	exit 1
fi
