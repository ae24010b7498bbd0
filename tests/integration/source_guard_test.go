package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestSourceGuard: a log whose source positions are ahead of the WAL --
// cluster A's partitions, with A's records and positions, started on
// cluster B, a fresh initdb whose WAL is far behind A's -- must not make
// the broker skip B's records as already appended. B's broker refuses to
// append SQL-produced records, says why in its log and in
// kafgres.pipeline, and keeps the refusal when B's WAL grows past A's
// positions and B restarts (records committed in between would still be
// skipped); Kafka clients are served meanwhile. After the documented way
// out (kafgres_rebase_source_positions) every record produced on B is in
// the topic exactly once, after A's, in commit order, and a restart
// appends nothing twice.
//
// The catalog of B is made to match A's directories by keeping B's
// identity files (kafgres.partition, partition.metadata) in them, as if
// the catalog had come with a dump; what matters here is the log.
func TestSourceGuard(t *testing.T) {
	ctx := context.Background()
	const topic = "moved"

	a := harness.Start(t)
	connA := a.Conn(t)
	a.CreateTopic(t, topic, 2)
	// A's records sit well beyond where a fresh cluster's WAL starts.
	pushWAL(t, connA, 3)
	want := map[int32][]string{}
	produceSQL(t, connA, topic, "a", 0, 20, want)
	waitDelivered(t, connA)
	connA.Close(ctx)
	a.StopPG(t, "fast")

	b := harness.Start(t)
	b.CreateTopic(t, topic, 2)
	b.CreateTopic(t, "kafka-side", 1)
	harness.Eventually(t, 30*time.Second, func() error {
		for p := 0; p < 2; p++ {
			if _, err := os.Stat(filepath.Join(b.DataDir(), fmt.Sprintf("%s-%d", topic, p), "kafgres.partition")); err != nil {
				return err
			}
		}
		return nil
	})
	b.StopPG(t, "fast")
	for p := 0; p < 2; p++ {
		moveLog(t, filepath.Join(a.DataDir(), fmt.Sprintf("%s-%d", topic, p)), filepath.Join(b.DataDir(), fmt.Sprintf("%s-%d", topic, p)))
	}
	b.StartPG(t)
	connB := b.Conn(t)

	refusal := waitRefusal(t, connB)
	for p := 0; p < 2; p++ {
		if !strings.Contains(refusal, fmt.Sprintf("%s-%d at ", topic, p)) {
			t.Errorf("kafgres.pipeline.sql_source_refused does not name %s-%d: %s", topic, p, refusal)
		}
	}
	var walLSN, logLSN string
	var ahead bool
	if err := connB.QueryRow(ctx, `SELECT wal_lsn::text, log_lsn::text, log_lsn > wal_lsn FROM kafgres.source_guard`).Scan(&walLSN, &logLSN, &ahead); err != nil || !ahead {
		t.Fatalf("kafgres.source_guard: %s, %s, ahead %v, %v", walLSN, logLSN, ahead, err)
	}
	// The log line follows the row.
	harness.Eventually(t, 10*time.Second, func() error {
		log, err := os.ReadFile(filepath.Join(b.Dir, "postgres.log"))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "not appending SQL-produced and CDC records") &&
				strings.Contains(line, topic+"-0 at ") && strings.Contains(line, "kafgres_rebase_source_positions") {
				return nil
			}
		}
		return fmt.Errorf("the broker's log does not say it refuses, where and the way out")
	})

	// B's first records end below A's positions: without the guard they
	// would be skipped as already appended.
	produceSQL(t, connB, topic, "b", 0, 10, want)
	var below bool
	if err := connB.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() < $1::pg_lsn`, logLSN).Scan(&below); err != nil || !below {
		t.Fatalf("B's records are not below the log's position %s (%v): the test proves nothing", logLSN, err)
	}
	notDelivered(t, connB)

	// Kafka clients are served: A's records read back, and a produce
	// through Kafka is acknowledged.
	if got := readExactly(t, b.Addr, topic, 20); strings.Join(got, ",") != strings.Join(flatten(want, "a"), ",") {
		t.Errorf("while refusing, %s holds %v, want A's records only", topic, got)
	}
	kafkaProduce(t, b.Addr, "kafka-side", "k-0")
	readExactly(t, b.Addr, "kafka-side", 1)

	// B's WAL grows past A's positions and B restarts: the refusal stands,
	// as comparing again would now pass with B's first records still
	// below the log's positions.
	pushWALPast(t, connB, logLSN)
	connB.Close(ctx)
	b.StopPG(t, "fast")
	b.StartPG(t)
	connB = b.Conn(t)
	waitRefusal(t, connB)
	produceSQL(t, connB, topic, "b", 10, 20, want)
	notDelivered(t, connB)

	// The way out, docs/operations.md "A log ahead of the WAL".
	if _, err := connB.Exec(ctx, `SELECT kafgres_rebase_source_positions('0/1')`); err == nil {
		t.Fatal("kafgres_rebase_source_positions accepted a log_lsn that is not the refusal's")
	}
	mustExec(t, connB, `SELECT kafgres_rebase_source_positions(log_lsn) FROM kafgres.source_guard`)
	waitDelivered(t, connB)
	var refused *string
	if err := connB.QueryRow(ctx, `SELECT sql_source_refused FROM kafgres.pipeline`).Scan(&refused); err != nil || refused != nil {
		t.Fatalf("kafgres.pipeline.sql_source_refused after the rebase: %v, %v", refused, err)
	}
	checkMoved(t, b.Addr, topic, want)

	// Exactly once from here on: a restart replays nothing twice.
	connB.Close(ctx)
	b.StopPG(t, "fast")
	b.StartPG(t)
	connB = b.Conn(t)
	produceSQL(t, connB, topic, "b", 20, 24, want)
	waitDelivered(t, connB)
	checkMoved(t, b.Addr, topic, want)
}

// produceSQL produces prefix-from..prefix-(to-1) with kafgres_produce, one
// transaction each, to the partitions of topic in turn, and adds them to
// want.
func produceSQL(t *testing.T, conn *pgx.Conn, topic, prefix string, from, to int, want map[int32][]string) {
	t.Helper()
	for i := from; i < to; i++ {
		v := fmt.Sprintf("%s-%d", prefix, i)
		p := int32(i % 2)
		if _, err := conn.Exec(context.Background(), `SELECT kafgres_produce($1, NULL::text, $2::text, partition => $3)`, topic, v, p); err != nil {
			t.Fatalf("kafgres_produce %s: %v", v, err)
		}
		want[p] = append(want[p], v)
	}
}

// flatten is want partition by partition, the values starting with
// prefix only.
func flatten(want map[int32][]string, prefix string) []string {
	var out []string
	for p := int32(0); p < 2; p++ {
		for _, v := range want[p] {
			if strings.HasPrefix(v, prefix+"-") {
				out = append(out, v)
			}
		}
	}
	return out
}

// checkMoved reads topic and compares it with want, partition by
// partition, in order.
func checkMoved(t *testing.T, addr, topic string, want map[int32][]string) {
	t.Helper()
	var w []string
	for p := int32(0); p < 2; p++ {
		w = append(w, want[p]...)
	}
	got := readExactly(t, addr, topic, len(w))
	if strings.Join(got, ",") != strings.Join(w, ",") {
		t.Fatalf("%s holds\n%v\nwant\n%v", topic, got, w)
	}
}

// waitRefusal waits for the broker to show its refusal in kafgres.pipeline
// and returns it.
func waitRefusal(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var refusal string
	// the broker says so once it is back after Postgres: on a busy
	// machine its start (the supervisor's backoff, loading the log) can
	// take more than half a minute
	harness.Eventually(t, 90*time.Second, func() error {
		var r *string
		if err := conn.QueryRow(context.Background(), `SELECT sql_source_refused FROM kafgres.pipeline`).Scan(&r); err != nil {
			return err
		}
		if r == nil {
			return fmt.Errorf("kafgres.pipeline.sql_source_refused is NULL")
		}
		refusal = *r
		return nil
	})
	return refusal
}

// notDelivered checks that what was committed is not delivered within a
// few seconds.
func notDelivered(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '3 seconds')`).Scan(&ok); err != nil || ok {
		t.Fatalf("kafgres_wait_delivered while the broker refuses: %v, %v; want false", ok, err)
	}
}

// pushWAL moves the WAL on by n segments.
func pushWAL(t *testing.T, conn *pgx.Conn, n int) {
	t.Helper()
	mustExec(t, conn, `CREATE TABLE IF NOT EXISTS wal_pad (x int)`)
	for i := 0; i < n; i++ {
		mustExec(t, conn, `INSERT INTO wal_pad VALUES (1)`, `SELECT pg_switch_wal()`)
	}
}

// pushWALPast moves the WAL on until its insert position is beyond lsn.
func pushWALPast(t *testing.T, conn *pgx.Conn, lsn string) {
	t.Helper()
	for i := 0; ; i++ {
		var past bool
		if err := conn.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn() > $1::pg_lsn`, lsn).Scan(&past); err != nil {
			t.Fatal(err)
		}
		if past {
			return
		}
		if i == 100 {
			t.Fatalf("the WAL does not get past %s", lsn)
		}
		pushWAL(t, conn, 1)
	}
}

// moveLog replaces the log in partition directory to with the one in from,
// keeping to's identity files (the kafgres marker and partition.metadata),
// with the files' owners.
func moveLog(t *testing.T, from, to string) {
	t.Helper()
	keep := map[string]bool{"kafgres.partition": true, "partition.metadata": true}
	for _, dir := range []string{to, from} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if keep[e.Name()] {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if dir == to {
				if err := os.RemoveAll(p); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if out, err := exec.Command("cp", "-a", p, to).CombinedOutput(); err != nil {
				t.Fatalf("cp %s: %v\n%s", p, err, out)
			}
		}
	}
}

// kafkaProduce produces one record through Kafka.
func kafkaProduce(t *testing.T, addr, topic, value string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce %s to %s: %v", value, topic, err)
	}
}

// TestSourceGuardPointInTime: the database goes back to a crash-consistent
// copy (a PITR's result: the same history up to a point, its slot from
// then) while the log stays newer. The broker refuses; records committed
// on the restored database are held, not skipped; the rebase keeping the
// positions up to the copy point leaves every record once: those from
// before the copy (which the restored slot replays) are not appended
// again, those of the abandoned history stay, and the new ones follow.
func TestSourceGuardPointInTime(t *testing.T) {
	ctx := context.Background()
	const topic = "pitr"
	c := harness.Start(t)
	c.CreateTopic(t, topic, 2)
	conn := c.Conn(t)
	want := map[int32][]string{}
	produceSQL(t, conn, topic, "p", 0, 10, want)
	waitDelivered(t, conn)
	// The copy point: every record so far ends at or below it.
	var point string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&point); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	// A crash-consistent copy, as a snapshot or a PITR would leave it:
	// the slot as of its last checkpoint, before these records were
	// acknowledged.
	c.StopPG(t, "immediate")
	harness.WaitPortClosed(t, c.Addr, 30*time.Second)
	pgdata := filepath.Join(c.Dir, "pgdata")
	backup := filepath.Join(c.Dir, "backup")
	if out, err := exec.Command("cp", "-a", pgdata, backup).CombinedOutput(); err != nil {
		t.Fatalf("copy pgdata: %v\n%s", err, out)
	}

	// The abandoned history: more records, in the log only.
	c.StartPG(t)
	conn = c.Conn(t)
	produceSQL(t, conn, topic, "q", 0, 10, want)
	waitDelivered(t, conn)
	conn.Close(ctx)
	c.StopPG(t, "fast")

	// Back to the copy, with the newer log.
	if err := os.RemoveAll(filepath.Join(backup, "kafgres")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(pgdata, "kafgres"), filepath.Join(backup, "kafgres")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(pgdata); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(backup, pgdata); err != nil {
		t.Fatal(err)
	}
	c.StartPG(t)
	conn = c.Conn(t)
	waitRefusal(t, conn)
	produceSQL(t, conn, topic, "r", 0, 10, want)
	notDelivered(t, conn)

	mustExec(t, conn, fmt.Sprintf(`SELECT kafgres_rebase_source_positions(log_lsn, '%s') FROM kafgres.source_guard`, point))
	waitDelivered(t, conn)
	checkMoved(t, c.Addr, topic, want)
}
