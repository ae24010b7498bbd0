#!/usr/bin/env bash
# kafka-configs.sh --describe / --alter (--add-config, --delete-config) for
# a topic, for broker 1 (kafgres's only node, the reference's node id) and
# for the cluster-wide broker default.
source "$(dirname "$0")/lib.sh"
t=$PREFIX-a

tool kafka-topics.sh --create --topic "$t" --partitions 1
expect_rc 0 "create the topic"

tool kafka-configs.sh --describe --entity-type topics --entity-name "$t"
expect_rc 0 "describe a topic without overrides exits 0"
expect_equals "$OUT" "Dynamic configs for topic $t are:" "a topic without overrides has no dynamic configs"

tool kafka-configs.sh --alter --entity-type topics --entity-name "$t" --add-config retention.ms=86400000,max.message.bytes=2000000
expect_rc 0 "alter --add-config exits 0"
expect_equals "$OUT" "Completed updating config for topic $t." "alter --add-config reports completion"

has_config() {
	run "$BIN/kafka-configs.sh" --bootstrap-server "$BOOTSTRAP" --describe --entity-type "$1" "${@:2:$#-2}"
	grep -qF -- "${!#}" <<<"$OUT"
}
retry 10 has_config topics --entity-name "$t" "retention.ms=86400000"
expect_contains "$OUT" "Dynamic configs for topic $t are:" "describe after alter: header"
expect_contains "$OUT" "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}" "describe shows the retention.ms override"
expect_contains "$OUT" "  max.message.bytes=2000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588}" "describe shows the max.message.bytes override with its broker synonym"
expect_equals "$(grep -c '^  ' <<<"$OUT")" 2 "describe shows exactly the two overrides"

tool kafka-configs.sh --describe --topic "$t" --all
expect_rc 0 "describe --all exits 0"
expect_contains "$OUT" "All configs for topic $t are:" "describe --all: header"
expect_contains "$OUT" "  retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}" "describe --all shows the override"
expect_contains "$OUT" "  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}" "describe --all shows a default"
expect_contains "$OUT" "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}" "describe --all shows segment.bytes"

tool kafka-configs.sh --alter --topic "$t" --delete-config retention.ms
expect_rc 0 "alter --delete-config exits 0"
expect_equals "$OUT" "Completed updating config for topic $t." "alter --delete-config reports completion"
lacks_config() { ! has_config "$@"; }
retry 10 lacks_config topics --entity-name "$t" "retention.ms="
expect_lacks "$OUT" "retention.ms=" "describe after --delete-config: the override is gone"
expect_contains "$OUT" "  max.message.bytes=2000000 " "describe after --delete-config: the other override stays"

tool kafka-configs.sh --alter --topic "$t" --add-config no.such.config=1
expect_rc 1 "alter with an unknown topic config fails"
expect_contains "$ERR" "InvalidConfigurationException: Unknown topic config name: no.such.config" "alter with an unknown topic config names it"

tool kafka-configs.sh --alter --topic "$t" --add-config retention.ms=abc
expect_rc 1 "alter with an invalid value fails"
expect_contains "$ERR" "InvalidConfigurationException: Invalid value abc for configuration retention.ms: Not a number of type LONG" "alter with an invalid value says why"

tool kafka-configs.sh --alter --topic "$PREFIX-missing" --add-config retention.ms=1000
expect_rc 1 "alter of a missing topic fails"
expect_contains "$ERR" "UnknownTopicOrPartitionException: The topic '$PREFIX-missing' does not exist." "alter of a missing topic says so"

# Broker configs. max.connections (per broker) and max.connections.per.ip
# (cluster default) are dynamic in Kafka, no topic config inherits them, and
# the values set here (100000 connections) change nothing for other clients.
tool kafka-configs.sh --describe --entity-type brokers --entity-name 1
expect_rc 0 "describe broker 1 exits 0"
expect_contains "$OUT" "Dynamic configs for broker 1 are:" "describe broker 1: header"
expect_lacks "$OUT" "max.connections=" "broker 1 has no max.connections override yet"

tool kafka-configs.sh --alter --entity-type brokers --entity-name 1 --add-config max.connections=100000
expect_rc 0 "alter broker 1 exits 0"
expect_equals "$OUT" "Completed updating config for broker 1." "alter broker 1 reports completion"
retry 10 has_config brokers --entity-name 1 "max.connections=100000"
expect_contains "$OUT" "  max.connections=100000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:max.connections=100000, DEFAULT_CONFIG:max.connections=2147483647}" "describe broker 1 shows the override"

tool kafka-configs.sh --alter --entity-type brokers --entity-name 1 --delete-config max.connections
expect_rc 0 "alter broker 1 --delete-config exits 0"
retry 10 lacks_config brokers --entity-name 1 "max.connections="
expect_lacks "$OUT" "max.connections=" "describe broker 1 after --delete-config: the override is gone"

tool kafka-configs.sh --describe --entity-type brokers --entity-default
expect_rc 0 "describe the broker default exits 0"
expect_contains "$OUT" "Default configs for brokers in the cluster are:" "describe the broker default: header"
# a KRaft cluster starts with this default (eligible leader replicas)
expect_contains "$OUT" "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}" "the broker default has min.insync.replicas"

tool kafka-configs.sh --alter --entity-type brokers --entity-default --add-config max.connections.per.ip=100000
expect_rc 0 "alter the broker default exits 0"
expect_equals "$OUT" "Completed updating default config for brokers in the cluster." "alter the broker default reports completion"
retry 10 has_config brokers --entity-default "max.connections.per.ip=100000"
expect_contains "$OUT" "  max.connections.per.ip=100000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:max.connections.per.ip=100000}" "describe the broker default shows the override"

tool kafka-configs.sh --alter --entity-type brokers --entity-default --delete-config max.connections.per.ip
expect_rc 0 "alter the broker default --delete-config exits 0"
retry 10 lacks_config brokers --entity-default "max.connections.per.ip="
expect_lacks "$OUT" "max.connections.per.ip=" "describe the broker default after --delete-config: the override is gone"

tool kafka-configs.sh --alter --entity-type brokers --entity-name 1 --add-config max.connections=abc
expect_rc 1 "alter broker 1 with an invalid value fails"
expect_contains "$ERR" "Invalid value abc for configuration max.connections" "alter broker 1 with an invalid value says why"

finish
