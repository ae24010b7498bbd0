#!/usr/bin/env bash
# The kcat demo: plain kcat against kafgres, checking every step.
#
#   bash examples/kcat-demo.sh            # against `make run` (127.0.0.1:9092)
#   BROKER=127.0.0.1:19092 PSQL="psql -h /path/run -p 5433 -U postgres" bash examples/kcat-demo.sh
#
# Nothing here is kafgres-aware except the two psql lines: every kcat line is
# one you would run against any Kafka broker. Exits non-zero on the first
# difference from the expected output.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
TOPIC=${TOPIC:-payments}

echo "kafgres: a Kafka broker inside PostgreSQL"

show "psql -tAc \"SELECT 'PostgreSQL ' || current_setting('server_version')\""
psql_q -tAc "SELECT 'PostgreSQL ' || current_setting('server_version')"
show "psql -tAc \"SELECT backend_type FROM pg_stat_activity WHERE backend_type = 'kafgres supervisor'\""
out=$(psql_q -tAc "SELECT backend_type FROM pg_stat_activity WHERE backend_type = 'kafgres supervisor'")
echo "$out"
expect "supervisor in pg_stat_activity" "kafgres supervisor" "$out"

# Rerunnable: start from a fresh topic.
psql_q -qtAc "SELECT kafgres_drop_topic('$TOPIC') FROM kafgres.topics WHERE name = '$TOPIC'" >/dev/null
show "psql -tAc \"SELECT kafgres_create_topic('$TOPIC', 3)\""
id=$(psql_q -tAc "SELECT kafgres_create_topic('$TOPIC', 3)")
echo "$id"
[[ "$id" =~ ^[0-9]+$ ]] || fail "kafgres_create_topic returned '$id', not a topic id"

show "kcat -b $BROKER -L -t $TOPIC"
out=$(kcat -b "$BROKER" -L -t "$TOPIC")
echo "$out"
expect "kcat -L" "Metadata for $TOPIC (from broker 1: $BROKER/1):
 1 brokers:
  broker 1 at $BROKER (controller)
 1 topics:
  topic \"$TOPIC\" with 3 partitions:
    partition 0, leader 1, replicas: 1, isrs: 1
    partition 1, leader 1, replicas: 1, isrs: 1
    partition 2, leader 1, replicas: 1, isrs: 1" "$out"

show "printf 'erin:{\"amt\":120}\\nken:{\"amt\":80}\\nalice:{\"amt\":210}\\n' | kcat -b $BROKER -t $TOPIC -K: -P"
printf 'erin:{"amt":120}\nken:{"amt":80}\nalice:{"amt":210}\n' | kcat -b "$BROKER" -t "$TOPIC" -K: -P

show "kcat -b $BROKER -t $TOPIC -C -e -q -o beginning -f '%p:%o %k -> %s\\n'"
out=$(kcat -b "$BROKER" -t "$TOPIC" -C -e -q -o beginning -f '%p:%o %k -> %s\n' | sort)
echo "$out"
# librdkafka's default partitioner (crc32 of the key) puts erin, ken and
# alice on 0, 1 and 2; the broker must store each where the client chose.
expect "kcat -C" '0:0 erin -> {"amt":120}
1:0 ken -> {"amt":80}
2:0 alice -> {"amt":210}' "$out"

# Consumer groups: the second run starts from the committed offsets and
# finds nothing left. Rerunnable: a fresh group name each run.
GROUP=${GROUP:-payments-demo-$$}
show "kcat -b $BROKER -G $GROUP $TOPIC -e -q -o beginning -c 3 -f '%p:%o %k -> %s\\n'"
out=$(kcat -b "$BROKER" -G "$GROUP" "$TOPIC" -e -q -o beginning -c 3 -f '%p:%o %k -> %s\n')
echo "$out"
expect "kcat -G (first run)" '0:0 erin -> {"amt":120}
1:0 ken -> {"amt":80}
2:0 alice -> {"amt":210}' "$(sort <<<"$out")"
show "kcat -b $BROKER -G $GROUP $TOPIC -e -q -f 'unexpected: %p:%o\\n'"
out=$(kcat -b "$BROKER" -G "$GROUP" "$TOPIC" -e -q -f 'unexpected: %p:%o\n')
[ -z "$out" ] && echo "(no output)"
expect "kcat -G (second run)" "" "$out"
out=$(psql_q -tAc "SELECT string_agg(partition || ':' || committed_offset || ':' || lag, ' ' ORDER BY partition) FROM kafgres.consumer_lag WHERE group_id = '$GROUP'")
expect "kafgres.consumer_lag" "0:1:0 1:1:0 2:1:0" "$out"

show "psql -c \"SELECT partition, high_watermark AS log_end_offset, log_start_offset FROM kafgres_partition_offsets('$TOPIC')\""
# The log end is mirrored into Postgres within milliseconds; allow a moment.
for _ in $(seq 1 50); do
	out=$(psql_q -tAc "SELECT string_agg(partition || ':' || high_watermark || ':' || log_start_offset, ' ' ORDER BY partition) FROM kafgres_partition_offsets('$TOPIC')")
	[ "$out" = "0:1:0 1:1:0 2:1:0" ] && break
	sleep 0.1
done
psql_q -c "SELECT partition, high_watermark AS log_end_offset, log_start_offset FROM kafgres_partition_offsets('$TOPIC')"
expect "kafgres_partition_offsets" "0:1:0 1:1:0 2:1:0" "$out"

echo
echo "kcat demo: all checks passed"
