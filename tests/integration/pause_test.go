package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestMappingPausedBySchemaChange: renaming a column a mapping's
// expressions name pauses that mapping, and only it: its changes are held,
// not dead-lettered, while everything else flows; kafgres_alter_mapping
// fixes it, and the changes made meanwhile are delivered in order, exactly
// once, before those made after, across a kill of the broker. A change of
// a used column's type pauses it too; adding a column does not.
func TestMappingPausedBySchemaChange(t *testing.T) {
	c := harness.Start(t)
	dumpOnFailure(t, c)
	conn := c.Conn(t)
	ctx := context.Background()
	mustExec(t, conn,
		`CREATE TABLE p (id int PRIMARY KEY, a int)`,
		`SELECT kafgres_create_topic('paused', 1)`,
		`SELECT kafgres_create_topic('fine', 1)`,
		`SELECT kafgres_add_mapping('pm', 'p', 'paused',
		   value_expr => $$ (new.a * 10)::text $$, key_expr => $$ coalesce(new.id, old.id)::text $$)`,
		`INSERT INTO p VALUES (1, 1)`)
	waitDelivered(t, conn)

	held := func(wantHeld, wantDead int) {
		t.Helper()
		harness.Eventually(t, 20*time.Second, func() error {
			var h, d int
			if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE held), count(*) FILTER (WHERE NOT held)
			                                FROM kafgres.dead_letter WHERE mapping_name = 'pm'`).Scan(&h, &d); err != nil {
				t.Fatal(err)
			}
			if h != wantHeld || d != wantDead {
				return fmt.Errorf("held %d, dead-lettered %d; want %d and %d", h, d, wantHeld, wantDead)
			}
			return nil
		})
	}

	mustExec(t, conn, `ALTER TABLE p RENAME COLUMN a TO b`,
		`INSERT INTO p VALUES (2, 2)`,
		`UPDATE p SET b = 3 WHERE id = 1`,
		`DELETE FROM p WHERE id = 2`)
	lastErr, _, _ := mappingStatus(t, conn, "pm", "paused")
	if !strings.Contains(lastErr, "column a (integer) is gone") {
		t.Fatalf("last_error %q", lastErr)
	}
	// the others flow at once; this one's changes are kept, not
	// dead-lettered
	produceDeliveredAtOnce(t, conn, "fine", "flows")
	held(3, 0)
	readTopic(t, c.Addr, "paused", 1)

	// fixed; the broker is killed as the fix commits
	mustExec(t, conn, `SELECT kafgres_alter_mapping('pm', value_expr => $$ (new.b * 10)::text $$,
	                                                 key_expr => $$ coalesce(new.id, old.id)::text $$)`)
	pid := c.KillBroker(t)
	mustExec(t, conn, `INSERT INTO p VALUES (4, 4)`)
	c.WaitBroker(t, pid, 60*time.Second)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "paused", 5), "1 -> 10", "2 -> 20", "1 -> 30", "2 -> <null>", "4 -> 40")
	mappingStatus(t, conn, "pm", "active")
	held(0, 0)
	harness.Eventually(t, 20*time.Second, func() error {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM kafgres.mapping_pause`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			return fmt.Errorf("%d pauses left", n)
		}
		return nil
	})

	// adding a column breaks nothing; a used column's new type pauses
	mustExec(t, conn, `ALTER TABLE p ADD COLUMN note text`, `INSERT INTO p VALUES (5, 5)`)
	waitDelivered(t, conn)
	readTopic(t, c.Addr, "paused", 6)
	mappingStatus(t, conn, "pm", "active")
	mustExec(t, conn, `ALTER TABLE p ALTER COLUMN b TYPE bigint`, `INSERT INTO p VALUES (6, 6)`)
	lastErr, _, _ = mappingStatus(t, conn, "pm", "paused")
	if !strings.Contains(lastErr, "column b changed type from integer to bigint") {
		t.Fatalf("last_error %q", lastErr)
	}
	held(1, 0)
	// the same expressions, written again: the owner says they fit
	mustExec(t, conn, `SELECT kafgres_alter_mapping('pm', value_expr => $$ (new.b * 10)::text $$,
	                                                 key_expr => $$ coalesce(new.id, old.id)::text $$)`,
		`INSERT INTO p VALUES (7, 7)`)
	waitDelivered(t, conn)
	recs := readTopic(t, c.Addr, "paused", 8)
	wantRecs(t, recs[5:], "5 -> 50", "6 -> 60", "7 -> 70")
	mappingStatus(t, conn, "pm", "active")

	// what may not change, and who may not change it
	if pe := pgErr(t, conn, `UPDATE kafgres.mapping SET topic = 'fine' WHERE name = 'pm'`); pe.Code != "55000" {
		t.Fatalf("changing the topic: %s %s", pe.Code, pe.Message)
	}
	if pe := pgErr(t, conn, `SELECT kafgres_alter_mapping('nope')`); pe.Code != "42704" {
		t.Fatalf("altering no mapping: %s %s", pe.Code, pe.Message)
	}
	if pe := pgErr(t, conn, `SELECT kafgres_alter_mapping('pm', value_expr => $$ new.nope $$)`); pe.Code != "42703" {
		t.Fatalf("altering to a column that does not exist: %s %s", pe.Code, pe.Message)
	}
	mappingAuthor(t, conn, "mallory")
	mustExec(t, conn, `GRANT EXECUTE ON FUNCTION kafgres_alter_mapping(text, text, text, text, text) TO mallory`)
	mallory := connAs(t, c, "mallory")
	if pe := pgErr(t, mallory, `SELECT kafgres_alter_mapping('pm')`); pe.Code != "42501" {
		t.Fatalf("altering another role's mapping: %s %s", pe.Code, pe.Message)
	}
}
