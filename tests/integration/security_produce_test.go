package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/decoder"
	"github.com/kafgres/kafgres/tests/harness"
)

// produceMessage is a well-formed kafgres_produce message of the unsigned
// format 1 (docs/producing.md): what a forger writes by hand.
func produceMessage(topic string, key, value []byte) []byte {
	b := []byte{1}
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // the broker chooses
	for _, v := range [][]byte{key, value} {
		if v == nil {
			b = binary.BigEndian.AppendUint32(b, 0xffffffff)
			continue
		}
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return binary.BigEndian.AppendUint16(b, 0) // no headers
}

// emitAs writes msg with pg_logical_emit_message on conn and returns the
// message's LSN.
func emitAs(t *testing.T, conn *pgx.Conn, transactional bool, msg []byte) string {
	t.Helper()
	var lsn string
	if err := conn.QueryRow(context.Background(),
		`SELECT pg_logical_emit_message($1, 'kafgres', $2::bytea)::text`, transactional, msg).Scan(&lsn); err != nil {
		t.Fatalf("pg_logical_emit_message: %v", err)
	}
	return lsn
}

// rejectedMessages is kafgres_rejected_messages(), the count of messages
// the output plugin dropped because they failed authentication.
func rejectedMessages(t *testing.T, conn *pgx.Conn) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(), `SELECT kafgres_rejected_messages()`).Scan(&n); err != nil {
		t.Fatalf("kafgres_rejected_messages: %v", err)
	}
	return n
}

// consumed reads topic from the start with a real Kafka client until n
// records have arrived, then for one more second to catch any that should
// not exist, and returns them as "key -> value" lines, long values cut
// short (a forged 5 MiB value would otherwise fill the failure message).
func consumed(t *testing.T, addr, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < n && ctx.Err() == nil {
		got = append(got, cl.PollFetches(ctx).Records()...)
	}
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	got = append(got, cl.PollFetches(short).Records()...)
	lines := recs(got)
	for i, l := range lines {
		if len(l) > 60 {
			lines[i] = fmt.Sprintf("%s... (%d bytes)", l[:60], len(l))
		}
	}
	return lines
}

func wantConsumed(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSecurityForgedProduceMessages (issue #10, item 3): a role with only
// LOGIN (and the CONNECT every role has) writes well-formed kafgres
// messages with pg_logical_emit_message, which PUBLIC may call: for an
// existing topic, for a new topic name with auto-creation on, and with a
// 5 MiB value. None reaches a Kafka consumer, no topic is created, and each
// rejection is counted and logged with its position. Direct writes to the
// kafgres tables and the produce functions are refused too. A role granted
// kafgres_produce still produces.
func TestSecurityForgedProduceMessages(t *testing.T) {
	c := harness.Start(t) // kafgres.auto_create_topics is on by default
	conn := c.Conn(t)
	ctx := context.Background()
	c.CreateTopic(t, "existing", 1)
	mustExec(t, conn,
		`CREATE ROLE mallory LOGIN`,
		`CREATE ROLE app LOGIN`,
		`GRANT EXECUTE ON FUNCTION kafgres_produce(text, text, text, jsonb, int) TO app`)
	mallory := connAs(t, c, "mallory")

	signedLooking := append([]byte{3}, bytes.Repeat([]byte{0xab}, 32)...)
	signedLooking = append(signedLooking, produceMessage("existing", nil, []byte("forged-mac"))...)
	forged := map[string][]byte{
		"existing topic":         produceMessage("existing", []byte("k"), []byte("forged")),
		"new topic":              produceMessage("forged-new-topic", nil, []byte("forged")),
		"5 MiB value":            produceMessage("existing", nil, bytes.Repeat([]byte("x"), 5<<20)),
		"made-up authentication": signedLooking,
	}
	var lsns []string
	for what, msg := range forged {
		lsns = append(lsns, emitAs(t, mallory, true, msg))
		t.Logf("forged %s at %s", what, lsns[len(lsns)-1])
	}
	// in a transaction with a savepoint, and non-transactional: no better
	mustExec(t, mallory, `BEGIN`, `SAVEPOINT s`)
	lsns = append(lsns, emitAs(t, mallory, true, produceMessage("existing", nil, []byte("forged-in-savepoint"))))
	mustExec(t, mallory, `RELEASE SAVEPOINT s`, `COMMIT`)
	lsns = append(lsns, emitAs(t, mallory, false, produceMessage("existing", nil, []byte("forged-non-transactional"))))

	// Nor by any other door: the functions, the tables (even with USAGE
	// on the schema), the snapshot path.
	mustExec(t, conn, `GRANT USAGE ON SCHEMA kafgres TO mallory`)
	for _, sql := range []string{
		`SELECT kafgres_produce('existing', 'k', 'v')`,
		`SELECT kafgres_produce('existing', 'k'::bytea, 'v'::bytea)`,
		`SELECT kafgres_produce('existing', 'k'::bytea, 'v'::bytea, ARRAY['h'], ARRAY['v'::bytea])`,
		`SELECT kafgres_create_topic('forged-new-topic', 1)`,
		`INSERT INTO kafgres.topic (name, partitions) VALUES ('forged-new-topic', 1)`,
		`INSERT INTO kafgres.partition (topic_id, partition) SELECT 1, 1`,
		`UPDATE kafgres.topic SET partitions = 2`,
		`INSERT INTO kafgres.topic_config (topic_id, name, value) VALUES (1, 'max.message.bytes', '100000000')`,
		`INSERT INTO kafgres.mapping (name, source_relid, topic, owner_role, search_path) VALUES ('m', 'pg_class'::regclass, 'existing', 10, 'public')`,
		`INSERT INTO kafgres.mapping_snapshot (mapping_id, xid) VALUES (1, pg_current_xact_id())`,
		`INSERT INTO kafgres.dead_letter (error) VALUES ('x')`,
		`UPDATE kafgres.delivery SET applied_lsn = 'FFFFFFFF/0'`,
		`SELECT kafgres_rejected_messages()`,
	} {
		if pe := pgErr(t, mallory, sql); pe.Code != "42501" {
			t.Errorf("mallory: %s: %s %s, want insufficient_privilege", sql, pe.Code, pe.Message)
		}
	}

	// The legitimate path works, for a role granted kafgres_produce.
	app := connAs(t, c, "app")
	mustExec(t, app, `SELECT kafgres_produce('existing', 'k', 'legit')`)
	waitDelivered(t, conn)
	wantConsumed(t, consumed(t, c.Addr, "existing", 1), "k -> legit")

	var topics int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM kafgres.topic WHERE name = 'forged-new-topic'`).Scan(&topics); err != nil || topics != 0 {
		t.Fatalf("forged-new-topic in kafgres.topic: %d %v", topics, err)
	}
	adm, _ := newAdmin(t, c.Addr)
	listed, err := adm.ListTopics(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if listed.Has("forged-new-topic") {
		t.Fatal("a Kafka client sees forged-new-topic")
	}

	if n := rejectedMessages(t, conn); n != int64(len(lsns)) {
		t.Fatalf("kafgres_rejected_messages() = %d, want %d", n, len(lsns))
	}
	logged, err := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	// compared as positions: how an LSN is spelled varies between versions
	loggedAt := map[decoder.LSN]int{}
	for _, m := range regexp.MustCompile(`unauthenticated kafgres message at ([0-9A-F]+/[0-9A-F]+)`).FindAllStringSubmatch(string(logged), -1) {
		l, err := pglogrepl.ParseLSN(m[1])
		if err != nil {
			t.Fatal(err)
		}
		loggedAt[l]++
	}
	for _, lsn := range lsns {
		l, err := pglogrepl.ParseLSN(lsn)
		if err != nil {
			t.Fatal(err)
		}
		if n := loggedAt[l]; n != 1 {
			t.Errorf("the rejection of the message at %s is logged %d times, want once", lsn, n)
		}
	}
	if len(loggedAt) != len(lsns) {
		t.Errorf("rejections logged at %v, want only the forged messages' %v", loggedAt, lsns)
	}
	if bytes.Contains(logged, []byte("forged-in-savepoint")) {
		t.Error("the log holds a rejected message's content")
	}
}

// TestSecurityMessageKeySurvivesCrash: the key that authenticates messages
// lives in the data directory, so a record committed before a crash, and
// decoded only after it, is still delivered.
func TestSecurityMessageKeySurvivesCrash(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "durable", 1)
	keyFile := filepath.Join(c.Dir, "pgdata", "kafgres_message_key")
	st, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != 32 {
		t.Fatalf("key file: mode %v, %d bytes; want 0600 and 32 bytes", st.Mode().Perm(), st.Size())
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}

	// Freeze the broker so nothing is decoded before the crash.
	pid := c.BrokerPID(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	conn := c.Conn(t)
	mustExec(t, conn, `SELECT kafgres_produce('durable', 'k', 'before-crash')`)
	conn.Close(context.Background())
	c.StopPG(t, "immediate")
	c.StartPG(t)

	again, err := os.ReadFile(keyFile)
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("key file changed across the restart (%v)", err)
	}
	conn = c.Conn(t)
	waitDelivered(t, conn)
	wantConsumed(t, consumed(t, c.Addr, "durable", 1), "k -> before-crash")
	if n := rejectedMessages(t, conn); n != 0 {
		t.Fatalf("%d messages rejected after the restart", n)
	}
}

// TestSecurityAppendTimeLimit: a record larger than its topic's
// max.message.bytes is not stored even when kafgres_produce let it through
// (its kafgres.max_message_bytes is larger), is recorded in
// kafgres.dead_letter with the reason, and the records after it flow on.
func TestSecurityAppendTimeLimit(t *testing.T) {
	c := harness.Start(t)
	adm, _ := newAdmin(t, c.Addr)
	r, err := adm.CreateTopic(ctxT(t), 1, 1, map[string]*string{"max.message.bytes": sp("2000")}, "small")
	if err != nil || r.Err != nil {
		t.Fatalf("create topic small: %v %v", err, r.Err)
	}
	conn := c.Conn(t)
	var bigLSN string
	if err := conn.QueryRow(context.Background(),
		`SELECT kafgres_produce('small', 'big', repeat('x', 5000))::text`).Scan(&bigLSN); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, `SELECT kafgres_produce('small', 'k', 'fits')`)
	waitDelivered(t, conn)
	wantConsumed(t, consumed(t, c.Addr, "small", 1), "k -> fits")

	var mappingID *int64
	var lsn, msg string
	if err := conn.QueryRow(context.Background(),
		`SELECT mapping_id, lsn::text, error FROM kafgres.dead_letter`).Scan(&mappingID, &lsn, &msg); err != nil {
		t.Fatalf("dead letter of the oversized record: %v", err)
	}
	if mappingID != nil || lsn != bigLSN || !strings.Contains(msg, "max.message.bytes") || !strings.Contains(msg, `"small"`) {
		t.Fatalf("dead letter: mapping %v lsn %s (want %s) error %q", mappingID, lsn, bigLSN, msg)
	}
}

// TestSecuritySnapshotRows: snapshot rows are authenticated too. Only
// kafgres_snapshot_mapping, run by a member of the mapping's owner role,
// can write them; a hand-written format-2 message, or another author
// calling the function that writes them, gets nothing into the topic.
func TestSecuritySnapshotRows(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mappingAuthor(t, conn, "alice")
	mappingAuthor(t, conn, "bob")
	mustExec(t, conn,
		`CREATE TABLE items (id int PRIMARY KEY, name text)`,
		`INSERT INTO items VALUES (1, 'one'), (2, 'two')`,
		`GRANT SELECT ON items TO alice, bob`,
		`GRANT UPDATE ON items TO alice`, // LOCK TABLE ... IN SHARE MODE (docs/sql.md)
		`SELECT kafgres_create_topic('items', 1)`)
	alice := connAs(t, c, "alice")
	mustExec(t, alice, `SELECT kafgres_add_mapping('items', 'items', 'items', key_expr => $$ new.id::text $$, value_expr => $$ new.name $$)`)
	var id int64
	if err := conn.QueryRow(context.Background(), `SELECT mapping_id FROM kafgres.mapping WHERE name = 'items'`).Scan(&id); err != nil {
		t.Fatal(err)
	}

	bob := connAs(t, c, "bob")
	row := `{"id": 66, "name": "forged"}`
	if pe := pgErr(t, bob, fmt.Sprintf(`SELECT kafgres.snapshot_row(%d, '%s')`, id, row)); pe.Code != "42501" {
		t.Fatalf("bob writes a snapshot row of alice's mapping: %s %s", pe.Code, pe.Message)
	}
	if pe := pgErr(t, bob, `SELECT kafgres_snapshot_mapping('items')`); pe.Code != "42501" {
		t.Fatalf("bob snapshots alice's mapping: %s %s", pe.Code, pe.Message)
	}
	forged := binary.BigEndian.AppendUint64([]byte{2}, uint64(id))
	forged = append(forged, row...)
	mustExec(t, bob, `BEGIN`)
	emitAs(t, bob, true, forged)
	mustExec(t, bob, `COMMIT`)
	// alice, the owner, may hand-write one too; it is rejected all the same
	emitAs(t, alice, true, forged)

	snapshotMapping(t, alice, "items", 2)
	waitDelivered(t, conn)
	wantConsumed(t, consumed(t, c.Addr, "items", 2), "1 -> one", "2 -> two")
	if got := rejectedMessages(t, conn); got != 2 {
		t.Fatalf("kafgres_rejected_messages() = %d, want 2", got)
	}
}
