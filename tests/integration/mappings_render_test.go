package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestMappingRenderValues: every value reaches the author's expression as
// the table holds it -- quotes, backslashes, commas, parentheses, blanks,
// empty strings and NULLs, arrays, composites, json and jsonb, numerics,
// bytea -- in new and old images of inserts, updates and deletes, and in
// snapshot rows: each record equals what Postgres itself makes of the
// row.
func TestMappingRenderValues(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()
	mustExec(t, conn,
		`CREATE TYPE pair AS (a text, b int)`,
		`CREATE TABLE vals (id int PRIMARY KEY, t text, v varchar(20), n numeric, arr text[], p pair,
		                    js jsonb, j json, d date, b bytea, f float8, nul text, "Odd ""Name"", (x)" text)`,
		`ALTER TABLE vals REPLICA IDENTITY FULL`,
		`SELECT kafgres_create_topic('vals', 1)`,
		`CREATE TABLE want (ord serial, v text)`)
	rows := []string{
		`(1, 'plain', 'v', 1.50, '{a,b}', ROW('x', 1), '{"k": [1, "two"]}', '[1, 2]', '2026-12-01', '\x00ff', 1.5, NULL, 'o')`,
		`(2, 'quote " and \ backslash', 'a,b', -0.000001, '{"with \"quote\"","c,d",NULL}', ROW('(paren, comma)', NULL),
		  '"str"', '{"a" : 1}', '2000-01-01', '', 'NaN', NULL, '  blanks  ')`,
		`(3, '', '', 1e20, '{}', ROW('', 0), 'null', 'null', 'infinity', NULL, '-Infinity', NULL, '')`,
		`(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
		`(5, E'tab\tnew\nline ( ) , " \\ ''', E'\\', 'NaN', '{{1,2},{3,4}}', ROW(E'\\"', -1), '{"nested": {"x": "y\"z"}}', '{}', '1999-12-31', '\x5c22', 0, NULL, '"')`,
	}
	expect := func(op, where, oldWhere string) {
		t.Helper()
		newSQL, oldSQL := "NULL::jsonb", "NULL::jsonb"
		if where != "" {
			newSQL = `(SELECT to_jsonb(vals) FROM vals WHERE ` + where + `)`
		}
		if oldWhere != "" {
			oldSQL = `(SELECT to_jsonb(before) FROM before WHERE ` + oldWhere + `)`
		}
		mustExec(t, conn, `INSERT INTO want (v) SELECT jsonb_build_object('op', '`+op+`', 'new', `+newSQL+`, 'old', `+oldSQL+`)::text`)
	}
	mustExec(t, conn, `SELECT kafgres_add_mapping('vals', 'vals', 'vals',
		value_expr => $$ jsonb_build_object('op', op, 'new', to_jsonb(new), 'old', to_jsonb(old)) $$)`)
	for i, r := range rows {
		mustExec(t, conn, `INSERT INTO vals VALUES `+r)
		expect("I", "id = "+string(rune('1'+i)), "")
	}
	mustExec(t, conn, `CREATE TABLE before AS SELECT * FROM vals`,
		`UPDATE vals SET t = t || ' (updated)', p = ROW('new "p"', 7) WHERE id IN (2, 5)`)
	expect("U", "id = 2", "id = 2")
	expect("U", "id = 5", "id = 5")
	mustExec(t, conn, `DROP TABLE before`, `CREATE TABLE before AS SELECT * FROM vals`, `DELETE FROM vals WHERE id = 3`)
	expect("D", "", "id = 3")
	mustExec(t, conn, `SELECT kafgres_snapshot_mapping('vals')`)
	for _, id := range []string{"1", "2", "4", "5"} {
		expect("R", "id = "+id, "")
	}
	waitDelivered(t, conn)

	var want []string
	r, err := conn.Query(ctx, `SELECT '<null> -> ' || v FROM want ORDER BY ord`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			t.Fatal(err)
		}
		want = append(want, s)
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	got := recs(readTopic(t, c.Addr, "vals", len(want)))
	// changes in commit order; snapshot rows in the order of the table's scan
	n := len(want) - 4
	slices.Sort(got[n:])
	slices.Sort(want[n:])
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mappingStatus(t, conn, "vals", "active")
}

// TestMappingColumnsReplaced: a render function made for the table's
// columns is not used with other columns in the same number and places
// (one dropped, one added) -- values would land in the wrong columns --
// but made again for the new ones, even when the broker was not told of
// the change.
func TestMappingColumnsReplaced(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE swap (id int PRIMARY KEY, a text, b text)`,
		`SELECT kafgres_create_topic('swap', 1)`,
		`SELECT kafgres_add_mapping('swap', 'swap', 'swap')`,
		`INSERT INTO swap VALUES (1, 'ay', 'bee')`)
	waitDelivered(t, conn) // the function exists, made for (id, a, b)
	// the broker reloads the definitions once more when it starts
	// listening for changes to them, which it does at its first render
	mustExec(t, conn, `INSERT INTO swap VALUES (0, 'ay', 'bee')`)
	waitDelivered(t, conn)
	mustExec(t, conn,
		// no event trigger tells the broker (kafgres_mapping_source_altered
		// would, but a notification may also come too late)
		`SET session_replication_role = replica`,
		`ALTER TABLE swap DROP COLUMN a`,
		`ALTER TABLE swap ADD COLUMN c text`,
		`INSERT INTO swap VALUES (2, 'bee', 'sea')`,
		`ALTER TABLE swap ALTER COLUMN c TYPE varchar(10)`,
		`INSERT INTO swap VALUES (3, 'bee', 'sea')`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "swap", 4),
		`<null> -> {"a": "ay", "b": "bee", "id": 1}`,
		`<null> -> {"a": "ay", "b": "bee", "id": 0}`,
		`<null> -> {"b": "bee", "c": "sea", "id": 2}`,
		`<null> -> {"b": "bee", "c": "sea", "id": 3}`)
	mappingStatus(t, conn, "swap", "active")
}

// TestMappingRenderReleasesAdvisoryLocks: a session advisory lock an
// expression takes (a rollback keeps it) is released after each render,
// so a mapping cannot hold locks in the broker's name.
func TestMappingRenderReleasesAdvisoryLocks(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE locks (id int PRIMARY KEY)`,
		`SELECT kafgres_create_topic('locks', 1)`,
		`SELECT kafgres_add_mapping('locks', 'locks', 'locks', value_expr => $$ pg_advisory_lock(4242)::text || 'locked' $$)`,
		`INSERT INTO locks VALUES (1)`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "locks", 1), `<null> -> locked`)
	var free bool
	if err := conn.QueryRow(context.Background(), `SELECT pg_try_advisory_lock(4242)`).Scan(&free); err != nil {
		t.Fatal(err)
	}
	if !free {
		t.Fatal("the render session still holds the advisory lock its mapping took")
	}
}

// TestDirectRenderAgrees: the mappings the broker renders itself
// (mappings/direct.go) make byte for byte the records their render
// functions make. Each mapping has a twin with a filter, which is always
// rendered by its function, and both read the same inserts, updates and
// deletes of values chosen to hit every rule: escapes and control
// characters, non-ASCII text, numeric NaN and infinities, scales, NULLs,
// jsonb in jsonb, duplicate keys, key-only old images.
func TestDirectRenderAgrees(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE direct (id int8 PRIMARY KEY, i2 int2, i4 int4, n numeric, n2 numeric(10,2), t text,
		                      v varchar(20), u uuid, b bool, j jsonb)`)
	forms := []struct{ value, key string }{
		{"", ""},
		{`jsonb_build_object('id', new.id, 'i2', new.i2, 'i4', new.i4, 'n', new.n, 'n2', new.n2, 't', new.t,
		    'v', new.v, 'u', new.u, 'b', new.b, 'j', new.j, 'op', op, 'c', 'const "q"', 'k', 5, 'z', NULL,
		    'idt', new.id::text, 'bt', new.b::text, 'jt', new.j::text, 'old', to_jsonb(old), 'id', new.i4)`, `new.id::text`},
		{`pg_catalog.json_build_object('b', new.b, 'n', new.n, 't', new.t, 'j', new.j, 'b', op,
		    'new', to_jsonb(new), 'old', row_to_json(old), 'x', jsonb_build_object('y', new.u))`, `new.b`},
		{`row_to_json(new)`, `new.u`},
		{`new.t`, `new.n::text`},
		{`to_json(old)`, `old.id`},
		{`new.j`, `new.i2`},
	}
	for i, f := range forms {
		args := ""
		if f.value != "" {
			args += ", value_expr => $$" + f.value + "$$"
		}
		if f.key != "" {
			args += ", key_expr => $$" + f.key + "$$"
		}
		for _, twin := range []struct{ suffix, args string }{{"d", ""}, {"f", ", filter_expr => 'true'"}} {
			name := fmt.Sprintf("direct%d%s", i, twin.suffix)
			mustExec(t, conn, `SELECT kafgres_create_topic('`+name+`', 1)`,
				`SELECT kafgres_add_mapping('`+name+`', 'direct', '`+name+`'`+args+twin.args+`)`)
		}
	}
	mustExec(t, conn,
		`INSERT INTO direct VALUES
		 (1, 1, -2, 1.50, 3.1, 'plain', 'v', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true, '{"a": 1}'),
		 (2, -32768, 2147483647, 'NaN', -0.01, E'quote " back \\ ctl \x01\x1f tab\t nl\n cr\r ff\f bs\b del\x7f', 'a,b',
		  '00000000-0000-0000-0000-000000000000', false, '"str"'),
		 (3, 0, 0, 'Infinity', 0, '', '', NULL, NULL, 'null'),
		 (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
		 (5, 32767, -2147483648, '-Infinity', 99999999.99, 'ü 日本 😀 \u2028', '(x)', NULL, true,
		  '{"x": "y\"z", "arr": [1.0, 2e3, true, null, -0.5], "": {}, "long key": []}'),
		 (9223372036854775807, 7, 7, 123456789012345678901234567890.123456789000, 1e6, '\', '"', NULL, false,
		  '[1, "two", {"3": 4}]')`,
		`UPDATE direct SET t = t || ' (updated)', n = n * 2 WHERE id IN (1, 2, 5)`,
		`UPDATE direct SET id = 6 WHERE id = 4`,
		`DELETE FROM direct WHERE id IN (3, 6)`)
	waitDelivered(t, conn)
	const n = 6 + 3 + 1 + 2
	for i := range forms {
		direct := recs(readTopic(t, c.Addr, fmt.Sprintf("direct%dd", i), n))
		viaFunction := recs(readTopic(t, c.Addr, fmt.Sprintf("direct%df", i), n))
		if strings.Join(direct, "\n") != strings.Join(viaFunction, "\n") {
			t.Errorf("form %d rendered directly:\n%s\nby its function:\n%s", i, strings.Join(direct, "\n"), strings.Join(viaFunction, "\n"))
		}
	}
	// and the twins took the two paths
	log, err := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range forms {
		for suffix, want := range map[string]string{"d": "direct=true", "f": "direct=false"} {
			name := fmt.Sprintf("direct%d%s", i, suffix)
			if !regexp.MustCompile(`render function ready.* mapping=` + name + ` .*` + want).Match(log) {
				t.Errorf("mapping %s: no %q in the broker's log", name, want)
			}
		}
	}
}
