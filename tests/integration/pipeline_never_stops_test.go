package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafgres/kafgres/producer"
	"github.com/kafgres/kafgres/tests/harness"
)

// TestPipelineTableWithoutKey: a mapping on a table without a primary key
// (and one with REPLICA IDENTITY NOTHING) delivers its INSERT, UPDATE and
// DELETE -- a DELETE carries no row there, so old is a NULL row -- and
// the pipeline goes on: a kafgres_produce after them is delivered at once.
func TestPipelineTableWithoutKey(t *testing.T) {
	c := harness.Start(t)
	dumpOnFailure(t, c)
	conn := c.Conn(t)
	value := `$$ jsonb_build_object('op', op, 'new', to_jsonb(new), 'old', to_jsonb(old))::text $$`
	mustExec(t, conn,
		`CREATE TABLE nokey (a int, b text)`,
		`CREATE TABLE nothing (id int PRIMARY KEY, b text)`,
		`ALTER TABLE nothing REPLICA IDENTITY NOTHING`,
		`SELECT kafgres_create_topic('nokey', 1)`,
		`SELECT kafgres_create_topic('after', 1)`,
		`SELECT kafgres_add_mapping('nokey', 'nokey', 'nokey', value_expr => `+value+`)`,
		`SELECT kafgres_add_mapping('nothing', 'nothing', 'nokey', value_expr => `+value+`)`,
		`INSERT INTO nokey VALUES (1, 'a')`,
		`UPDATE nokey SET b = 'b'`,
		`DELETE FROM nokey`,
		`INSERT INTO nothing VALUES (1, 'a')`,
		`DELETE FROM nothing`,
		`SELECT kafgres_produce('after', 'k', 'delivered')`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "nokey", 5),
		`<null> -> {"op": "I", "new": {"a": 1, "b": "a"}, "old": null}`,
		`<null> -> {"op": "U", "new": {"a": 1, "b": "b"}, "old": null}`,
		`<null> -> {"op": "D", "new": null, "old": null}`,
		`<null> -> {"op": "I", "new": {"b": "a", "id": 1}, "old": null}`,
		`<null> -> {"op": "D", "new": null, "old": null}`)
	wantRecs(t, readTopic(t, c.Addr, "after", 1), `k -> delivered`)
}

// TestPipelineStallSkip: a transaction the replication stream cannot be
// read past (the decoder's failpoint makes every message of it
// unreadable) is a state in SQL: kafgres.pipeline says stalled, with the
// reason, LSN and xid, and kafgres_wait_delivered raises an error naming
// it instead of timing out. kafgres_skip_transaction skips exactly that
// transaction, keeping what it held in kafgres.dead_letter; what was
// committed after it is delivered, and the pipeline flows again.
func TestPipelineStallSkip(t *testing.T) {
	c := harness.Start(t)
	dumpOnFailure(t, c)
	c.CreateTopic(t, "st", 1)
	conn := c.Conn(t)
	ctx := context.Background()
	mustExec(t, conn, `CREATE TABLE skipme (id int PRIMARY KEY)`,
		`SELECT kafgres_add_mapping('skipme', 'skipme', 'st')`)

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var xid int64
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint % 4294967296`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`INSERT INTO skipme VALUES (1)`, `SELECT kafgres_produce('st', 'k', 'skipped')`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := os.WriteFile(filepath.Join(c.DataDir(), producer.FailpointFile), fmt.Appendf(nil, "unreadable-xid %d", xid), 0o644); err != nil {
		t.Fatal(err)
	}
	c.WaitBroker(t, c.KillBroker(t), 30*time.Second)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	other := c.Conn(t)
	var after string
	if err := other.QueryRow(ctx, `SELECT kafgres_produce('st', 'k', 'after')::text`).Scan(&after); err != nil {
		t.Fatal(err)
	}

	harness.Eventually(t, 30*time.Second, func() error {
		var state string
		var sxid *int64
		var skippable bool
		if err := conn.QueryRow(ctx, `SELECT state, stalled_xid, stall_skippable FROM kafgres.pipeline`).Scan(&state, &sxid, &skippable); err != nil {
			t.Fatal(err)
		}
		if state != "stalled" || sxid == nil || *sxid != xid || !skippable {
			return fmt.Errorf("kafgres.pipeline: %s, xid %v, skippable %v; want stalled on %d", state, sxid, skippable, xid)
		}
		return nil
	})
	pe := pgErr(t, conn, fmt.Sprintf(`SELECT kafgres_wait_delivered('%s', '1 second')`, after))
	if pe.Code != "55000" || !strings.Contains(pe.Message, "stalled") || !strings.Contains(pe.Hint, fmt.Sprintf("kafgres_skip_transaction(%d)", xid)) {
		t.Fatalf("kafgres_wait_delivered while stalled: %s %q hint %q", pe.Code, pe.Message, pe.Hint)
	}
	if pe := pgErr(t, conn, fmt.Sprintf(`SELECT kafgres_skip_transaction(%d)`, xid+1)); pe.Code != "22023" {
		t.Fatalf("skipping another transaction: %s %s", pe.Code, pe.Message)
	}
	mustExec(t, conn, fmt.Sprintf(`SELECT kafgres_skip_transaction(%d)`, xid))
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT kafgres_wait_delivered($1::pg_lsn, '30 seconds')`, after).Scan(&ok); err != nil || !ok {
		t.Fatalf("after the skip: %v %v", ok, err)
	}
	wantRecs(t, readTopic(t, c.Addr, "st", 1), `k -> after`)

	var n int
	var reason string
	if err := conn.QueryRow(ctx, `SELECT count(*) OVER (), error FROM kafgres.dead_letter WHERE xid = $1`, xid).Scan(&n, &reason); err != nil {
		t.Fatal(err)
	}
	if n != 1 || !strings.Contains(reason, "skipped with kafgres_skip_transaction") {
		t.Fatalf("dead letters of the skipped transaction: %d, %q", n, reason)
	}
	var state string
	harness.Eventually(t, 10*time.Second, func() error {
		if err := conn.QueryRow(ctx, `SELECT state FROM kafgres.pipeline`).Scan(&state); err != nil {
			t.Fatal(err)
		}
		if state != "flowing" {
			return fmt.Errorf("state %s after the skip", state)
		}
		return nil
	})
	if pe := pgErr(t, conn, fmt.Sprintf(`SELECT kafgres_skip_transaction(%d)`, xid)); pe.Code != "55000" {
		t.Fatalf("skipping while flowing: %s %s", pe.Code, pe.Message)
	}
}

// TestMappingExpressionBounded: an expression deep enough to overflow the
// C stack of the broker's parser (25,000 "+1" terms) is refused at every
// way into kafgres.mapping -- kafgres_add_mapping and a plain INSERT --
// and the broker, rendering the table's changes, stays up.
func TestMappingExpressionBounded(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	deep := "1" + strings.Repeat("+1", 25000)
	mustExec(t, conn, `CREATE TABLE deep (id int PRIMARY KEY)`, `SELECT kafgres_create_topic('deep', 1)`)
	pid := c.BrokerPID(t)
	for _, q := range []string{
		`SELECT kafgres_add_mapping('deep', 'deep', 'deep', value_expr => '` + deep + `')`,
		`INSERT INTO kafgres.mapping (name, source_relid, topic, value_expr, on_error, owner_role, search_path)
		 VALUES ('deep', 'deep'::regclass, 'deep', '` + deep + `', 'dead_letter', 10, 'public')`,
		`INSERT INTO kafgres.mapping (name, source_relid, topic, key_expr, on_error, owner_role, search_path)
		 VALUES ('long', 'deep'::regclass, 'deep', '''` + strings.Repeat("x", 70000) + `''', 'dead_letter', 10, 'public')`,
	} {
		pe := pgErr(t, conn, q)
		if pe.Code != "22023" || !strings.Contains(pe.Detail, "more than the") {
			t.Fatalf("%.60s...: %s %s (%s)", q, pe.Code, pe.Message, pe.Detail)
		}
	}
	mustExec(t, conn, `SELECT kafgres_add_mapping('fine', 'deep', 'deep', value_expr => '`+"1"+strings.Repeat("+1", 3000)+`')`,
		`INSERT INTO deep VALUES (1)`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "deep", 1), "<null> -> 3001")
	if got := c.BrokerPID(t); got != pid {
		t.Fatalf("the broker restarted: pid %d, was %d", got, pid)
	}
}

// TestCompactedTopicRefusesKeyless: what Kafka refuses, SQL produce and CDC
// refuse too. kafgres_produce without a key into a compacted topic is an
// error at the call; a mapping's record without a key for it is
// dead-lettered with the reason, and its keyed records are delivered.
func TestCompactedTopicRefusesKeyless(t *testing.T) {
	c := harness.Start(t)
	dumpOnFailure(t, c)
	conn := c.Conn(t)
	mustExec(t, conn,
		`SELECT kafgres_create_topic('compacted', 1)`,
		`INSERT INTO kafgres.topic_config (topic_id, name, value)
		   SELECT topic_id, 'cleanup.policy', 'compact' FROM kafgres.topic WHERE name = 'compacted'`,
		`CREATE TABLE kv (id int PRIMARY KEY, k text)`,
		`SELECT kafgres_add_mapping('kv', 'kv', 'compacted', value_expr => $$ new.id::text $$, key_expr => $$ new.k $$)`)
	if pe := pgErr(t, conn, `SELECT kafgres_produce('compacted', NULL, 'v')`); pe.Code != "22023" || !strings.Contains(pe.Message, "compacted topic") {
		t.Fatalf("kafgres_produce without a key: %s %s", pe.Code, pe.Message)
	}
	mustExec(t, conn, `INSERT INTO kv VALUES (1, 'a'), (2, NULL), (3, 'c')`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "compacted", 2), "a -> 1", "c -> 3")
	var reason string
	if err := conn.QueryRow(context.Background(),
		`SELECT error FROM kafgres.dead_letter WHERE mapping_id IS NULL AND new_row->>'value' = 'Mg=='`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "compacted") {
		t.Fatalf("dead letter reason %q", reason)
	}
}
