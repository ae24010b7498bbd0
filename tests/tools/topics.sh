#!/usr/bin/env bash
# kafka-topics.sh: --create (partitions, configs, --if-not-exists, errors),
# --list, --describe, --alter --partitions, --delete.
source "$(dirname "$0")/lib.sh"
t1=$PREFIX-a
t2=$PREFIX-b

tool kafka-topics.sh --create --topic "$t1" --partitions 2 --replication-factor 1
expect_rc 0 "create exits 0"
expect_equals "$OUT" "Created topic $t1." "create prints the topic"

tool kafka-topics.sh --create --topic "$t1" --partitions 2
expect_rc 1 "create of an existing topic fails"
expect_contains "$OUT" "Topic '$t1' already exists." "create of an existing topic says so"

tool kafka-topics.sh --create --topic "$t1" --partitions 2 --if-not-exists
expect_rc 0 "create --if-not-exists of an existing topic exits 0"
expect_equals "$OUT" "" "create --if-not-exists of an existing topic prints nothing"

tool kafka-topics.sh --create --topic "$t2" --config retention.ms=123456789 --config cleanup.policy=compact
expect_rc 0 "create with --config exits 0"
expect_equals "$OUT" "Created topic $t2." "create with --config prints the topic"

tool kafka-topics.sh --create --topic "$PREFIX-bad" --config no.such.config=1
expect_rc 1 "create with an unknown config fails"
expect_contains "$OUT" "Unknown topic config name: no.such.config" "create with an unknown config names it"

has_topics() {
	run "$BIN/kafka-topics.sh" --bootstrap-server "$BOOTSTRAP" --list --topic "$PREFIX-.*"
	[ "$OUT" == "$*" ]
}
retry 10 has_topics "$t1"$'\n'"$t2"
expect_equals "$OUT" "$t1"$'\n'"$t2" "list with a regex shows exactly the created topics, sorted"
tool kafka-topics.sh --list
expect_rc 0 "list exits 0"
expect_match "$OUT" "^$t1\$" "list shows the topic"

tool kafka-topics.sh --describe --topic "$t1"
expect_rc 0 "describe exits 0"
# the topic id differs per cluster: its shape only
expect_match "$OUT" "^Topic: $t1	TopicId: [A-Za-z0-9_-]{22}	PartitionCount: 2	ReplicationFactor: 1	Configs: " "describe header"
expect_match "$OUT" "^	Topic: $t1	Partition: 0	Leader: 1	Replicas: 1	Isr: 1" "describe partition 0"
expect_match "$OUT" "^	Topic: $t1	Partition: 1	Leader: 1	Replicas: 1	Isr: 1" "describe partition 1"
expect_equals "$(grep -c 'Partition: ' <<<"$OUT")" 2 "describe shows 2 partitions"

tool kafka-topics.sh --describe --topic "$t2"
expect_match "$OUT" "^Topic: $t2	.*PartitionCount: 1	.*Configs: .*cleanup.policy=compact" "describe shows the cleanup.policy override"
expect_match "$OUT" "^Topic: $t2	.*Configs: .*retention.ms=123456789" "describe shows the retention.ms override"

tool kafka-topics.sh --describe --topic "$PREFIX-missing"
expect_rc 1 "describe of a missing topic fails"
expect_contains "$OUT" "Topic '$PREFIX-missing' does not exist as expected" "describe of a missing topic says so"

tool kafka-topics.sh --alter --topic "$t1" --partitions 4
expect_rc 0 "alter --partitions 4 exits 0"
partitions_are() {
	run "$BIN/kafka-topics.sh" --bootstrap-server "$BOOTSTRAP" --describe --topic "$t1"
	grep -q "PartitionCount: $1	" <<<"$OUT"
}
retry 10 partitions_are 4
expect_match "$OUT" "^Topic: $t1	.*PartitionCount: 4	" "describe after alter shows 4 partitions"
expect_match "$OUT" "^	Topic: $t1	Partition: 3	Leader: 1	Replicas: 1	Isr: 1" "describe after alter shows partition 3"
expect_equals "$(grep -c 'Partition: ' <<<"$OUT")" 4 "describe after alter lists 4 partitions"

tool kafka-topics.sh --alter --topic "$t1" --partitions 3
expect_rc 1 "alter to fewer partitions fails"
expect_contains "$OUT" "The topic $t1 currently has 4 partition(s); 3 would not be an increase." "alter to fewer partitions says why"

tool kafka-topics.sh --delete --topic "$t1"
expect_rc 0 "delete exits 0"
expect_equals "$OUT" "" "delete prints nothing"
retry 10 has_topics "$t2"
expect_equals "$OUT" "$t2" "list after delete no longer shows the topic"

tool kafka-topics.sh --delete --topic "$PREFIX-missing"
expect_rc 1 "delete of a missing topic fails"
expect_contains "$OUT" "Topic '$PREFIX-missing' does not exist as expected" "delete of a missing topic says so"
tool kafka-topics.sh --delete --topic "$PREFIX-missing" --if-exists
expect_rc 0 "delete --if-exists of a missing topic exits 0"

finish
