package integration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// The seed's CDC example (README, "CDC without Debezium").
const (
	seedSchema = `
CREATE TABLE customers (id int PRIMARY KEY, name text, tier text);
CREATE TABLE orders (
  id int PRIMARY KEY,
  customer_id int REFERENCES customers,
  total numeric,
  status text
);
INSERT INTO customers VALUES (1, 'Acme', 'gold');`

	seedMapping = `
SELECT kafgres_add_mapping(
  'orders', 'public.orders', 'order-events',
  value_expr => $$ jsonb_build_object(
    'order_id', new.id,
    'total', new.total,
    'op', op,
    'customer', (SELECT jsonb_build_object('tier', c.tier)
                   FROM customers c WHERE c.id = new.customer_id)) $$,
  key_expr => $$ new.id::text $$,
  filter_expr => $$ new.status = 'placed' $$)`

	seedValue = `{"op": "I", "total": 99.50, "customer": {"tier": "gold"}, "order_id": 10}`
)

// mustExec runs statements on conn.
func mustExec(t *testing.T, conn *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// pgErr returns the Postgres error of running sql, failing if it succeeds.
func pgErr(t *testing.T, conn *pgx.Conn, sql string) *pgconn.PgError {
	t.Helper()
	_, err := conn.Exec(context.Background(), sql)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: got %v, want a Postgres error", sql, err)
	}
	return pe
}

// connAs connects to c as role.
func connAs(t *testing.T, c *harness.Cluster, role string) *pgx.Conn {
	t.Helper()
	dsn := fmt.Sprintf("host=%s port=%d user=%s dbname=postgres", filepath.Join(c.Dir, "run"), c.PGPort, role)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// mappingAuthor creates a login role with the grants docs/sql.md lists for
// a mapping author.
func mappingAuthor(t *testing.T, conn *pgx.Conn, role string) {
	t.Helper()
	mustExec(t, conn,
		"CREATE ROLE "+role+" LOGIN",
		"GRANT USAGE ON SCHEMA kafgres TO "+role,
		"GRANT SELECT, INSERT, DELETE ON kafgres.mapping TO "+role,
		"GRANT SELECT ON kafgres.mappings, kafgres.dead_letter TO "+role,
		"GRANT INSERT ON kafgres.mapping_snapshot TO "+role,
		`GRANT EXECUTE ON FUNCTION kafgres_add_mapping(text, regclass, text, text, text, text, text),
		   kafgres_remove_mapping(text), kafgres_preview_mapping(text, int),
		   kafgres_snapshot_mapping(text), kafgres.mapping_topic(text) TO `+role)
}

// recs is topic's records as "key -> value" lines, NULL shown as <null>.
func recs(rs []*kgo.Record) []string {
	var out []string
	for _, r := range rs {
		k, v := "<null>", "<null>"
		if r.Key != nil {
			k = string(r.Key)
		}
		if r.Value != nil {
			v = string(r.Value)
		}
		out = append(out, k+" -> "+v)
	}
	return out
}

func wantRecs(t *testing.T, got []*kgo.Record, want ...string) {
	t.Helper()
	g := recs(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

// mappingStatus waits until the mapping's status is want (the broker
// writes it in batches, at most once a second) and returns last_error.
func mappingStatus(t *testing.T, conn *pgx.Conn, name, want string) (lastError string, rendered, deadLettered int64) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, func() error {
		var status string
		var le *string
		err := conn.QueryRow(context.Background(),
			`SELECT status, last_error, rendered, dead_lettered FROM kafgres.mappings WHERE name = $1`, name).
			Scan(&status, &le, &rendered, &deadLettered)
		if err != nil {
			t.Fatalf("read status of %s: %v", name, err)
		}
		if status != want {
			return fmt.Errorf("mapping %s: status %q, want %q", name, status, want)
		}
		if le != nil {
			lastError = *le
		}
		return nil
	})
	return lastError, rendered, deadLettered
}

// TestMappingSeedExample is the seed's CDC example end to end: a change
// committed in SQL reaches a Kafka consumer rendered by the mapping, with
// the draft order filtered out.
func TestMappingSeedExample(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn, seedSchema, `SELECT kafgres_create_topic('order-events', 3)`, seedMapping)
	mustExec(t, conn,
		`INSERT INTO orders VALUES (10, 1, 99.50, 'placed')`,
		`INSERT INTO orders VALUES (11, 1, 5.00, 'draft')`)
	waitDelivered(t, conn)
	got := readTopic(t, c.Addr, "order-events", 1)
	wantRecs(t, got, "10 -> "+seedValue)

	// an update that passes the filter renders with op U
	mustExec(t, conn, `UPDATE orders SET status = 'placed' WHERE id = 11`)
	waitDelivered(t, conn)
	got = readTopic(t, c.Addr, "order-events", 2)
	slices.SortFunc(got, func(a, b *kgo.Record) int { return strings.Compare(string(a.Key), string(b.Key)) })
	wantRecs(t, got,
		"10 -> "+seedValue,
		`11 -> {"op": "U", "total": 5.00, "customer": {"tier": "gold"}, "order_id": 11}`)

	mappingStatus(t, conn, "orders", "active")
	var owner, source string
	if err := conn.QueryRow(context.Background(),
		`SELECT owner::text, source_table::text FROM kafgres.mappings WHERE name = 'orders'`).Scan(&owner, &source); err != nil {
		t.Fatal(err)
	}
	if owner != "postgres" || source != "orders" {
		t.Fatalf("owner %q source %q", owner, source)
	}

	// removed: later changes are not rendered, and the function goes
	mustExec(t, conn, `SELECT kafgres_remove_mapping('orders')`)
	mustExec(t, conn, `INSERT INTO orders VALUES (12, 1, 1.00, 'placed')`)
	waitDelivered(t, conn)
	readTopic(t, c.Addr, "order-events", 2) // fails on a third record
	if pe := pgErr(t, conn, `SELECT kafgres_remove_mapping('orders')`); pe.Code != "42704" {
		t.Fatalf("remove unknown mapping: %s %s", pe.Code, pe.Message)
	}
}

// TestMappingDeleteAndTombstone: old comes out of the WAL (exact with
// REPLICA IDENTITY FULL), and a NULL value is a tombstone.
func TestMappingDeleteAndTombstone(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE items (id int PRIMARY KEY, name text, qty int, tags text[], attrs jsonb, seen timestamptz)`,
		`ALTER TABLE items REPLICA IDENTITY FULL`,
		`SELECT kafgres_create_topic('items-old', 1)`,
		`SELECT kafgres_create_topic('items-compact', 1)`,
		`SELECT kafgres_add_mapping('items-old', 'items', 'items-old',
		   value_expr => $$ jsonb_build_object('op', op, 'old', to_jsonb(old), 'new', to_jsonb(new)) $$,
		   key_expr => $$ coalesce(new.id, old.id)::text $$)`,
		// the default value is to_jsonb(new): NULL on a delete
		`SELECT kafgres_add_mapping('items-compact', 'items', 'items-compact',
		   key_expr => $$ coalesce(new.id, old.id)::text $$)`)
	mustExec(t, conn,
		`INSERT INTO items VALUES (1, 'bolt "M4"', 5, '{a,"b c"}', '{"x": [1, 2]}', '2024-01-02 03:04:05.678+00')`,
		`UPDATE items SET qty = 6 WHERE id = 1`,
		`DELETE FROM items WHERE id = 1`)
	waitDelivered(t, conn)
	row5 := `{"id": 1, "qty": 5, "name": "bolt \"M4\"", "seen": "2024-01-02T03:04:05.678+00:00", "tags": ["a", "b c"], "attrs": {"x": [1, 2]}}`
	row6 := strings.Replace(row5, `"qty": 5`, `"qty": 6`, 1)
	wantRecs(t, readTopic(t, c.Addr, "items-old", 3),
		`1 -> {"op": "I", "new": `+row5+`, "old": null}`,
		`1 -> {"op": "U", "new": `+row6+`, "old": `+row5+`}`,
		`1 -> {"op": "D", "new": null, "old": `+row6+`}`)
	wantRecs(t, readTopic(t, c.Addr, "items-compact", 3),
		`1 -> `+row5,
		`1 -> `+row6,
		`1 -> <null>`)
}

// TestMappingAlterTable: columns added and dropped after the mapping was
// made do not stop it.
func TestMappingAlterTable(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE notes (id int PRIMARY KEY, body text)`,
		`SELECT kafgres_create_topic('notes', 1)`,
		`SELECT kafgres_add_mapping('notes', 'notes', 'notes', key_expr => $$ new.id::text $$)`,
		`INSERT INTO notes VALUES (1, 'one')`)
	waitDelivered(t, conn)
	mustExec(t, conn,
		`ALTER TABLE notes ADD COLUMN author text`,
		`INSERT INTO notes VALUES (2, 'two', 'ann')`)
	waitDelivered(t, conn)
	mustExec(t, conn,
		`ALTER TABLE notes DROP COLUMN body`,
		`INSERT INTO notes VALUES (3, 'bob')`)
	waitDelivered(t, conn)
	// a new type of the column the key names pauses the mapping until its
	// owner says the expressions fit (TestMappingPausedBySchemaChange)
	mustExec(t, conn,
		`ALTER TABLE notes ALTER COLUMN id TYPE bigint`,
		`INSERT INTO notes VALUES (4, 'cy')`)
	mappingStatus(t, conn, "notes", "paused")
	mustExec(t, conn, `SELECT kafgres_alter_mapping('notes', key_expr => $$ new.id::text $$)`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "notes", 4),
		`1 -> {"id": 1, "body": "one"}`,
		`2 -> {"id": 2, "body": "two", "author": "ann"}`,
		`3 -> {"id": 3, "author": "bob"}`,
		`4 -> {"id": 4, "author": "cy"}`)
	mappingStatus(t, conn, "notes", "active")
}

// TestMappingUnchangedToast: a TOASTed value an update did not change is
// not in the WAL; new gets it from old when the table has REPLICA
// IDENTITY FULL, and otherwise the change cannot be rendered and is
// dead-lettered, never rendered with a NULL (docs/producing.md, "What old
// holds").
func TestMappingUnchangedToast(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn, `SELECT kafgres_create_topic('docs', 1)`)
	for _, table := range []string{"docs_full", "docs_default"} {
		mustExec(t, conn,
			`CREATE TABLE `+table+` (id int PRIMARY KEY, big text, n int)`,
			`SELECT kafgres_add_mapping('`+table+`', '`+table+`', 'docs',
			   value_expr => $$ jsonb_build_object('t', '`+table+`', 'op', op, 'n', new.n, 'len', length(new.big)) $$)`,
			// incompressible, so stored out of line
			`INSERT INTO `+table+` SELECT 1, string_agg(md5(i::text), ''), 0 FROM generate_series(1, 400) AS i`,
			`UPDATE `+table+` SET n = 1`)
	}
	mustExec(t, conn, `ALTER TABLE docs_full REPLICA IDENTITY FULL`, `UPDATE docs_full SET n = 2`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "docs", 3),
		`<null> -> {"n": 0, "t": "docs_full", "op": "I", "len": 12800}`,
		`<null> -> {"n": 0, "t": "docs_default", "op": "I", "len": 12800}`,
		`<null> -> {"n": 2, "t": "docs_full", "op": "U", "len": 12800}`)
	var dead string
	if err := conn.QueryRow(context.Background(),
		`SELECT string_agg(mapping_name || ' ' || op, ',' ORDER BY lsn) FROM kafgres.dead_letter`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead != "docs_full U,docs_default U" {
		t.Fatalf("dead letters %q", dead)
	}
}

// TestMappingDeadLetterAndStall: a change that fails to render goes to
// kafgres.dead_letter and the rest flow on; with on_error 'stall' nothing
// flows until the cause is fixed, and then everything does, in order.
func TestMappingDeadLetterAndStall(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE m (id int PRIMARY KEY, a int, b int)`,
		`SELECT kafgres_create_topic('ratios', 1)`,
		`SELECT kafgres_add_mapping('ratios', 'm', 'ratios',
		   value_expr => $$ (new.a / new.b)::text $$, key_expr => $$ new.id::text $$)`,
		`INSERT INTO m VALUES (1, 6, 3)`,
		`INSERT INTO m VALUES (2, 1, 0), (3, 8, 2)`, // one bad row in a transaction of two
		`INSERT INTO m VALUES (4, 9, 3)`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "ratios", 3), "1 -> 2", "3 -> 4", "4 -> 3")
	var (
		op, msg string
		newRow  string
		n       int
	)
	if err := conn.QueryRow(context.Background(),
		`SELECT count(*) OVER (), op, error, new_row::text FROM kafgres.dead_letter WHERE mapping_name = 'ratios'`).
		Scan(&n, &op, &msg, &newRow); err != nil {
		t.Fatal(err)
	}
	if n != 1 || op != "I" || msg != "division by zero" || newRow != `{"a": "1", "b": "0", "id": "2"}` {
		t.Fatalf("dead letter: %d %s %q %s", n, op, msg, newRow)
	}
	harness.Eventually(t, 20*time.Second, func() error {
		_, rendered, dead := mappingStatus(t, conn, "ratios", "active")
		// rendered counts again if the broker renders a group again
		// (after an append failed, say): at least 3
		if rendered < 3 || dead != 1 {
			return fmt.Errorf("mapping ratios: rendered %d, dead-lettered %d; want at least 3 and 1", rendered, dead)
		}
		return nil
	})

	// stall: alice's mapping reads customers; revoking that stalls it
	mappingAuthor(t, conn, "alice")
	mustExec(t, conn, seedSchema,
		`GRANT SELECT ON orders, customers TO alice`,
		`SELECT kafgres_create_topic('order-events', 1)`)
	alice := connAs(t, c, "alice")
	mustExec(t, alice, strings.Replace(seedMapping, "filter_expr", "on_error => 'stall', filter_expr", 1))
	mustExec(t, conn, `REVOKE SELECT ON customers FROM alice`,
		`INSERT INTO orders VALUES (10, 1, 99.50, 'placed')`,
		`SELECT kafgres_produce('ratios', 'sql', 'after the stall')`)
	lastErr, _, _ := mappingStatus(t, conn, "orders", "stalled")
	// the expression, the change and its key, and Postgres's error
	if !strings.HasPrefix(lastErr, "value_expr failed for change I at ") ||
		!strings.HasSuffix(lastErr, ", key (id)=(10)): permission denied for table customers") {
		t.Fatalf("last_error %q", lastErr)
	}
	// nothing after the stalled change is delivered, from any source.
	// Waiting for something not to happen: a second is several delivery
	// rounds of the broker; readTopic fails on a fourth record.
	time.Sleep(time.Second)
	readTopic(t, c.Addr, "ratios", 3)
	mustExec(t, conn, `GRANT SELECT ON customers TO alice`)
	mappingStatus(t, conn, "orders", "active")
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "order-events", 1), "10 -> "+seedValue)
	wantRecs(t, readTopic(t, c.Addr, "ratios", 4)[3:], "sql -> after the stall")
}

// TestMappingValidation: expressions that are not exactly one expression,
// or that the author may not evaluate, are refused when the mapping is
// added, with errors that name the argument.
func TestMappingValidation(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn, seedSchema, `SELECT kafgres_create_topic('order-events', 1)`)
	add := func(arg, expr string) *pgconn.PgError {
		return pgErr(t, conn, fmt.Sprintf(`SELECT kafgres_add_mapping('bad', 'orders', 'order-events', %s => %s)`,
			arg, "$x$"+expr+"$x$"))
	}
	for _, tc := range []struct {
		arg, expr, code, msg, detail string
	}{
		{"value_expr", `1) FROM pg_authid --`, "22023", "value_expr must be a single SQL expression", "It adds a FROM clause."},
		{"key_expr", `1; DROP TABLE orders`, "42601", `syntax error at or near ";"`, ""},
		{"value_expr", `1), (2`, "22023", "value_expr must be a single SQL expression", "It makes 2 columns."},
		{"value_expr", `(WITH d AS (DELETE FROM orders RETURNING 1) SELECT 1)`, "22023", "value_expr must be a single SQL expression", "It contains a DELETE."},
		{"filter_expr", `(SELECT true FROM (SELECT 1) s WHERE EXISTS (WITH i AS (INSERT INTO customers VALUES (9) RETURNING 1) SELECT 1))`, "22023", "filter_expr must be a single SQL expression", "It contains an INSERT."},
		{"value_expr", ``, "22023", "value_expr must be a single SQL expression", "It is empty."},
		{"value_expr", `-- nothing`, "22023", "value_expr must be a single SQL expression", "It is empty."},
		{"key_expr", `1) --`, "22023", "key_expr must be a single SQL expression", "Its parentheses do not close exactly at its end."},
		{"key_expr", `new.id) + (1`, "22023", "key_expr must be a single SQL expression", "Its parentheses do not close exactly at its end."},
		{"value_expr", `new.nope`, "42703", "column new.nope does not exist", `In argument value_expr of mapping "bad".`},
		{"filter_expr", `new.id`, "42804", "argument of WHERE must be type boolean, not type integer", `In argument filter_expr of mapping "bad".`},
		{"value_expr", `new.id + 'x'`, "22P02", `invalid input syntax for type integer: "x"`, `In argument value_expr of mapping "bad".`},
	} {
		pe := add(tc.arg, tc.expr)
		if pe.Code != tc.code || pe.Message != tc.msg || (tc.detail != "" && pe.Detail != tc.detail) {
			t.Errorf("%s => %q: got %s %q (%q), want %s %q (%q)", tc.arg, tc.expr, pe.Code, pe.Message, pe.Detail, tc.code, tc.msg, tc.detail)
		}
	}
	if pe := pgErr(t, conn, `SELECT kafgres_add_mapping('x', 'orders', 'a b')`); pe.Code != "22023" {
		t.Errorf("bad topic name: %s %s", pe.Code, pe.Message)
	}
	if pe := pgErr(t, conn, `SELECT kafgres_add_mapping('x', 'orders', 'order-events', on_error => 'ignore')`); pe.Code != "22023" {
		t.Errorf("bad on_error: %s %s", pe.Code, pe.Message)
	}
	mustExec(t, conn, `SELECT kafgres_add_mapping('ok', 'orders', 'order-events')`)
	if pe := pgErr(t, conn, `SELECT kafgres_add_mapping('ok', 'orders', 'order-events')`); pe.Code != "42710" {
		t.Errorf("duplicate mapping: %s %s", pe.Code, pe.Message)
	}

	// alice may read orders but not customers: the seed's mapping, which
	// joins customers, is refused when she adds it
	mappingAuthor(t, conn, "alice")
	mustExec(t, conn, `GRANT SELECT ON orders TO alice`)
	alice := connAs(t, c, "alice")
	pe := pgErr(t, alice, seedMapping)
	if pe.Code != "42501" || pe.Message != "permission denied for table customers" {
		t.Fatalf("alice adds the seed mapping: %s %q", pe.Code, pe.Message)
	}
	// she cannot claim to be someone else, nor remove others' mappings
	mustExec(t, alice, `INSERT INTO kafgres.mapping (name, source_relid, topic, owner_role, search_path)
	                    VALUES ('mine', 'orders'::regclass, 'order-events', 10, 'public')`)
	var owner string
	if err := conn.QueryRow(context.Background(), `SELECT owner::text FROM kafgres.mappings WHERE name = 'mine'`).Scan(&owner); err != nil || owner != "alice" {
		t.Fatalf("owner of a mapping alice inserted: %q %v", owner, err)
	}
	if pe := pgErr(t, alice, `SELECT kafgres_remove_mapping('ok')`); pe.Code != "42501" {
		t.Fatalf("alice removes postgres's mapping: %s %s", pe.Code, pe.Message)
	}
}

// TestMappingCannotEscalate: expressions run as the mapping's owner, and
// cannot get back to the broker's superuser role.
func TestMappingCannotEscalate(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mappingAuthor(t, conn, "alice")
	mustExec(t, conn,
		`CREATE TABLE t (id int PRIMARY KEY)`,
		`GRANT SELECT ON t TO alice`,
		`SELECT kafgres_create_topic('who', 1)`)
	alice := connAs(t, c, "alice")
	mustExec(t, alice,
		`SELECT kafgres_add_mapping('who', 't', 'who', value_expr => $$ current_user || ' ' || current_setting('transaction_read_only') $$)`,
		`SELECT kafgres_add_mapping('climb', 't', 'who', value_expr => $$ set_config('role', 'postgres', false) $$)`,
		`SELECT kafgres_add_mapping('climb-local', 't', 'who', value_expr => $$ set_config('role', 'postgres', true) || current_user $$)`,
		`SELECT kafgres_add_mapping('climb-session', 't', 'who', value_expr => $$ set_config('session_authorization', 'postgres', true) $$)`)
	mustExec(t, conn, `INSERT INTO t VALUES (1)`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "who", 1), "<null> -> alice on")

	rows, err := conn.Query(context.Background(), `SELECT mapping_name, error FROM kafgres.dead_letter ORDER BY mapping_name`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var name, msg string
		if err := rows.Scan(&name, &msg); err != nil {
			t.Fatal(err)
		}
		got = append(got, name+": "+msg)
	}
	want := []string{
		`climb: cannot set parameter "role" within security-definer function`,
		`climb-local: cannot set parameter "role" within security-definer function`,
		`climb-session: cannot set parameter "session_authorization" within security-definer function`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("dead letters:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// nor can alice turn her render function into SECURITY INVOKER: she
	// cannot even name it
	var id int64
	if err := conn.QueryRow(context.Background(), `SELECT mapping_id FROM kafgres.mapping WHERE name = 'who'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	pe := pgErr(t, alice, fmt.Sprintf(`ALTER FUNCTION kafgres_render.m%d SECURITY INVOKER`, id))
	if pe.Code != "42501" {
		t.Fatalf("alice alters her render function: %s %s", pe.Code, pe.Message)
	}
	var secdef bool
	var owner string
	if err := conn.QueryRow(context.Background(), fmt.Sprintf(
		`SELECT prosecdef, proowner::regrole::text FROM pg_proc WHERE oid = 'kafgres_render.m%d'::regproc`, id)).Scan(&secdef, &owner); err != nil {
		t.Fatal(err)
	}
	if !secdef || owner != "alice" {
		t.Fatalf("render function: security definer %v, owner %s", secdef, owner)
	}
}

// TestMappingPreviewAndSnapshot: preview renders current rows without the
// broker; snapshot emits them through it as op R, ahead of later changes.
func TestMappingPreviewAndSnapshot(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn, seedSchema,
		`INSERT INTO orders VALUES (1, 1, 10, 'placed'), (2, 1, 20, 'draft'), (3, 1, 30, 'placed')`,
		`SELECT kafgres_create_topic('order-events', 1)`, seedMapping)

	rows, err := conn.Query(context.Background(), `SELECT key, value FROM kafgres_preview_mapping('orders') ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	var preview []string
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		preview = append(preview, k+" -> "+v)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	wantPreview := []string{
		`1 -> {"op": "I", "total": 10, "customer": {"tier": "gold"}, "order_id": 1}`,
		`3 -> {"op": "I", "total": 30, "customer": {"tier": "gold"}, "order_id": 3}`,
	}
	if strings.Join(preview, "\n") != strings.Join(wantPreview, "\n") {
		t.Fatalf("preview:\n%s", strings.Join(preview, "\n"))
	}
	var limited int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM kafgres_preview_mapping('orders', 1)`).Scan(&limited); err != nil || limited != 1 {
		t.Fatalf("preview with limit 1: %d rows, %v", limited, err)
	}
	readTopic(t, c.Addr, "order-events", 0) // the preview produced nothing

	snapshotMapping(t, conn, "orders", 3)
	mustExec(t, conn, `INSERT INTO orders VALUES (4, 1, 40, 'placed')`)
	// a forged snapshot row: anyone may emit a logical message, but it is
	// not rendered without kafgres_snapshot_mapping's marker
	mustExec(t, conn, `SELECT pg_logical_emit_message(true, 'kafgres',
	    '\x02'::bytea || int8send((SELECT mapping_id FROM kafgres.mapping WHERE name = 'orders'))
	    || convert_to('{"id": 66, "customer_id": 1, "total": 1, "status": "placed"}', 'UTF8'))`)
	waitDelivered(t, conn)
	got := readTopic(t, c.Addr, "order-events", 3)
	wantRecs(t, got,
		`1 -> {"op": "R", "total": 10, "customer": {"tier": "gold"}, "order_id": 1}`,
		`3 -> {"op": "R", "total": 30, "customer": {"tier": "gold"}, "order_id": 3}`,
		`4 -> {"op": "I", "total": 40, "customer": {"tier": "gold"}, "order_id": 4}`)
}

// TestCDCDemo runs examples/cdc-demo.sh, which checks its own output.
func TestCDCDemo(t *testing.T) {
	runExample(t, harness.Start(t), "cdc-demo.sh")
}

// snapshotMapping runs kafgres_snapshot_mapping(name) as conn's role in a
// transaction of its own and checks that it wrote want rows.
func snapshotMapping(t *testing.T, conn *pgx.Conn, name string, want int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var n int64
	if err := tx.QueryRow(ctx, `SELECT kafgres_snapshot_mapping($1)`, name).Scan(&n); err != nil || n != want {
		t.Fatalf("kafgres_snapshot_mapping(%q): %d rows, %v; want %d", name, n, err, want)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
