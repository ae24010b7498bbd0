#!/usr/bin/env bash
# kafka-log-dirs.sh --describe: the JSON names broker 1 and one log
# directory holding the topic's partitions, with their sizes. The path of
# the directory differs per broker: only its shape is checked.
source "$(dirname "$0")/lib.sh"
t=$PREFIX-a

tool kafka-topics.sh --create --topic "$t" --partitions 2
expect_rc 0 "create the topic"
# k3, k4 go to partition 0 of 2
run "$BIN/kafka-console-producer.sh" --bootstrap-server "$BOOTSTRAP" --topic "$t" \
	--reader-property parse.key=true --reader-property key.separator=: < <(printf 'k3:a\nk4:b\n')
expect_rc 0 "console producer"

# summary JSON: prints the facts the test checks, one per line
summarize() {
	python3 -c '
import json, sys
topic = sys.argv[1]
lines = [l for l in sys.stdin.read().splitlines() if l.startswith("{")]
doc = json.loads(lines[-1])
print("version", doc["version"])
for b in doc["brokers"]:
    print("broker", b["broker"], "logdirs", len(b["logDirs"]))
    for d in b["logDirs"]:
        print("error", d["error"], "absolute", d["logDir"].startswith("/"))
        for p in sorted(d["partitions"], key=lambda p: p["partition"]):
            if p["partition"].startswith(topic + "-"):
                print(p["partition"], "nonempty" if p["size"] > 0 else "empty", "lag", p["offsetLag"], "future", p["isFuture"])
' "$t" <<<"$OUT"
}

tool kafka-log-dirs.sh --describe --topic-list "$t"
expect_rc 0 "describe exits 0"
expect_contains "$OUT" "Querying brokers for log directories information" "describe announces the query"
expect_contains "$OUT" "Received log directory information from brokers 1" "describe names broker 1"
expect_equals "$(summarize)" "version 1
broker 1 logdirs 1
error None absolute True
$t-0 nonempty lag 0 future False
$t-1 empty lag 0 future False" "the JSON lists the topic's partitions in one log dir of broker 1"
# the size depends on how the producer batched (timestamps are the wall clock)
expect_match "$OUT" "\"partition\":\"$t-0\",\"size\":[1-9][0-9]*,\"offsetLag\":0,\"isFuture\":false" "partition 0 in Kafka's field order"

tool kafka-log-dirs.sh --describe --broker-list 1 --topic-list "$t"
expect_rc 0 "describe --broker-list 1 exits 0"
expect_contains "$(summarize)" "$t-1 empty lag 0 future False" "describe --broker-list 1 lists the partitions"

tool kafka-log-dirs.sh --describe
expect_rc 0 "describe of every topic exits 0"
expect_contains "$(summarize)" "$t-0 nonempty lag 0 future False" "describe of every topic includes the topic"

finish
