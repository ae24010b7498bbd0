#!/usr/bin/env bash
# kafka-get-offsets.sh --time -1 (latest), -2 (earliest), -3 (max
# timestamp) and a timestamp, with --partitions and --topic-partitions, on
# records written by the console producer. The console producer stamps
# records with the wall clock (CreateTime), so the test writes two batches
# with a known instant between them.
source "$(dirname "$0")/lib.sh"
t=$PREFIX-a
e=$PREFIX-empty

tool kafka-topics.sh --create --topic "$t" --partitions 2
expect_rc 0 "create the topic"
tool kafka-topics.sh --create --topic "$e" --partitions 1
expect_rc 0 "create the empty topic"

# The default partitioner puts k3, k4, k5 in partition 0 and k0 in 1 of 2
# (murmur2 of the key, as in every Java client).
produce() {
	run "$BIN/kafka-console-producer.sh" --bootstrap-server "$BOOTSTRAP" --topic "$t" \
		--reader-property parse.key=true --reader-property key.separator=:
}
produce < <(printf 'k3:a\nk4:b\nk5:c\nk0:d\n')
expect_rc 0 "console producer, first batch"
sleep 0.2
mid=$(now_ms)
sleep 0.2
produce < <(printf 'k3:e\n')
expect_rc 0 "console producer, second batch"

tool kafka-get-offsets.sh --topic "$t" --time -1
expect_rc 0 "latest exits 0"
expect_equals "$OUT" "$t:0:4"$'\n'"$t:1:1" "latest offsets"

tool kafka-get-offsets.sh --topic "$t"
expect_equals "$OUT" "$t:0:4"$'\n'"$t:1:1" "latest is the default"

tool kafka-get-offsets.sh --topic "$t" --time -2
expect_equals "$OUT" "$t:0:0"$'\n'"$t:1:0" "earliest offsets"

tool kafka-get-offsets.sh --topic "$t" --time "$mid"
expect_rc 0 "by time exits 0"
# partition 1 has no record at or after $mid: not printed
expect_equals "$OUT" "$t:0:3" "by time: the first record at or after the instant"

tool kafka-get-offsets.sh --topic "$t" --time "$((mid - 3600000))"
expect_equals "$OUT" "$t:0:0"$'\n'"$t:1:0" "by time an hour before: the first records"

tool kafka-get-offsets.sh --topic "$t" --time "$((mid + 3600000))"
expect_rc 0 "by time in the future exits 0"
expect_equals "$OUT" "" "by time in the future: no offsets"

tool kafka-get-offsets.sh --topic "$t" --time -3
expect_rc 0 "max timestamp exits 0"
expect_equals "$OUT" "$t:0:3"$'\n'"$t:1:0" "max timestamp: the newest record of each partition"

tool kafka-get-offsets.sh --topic "$t" --partitions 1 --time -1
expect_equals "$OUT" "$t:1:1" "--partitions 1"

tool kafka-get-offsets.sh --topic-partitions "$t:0,$e:0" --time -1
expect_equals "$OUT" "$t:0:4"$'\n'"$e:0:0" "--topic-partitions over two topics, sorted by topic"

tool kafka-get-offsets.sh --topic "$PREFIX-.*" --time -2
expect_equals "$OUT" "$t:0:0"$'\n'"$t:1:0"$'\n'"$e:0:0" "a topic regex"

tool kafka-get-offsets.sh --topic "$e" --time -3
expect_rc 0 "max timestamp of an empty topic exits 0"
expect_equals "$OUT" "" "max timestamp of an empty topic: no offset"

tool kafka-get-offsets.sh --topic "$PREFIX-missing" --time -1
expect_rc 1 "a missing topic fails"
expect_contains "$ERR" "Could not match any topic-partitions with the specified filters" "a missing topic says so"

finish
