#!/usr/bin/env bash
# kafka-delete-records.sh: delete before an offset and before the high
# watermark (-1); kafka-get-offsets.sh --time -2 and the console consumer
# then start at the new low watermark; errors per partition.
source "$(dirname "$0")/lib.sh"
t=$PREFIX-a

tool kafka-topics.sh --create --topic "$t" --partitions 2
expect_rc 0 "create the topic"
# k3, k4, k5 go to partition 0 of 2, k0 and k1 to partition 1
run "$BIN/kafka-console-producer.sh" --bootstrap-server "$BOOTSTRAP" --topic "$t" \
	--reader-property parse.key=true --reader-property key.separator=: \
	< <(printf 'k3:a\nk4:b\nk5:c\nk3:d\nk4:e\nk0:x\nk1:y\n')
expect_rc 0 "console producer"

offsets_json() {
	printf '{"version":1,"partitions":[%s]}\n' "$1" >"$WORK/offsets.json"
}
offsets_json "{\"topic\":\"$t\",\"partition\":0,\"offset\":3},{\"topic\":\"$t\",\"partition\":1,\"offset\":-1}"
tool kafka-delete-records.sh --offset-json-file "$WORK/offsets.json"
expect_rc 0 "delete records exits 0"
expect_contains "$OUT" "Executing records delete operation" "delete records announces the operation"
expect_contains "$OUT" "Records delete operation completed:" "delete records completes"
expect_contains "$OUT" "partition: $t-0	low_watermark: 3" "partition 0 starts at 3"
expect_contains "$OUT" "partition: $t-1	low_watermark: 2" "offset -1 deletes up to the high watermark"

tool kafka-get-offsets.sh --topic "$t" --time -2
expect_equals "$OUT" "$t:0:3"$'\n'"$t:1:2" "earliest offsets after the delete"
tool kafka-get-offsets.sh --topic "$t" --time -1
expect_equals "$OUT" "$t:0:5"$'\n'"$t:1:2" "latest offsets do not move"

tool kafka-console-consumer.sh --topic "$t" --partition 0 --offset earliest --max-messages 2 --timeout-ms 15000 \
	--formatter-property print.offset=true
expect_rc 0 "console consumer from the earliest offset"
expect_equals "$OUT" "Offset:3	d"$'\n'"Offset:4	e" "the consumer starts at the low watermark"

offsets_json "{\"topic\":\"$t\",\"partition\":0,\"offset\":1}"
tool kafka-delete-records.sh --offset-json-file "$WORK/offsets.json"
expect_rc 0 "delete below the low watermark exits 0"
expect_contains "$OUT" "partition: $t-0	low_watermark: 3" "delete below the low watermark changes nothing"

offsets_json "{\"topic\":\"$t\",\"partition\":0,\"offset\":10}"
tool kafka-delete-records.sh --offset-json-file "$WORK/offsets.json"
expect_rc 0 "delete beyond the high watermark still exits 0"
expect_contains "$OUT" "partition: $t-0	error: org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset is not within the range of offsets maintained by the server." "delete beyond the high watermark is out of range"

tool kafka-get-offsets.sh --topic "$t" --time -2
expect_equals "$OUT" "$t:0:3"$'\n'"$t:1:2" "a failed delete changes nothing"

finish
