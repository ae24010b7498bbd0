#!/usr/bin/env bash
# kafka-broker-api-versions.sh: the broker (node 1) and its API versions.
# Every API the broker says it serves must carry exactly Kafka 4.4's
# version range (tests/reference/apiversions-4.4.0.txt, this tool's output
# against Kafka 4.4.0), and the APIs the kafka-*.sh tools need must be
# among them. The broker's host:port differs: its shape only.
source "$(dirname "$0")/lib.sh"
ref=$TOOLS_ROOT/tests/reference/apiversions-4.4.0.txt

tool kafka-broker-api-versions.sh
expect_rc 0 "exits 0"
expect_match "$OUT" '^[^ ]+:[0-9]+ \(id: 1 rack: null isFenced: false\) -> \($' "the broker is node 1, unfenced, without a rack"
expect_equals "$(tail -n 1 <<<"$OUT")" ")" "the list is closed"

# one "Name(key): versions" per line, without the tab and the comma
apis=$(sed -n 's/^\t\(.*[^,]\),\{0,1\}$/\1/p' <<<"$OUT")
served=$(grep -v ': UNSUPPORTED$' <<<"$apis")
unknown=$(grep -vxF -f "$ref" <<<"$served")
expect_equals "$unknown" "" "every served API has Kafka 4.4's version range"
for api in 'Produce(0)' 'Fetch(1)' 'ListOffsets(2)' 'Metadata(3)' 'OffsetCommit(8)' 'OffsetFetch(9)' \
	'FindCoordinator(10)' 'ApiVersions(18)' 'CreateTopics(19)' 'DeleteTopics(20)' 'DeleteRecords(21)' \
	'DescribeConfigs(32)' 'AlterConfigs(33)' 'DescribeLogDirs(35)' 'CreatePartitions(37)' \
	'IncrementalAlterConfigs(44)' 'UpdateFeatures(57)' 'DescribeCluster(60)'; do
	want=$(grep -F "$api:" "$ref")
	expect_contains "$served" "$want" "serves $api as Kafka 4.4 does"
done

finish
