#!/usr/bin/env bash
# Transactional produce: an event that exists if and only if its transaction
# commits. The blog post's example, checked line by line.
#
#   bash examples/transactional-produce.sh     # against `make run`
#   BROKER=... PSQL="psql -h ... -p ... -U postgres" bash examples/transactional-produce.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"
TOPIC=order-events

# Rerunnable: fresh table and topic.
psql_q -c "DROP TABLE IF EXISTS orders" \
	-c "SELECT kafgres_drop_topic(name) FROM kafgres.topics WHERE name = '$TOPIC'" >/dev/null
psql_q -c "CREATE TABLE orders (id int PRIMARY KEY, customer_id int, total numeric, status text)" \
	-c "SELECT kafgres_create_topic('$TOPIC', 3)" >/dev/null

show "BEGIN; INSERT INTO orders ... 1001; SELECT kafgres_produce('$TOPIC', 'order-1001', ...); COMMIT;"
psql_q <<'SQL'
BEGIN;
INSERT INTO orders VALUES (1001, 1, 249.99, 'placed');
SELECT kafgres_produce('order-events', 'order-1001',
    jsonb_build_object('event', 'OrderPlaced', 'order_id', 1001,
                       'customer', 'Acme Corp', 'total', 249.99)::text) \gset first_
COMMIT;
SQL

show "BEGIN; INSERT INTO orders ... 2001; SELECT kafgres_produce(...); ROLLBACK;   -- leaves no event"
psql_q <<'SQL'
BEGIN;
INSERT INTO orders VALUES (2001, 2, 10.00, 'placed');
SELECT kafgres_produce('order-events', 'order-2001', '{"event":"OrderPlaced","order_id":2001}') \gset
ROLLBACK;
SQL

show "echo 'order-3001:{...}' | kcat -b $BROKER -t $TOPIC -K: -P"
echo 'order-3001:{"event":"OrderPlaced","order_id":3001,"source":"Kafka-client"}' |
	kcat -b "$BROKER" -t "$TOPIC" -K: -P

show "BEGIN; INSERT INTO orders ... 3002; SELECT kafgres_produce(...); COMMIT; SELECT kafgres_wait_delivered(...)"
delivered=$(psql_q -tA <<'SQL'
BEGIN;
INSERT INTO orders VALUES (3002, 4, 1250.00, 'placed');
SELECT kafgres_produce('order-events', 'order-3002',
    jsonb_build_object('event', 'OrderPlaced', 'order_id', 3002,
                       'source', 'sql-transaction')::text) AS lsn \gset
COMMIT;
SELECT kafgres_wait_delivered(:'lsn', '30 seconds');
SQL
)
expect "kafgres_wait_delivered" "t" "$delivered"

show "kcat -b $BROKER -t $TOPIC -C -e -q -o beginning -f '%p:%o  %k -> %s\\n'"
out=$(kcat -b "$BROKER" -t "$TOPIC" -C -e -q -o beginning -f '%p:%o  %k -> %s\n' | sort)
echo "$out"
# order-1001 and order-3002 are placed by murmur2, as a Java producer would;
# order-3001 by kcat's own partitioner. The rolled-back order-2001 is absent.
expect "records" '0:0  order-1001 -> {"event": "OrderPlaced", "total": 249.99, "customer": "Acme Corp", "order_id": 1001}
1:0  order-3001 -> {"event":"OrderPlaced","order_id":3001,"source":"Kafka-client"}
1:1  order-3002 -> {"event": "OrderPlaced", "source": "sql-transaction", "order_id": 3002}' "$out"

rows=$(psql_q -tAc "SELECT string_agg(id::text, ',' ORDER BY id) FROM orders")
expect "orders table" "1001,3002" "$rows"

echo
echo "transactional produce: all checks passed"
