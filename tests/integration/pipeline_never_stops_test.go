package integration

import (
	"testing"

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
