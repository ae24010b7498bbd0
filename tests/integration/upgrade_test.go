package integration

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestExtensionUpdate: ALTER EXTENSION kafgres UPDATE from 0.1.0 yields the
// objects, columns, privileges and function settings (SECURITY DEFINER,
// the pinned search_path, which a CREATE OR REPLACE without its SET clause
// would drop) a fresh CREATE EXTENSION gives (which guards the day a
// version gets its own install script again).
func TestExtensionUpdate(t *testing.T) {
	c := harness.Start(t)
	ctx := ctxT(t)
	c.Exec(t, `CREATE DATABASE updated`)
	cfg, err := pgx.ParseConfig(c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "updated"
	up, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close(ctx)
	for _, sql := range []string{`CREATE EXTENSION kafgres VERSION '0.1.0'`, `ALTER EXTENSION kafgres UPDATE`} {
		if _, err := up.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// what an installation consists of, as comparable text
	const shape = `
SELECT pg_describe_object(classid, objid, 0) FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'kafgres') AND deptype = 'e'
UNION ALL
SELECT format('%s.%s %s %s %s', table_name, column_name, data_type, is_nullable, column_default)
  FROM information_schema.columns WHERE table_schema = 'kafgres'
UNION ALL
SELECT format('%s %s', c.relname, c.relacl) FROM pg_class c
 WHERE c.relnamespace = 'kafgres'::regnamespace
UNION ALL
SELECT format('%s %s %s %s', p.oid::regprocedure, p.proacl, p.prosecdef, p.proconfig) FROM pg_proc p
 WHERE p.proname LIKE 'kafgres%' OR p.pronamespace = 'kafgres'::regnamespace
UNION ALL
SELECT format('config %s %s', c.relname, x.cond)
  FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS x(cfg, cond), pg_class c
 WHERE e.extname = 'kafgres' AND c.oid = x.cfg
UNION ALL
SELECT format('version %s', extversion) FROM pg_extension WHERE extname = 'kafgres'`
	read := func(conn *pgx.Conn) []string {
		t.Helper()
		rows, err := conn.Query(ctx, shape)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	fresh, updated := read(c.Conn(t)), read(up)
	for _, s := range fresh {
		if !slices.Contains(updated, s) {
			t.Errorf("fresh install has, updated one lacks: %s", s)
		}
	}
	for _, s := range updated {
		if !slices.Contains(fresh, s) {
			t.Errorf("updated install has, fresh one lacks: %s", s)
		}
	}
}
