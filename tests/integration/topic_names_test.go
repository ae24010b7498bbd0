package integration

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafgres/kafgres/broker/topicname"
	"github.com/kafgres/kafgres/tests/harness"
)

// TestTopicNameRulesAgree: Kafka's topic name rule is written twice — in
// Go (broker/topicname: CreateTopics, Metadata, auto-creation) and in C
// (outputplugin/topicname.c: kafgres_produce, and SQL through
// kafgres.topic_name_problem, which kafgres_create_topic and
// kafgres_add_mapping ask). One table of names, every verdict the same:
// the SQL function's, and those of the functions that use the rule. The
// internal topics' names agree too.
func TestTopicNameRulesAgree(t *testing.T) {
	c := harness.Start(t)
	c.Exec(t, `CREATE TABLE names_src (id int PRIMARY KEY)`)
	conn := c.Conn(t)
	ctx := context.Background()

	names := []string{
		"orders", "a", "A.b_c-D9", "...", "-", "_", ".hidden", "a..b",
		strings.Repeat("x", topicname.MaxLength), strings.Repeat("x", topicname.MaxLength+1),
		"", ".", "..", "a b", "a/b", "a:b", "a*", "ä", "é.b", "tab\tname", "new\nline",
		strings.Repeat("é", 125), // 250 bytes, 125 characters
	}
	// verdict runs sql in a transaction that is rolled back, so nothing it
	// creates stays: true when the name was accepted, false when it was
	// refused as a topic name; any other failure fails the test.
	verdict := func(sql, name string) bool {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, sql, name)
		if err == nil {
			return true
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "22023" && strings.HasPrefix(pgErr.Message, "invalid topic name") {
			return false
		}
		t.Fatalf("%s with %q: %v", sql, name, err)
		return false
	}
	for _, name := range names {
		want := topicname.Valid(name)
		var problem *string
		if err := conn.QueryRow(ctx, `SELECT kafgres.topic_name_problem($1)`, name).Scan(&problem); err != nil {
			t.Fatalf("kafgres.topic_name_problem(%q): %v", name, err)
		}
		if got := problem == nil; got != want {
			t.Errorf("SQL kafgres.topic_name_problem says %q is valid: %v (%v); Go says %v (%s)", name, got, problem, want, topicname.Problem(name))
		}
		for _, check := range []struct{ who, sql string }{
			{"SQL kafgres_create_topic", `SELECT public.kafgres_create_topic($1, 1)`},
			{"SQL kafgres_add_mapping", `SELECT public.kafgres_add_mapping('names_m', 'names_src', $1)`},
			{"C kafgres_produce", `SELECT public.kafgres_produce($1, 'k', 'v')`},
		} {
			if got := verdict(check.sql, name); got != want {
				t.Errorf("%s says %q is valid: %v; Go says %v (%s)", check.who, name, got, want, topicname.Problem(name))
			}
		}
	}

	// Kafka's internal topics, named the same in C and Go; kafgres_produce
	// refuses them.
	for _, name := range []string{"__consumer_offsets", "__transaction_state", "__share_group_state", "__consumer_offsets_", "_transaction_state", "orders"} {
		var internal bool
		if err := conn.QueryRow(ctx, `SELECT kafgres.topic_is_internal($1)`, name).Scan(&internal); err != nil {
			t.Fatal(err)
		}
		if internal != topicname.Internal(name) {
			t.Errorf("kafgres.topic_is_internal(%q) = %v; Go says %v", name, internal, topicname.Internal(name))
		}
		if !internal {
			continue
		}
		_, err := conn.Exec(ctx, `SELECT public.kafgres_produce($1, 'k', 'v')`, name)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.HasPrefix(pgErr.Message, "cannot produce to internal topic") {
			t.Errorf("kafgres_produce to %s: %v; want refused as an internal topic", name, err)
		}
	}
}
