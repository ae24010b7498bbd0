--
-- mappings: kafgres_add_mapping and its checks, kafgres_validate_expression,
-- kafgres_preview_mapping, kafgres_snapshot_mapping, kafgres_remove_mapping,
-- and what happens to a mapping whose table is altered or dropped.
--
SET search_path = regress, public;
\set SHOW_CONTEXT never
CREATE SCHEMA shop;
CREATE TABLE shop.orders (id int PRIMARY KEY, customer int, amount numeric(10, 2), note text);
ALTER TABLE shop.orders REPLICA IDENTITY FULL;
CREATE TABLE shop.customers (id int PRIMARY KEY, name text);
INSERT INTO shop.customers VALUES (1, 'Ada'), (2, 'Grace');
INSERT INTO shop.orders VALUES (10, 1, 9.99, NULL), (11, 2, 100.00, 'rush'), (12, 1, 0.50, NULL);
SELECT kafgres_create_topic('orders', 2) > 0 AS created;
SELECT * FROM decode();

-- kafgres_validate_expression: exactly one SQL expression
SELECT kafgres_validate_expression('new.id::text');
SELECT kafgres_validate_expression('(SELECT name FROM shop.customers c WHERE c.id = new.customer)');
SELECT kafgres_validate_expression('jsonb_build_object(''id'', new.id, ''op'', op)', 'value_expr');
SELECT kafgres_validate_expression('1; DROP TABLE shop.orders', 'value_expr');
SELECT kafgres_validate_expression('1) UNION (SELECT 2', 'value_expr');
SELECT kafgres_validate_expression('1 FROM shop.orders', 'value_expr');
-- (1, 2) is a row, one expression; (1), (2) two
SELECT kafgres_validate_expression('1, 2', 'key_expr');
SELECT kafgres_validate_expression('1), (2', 'key_expr');
SELECT kafgres_validate_expression('1 AS x', 'key_expr');
SELECT kafgres_validate_expression('   ', 'key_expr');
SELECT kafgres_validate_expression('-- nothing', 'key_expr');
SELECT kafgres_validate_expression('(WITH d AS (DELETE FROM shop.orders RETURNING 1) SELECT 1)', 'filter_expr');
SELECT kafgres_validate_expression('new.id +', 'filter_expr');
SELECT kafgres_validate_expression(NULL);

-- adding a mapping: the arguments, one by one
SELECT kafgres_add_mapping(NULL, 'shop.orders', 'orders');
SELECT kafgres_add_mapping('bad name', 'shop.orders', 'orders');
SELECT kafgres_add_mapping(repeat('m', 201), 'shop.orders', 'orders');
SELECT kafgres_add_mapping('m', NULL, 'orders');
SELECT kafgres_add_mapping('m', 'shop.nope', 'orders');
CREATE VIEW shop.v AS SELECT * FROM shop.orders;
SELECT kafgres_add_mapping('m', 'shop.v', 'orders');
CREATE SEQUENCE shop.s;
SELECT kafgres_add_mapping('m', 'shop.s', 'orders');
CREATE UNLOGGED TABLE shop.unlogged (id int);
SELECT kafgres_add_mapping('m', 'shop.unlogged', 'orders');
CREATE TEMP TABLE temp_t (id int);
SELECT kafgres_add_mapping('m', 'temp_t', 'orders');
SELECT kafgres_add_mapping('m', 'shop.orders', NULL);
SELECT kafgres_add_mapping('m', 'shop.orders', 'no such topic');
SELECT kafgres_add_mapping('m', 'shop.orders', '..');
SELECT kafgres_add_mapping('m', 'shop.orders', 'orders', on_error => 'ignore');
SELECT kafgres_add_mapping('m', 'shop.orders', 'orders', on_error => NULL);
-- expressions: shape first, then meaning, checked as the caller
SELECT kafgres_add_mapping('m', 'shop.orders', 'orders', value_expr => '1; SELECT 2');
SELECT kafgres_add_mapping('m', 'shop.orders', 'orders', value_expr => 'new.nope');
SELECT kafgres_add_mapping('m', 'shop.orders', 'orders', key_expr => 'new.id + ''x''');
SELECT kafgres_add_mapping('m', 'shop.orders', 'orders', filter_expr => 'new.id');
SELECT kafgres_add_mapping('m', 'shop.orders', 'orders', filter_expr => 'new.amount > (SELECT max(x) FROM shop.nope)');
-- none of that left anything behind
SELECT count(*) FROM kafgres.mapping;

-- a mapping, rendered by expressions over new, old, op, ...
SELECT kafgres_add_mapping('orders', 'shop.orders', 'orders',
           value_expr => 'jsonb_build_object(''id'', coalesce(new.id, old.id), ''op'', op, ''customer'', (SELECT name FROM shop.customers c WHERE c.id = coalesce(new.customer, old.customer)))',
           key_expr => 'coalesce(new.id, old.id)::text',
           filter_expr => 'coalesce(new.amount, old.amount) >= 1',
           on_error => 'stall') > 0 AS added;
SELECT kafgres_add_mapping('orders', 'shop.orders', 'orders');
SELECT name, source_table, topic, value_expr IS NOT NULL AS has_value, key_expr, filter_expr,
       on_error, owner, status, last_error, rendered, dead_lettered
  FROM kafgres.mappings;
-- the search_path it was made in is kept; owner_role is always its maker
SELECT search_path, owner_role = (SELECT oid FROM pg_roles WHERE rolname = current_user) AS owned
  FROM kafgres.mapping;
-- what a mapping maps (name, table, topic) cannot be changed, only removed and added again
UPDATE kafgres.mapping SET topic = 'other' WHERE name = 'orders';

-- preview: the rows as inserts, rendered as the caller, in the mapping's
-- search_path; nothing written
SELECT * FROM kafgres_preview_mapping('orders');
SELECT * FROM kafgres_preview_mapping('orders', 1);
SELECT * FROM kafgres_preview_mapping('nope');
SELECT kafgres_add_mapping('orders_plain', 'shop.orders', 'orders') > 0 AS added;
SELECT * FROM kafgres_preview_mapping('orders_plain', 2);
-- the query all of them render with (kafgres.render_query)
SELECT kafgres.render_query('shop.orders', NULL, 'new.id', 'op <> ''D''', 'probe');
SELECT kafgres.render_query('shop.orders', NULL, NULL, NULL, 'table');
SELECT kafgres.render_query('shop.orders', 'new.id; SELECT 1', NULL, NULL, 'call');
SELECT kafgres.render_query('shop.orders', NULL, NULL, NULL, 'other');
-- its filter is evaluated once per change, even when it reads no column
CREATE TEMP TABLE sampled AS SELECT i AS id FROM generate_series(1, 40) AS i;
DO $$
DECLARE
    n int;
BEGIN
    EXECUTE 'SELECT count(*) FILTER (WHERE r.pass) FROM ('
            || kafgres.render_query('sampled', NULL, NULL, 'random() < 0.5', 'table') || ') AS r' INTO n;
    RAISE NOTICE 'some but not all of 40 passed: %', n BETWEEN 1 AND 39;
END
$$;
DROP TABLE sampled;
SELECT * FROM decode();

-- snapshot: every current row as a snapshot record (format 2), signed,
-- in the caller's transaction; a rolled-back snapshot sends nothing
BEGIN;
SELECT kafgres_snapshot_mapping('orders');
ROLLBACK;
SELECT kafgres_snapshot_mapping('orders');
SELECT m.name FROM kafgres.mapping_snapshot s JOIN kafgres.mapping m USING (mapping_id);
SELECT kafgres_snapshot_mapping('nope');
-- (kafgres.snapshot_row is STRICT)
SELECT kafgres.snapshot_row(NULL, '{}');
SELECT * FROM decode();

-- changes of the table, covered by both mappings
UPDATE shop.orders SET amount = amount + 1 WHERE id = 10;
SELECT * FROM decode();

-- removing: the definition is kept as retired
SELECT kafgres_remove_mapping('orders_plain');
SELECT kafgres_remove_mapping('orders_plain');
SELECT kafgres_remove_mapping(NULL);
SELECT name, topic, reason FROM kafgres.mapping_retired WHERE topic = 'orders' ORDER BY name;

-- an altered table keeps its mapping; a dropped one loses it (the reason
-- is kept)
ALTER TABLE shop.orders RENAME TO orders_renamed;
SELECT name, source_table FROM kafgres.mappings;
ALTER TABLE shop.orders_renamed RENAME TO orders;
DROP TABLE shop.orders CASCADE;
SELECT count(*) FROM kafgres.mapping;
SELECT name, topic, reason FROM kafgres.mapping_retired WHERE topic = 'orders' ORDER BY name;
DROP SCHEMA shop CASCADE;
SELECT * FROM decode();
