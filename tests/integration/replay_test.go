package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestMappingFailureNamesExpression: a change that fails says which
// expression failed and the row's key, in the mapping's last_error and in
// its dead letter; kafgres_replay_dead_letters then delivers the fixed
// ones in their order, exactly once, after a kill of the broker too, and
// leaves the one that still fails where it was, with its reason.
func TestMappingFailureNamesExpression(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE m (id int PRIMARY KEY, a int, b int)`,
		// the value goes through a function the test fixes later
		`CREATE FUNCTION ratio(a int, b int) RETURNS text LANGUAGE sql AS $$ SELECT (a / b)::text $$`,
		`SELECT kafgres_create_topic('ratios', 1)`,
		`SELECT kafgres_add_mapping('ratios', 'm', 'ratios',
		   value_expr => $$ ratio(new.a, new.b) $$, key_expr => $$ new.id::text $$,
		   filter_expr => $$ new.a <> -1 OR new.a / (new.a + 1) = 0 $$)`,
		`INSERT INTO m VALUES (1, 6, 3)`,
		`INSERT INTO m VALUES (2, 1, 0)`,  // the value fails
		`INSERT INTO m VALUES (3, -1, 5)`, // the filter fails
		`INSERT INTO m VALUES (4, 9, 3)`,
		`INSERT INTO m VALUES (5, 4, 0)`) // the value fails, last
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "ratios", 2), "1 -> 2", "4 -> 3")

	lastErr, _, _ := mappingStatus(t, conn, "ratios", "error")
	for _, want := range []string{"value_expr failed for change I at ", "key (id)=(5)", ": division by zero"} {
		if !strings.Contains(lastErr, want) {
			t.Fatalf("last_error %q lacks %q", lastErr, want)
		}
	}
	wantDead := func(want string) {
		t.Helper()
		harness.Eventually(t, 20*time.Second, func() error {
			var got string
			if err := conn.QueryRow(context.Background(),
				`SELECT coalesce(string_agg(new_row->>'id' || ' ' || coalesce(expression, '-') || ' ' || error, ', ' ORDER BY id), '')
				   FROM kafgres.dead_letter WHERE mapping_name = 'ratios'`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				var dbg string
				conn.QueryRow(context.Background(), `SELECT string_agg(id || ' ' || coalesce(replay_xid::text, 'x') || ' ' || coalesce(replayed_lsn::text, 'y') || ' ' || (select applied_lsn::text from kafgres.delivery), ', ') FROM kafgres.dead_letter`).Scan(&dbg)
				return fmt.Errorf("dead letters %q, want %q (%s)", got, want, dbg)
			}
			return nil
		})
	}
	wantDead("2 value_expr division by zero, 3 filter_expr division by zero, 5 value_expr division by zero")

	// only the mapping's owner may replay
	mappingAuthor(t, conn, "eve")
	mustExec(t, conn, `GRANT EXECUTE ON FUNCTION kafgres_replay_dead_letters(text, int) TO eve`,
		`GRANT UPDATE (replay_xid) ON kafgres.dead_letter TO eve`)
	eve := connAs(t, c, "eve")
	if pe := pgErr(t, eve, `SELECT kafgres_replay_dead_letters('ratios')`); pe.Code != "42501" {
		t.Fatalf("replay by another role: %s %s", pe.Code, pe.Message)
	}
	if pe := pgErr(t, conn, `SELECT kafgres_replay_dead_letters('nope')`); pe.Code != "42704" {
		t.Fatalf("replay of no mapping: %s %s", pe.Code, pe.Message)
	}
	// a replay rolled back asks for nothing
	mustExec(t, conn, `BEGIN`, `SELECT kafgres_replay_dead_letters('ratios')`, `ROLLBACK`)

	// fixed: the value no longer fails; the filter still does. The broker
	// is killed as the replay commits: the replayed records come once.
	mustExec(t, conn, `CREATE OR REPLACE FUNCTION ratio(a int, b int) RETURNS text LANGUAGE sql
	                   AS $$ SELECT CASE WHEN b = 0 THEN 'inf' ELSE (a / b)::text END $$`)
	var asked int64
	if err := conn.QueryRow(context.Background(), `SELECT kafgres_replay_dead_letters('ratios')`).Scan(&asked); err != nil || asked != 3 {
		t.Fatalf("replay asked for %d: %v", asked, err)
	}
	pid := c.KillBroker(t)
	c.WaitBroker(t, pid, 60*time.Second)
	mustExec(t, conn, `INSERT INTO m VALUES (6, 8, 4)`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "ratios", 5), "1 -> 2", "4 -> 3", "2 -> inf", "5 -> inf", "6 -> 2")
	mappingStatus(t, conn, "ratios", "active")
	// the delivered ones leave once delivery has passed their replay; the
	// one that failed again stays, as it was
	wantDead("3 filter_expr division by zero")

	// asking again renders it again, and it fails again: nothing new
	if err := conn.QueryRow(context.Background(), `SELECT kafgres_replay_dead_letters('ratios')`).Scan(&asked); err != nil || asked != 1 {
		t.Fatalf("second replay asked for %d: %v", asked, err)
	}
	waitDelivered(t, conn)
	wantDead("3 filter_expr division by zero")
	readTopic(t, c.Addr, "ratios", 5)
	lastErr, _, _ = mappingStatus(t, conn, "ratios", "error")
	for _, want := range []string{"filter_expr failed for replayed change I at ", "key (id)=(3)"} {
		if !strings.Contains(lastErr, want) {
			t.Fatalf("last_error %q lacks %q", lastErr, want)
		}
	}
}

// TestMappingRecordTooLarge: a rendered record larger than its topic's
// max.message.bytes is refused where it is rendered, in Postgres, and
// dead-lettered under its mapping with the reason; the records after it
// flow.
func TestMappingRecordTooLarge(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE big (id int PRIMARY KEY, n int)`,
		`SELECT kafgres_create_topic('big', 1)`,
		`SELECT kafgres_add_mapping('big', 'big', 'big', key_expr => $$ new.id::text $$,
		   value_expr => $$ repeat('x', new.n) $$)`,
		`INSERT INTO big VALUES (1, 10)`,
		`INSERT INTO big VALUES (2, 3000000)`, // three times the default max.message.bytes
		`INSERT INTO big VALUES (3, 20)`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "big", 2), "1 -> "+strings.Repeat("x", 10), "3 -> "+strings.Repeat("x", 20))
	var id, reason string
	if err := conn.QueryRow(context.Background(),
		`SELECT new_row->>'id', error FROM kafgres.dead_letter WHERE mapping_name = 'big'`).Scan(&id, &reason); err != nil {
		t.Fatal(err)
	}
	if id != "2" || !strings.Contains(reason, `record of 3000001 bytes (key and value) is larger than max.message.bytes 1048588 of topic "big"`) {
		t.Fatalf("dead letter of %s: %q", id, reason)
	}
}
