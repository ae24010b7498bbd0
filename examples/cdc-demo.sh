#!/usr/bin/env bash
# CDC without Debezium: the README's example, checked line by line. A
# mapping written in SQL turns committed changes of a table into records
# that plain kcat reads.
#
#   bash examples/cdc-demo.sh          # against `make run` (127.0.0.1:9092)
#   BROKER=127.0.0.1:19092 PSQL="psql -h /path/run -p 5433 -U postgres" bash examples/cdc-demo.sh
#
# Rerunnable: it starts from fresh tables, mapping and topic. Exits
# non-zero on the first difference from the expected output.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
TOPIC=order-events

echo "kafgres: CDC without Debezium"

psql_q >/dev/null <<SQL
SELECT kafgres_remove_mapping(name) FROM kafgres.mappings WHERE name = 'orders';
DROP TABLE IF EXISTS orders;
DROP TABLE IF EXISTS customers;
SELECT kafgres_drop_topic(name) FROM kafgres.topics WHERE name = '$TOPIC';
SQL

show "psql   # the tables, a topic and the mapping"
setup=$(cat <<'SQL'
CREATE TABLE customers (id int PRIMARY KEY, name text, tier text);
CREATE TABLE orders (
  id int PRIMARY KEY,
  customer_id int REFERENCES customers,
  total numeric,
  status text
);
INSERT INTO customers VALUES (1, 'Acme', 'gold');
SELECT kafgres_create_topic('order-events', 3);
SELECT kafgres_add_mapping(
  'orders', 'public.orders', 'order-events',
  value_expr => $$ jsonb_build_object(
    'order_id', new.id,
    'total', new.total,
    'op', op,
    'customer', (SELECT jsonb_build_object('tier', c.tier)
                   FROM customers c WHERE c.id = new.customer_id)) $$,
  key_expr => $$ new.id::text $$,
  filter_expr => $$ new.status = 'placed' $$);
SQL
)
echo "$setup"
psql_q -c "$setup" >/dev/null

show "psql -c \"INSERT INTO orders VALUES (10, 1, 99.50, 'placed')\""
psql_q -c "INSERT INTO orders VALUES (10, 1, 99.50, 'placed')"
show "psql -c \"INSERT INTO orders VALUES (11, 1, 5.00, 'draft')\"   # filtered out"
psql_q -c "INSERT INTO orders VALUES (11, 1, 5.00, 'draft')"

# The records are appended once their transactions are decoded; wait for
# that rather than for a guessed time.
delivered=$(psql_q -tAc "SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '30 seconds')")
expect "kafgres_wait_delivered" "t" "$delivered"

show "kcat -b $BROKER -t $TOPIC -C -e -q -o beginning -f '%k -> %s\\n'"
out=$(kcat -b "$BROKER" -t "$TOPIC" -C -e -q -o beginning -f '%k -> %s\n')
echo "$out"
expect "kcat -C" '10 -> {"op": "I", "total": 99.50, "customer": {"tier": "gold"}, "order_id": 10}' "$out"

show "psql -c \"SELECT name, status, rendered FROM kafgres.mappings\""
for _ in $(seq 1 50); do
	out=$(psql_q -tAc "SELECT name || ' ' || status || ' ' || rendered FROM kafgres.mappings WHERE name = 'orders'")
	[ "$out" = "orders active 1" ] && break
	sleep 0.1
done
psql_q -c "SELECT name, status, rendered FROM kafgres.mappings WHERE name = 'orders'"
expect "kafgres.mappings" "orders active 1" "$out"

echo
echo "CDC demo: all checks passed"
