package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestPipelineDeadLettersWhatCannotBeAppended: committed records that
// cannot be appended — their topic was dropped before the broker got to
// them, their partition no longer exists, or the message does not parse —
// are kept in kafgres.dead_letter with the reason and counted in
// kafgres.pipeline, and the records committed with them are delivered.
func TestPipelineDeadLettersWhatCannotBeAppended(t *testing.T) {
	c := harness.Start(t, "kafgres.auto_create_topics = off")
	c.CreateTopic(t, "kept", 1)
	c.CreateTopic(t, "doomed", 1)
	c.CreateTopic(t, "shrunk", 4)
	conn := c.Conn(t)
	ctx := context.Background()

	// The topic goes in the same transaction as the record, and a topic
	// of the same name comes back with fewer partitions: both are gone
	// when the broker decodes the records.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT kafgres_produce('kept', 'k', 'before')`,
		`SELECT kafgres_produce('doomed', 'k', 'orphan')`,
		`SELECT kafgres_produce('shrunk', 'k', 'far', partition => 3)`,
		`SELECT kafgres_drop_topic('doomed')`,
		`SELECT kafgres_drop_topic('shrunk')`,
		`SELECT kafgres_create_topic('shrunk', 2)`,
		`SELECT kafgres_produce('kept', 'k', 'after')`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// A message the plugin accepts (signed with the cluster's key, as only
	// kafgres can) whose content does not parse.
	key := readMessageKey(t, c)
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var xid int64
	var db uint32
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint, (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&xid, &db); err != nil {
		t.Fatal(err)
	}
	payload := []byte{9, 'b', 'a', 'd'}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("kafgres signed message v3"))
	mac.Write(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(xid)), db))
	mac.Write(payload)
	envelope := append(append([]byte{3}, mac.Sum(nil)...), payload...)
	if _, err := tx.Exec(ctx, `SELECT pg_logical_emit_message(true, 'kafgres', $1::bytea)`, envelope); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT kafgres_produce('kept', 'k', 'last')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, conn)

	if got := values(readTopic(t, c.Addr, "kept", 3)); got != "before,after,last" {
		t.Fatalf("kept: %s, want before,after,last", got)
	}
	rows, err := conn.Query(ctx, `SELECT error, new_row::text FROM kafgres.dead_letter WHERE mapping_id IS NULL ORDER BY lsn`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var e, row string
		if err := rows.Scan(&e, &row); err != nil {
			t.Fatal(err)
		}
		got = append(got, e+" | "+row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wants := []string{`topic "doomed" does not exist`, `partition 3 of topic "shrunk" does not exist (it has 2)`, `unknown format 9`}
	if len(got) != len(wants) {
		t.Fatalf("dead letters:\n%s\nwant %d", strings.Join(got, "\n"), len(wants))
	}
	for i, w := range wants {
		if !strings.Contains(got[i], w) {
			t.Errorf("dead letter %d: %s, want %q", i, got[i], w)
		}
	}
	if !strings.Contains(got[0], `"value": "b3JwaGFu"`) || !strings.Contains(got[2], `"content": "CWJhZA=="`) {
		t.Errorf("dead letters do not keep the record / the content:\n%s", strings.Join(got, "\n"))
	}
	var counted int64
	if err := conn.QueryRow(ctx, `SELECT dead_lettered FROM kafgres.pipeline`).Scan(&counted); err != nil || counted != 3 {
		t.Fatalf("kafgres.pipeline counts %d dead letters (%v), want 3", counted, err)
	}
}

// readMessageKey reads the cluster's message key (kafgres_message_key in
// the data directory) as a superuser may.
func readMessageKey(t *testing.T, c *harness.Cluster) []byte {
	t.Helper()
	var key []byte
	if err := c.Conn(t).QueryRow(context.Background(), `SELECT pg_read_binary_file('kafgres_message_key')`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	return key
}
