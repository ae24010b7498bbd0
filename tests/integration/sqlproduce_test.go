package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// readTopic returns every record of topic once n have arrived (read
// uncommitted: kafgres never stores a record before its transaction commits).
func readTopic(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	return readTopicAs(t, addr, topic, n, kgo.ReadUncommitted())
}

// readTopicAs is readTopic at an isolation level.
func readTopicAs(t *testing.T, addr, topic string, n int, isolation kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	out, extra := consumeRecords(t, addr, n, topic, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(isolation))
	// Anything more would be a record that should not exist.
	if len(extra) > 0 {
		t.Fatalf("%s: %d unexpected extra records, first %q", topic, len(extra), extra[0].Value)
	}
	return out
}

// consumeRecords reads, from the start, at least n records with a client
// of opts (what it reads, for the failure message), and then whatever
// more arrives within a second (extra).
func consumeRecords(t *testing.T, addr string, n int, what string, opts ...kgo.Opt) (out, extra []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// a millisecond a record on top, for the long reads
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second+time.Duration(n)*time.Millisecond)
	defer cancel()
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s", len(out), n, what)
		}
		out = append(out, fs.Records()...)
	}
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	return out, cl.PollFetches(short).Records()
}

func waitDelivered(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '30 seconds')`).Scan(&ok); err != nil || !ok {
		t.Fatalf("kafgres_wait_delivered: %v %v", ok, err)
	}
}

func values(recs []*kgo.Record) string {
	var vs []string
	for _, r := range recs {
		vs = append(vs, string(r.Value))
	}
	return strings.Join(vs, ",")
}

// TestSQLProduceTransactions: records exist iff their transaction (or
// savepoint, or prepared transaction) commits.
func TestSQLProduceTransactions(t *testing.T) {
	c := harness.Start(t, "max_prepared_transactions = 10")
	c.CreateTopic(t, "tx", 1)
	conn := c.Conn(t)
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`BEGIN; SELECT kafgres_produce('tx', NULL, 'committed-1'); COMMIT`)
	exec(`BEGIN; SELECT kafgres_produce('tx', NULL, 'rolled-back'); ROLLBACK`)
	exec(`BEGIN; SELECT kafgres_produce('tx', NULL, 'before-savepoint'); SAVEPOINT s;
		SELECT kafgres_produce('tx', NULL, 'in-rolled-back-savepoint'); ROLLBACK TO SAVEPOINT s;
		SELECT kafgres_produce('tx', NULL, 'after-savepoint'); COMMIT`)
	exec(`BEGIN; SELECT kafgres_produce('tx', NULL, 'prepared-committed'); PREPARE TRANSACTION 'p1'`)
	exec(`BEGIN; SELECT kafgres_produce('tx', NULL, 'prepared-rolled-back'); PREPARE TRANSACTION 'p2'`)

	// An open transaction's record is invisible to every consumer.
	open := c.Conn(t)
	if _, err := open.Exec(ctx, `BEGIN; SELECT kafgres_produce('tx', NULL, 'open-then-committed')`); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, conn)
	if got := values(readTopic(t, c.Addr, "tx", 3)); got != "committed-1,before-savepoint,after-savepoint" {
		t.Fatalf("before COMMIT PREPARED: %s", got)
	}
	exec(`COMMIT PREPARED 'p1'`)
	exec(`ROLLBACK PREPARED 'p2'`)
	if _, err := open.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, conn)
	got := values(readTopic(t, c.Addr, "tx", 5))
	if got != "committed-1,before-savepoint,after-savepoint,prepared-committed,open-then-committed" {
		t.Fatalf("records: %s", got)
	}
}

// TestSQLProduceRecordShape: keys, values, headers, partitions, bytea.
func TestSQLProduceRecordShape(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "shape", 3)
	conn := c.Conn(t)
	ctx := context.Background()
	for _, sql := range []string{
		`SELECT kafgres_produce('shape', 'order-1001', 'murmur', '{"h1": "v1", "h2": null}'::jsonb)`,
		`SELECT kafgres_produce('shape', '\x00ff'::bytea, '\xdeadbeef'::bytea, ARRAY['a', 'b'], ARRAY['\x01'::bytea, NULL])`,
		`SELECT kafgres_produce('shape', 'k', 'explicit', partition => 2)`,
		`SELECT kafgres_produce('shape', NULL::text, NULL::text, partition => 1)`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	waitDelivered(t, conn)
	byValue := map[string]*kgo.Record{}
	for _, r := range readTopic(t, c.Addr, "shape", 4) {
		byValue[string(r.Value)] = r
	}
	// The key's partition is the one a Kafka client computes (murmur2).
	want := int32(kgo.StickyKeyPartitioner(nil).ForTopic("shape").Partition(&kgo.Record{Key: []byte("order-1001")}, 3))
	m := byValue["murmur"]
	if m == nil || m.Partition != want || string(m.Key) != "order-1001" {
		t.Fatalf("keyed record: %+v, want partition %d", m, want)
	}
	if len(m.Headers) != 2 || m.Headers[0].Key != "h1" || string(m.Headers[0].Value) != "v1" || m.Headers[1].Key != "h2" || m.Headers[1].Value != nil {
		t.Fatalf("jsonb headers: %+v", m.Headers)
	}
	b := byValue["\xde\xad\xbe\xef"]
	if b == nil || !bytes.Equal(b.Key, []byte{0, 0xff}) || len(b.Headers) != 2 || !bytes.Equal(b.Headers[0].Value, []byte{1}) || b.Headers[1].Value != nil {
		t.Fatalf("bytea record: %+v", b)
	}
	if e := byValue["explicit"]; e == nil || e.Partition != 2 {
		t.Fatalf("explicit partition: %+v", e)
	}
	if n := byValue[""]; n == nil || n.Partition != 1 || n.Key != nil || n.Value != nil {
		t.Fatalf("NULL key and value: %+v", n)
	}
	if ts := m.Timestamp; time.Since(ts) > time.Minute || time.Since(ts) < 0 {
		t.Fatalf("timestamp %v is not the commit time", ts)
	}
}

// TestSQLProduceErrors: clear errors, nothing written.
func TestSQLProduceErrors(t *testing.T) {
	c := harness.Start(t, "kafgres.auto_create_topics = off", "kafgres.max_message_bytes = 2000")
	c.CreateTopic(t, "errs", 2)
	conn := c.Conn(t)
	ctx := context.Background()
	cases := map[string]string{
		`SELECT kafgres_produce('nope', 'k', 'v')`:                  `topic "nope" does not exist`,
		`SELECT kafgres_produce('errs', 'k', repeat('x', 5000))`:    `too large`,
		`SELECT kafgres_produce('errs', 'k', 'v', partition => 7)`:  `partition`,
		`SELECT kafgres_produce('bad name!', 'k', 'v')`:             `invalid topic name`,
		`SELECT kafgres_produce('errs', 'k', 'v', '[1, 2]'::jsonb)`: `headers`,
		`SELECT kafgres_produce(NULL, 'k', 'v')`:                    `topic`,
	}
	for sql, want := range cases {
		_, err := conn.Exec(ctx, sql)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
			t.Errorf("%s: error %v, want one mentioning %q", sql, err, want)
		}
	}
	if _, err := conn.Exec(ctx, `SELECT kafgres_produce('errs', NULL, 'only', partition => 0)`); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, conn)
	if got := values(readTopic(t, c.Addr, "errs", 1)); got != "only" {
		t.Fatalf("records after failed produces: %s", got)
	}
}

// TestOutputPluginSQL runs the extension's own tests, the way PostgreSQL's
// contrib modules are tested: `make -C outputplugin installcheck`, which
// runs the pg_regress tests (outputplugin/sql, the SQL functions, their
// errors and privileges, the output plugin's frames) and the isolation
// specs (outputplugin/specs, kafgres_produce racing topic DDL, mappings
// changing while changes are made and decoded) in a temporary instance of
// their own. Run as root, the Makefile runs them as the OS user postgres.
func TestOutputPluginSQL(t *testing.T) {
	out := t.TempDir()
	cmd := exec.Command("make", "-C", filepath.Join(harness.RepoRoot(), "outputplugin"),
		"installcheck", "REGRESS_OUTPUT="+out)
	// not the jobserver of a make that runs the Go tests
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	output, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	var diffs strings.Builder
	for _, name := range []string{"regression.diffs", filepath.Join("output_iso", "regression.diffs")} {
		if b, rerr := os.ReadFile(filepath.Join(out, name)); rerr == nil && len(b) > 0 {
			fmt.Fprintf(&diffs, "---- %s ----\n%s\n", name, b)
		}
	}
	t.Fatalf("make -C outputplugin installcheck: %v\n%s\n%s", err, output, diffs.String())
}

// TestSQLProduceMissingSlot: without slot "kafgres", kafgres_produce refuses
// with a clear error; once the broker has recreated it, produce works again.
func TestSQLProduceMissingSlot(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "slotless", 1)
	conn := c.Conn(t)
	ctx := context.Background()
	pid := c.BrokerPID(t)
	// Freeze the broker so it cannot reconnect, end its walsender, drop the slot.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'kafgres' AND active_pid IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	// the walsender takes a moment to end and release the slot
	harness.Eventually(t, 10*time.Second, func() error {
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot('kafgres')`); err != nil {
			return fmt.Errorf("drop slot: %w", err)
		}
		return nil
	})
	_, err := conn.Exec(ctx, `SELECT kafgres_produce('slotless', 'k', 'lost?')`)
	if err == nil || !strings.Contains(err.Error(), `replication slot "kafgres" does not exist`) {
		t.Fatalf("produce without slot: %v", err)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	harness.Eventually(t, 20*time.Second, func() error {
		if _, err := conn.Exec(ctx, `SELECT kafgres_produce('slotless', 'k', 'after')`); err != nil {
			return fmt.Errorf("produce after the broker came back: %w", err)
		}
		return nil
	})
	waitDelivered(t, conn)
	if got := values(readTopic(t, c.Addr, "slotless", 1)); got != "after" {
		t.Fatalf("records: %s", got)
	}
}
