#!/usr/bin/env bash
# kafka-console-producer.sh and kafka-console-consumer.sh: keys, headers,
# null markers; assigned and group consumers; kafka-consumer-groups.sh
# sees the console consumer's group.
source "$(dirname "$0")/lib.sh"
t=$PREFIX-a
h=$PREFIX-h
g=$PREFIX-g

tool kafka-topics.sh --create --topic "$t" --partitions 3
expect_rc 0 "create the topic"
tool kafka-topics.sh --create --topic "$h" --partitions 1
expect_rc 0 "create the headers topic"

# of 3 partitions, the default partitioner puts k5 and y in 0, a in 1, b in 2
run "$BIN/kafka-console-producer.sh" --bootstrap-server "$BOOTSTRAP" --topic "$t" \
	--reader-property parse.key=true --reader-property key.separator=: < <(printf 'k5:v1\na:v2\nb:v3\ny:v4\n')
expect_rc 0 "console producer with keys exits 0"
expect_equals "$OUT" "" "console producer prints nothing"

tool kafka-console-consumer.sh --topic "$t" --from-beginning --max-messages 4 --timeout-ms 20000 --property print.key=true
expect_rc 0 "consumer --from-beginning exits 0"
# Kafka 4.4 warns about --property on stdout, before the records
expect_equals "$(head -n 1 <<<"$OUT")" "Option --property is deprecated and will be removed in a future version. Use --formatter-property instead." "--property is deprecated"
expect_equals "$(tail -n +2 <<<"$OUT" | sort)" "a	v2"$'\n'"b	v3"$'\n'"k5	v1"$'\n'"y	v4" "consumer prints each key and value (--property print.key=true)"
expect_contains "$ERR" "Processed a total of 4 messages" "consumer counts the records"

tool kafka-console-consumer.sh --topic "$t" --partition 0 --offset earliest --max-messages 2 --timeout-ms 15000 \
	--formatter-property print.key=true --formatter-property print.partition=true --formatter-property print.offset=true \
	--formatter-property print.timestamp=true --formatter-property key.separator=' -> '
# key.separator separates every field
expect_rc 0 "consumer of partition 0 exits 0"
expect_match "$OUT" '^CreateTime:[0-9]{13} -> Partition:0 -> Offset:0 -> k5 -> v1$' "partition 0, offset 0 with its timestamp"
expect_match "$OUT" '^CreateTime:[0-9]{13} -> Partition:0 -> Offset:1 -> y -> v4$' "partition 0, offset 1"

tool kafka-console-consumer.sh --topic "$t" --partition 2 --offset 0 --max-messages 1 --timeout-ms 15000 --formatter-property print.value=false --formatter-property print.key=true
expect_equals "$OUT" "b" "partition 2 holds key b (print.value=false)"

tool kafka-console-consumer.sh --topic "$t" --partition 1 --offset latest --timeout-ms 2000
expect_equals "$OUT" "" "consumer from the latest offset of a quiet partition prints nothing"
expect_contains "$ERR" "Processed a total of 0 messages" "and counts none"

# headers: "k:v,k:v<TAB>key<TAB>value"; NULL is the null marker
run "$BIN/kafka-console-producer.sh" --bootstrap-server "$BOOTSTRAP" --topic "$h" \
	--reader-property parse.key=true --reader-property parse.headers=true --reader-property null.marker=NULL \
	< <(printf 'h1:a,h2:b\tk1\tv1\nh1:x,h1:y\tNULL\tv2\nh3:z\tk3\tNULL\n')
expect_rc 0 "console producer with headers and null markers exits 0"
tool kafka-console-consumer.sh --topic "$h" --partition 0 --offset earliest --max-messages 3 --timeout-ms 15000 \
	--formatter-property print.key=true --formatter-property print.headers=true --formatter-property print.offset=true \
	--formatter-property null.literal='<null>'
expect_rc 0 "consumer with print.headers exits 0"
expect_equals "$OUT" "Offset:0	h1:a,h2:b	k1	v1
Offset:1	h1:x,h1:y	<null>	v2
Offset:2	h3:z	k3	<null>" "headers, repeated header keys, a null key and a null value"

# a consumer group: the console consumer commits what it read
tool kafka-console-consumer.sh --topic "$t" --group "$g" --from-beginning --max-messages 4 --timeout-ms 20000
expect_rc 0 "consumer in a group exits 0"
expect_equals "$(sort <<<"$OUT")" "v1"$'\n'"v2"$'\n'"v3"$'\n'"v4" "the group consumer reads every record"
tool kafka-consumer-groups.sh --list
expect_match "$OUT" "^$g\$" "kafka-consumer-groups --list shows the console consumer's group"
tool kafka-consumer-groups.sh --describe --group "$g"
expect_rc 0 "kafka-consumer-groups --describe exits 0"
want=(2 1 1)
for p in 0 1 2; do
	expect_match "$OUT" "^$g +$t +$p +${want[p]} +${want[p]} +0 " "committed offset of partition $p is its end, lag 0"
done

finish
