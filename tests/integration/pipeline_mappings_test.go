package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// Issue #11, items 3, 4, 6 (SQL side) and 8: no single mapping stops the
// pipeline, changes render with the definition that matched them in the
// WAL, partitioned tables can be mapped, and an unchanged TOASTed value
// never becomes a NULL that was not in the row.

// runScriptOnce runs a self-checking script of examples/ once against c.
func runScriptOnce(t *testing.T, c *harness.Cluster, script string) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(harness.RepoRoot(), "examples", script))
	cmd.Env = append(os.Environ(), "BROKER="+c.Addr, "PSQL="+psqlCommand(c))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all checks passed") {
		t.Fatalf("%s: %v\n%s\n%s", script, err, out, c.LogTail())
	}
}

// produceDeliveredAtOnce produces one record with kafgres_produce and
// fails unless kafgres_wait_delivered sees it delivered within a few
// seconds: nothing holds the pipeline up.
func produceDeliveredAtOnce(t *testing.T, conn *pgx.Conn, topic, value string) {
	t.Helper()
	var lsn string
	if err := conn.QueryRow(context.Background(), `SELECT kafgres_produce($1, NULL, $2)::text`, topic, value).Scan(&lsn); err != nil {
		t.Fatalf("kafgres_produce: %v", err)
	}
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT kafgres_wait_delivered($1::pg_lsn, '5 seconds')`, lsn).Scan(&ok); err != nil || !ok {
		t.Fatalf("record produced at %s not delivered within 5s: %v %v", lsn, ok, err)
	}
}

// retiredReason waits for mapping name to be retired and returns why.
func retiredReason(t *testing.T, conn *pgx.Conn, name string) string {
	t.Helper()
	var reason string
	harness.Eventually(t, 20*time.Second, func() error {
		err := conn.QueryRow(context.Background(),
			`SELECT reason FROM kafgres.mapping_retired WHERE name = $1 ORDER BY retired_at DESC LIMIT 1`, name).Scan(&reason)
		if err != nil {
			return fmt.Errorf("mapping %s not retired: %w", name, err)
		}
		return nil
	})
	var live bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM kafgres.mapping WHERE name = $1)`, name).Scan(&live); err != nil || live {
		t.Fatalf("mapping %s still in kafgres.mapping (%v)", name, err)
	}
	return reason
}

// TestPipelineMappingsDemosThenProduce: examples/cdc-demo.sh, then
// examples/transactional-produce.sh, which drops the mapped table orders
// and makes a new one. The mapping of the dropped table used to make the
// definitions query fail, and with it every later group, forever.
func TestPipelineMappingsDemosThenProduce(t *testing.T) {
	c := harness.Start(t)
	runScriptOnce(t, c, "cdc-demo.sh")
	runScriptOnce(t, c, "transactional-produce.sh")
	conn := c.Conn(t)
	// the demo's mapping made again on the new table, which makes the
	// broker load the definitions, the removed one's included
	mustExec(t, conn, seedMapping, `INSERT INTO orders VALUES (77, 1, 7.00, 'placed')`)
	c.CreateTopic(t, "after-demos", 1)
	produceDeliveredAtOnce(t, conn, "after-demos", "one")
	got := recs(readTopic(t, c.Addr, "order-events", 4))
	if want := `77 -> {"op": "I", "total": 7.00, "customer": {"tier": "gold"}, "order_id": 77}`; !slices.Contains(got, want) {
		t.Fatalf("records %q lack %q", got, want)
	}
	var reason string
	if err := conn.QueryRow(context.Background(),
		`SELECT reason FROM kafgres.mapping_retired WHERE name = 'orders'`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "public.orders") || !strings.Contains(reason, "dropped") {
		t.Fatalf("retired mapping reason %q", reason)
	}
}

// TestPipelineMappingsDDL: DROP SCHEMA ... CASCADE retires the mappings of
// the tables it drops, a renamed table keeps its mapping, a changed column
// type makes the render function be made again (once the mapping paused by
// it is resumed), and a table dropped where
// the event trigger does not fire (session_replication_role = replica)
// still does not stop anything.
func TestPipelineMappingsDDL(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`SELECT kafgres_create_topic('ddl', 1)`,
		`SELECT kafgres_create_topic('other', 1)`,
		`CREATE SCHEMA doomed`,
		`CREATE TABLE doomed.t (id int PRIMARY KEY)`,
		`CREATE TABLE ren (id int PRIMARY KEY, v text)`,
		`CREATE TABLE ty (id int PRIMARY KEY, k bytea)`,
		`CREATE TABLE quiet (id int PRIMARY KEY)`,
		`SELECT kafgres_add_mapping('doomed', 'doomed.t', 'ddl', value_expr => $$ 'doomed ' || new.id $$)`,
		`SELECT kafgres_add_mapping('ren', 'ren', 'ddl', value_expr => $$ 'ren ' || new.v $$)`,
		`SELECT kafgres_add_mapping('ty', 'ty', 'ddl', key_expr => $$ new.k $$, value_expr => $$ 'ty ' || new.id $$)`,
		`SELECT kafgres_add_mapping('quiet', 'quiet', 'ddl', value_expr => $$ 'quiet ' || new.id $$)`,
		`INSERT INTO doomed.t VALUES (1)`,
		`INSERT INTO ren VALUES (1, 'a')`,
		`INSERT INTO ty VALUES (1, '\x6869')`)
	waitDelivered(t, conn)

	mustExec(t, conn, `DROP SCHEMA doomed CASCADE`)
	if reason := retiredReason(t, conn, "doomed"); !strings.Contains(reason, "doomed.t") {
		t.Fatalf("retired reason %q", reason)
	}
	produceDeliveredAtOnce(t, conn, "other", "after drop schema")

	mustExec(t, conn, `ALTER TABLE ren RENAME TO renamed`, `INSERT INTO renamed VALUES (2, 'b')`)
	// a new type of a column its key names pauses ty (TestMappingPausedBySchemaChange);
	// written again, the same expressions fit, and the function is made
	// for the new type
	mustExec(t, conn, `ALTER TABLE ty ALTER COLUMN k TYPE text USING convert_from(k, 'UTF8')`,
		`INSERT INTO ty VALUES (2, 'yo')`)
	mappingStatus(t, conn, "ty", "paused")
	mustExec(t, conn, `SELECT kafgres_alter_mapping('ty', key_expr => $$ new.k $$, value_expr => $$ 'ty ' || new.id $$)`)
	// not seen by the event triggers: found when the definitions load
	mustExec(t, conn, `SET session_replication_role = replica`, `DROP TABLE quiet`, `RESET session_replication_role`)
	mustExec(t, conn, `CREATE TABLE later (id int PRIMARY KEY)`,
		`SELECT kafgres_add_mapping('later', 'later', 'ddl', value_expr => $$ 'later ' || new.id $$)`,
		`INSERT INTO later VALUES (1)`)
	produceDeliveredAtOnce(t, conn, "other", "after the quiet drop")
	waitDelivered(t, conn)

	got := recs(readTopic(t, c.Addr, "ddl", 6))
	want := []string{"<null> -> doomed 1", "<null> -> ren a", "hi -> ty 1", "<null> -> ren b", "yo -> ty 2", "<null> -> later 1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mappingStatus(t, conn, "ren", "active")
	mappingStatus(t, conn, "ty", "active")
	// kafgres.mapping_retired keeps a definition only until delivery has
	// passed every change that could match it, which by now it may have:
	// the broker's log says why quiet went.
	if line := waitLog(t, c, "removing mapping: its source table was dropped", 20*time.Second); !strings.Contains(line, "mapping=quiet") {
		t.Fatalf("quiet not removed as dropped: %s", line)
	}
	var live bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM kafgres.mapping WHERE name = 'quiet')`).Scan(&live); err != nil || live {
		t.Fatalf("mapping quiet still in kafgres.mapping (%v)", err)
	}
	var dead int
	// (the change ty held is delivered, and removed in a while)
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM kafgres.dead_letter WHERE replayed_lsn IS NULL`).Scan(&dead); err != nil || dead != 0 {
		t.Fatalf("dead letters: %d %v", dead, err)
	}

	// DDL of other users on other tables is not affected by the triggers
	mustExec(t, conn, `CREATE ROLE bystander LOGIN`, `GRANT CREATE ON SCHEMA public TO bystander`)
	b := connAs(t, c, "bystander")
	mustExec(t, b, `CREATE TABLE mine (id int)`, `ALTER TABLE mine RENAME TO mine2`,
		`ALTER TABLE mine2 ALTER COLUMN id TYPE bigint`, `DROP TABLE mine2`)
}

// stopBroker keeps the supervisor from running the broker (its path is
// made to point nowhere) and returns a function that lets it run again.
func stopBroker(t *testing.T, c *harness.Cluster, conn *pgx.Conn) (restart func()) {
	t.Helper()
	old := c.BrokerPID(t)
	mustExec(t, conn, `ALTER SYSTEM SET kafgres.broker_path = '/nonexistent/kafgres-broker'`, `SELECT pg_reload_conf()`)
	harness.WaitPortClosed(t, c.Addr, 30*time.Second)
	return func() {
		t.Helper()
		mustExec(t, conn, `ALTER SYSTEM RESET kafgres.broker_path`, `SELECT pg_reload_conf()`)
		c.WaitBroker(t, old, 60*time.Second)
	}
}

// TestPipelineMappingsRenderAsOfWAL: changes committed while a mapping
// existed are rendered with its definition even when it was removed, or
// removed and added again with another expression, before the broker got
// to them.
func TestPipelineMappingsRenderAsOfWAL(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`SELECT kafgres_create_topic('asof', 1)`,
		`SELECT kafgres_create_topic('gone', 1)`,
		`CREATE TABLE a (id int PRIMARY KEY)`,
		`CREATE TABLE g (id int PRIMARY KEY)`,
		`SELECT kafgres_add_mapping('a', 'a', 'asof', value_expr => $$ 'v1 ' || new.id $$)`,
		`SELECT kafgres_add_mapping('g', 'g', 'gone', value_expr => $$ 'g ' || new.id $$, on_error => 'stall')`,
		`INSERT INTO a VALUES (0)`)
	waitDelivered(t, conn)

	restart := stopBroker(t, c, conn)
	mustExec(t, conn,
		`INSERT INTO a VALUES (1)`,
		`INSERT INTO g VALUES (1), (2)`,
		`INSERT INTO a VALUES (2)`,
		`SELECT kafgres_remove_mapping('g')`,
		`SELECT kafgres_remove_mapping('a')`,
		`SELECT kafgres_add_mapping('a', 'a', 'asof', value_expr => $$ 'v2 ' || new.id $$)`,
		`INSERT INTO a VALUES (3)`,
		`INSERT INTO g VALUES (3)`) // unmapped: nothing
	restart()
	waitDelivered(t, conn)
	got := recs(readTopic(t, c.Addr, "asof", 4))
	want := []string{"<null> -> v1 0", "<null> -> v1 1", "<null> -> v1 2", "<null> -> v2 3"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantRecs(t, readTopic(t, c.Addr, "gone", 2), "<null> -> g 1", "<null> -> g 2")

	// retired definitions and their functions go once everything that
	// could have matched them is delivered
	harness.Eventually(t, 20*time.Second, func() error {
		produceDeliveredAtOnce(t, conn, "gone", "tick")
		var n int
		err := conn.QueryRow(context.Background(), `SELECT
		    (SELECT count(*) FROM kafgres.mapping_retired)
		  + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'kafgres_render'::regnamespace
		       AND proname NOT IN (SELECT 'm' || mapping_id FROM kafgres.mapping))`).Scan(&n)
		switch {
		case err != nil:
			return err
		case n != 0:
			return fmt.Errorf("%d retired definitions and render functions left", n)
		}
		return nil
	})

	// what a definition maps is immutable (its expressions may change:
	// kafgres_alter_mapping)
	if pe := pgErr(t, conn, `UPDATE kafgres.mapping SET topic = 'gone' WHERE name = 'a'`); pe.Code != "55000" {
		t.Fatalf("update of a mapping: %s %s", pe.Code, pe.Message)
	}
}

// noticeConn connects as the superuser and collects the notices and
// warnings the server sends.
func noticeConn(t *testing.T, c *harness.Cluster) (*pgx.Conn, func() []*pgconn.Notice) {
	t.Helper()
	cfg, err := pgx.ParseConfig(c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		notices []*pgconn.Notice
	)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n)
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn, func() []*pgconn.Notice {
		mu.Lock()
		defer mu.Unlock()
		out := notices
		notices = nil
		return out
	}
}

// TestPipelineMappingsUnchangedToast: an update that leaves a TOASTed
// value alone does not write it to the WAL. Without REPLICA IDENTITY FULL
// the change cannot be rendered truthfully: it is dead-lettered with an
// error naming the column and the fix, never rendered with a NULL. With
// FULL the real value is rendered.
func TestPipelineMappingsUnchangedToast(t *testing.T) {
	c := harness.Start(t)
	conn, notices := noticeConn(t, c)
	mustExec(t, conn, `SELECT kafgres_create_topic('toast', 1)`)
	for _, table := range []string{"tdefault", "tfull"} {
		mustExec(t, conn, `CREATE TABLE `+table+` (id int PRIMARY KEY, big text, n int)`,
			`ALTER TABLE `+table+` ALTER COLUMN big SET STORAGE EXTERNAL`)
	}
	mustExec(t, conn, `ALTER TABLE tfull REPLICA IDENTITY FULL`)
	notices()
	mustExec(t, conn, `SELECT kafgres_add_mapping('tdefault', 'tdefault', 'toast',
	    value_expr => $$ jsonb_build_object('t', 'default', 'op', op, 'n', new.n, 'len', length(new.big)) $$)`)
	ns := notices()
	if len(ns) != 1 || ns[0].Severity != "WARNING" || !strings.Contains(ns[0].Message+ns[0].Detail+ns[0].Hint, "REPLICA IDENTITY FULL") {
		t.Fatalf("add_mapping on a table with TOASTable columns: notices %+v", ns)
	}
	mustExec(t, conn, `SELECT kafgres_add_mapping('tfull', 'tfull', 'toast',
	    value_expr => $$ jsonb_build_object('t', 'full', 'op', op, 'n', new.n, 'len', length(new.big)) $$)`)
	if ns := notices(); len(ns) != 0 {
		t.Fatalf("add_mapping on a REPLICA IDENTITY FULL table: notices %+v", ns)
	}
	for _, table := range []string{"tdefault", "tfull"} {
		mustExec(t, conn, `INSERT INTO `+table+` VALUES (1, repeat('x', 5000), 0)`,
			`UPDATE `+table+` SET n = 1`)
	}
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "toast", 3),
		`<null> -> {"n": 0, "t": "default", "op": "I", "len": 5000}`,
		`<null> -> {"n": 0, "t": "full", "op": "I", "len": 5000}`,
		`<null> -> {"n": 1, "t": "full", "op": "U", "len": 5000}`)
	var op, msg, newRow string
	if err := conn.QueryRow(context.Background(),
		`SELECT op, error, new_row::text FROM kafgres.dead_letter WHERE mapping_name = 'tdefault'`).Scan(&op, &msg, &newRow); err != nil {
		t.Fatal(err)
	}
	// the row as far as the WAL has it, without the value it lacks
	if op != "U" || !strings.Contains(msg, `"big"`) || !strings.Contains(msg, "REPLICA IDENTITY FULL") || newRow != `{"n": "1", "id": "1"}` {
		t.Fatalf("dead letter: %s %q %s", op, msg, newRow)
	}
}

// TestPipelineMappingsPartitioned: a partitioned table can be mapped (its
// partitions' changes are matched by the output plugin), with privileges
// checked on it, and preview and snapshot read through it.
func TestPipelineMappingsPartitioned(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`SELECT kafgres_create_topic('parts', 1)`,
		`CREATE TABLE p (id int, region text, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
		`CREATE TABLE p_eu PARTITION OF p FOR VALUES IN ('eu')`,
		`CREATE TABLE p_us PARTITION OF p FOR VALUES IN ('us')`,
		`INSERT INTO p VALUES (1, 'eu'), (2, 'us')`)
	mappingAuthor(t, conn, "carol")
	carol := connAs(t, c, "carol")
	add := `SELECT kafgres_add_mapping('p', 'p', 'parts', key_expr => $$ new.id::text $$,
	    value_expr => $$ op || ' ' || new.region $$)`
	if pe := pgErr(t, carol, add); pe.Code != "42501" {
		t.Fatalf("add without SELECT on the parent: %s %s", pe.Code, pe.Message)
	}
	// SELECT on the partitions is not SELECT on the parent
	mustExec(t, conn, `GRANT SELECT ON p_eu, p_us TO carol`)
	if pe := pgErr(t, carol, add); pe.Code != "42501" {
		t.Fatalf("add with SELECT on the partitions only: %s %s", pe.Code, pe.Message)
	}
	mustExec(t, conn, `GRANT SELECT, UPDATE ON p TO carol`)
	mustExec(t, carol, add)

	rows, err := carol.Query(context.Background(), `SELECT key || ' -> ' || value FROM kafgres_preview_mapping('p') ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	preview, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(preview, ",") != "1 -> I eu,2 -> I us" {
		t.Fatalf("preview %q", preview)
	}
	snapshotMapping(t, carol, "p", 2)
	// changes of every partition, attached before or after the mapping
	mustExec(t, conn, `CREATE TABLE p_asia (id int, region text, PRIMARY KEY (id, region))`,
		`ALTER TABLE p ATTACH PARTITION p_asia FOR VALUES IN ('asia')`,
		`INSERT INTO p VALUES (3, 'eu')`, `INSERT INTO p VALUES (4, 'asia')`,
		`UPDATE p SET id = 5 WHERE id = 2`)
	waitDelivered(t, conn)
	got := readTopic(t, c.Addr, "parts", 5)
	slices.SortStableFunc(got[:2], func(a, b *kgo.Record) int { return strings.Compare(string(a.Key), string(b.Key)) })
	wantRecs(t, got, "1 -> R eu", "2 -> R us", "3 -> I eu", "4 -> I asia", "5 -> U us")
	mappingStatus(t, conn, "p", "active")
}

// TestPipelineMappingsBrokenDefinition: a definition that can never render
// (an expression that fails validation, written by a plain INSERT; an
// owner role that is gone) has status 'error' with the reason, and its
// changes are dead-lettered, not dropped, and not stalled even with
// on_error 'stall': everything else flows.
func TestPipelineMappingsBrokenDefinition(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`SELECT kafgres_create_topic('broken', 1)`,
		`SELECT kafgres_create_topic('fine', 1)`,
		`CREATE TABLE b (id int PRIMARY KEY)`,
		`INSERT INTO kafgres.mapping (name, source_relid, topic, value_expr, on_error, owner_role, search_path)
		 VALUES ('bad-expr', 'b'::regclass, 'broken', '1) FROM pg_class --', 'stall', 0, 'public')`)
	mappingAuthor(t, conn, "dave")
	mustExec(t, conn, `GRANT SELECT ON b TO dave`)
	dave := connAs(t, c, "dave")
	mustExec(t, dave, `SELECT kafgres_add_mapping('no-owner', 'b', 'broken', value_expr => $$ 'x' $$, on_error => 'stall')`)
	dave.Close(context.Background())
	mustExec(t, conn, `INSERT INTO b VALUES (1)`)
	waitDelivered(t, conn)
	mustExec(t, conn, `DROP OWNED BY dave`, `DROP ROLE dave`, `INSERT INTO b VALUES (2)`)
	produceDeliveredAtOnce(t, conn, "fine", "flows")

	lastErr, _, _ := mappingStatus(t, conn, "bad-expr", "error")
	if !strings.Contains(lastErr, "value_expr") {
		t.Fatalf("bad-expr last_error %q", lastErr)
	}
	lastErr, _, _ = mappingStatus(t, conn, "no-owner", "error")
	if !strings.Contains(lastErr, "owner role") {
		t.Fatalf("no-owner last_error %q", lastErr)
	}
	var dead string
	if err := conn.QueryRow(context.Background(),
		`SELECT string_agg(mapping_name || ' ' || (new_row->>'id'), ',' ORDER BY mapping_name, lsn) FROM kafgres.dead_letter`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead != "bad-expr 1,bad-expr 2,no-owner 2" {
		t.Fatalf("dead letters %q", dead)
	}
	readTopic(t, c.Addr, "broken", 1) // the change of 1 rendered by no-owner, nothing else
}

// TestPipelineMappingsRemoveStalled: removing a stalled mapping lets
// everything flow again, and the change it stalled on is not lost: it is
// rendered with the removed definition, which never stalls, so it is
// dead-lettered.
func TestPipelineMappingsRemoveStalled(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`SELECT kafgres_create_topic('ratios', 1)`,
		`SELECT kafgres_create_topic('fine', 1)`,
		`CREATE TABLE r (id int PRIMARY KEY, a int, b int)`,
		`SELECT kafgres_add_mapping('ratio', 'r', 'ratios', value_expr => $$ (new.a / new.b)::text $$, on_error => 'stall')`,
		`INSERT INTO r VALUES (1, 6, 3)`,
		`INSERT INTO r VALUES (2, 1, 0)`)
	mappingStatus(t, conn, "ratio", "stalled")
	var lsn string
	if err := conn.QueryRow(context.Background(), `SELECT kafgres_produce('fine', NULL, 'held')::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	// the stall is a state: kafgres_wait_delivered names it rather than
	// time out
	harness.Eventually(t, 20*time.Second, func() error {
		var state, reason string
		if err := conn.QueryRow(context.Background(), `SELECT state, coalesce(stall_reason, '') FROM kafgres.pipeline`).Scan(&state, &reason); err != nil {
			t.Fatal(err)
		}
		if state != "stalled" || !strings.Contains(reason, "ratio") {
			return fmt.Errorf("kafgres.pipeline: %s %q", state, reason)
		}
		return nil
	})
	if pe := pgErr(t, conn, `SELECT kafgres_wait_delivered('`+lsn+`'::pg_lsn, '1 second')`); pe.Code != "55000" || !strings.Contains(pe.Message, "division by zero") {
		t.Fatalf("waiting past a stalled mapping: %s %s", pe.Code, pe.Message)
	}
	mustExec(t, conn, `SELECT kafgres_remove_mapping('ratio')`)
	produceDeliveredAtOnce(t, conn, "fine", "flows")
	wantRecs(t, readTopic(t, c.Addr, "ratios", 1), "<null> -> 2")
	wantRecs(t, readTopic(t, c.Addr, "fine", 2), "<null> -> held", "<null> -> flows")
	var msg, newRow string
	if err := conn.QueryRow(context.Background(),
		`SELECT error, new_row::text FROM kafgres.dead_letter WHERE mapping_name = 'ratio'`).Scan(&msg, &newRow); err != nil {
		t.Fatal(err)
	}
	if msg != "division by zero" || newRow != `{"a": "1", "b": "0", "id": "2"}` {
		t.Fatalf("dead letter %q %s", msg, newRow)
	}
}
