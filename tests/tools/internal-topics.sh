#!/usr/bin/env bash
# Internal topics (issue #14): kafka-consumer-groups.sh --describe looks up
# a group coordinator, which creates __consumer_offsets as Kafka does;
# kafka-topics.sh then lists and describes it as internal, and
# --exclude-internal leaves it out.
source "$(dirname "$0")/lib.sh"
t1=$PREFIX-a

tool kafka-topics.sh --create --topic "$t1" --partitions 1 --replication-factor 1
expect_rc 0 "create exits 0"

tool kafka-consumer-groups.sh --describe --group "$PREFIX-g"
# the group does not exist; what matters is the coordinator lookup

has_offsets_topic() {
	run "$BIN/kafka-topics.sh" --bootstrap-server "$BOOTSTRAP" --list
	grep -qx "__consumer_offsets" <<<"$OUT"
}
retry 10 has_offsets_topic
expect_match "$OUT" "^__consumer_offsets\$" "list shows __consumer_offsets"
expect_match "$OUT" "^$t1\$" "list shows the user topic"

tool kafka-topics.sh --list --exclude-internal
expect_rc 0 "list --exclude-internal exits 0"
expect_lacks "$OUT" "__consumer_offsets" "list --exclude-internal leaves out __consumer_offsets"
expect_match "$OUT" "^$t1\$" "list --exclude-internal shows the user topic"

tool kafka-topics.sh --describe --topic __consumer_offsets
expect_rc 0 "describe __consumer_offsets exits 0"
# the id differs per cluster, the order of the configs too
expect_match "$OUT" "^Topic: __consumer_offsets	TopicId: [A-Za-z0-9_-]{22}	PartitionCount: 50	ReplicationFactor: 1	Configs: " "describe header"
for c in cleanup.policy=compact compression.type=producer segment.bytes=104857600; do
	expect_match "$OUT" "^Topic: __consumer_offsets	.*Configs: (.*,)?$c(,|\$)" "describe shows $c"
done
expect_equals "$(grep -c 'Partition: ' <<<"$OUT")" 50 "describe shows 50 partitions"

tool kafka-topics.sh --describe --exclude-internal
expect_lacks "$OUT" "__consumer_offsets" "describe --exclude-internal leaves out __consumer_offsets"

tool kafka-configs.sh --describe --entity-type topics --entity-name __consumer_offsets
expect_rc 0 "configs --describe exits 0"
expect_contains "$OUT" "cleanup.policy=compact" "configs --describe shows cleanup.policy"

finish
