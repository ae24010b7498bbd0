package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/tests/harness"
)

// Issue #10, findings 1, 2 and 4: what a CDC mapping's author can reach
// through the broker and the mapping functions. Every test uses real login
// roles and reads the topics with a real Kafka consumer.

// evilSchema gives alice a schema of her own holding the tools of an
// author who wants more than her mapping: an operator for bigint "=" and
// "+" and a to_jsonb that try to make her a superuser when someone more
// privileged runs them, a function that does the same as whoever calls it,
// and one that leaves a prepared statement behind in the session.
const evilSchema = `
CREATE FUNCTION evil.climb() RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
    BEGIN
        EXECUTE 'ALTER ROLE alice SUPERUSER';
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
    RETURN 'k';
END $f$;
CREATE FUNCTION evil.eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM evil.climb();
    RETURN $1 OPERATOR(pg_catalog.=) $2;
END $f$;
CREATE FUNCTION evil.plus(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM evil.climb();
    RETURN $1 OPERATOR(pg_catalog.+) $2;
END $f$;
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.eq);
CREATE OPERATOR evil.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.plus);
CREATE FUNCTION evil.to_jsonb(anyelement) RETURNS jsonb LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM evil.climb();
    RETURN pg_catalog.to_jsonb($1);
END $f$;
CREATE FUNCTION evil.prep() RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_prepared_statements AS s WHERE s.name OPERATOR(pg_catalog.=) 'kafgres_evil') THEN
        EXECUTE 'PREPARE kafgres_evil AS SELECT 1';
    END IF;
    RETURN 'p';
END $f$;`

// leakProbe is what a later render, or the caller of a preview, sees of
// the settings and prepared statements a mapping left behind: "unset
// unset 0" when nothing survived.
const leakProbe = `coalesce(nullif(current_setting('kafgres_test.session', true), ''), 'unset') || ' ' ||
	coalesce(nullif(current_setting('kafgres_test.local', true), ''), 'unset') || ' ' ||
	(SELECT count(*) FROM pg_prepared_statements WHERE name = 'kafgres_evil')::text`

// leakExpr sets both kinds of setting and leaves a prepared statement.
const leakExpr = `set_config('search_path', 'evil, pg_catalog', false)
	|| set_config('kafgres_test.session', 'leaked', false)
	|| set_config('kafgres_test.local', 'leaked', true)
	|| evil.prep()`

func isSuperuser(t *testing.T, conn *pgx.Conn, role string) bool {
	t.Helper()
	var super bool
	if err := conn.QueryRow(context.Background(), `SELECT rolsuper FROM pg_roles WHERE rolname = $1`, role).Scan(&super); err != nil {
		t.Fatal(err)
	}
	return super
}

func evilAuthor(t *testing.T, conn *pgx.Conn, c *harness.Cluster) *pgx.Conn {
	t.Helper()
	mappingAuthor(t, conn, "alice")
	mustExec(t, conn, `CREATE SCHEMA evil AUTHORIZATION alice`)
	alice := connAs(t, c, "alice")
	mustExec(t, alice, evilSchema)
	return alice
}

// TestSecurityMappingsRenderIsolation: nothing a mapping's expressions do
// to the session survives its render, neither settings (set_config with
// is_local false or true, search_path included) nor prepared statements,
// so neither the next mapping nor the broker's own statements run with
// state its author chose; alice's "=" and "+" never run as the broker.
func TestSecurityMappingsRenderIsolation(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	alice := evilAuthor(t, conn, c)
	mustExec(t, conn,
		`CREATE TABLE t (id int PRIMARY KEY)`,
		`GRANT SELECT ON t TO alice`,
		`SELECT kafgres_create_topic('leak', 1)`,
		`SELECT kafgres_create_topic('probe', 1)`)
	mustExec(t, alice, `SELECT kafgres_add_mapping('a-leak', 't', 'leak', value_expr => $$ `+leakExpr+` $$)`)
	// made after a-leak, so rendered after it in every group
	mustExec(t, conn, `SELECT kafgres_add_mapping('b-probe', 't', 'probe', value_expr => $$ `+leakProbe+` $$)`)

	for i := 1; i <= 3; i++ {
		mustExec(t, conn, `INSERT INTO t VALUES (`+string(rune('0'+i))+`)`)
		waitDelivered(t, conn)
	}
	wantRecs(t, readTopic(t, c.Addr, "probe", 3), "<null> -> unset unset 0", "<null> -> unset unset 0", "<null> -> unset unset 0")
	wantRecs(t, readTopic(t, c.Addr, "leak", 3), "<null> -> evil, pg_catalogleakedleakedp", "<null> -> evil, pg_catalogleakedleakedp", "<null> -> evil, pg_catalogleakedleakedp")
	// the batched writer writes the status and counters (with "=" and
	// "+") after the renders, at most once a second: once they count all
	// three, the broker's statements ran with whatever the renders left
	harness.Eventually(t, 20*time.Second, func() error {
		for _, m := range []string{"a-leak", "b-probe"} {
			if _, rendered, _ := mappingStatus(t, conn, m, "active"); rendered < 3 {
				return fmt.Errorf("%s rendered %d, want 3", m, rendered)
			}
		}
		return nil
	})
	if isSuperuser(t, conn, "alice") {
		t.Fatal("alice became a superuser through the broker's statements")
	}
}

// TestSecurityMappingsPreview: kafgres_preview_mapping runs a mapping's
// expressions as the mapping's owner, whoever calls it, with nothing
// resolved through the caller's or the author's search_path that the
// author did not write herself, and nothing left in the caller's session;
// only members of the owner role (and superusers) may call it.
func TestSecurityMappingsPreview(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	alice := evilAuthor(t, conn, c)
	mappingAuthor(t, conn, "bob")
	mustExec(t, conn,
		`CREATE TABLE t (id int PRIMARY KEY)`,
		`INSERT INTO t VALUES (1), (2)`,
		`GRANT SELECT ON t TO alice, bob`,
		`SELECT kafgres_create_topic('t', 1)`)
	// the default value expression, to_jsonb(new), in a search_path that
	// finds evil.to_jsonb first
	mustExec(t, alice, `SET search_path = evil, public, pg_catalog`,
		`SELECT public.kafgres_add_mapping('evil', 'public.t', 't', key_expr => $$ evil.climb() || `+leakExpr+` $$)`,
		`RESET search_path`)

	preview := func(conn *pgx.Conn) []string {
		t.Helper()
		rows, err := conn.Query(context.Background(), `SELECT key, value FROM kafgres_preview_mapping('evil') ORDER BY value`)
		if err != nil {
			t.Fatalf("preview: %v", err)
		}
		var out []string
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, k+" -> "+v)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("preview: %v", err)
		}
		return out
	}
	want := []string{
		`kevil, pg_catalogleakedleakedp -> {"id": 1}`,
		`kevil, pg_catalogleakedleakedp -> {"id": 2}`,
	}

	// a superuser previews alice's mapping, in a transaction of its own
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := preview(tx.Conn()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("superuser's preview:\n%s", strings.Join(got, "\n"))
	}
	var during string
	if err := tx.QueryRow(ctx, `SELECT `+leakProbe+` || ' ' || current_setting('search_path')`).Scan(&during); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var after string
	if err := conn.QueryRow(ctx, `SELECT `+leakProbe+` || ' ' || current_setting('search_path')`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if during != `unset unset 0 "$user", public` || after != `unset unset 0 "$user", public` {
		t.Fatalf("the preview left state in the caller's session: %q in its transaction, %q after", during, after)
	}
	if isSuperuser(t, conn, "alice") {
		t.Fatal("alice became a superuser when a superuser previewed her mapping")
	}

	// alice herself may preview it; bob, who may read the table but is
	// not a member of alice, may not
	if got := preview(alice); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("alice's preview:\n%s", strings.Join(got, "\n"))
	}
	bob := connAs(t, c, "bob")
	if pe := pgErr(t, bob, `SELECT * FROM kafgres_preview_mapping('evil')`); pe.Code != "42501" || pe.Message != `must be owner of mapping "evil"` {
		t.Fatalf("bob previews alice's mapping: %s %q", pe.Code, pe.Message)
	}
	// a member of alice previews it as alice, not as himself
	mustExec(t, conn, `GRANT alice TO bob`, `REVOKE SELECT ON t FROM bob`)
	if got := preview(bob); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("bob's preview as a member of alice:\n%s", strings.Join(got, "\n"))
	}
	if isSuperuser(t, conn, "alice") {
		t.Fatal("alice became a superuser")
	}
}

// TestSecurityMappingsTablePrivileges: a mapping publishes every change of
// its table, so its owner must be able to read all of it: SELECT on every
// column, and row-level security bypassed (changes come from the WAL,
// which row security does not filter). Checked when the mapping is made,
// and again by the broker as it renders: a mapping whose owner lost the
// privilege is paused, its changes dead-lettered where only those who may
// read the table see them, and resumes when the privilege is back.
func TestSecurityMappingsTablePrivileges(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mappingAuthor(t, conn, "alice")
	mustExec(t, conn,
		`CREATE TABLE secret (id int PRIMARY KEY, note text)`,
		`SELECT kafgres_create_topic('stolen', 1)`,
		`SELECT kafgres_create_topic('other', 1)`)
	alice := connAs(t, c, "alice")

	add := `SELECT kafgres_add_mapping('steal', 'secret', 'stolen', key_expr => $$ new.id::text $$)`
	pe := pgErr(t, alice, add)
	if pe.Code != "42501" || pe.Message != "permission denied to map table public.secret" ||
		pe.Detail != `Role "alice" may not SELECT columns id, note of table public.secret.` {
		t.Fatalf("alice maps a table she may not read: %s %q %q", pe.Code, pe.Message, pe.Detail)
	}
	pe = pgErr(t, alice, `INSERT INTO kafgres.mapping (name, source_relid, topic, owner_role, search_path)
	                      VALUES ('steal', 'secret'::regclass, 'stolen', 0, 'public')`)
	if pe.Code != "42501" || pe.Message != "permission denied to map table public.secret" {
		t.Fatalf("alice inserts a mapping of a table she may not read: %s %q", pe.Code, pe.Message)
	}
	mustExec(t, conn, `GRANT SELECT (id) ON secret TO alice`)
	pe = pgErr(t, alice, add)
	if pe.Code != "42501" || pe.Detail != `Role "alice" may not SELECT column note of table public.secret.` {
		t.Fatalf("alice maps a table of which she may read one column: %s %q %q", pe.Code, pe.Message, pe.Detail)
	}
	mustExec(t, conn, `GRANT SELECT (note) ON secret TO alice`) // every column: enough
	mustExec(t, alice, add)
	mustExec(t, conn, `INSERT INTO secret VALUES (1, 'one')`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "stolen", 1), `1 -> {"id": 1, "note": "one"}`)

	// revoked while the broker runs (REVOKE sends no notification)
	mustExec(t, conn, `REVOKE SELECT ON secret FROM alice`,
		`INSERT INTO secret VALUES (2, 'two')`,
		`SELECT kafgres_produce('other', 'k', 'unrelated')`)
	waitDelivered(t, conn)
	lastErr, _, _ := mappingStatus(t, conn, "steal", "paused")
	wantErr := `paused: role "alice" may not SELECT columns id, note of table public.secret`
	if lastErr != wantErr {
		t.Fatalf("last_error %q, want %q", lastErr, wantErr)
	}
	readTopic(t, c.Addr, "stolen", 1) // and nothing more
	wantRecs(t, readTopic(t, c.Addr, "other", 1), "k -> unrelated")
	var msg, newRow string
	if err := conn.QueryRow(context.Background(),
		`SELECT error, new_row::text FROM kafgres.dead_letter WHERE mapping_name = 'steal'`).Scan(&msg, &newRow); err != nil {
		t.Fatalf("dead letter of the paused mapping: %v", err)
	}
	if msg != wantErr || newRow != `{"id": "2", "note": "two"}` {
		t.Fatalf("dead letter: %q %s", msg, newRow)
	}
	countDead := func() int {
		var n int
		if err := alice.QueryRow(context.Background(), `SELECT count(*) FROM kafgres.dead_letter`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := countDead(); n != 0 {
		t.Fatalf("alice sees %d dead letters of a table she may no longer read", n)
	}

	// granted back: the mapping resumes, and alice may see what it missed
	mustExec(t, conn, `GRANT SELECT ON secret TO alice`, `INSERT INTO secret VALUES (3, 'three')`)
	waitDelivered(t, conn)
	mappingStatus(t, conn, "steal", "active")
	wantRecs(t, readTopic(t, c.Addr, "stolen", 2), `1 -> {"id": 1, "note": "one"}`, `3 -> {"id": 3, "note": "three"}`)
	if n := countDead(); n != 1 {
		t.Fatalf("alice sees %d dead letters, want 1", n)
	}

	// row-level security: the WAL is not filtered by it, so only a role
	// that bypasses it may map the table
	mustExec(t, conn,
		`CREATE TABLE guarded (id int PRIMARY KEY)`,
		`ALTER TABLE guarded ENABLE ROW LEVEL SECURITY`,
		`GRANT SELECT ON guarded TO alice`,
		`CREATE SCHEMA own AUTHORIZATION alice`,
		`SELECT kafgres_create_topic('guarded', 1)`)
	pe = pgErr(t, alice, `SELECT kafgres_add_mapping('guarded', 'guarded', 'guarded')`)
	if pe.Code != "42501" || pe.Message != "permission denied to map table public.guarded" ||
		!strings.Contains(pe.Detail, "row-level security") {
		t.Fatalf("alice maps a table with row security: %s %q %q", pe.Code, pe.Message, pe.Detail)
	}
	// her own table with row security is hers to map, until she forces
	// row security on herself
	mustExec(t, alice,
		`CREATE TABLE own.mine (id int PRIMARY KEY)`,
		`ALTER TABLE own.mine ENABLE ROW LEVEL SECURITY`,
		`SELECT kafgres_add_mapping('mine', 'own.mine', 'guarded', key_expr => $$ new.id::text $$)`,
		`INSERT INTO own.mine VALUES (1)`)
	waitDelivered(t, conn)
	wantRecs(t, readTopic(t, c.Addr, "guarded", 1), `1 -> {"id": 1}`)
	mustExec(t, alice, `ALTER TABLE own.mine FORCE ROW LEVEL SECURITY`)
	mustExec(t, conn, `INSERT INTO own.mine VALUES (2)`)
	waitDelivered(t, conn)
	lastErr, _, _ = mappingStatus(t, conn, "mine", "paused")
	if !strings.Contains(lastErr, "row-level security") {
		t.Fatalf("last_error %q", lastErr)
	}
	readTopic(t, c.Addr, "guarded", 1)
	// a role with BYPASSRLS may map either
	mustExec(t, conn, `ALTER ROLE alice BYPASSRLS`)
	mustExec(t, alice, `SELECT kafgres_add_mapping('guarded', 'guarded', 'guarded')`)
}

// TestSecurityMappingsRenderTimeout: a mapping that takes longer than
// kafgres.mapping_render_timeout to render a change does not hold up
// anyone else: the change is dead-lettered with the reason and the next
// transaction flows, even if the expression tries to lift the limit.
func TestSecurityMappingsRenderTimeout(t *testing.T) {
	c := harness.Start(t, "kafgres.mapping_render_timeout = '1s'")
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE slow (id int PRIMARY KEY, delay float8)`,
		`SELECT kafgres_create_topic('slow', 1)`,
		`SELECT kafgres_create_topic('fast', 1)`,
		`SELECT kafgres_add_mapping('slow', 'slow', 'slow',
		   value_expr => $$ (SELECT new.id::text FROM pg_sleep(new.delay)) $$,
		   filter_expr => $$ set_config('statement_timeout', '0', true) IS NOT NULL $$)`)

	mustExec(t, conn,
		`INSERT INTO slow VALUES (1, 0)`,
		`INSERT INTO slow VALUES (2, 8)`,
		`SELECT kafgres_produce('fast', 'k', 'after the slow change')`)
	start := time.Now()
	waitDelivered(t, conn)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a slow mapping held up delivery for %s", d)
	}
	wantRecs(t, readTopic(t, c.Addr, "fast", 1), "k -> after the slow change")

	// a slow change among fast ones in one transaction: only it is held back
	mustExec(t, conn, `INSERT INTO slow VALUES (3, 0), (4, 8), (5, 0)`)
	start = time.Now()
	waitDelivered(t, conn)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a slow mapping held up delivery for %s", d)
	}
	wantRecs(t, readTopic(t, c.Addr, "slow", 3), "<null> -> 1", "<null> -> 3", "<null> -> 5")

	rows, err := conn.Query(context.Background(), `SELECT new_row->>'id', error FROM kafgres.dead_letter ORDER BY lsn`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var id, msg string
		if err := rows.Scan(&id, &msg); err != nil {
			t.Fatal(err)
		}
		got = append(got, id+": "+msg)
	}
	want := []string{
		"2: render timed out after 1s (kafgres.mapping_render_timeout)",
		"4: render timed out after 1s (kafgres.mapping_render_timeout)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("dead letters:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var setting string
	if err := conn.QueryRow(context.Background(), `SHOW kafgres.mapping_render_timeout`).Scan(&setting); err != nil || setting != "1s" {
		t.Fatalf("kafgres.mapping_render_timeout: %q %v", setting, err)
	}
}
