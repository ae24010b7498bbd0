package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestSQLProduceSeesCatalogChanges: kafgres_produce keeps where
// kafgres.topic is (its OID, index and columns) from one call to the next in
// a session; a change to the table or its schema made by another session
// must be seen at the next call, not the stale layout used.
func TestSQLProduceSeesCatalogChanges(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "layout", 1)
	producer := c.Conn(t)
	admin := c.Conn(t)
	ctx := context.Background()
	produce := func() error {
		_, err := producer.Exec(ctx, `SELECT kafgres_produce('layout', 'k', 'v')`)
		return err
	}
	ddl := func(sql string) {
		t.Helper()
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := produce(); err != nil {
		t.Fatal(err)
	}

	for _, change := range []struct{ do, undo, want string }{
		{`ALTER TABLE kafgres.topic RENAME COLUMN partitions TO parts`,
			`ALTER TABLE kafgres.topic RENAME COLUMN parts TO partitions`,
			`table kafgres.topic lacks column "name" or "partitions"`},
		{`ALTER SCHEMA kafgres RENAME TO kafgres_renamed`,
			`ALTER SCHEMA kafgres_renamed RENAME TO kafgres`,
			`table kafgres.topic does not exist`},
		{`ALTER TABLE kafgres.topic RENAME TO topic_renamed`,
			`ALTER TABLE kafgres.topic_renamed RENAME TO topic`,
			`table kafgres.topic does not exist`},
	} {
		ddl(change.do)
		err := produce()
		ddl(change.undo)
		if err == nil || !strings.Contains(err.Error(), change.want) {
			t.Errorf("after %s: kafgres_produce gave %v, want an error saying %q", change.do, err, change.want)
		}
		if err := produce(); err != nil {
			t.Errorf("after %s: %v", change.undo, err)
		}
	}

	waitDelivered(t, producer)
	if got := len(readTopic(t, c.Addr, "layout", 4)); got != 4 {
		t.Fatalf("%d records, want 4", got)
	}
}
