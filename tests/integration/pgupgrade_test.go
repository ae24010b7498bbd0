package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestPgUpgrade (issue #17): a cluster on PostgreSQL 15
// ($KAFGRES_UPGRADE_OLD_BINDIR) gets records from every source -- SQL
// (kafgres_produce), CDC (a mapping on orders) and a Kafka producer -- and a
// consumer group commits an offset; it is moved to the PostgreSQL first in
// PATH (18) with tests/pgupgrade.sh, the procedure of docs/operations.md;
// every source produces again on 18. Read from the start, every topic then
// holds each record exactly once, in the order produced, and the group
// resumes at its committed offset. The replication slot does not survive
// pg_upgrade and the broker makes a new one: the new cluster's WAL must
// start beyond every source position in the log, or the producer would take
// the new records for ones already appended and skip them.
//
// tests/pg18.sh check runs it with both set.
func TestPgUpgrade(t *testing.T) {
	oldBin := os.Getenv("KAFGRES_UPGRADE_OLD_BINDIR")
	if oldBin == "" {
		t.Skip("KAFGRES_UPGRADE_OLD_BINDIR is not set (tests/pg18.sh check sets it)")
	}
	out, err := exec.Command("pg_config", "--bindir").Output()
	if err != nil {
		t.Fatalf("pg_config --bindir: %v", err)
	}
	newBin := strings.TrimSpace(string(out))
	if filepath.Clean(newBin) == filepath.Clean(oldBin) {
		t.Skipf("PATH's PostgreSQL is the old one (%s): nothing to upgrade to", oldBin)
	}

	old := harness.StartOn(t, oldBin, func(*harness.Cluster) []string { return nil })
	conn := old.Conn(t)
	requireMajor(t, conn, 15)
	mustExec(t, conn, seedSchema, seedMapping)
	old.CreateTopic(t, "sql", 3)
	old.CreateTopic(t, "kafka", 1)

	want := upgradeRecords{}
	want.produce(t, old, conn, 0, 40)
	// A group commits an offset in "kafka": the offset is a row
	// in Postgres and must survive the upgrade with the log it points in.
	const committed = 15
	commitGroupOffset(t, old.Addr, "kafka", "upgrade-group", committed)
	want.produce(t, old, conn, 40, 60)
	// A backlog the broker is still decoding when the upgrade starts
	// (one transaction for each of SQL and CDC), and no wait for delivery:
	// draining the slot is the procedure's job.
	want.bulk(t, conn, 60, 20060)
	// Every source position of the old cluster is below its WAL end.
	var before string
	if err := conn.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())

	nc := old.Upgrade(t, newBin)
	conn = nc.Conn(t)
	requireMajor(t, conn, 18)
	var beyond bool
	if err := conn.QueryRow(context.Background(),
		`SELECT restart_lsn > $1::pg_lsn FROM pg_replication_slots WHERE slot_name = 'kafgres'`, before).Scan(&beyond); err != nil {
		t.Fatal(err)
	}
	if !beyond {
		t.Fatalf("the new slot starts at or before %s, the old cluster's WAL end", before)
	}

	want.produce(t, nc, conn, 20060, 20100)
	waitDelivered(t, conn)

	for _, topic := range []string{"sql", "order-events", "kafka"} {
		w := want.topic(topic)
		got := readExactly(t, nc.Addr, topic, len(w))
		for i := range got {
			if got[i] != w[i] {
				t.Errorf("%s after the upgrade: record %d of %d is %q, want %q", topic, i, len(w), got[i], w[i])
				break
			}
		}
	}
	if got := groupResume(t, nc.Addr, "kafka", "upgrade-group"); got != want["kafka"][committed] {
		t.Errorf("upgrade-group resumed at %q, want %q (offset %d)", got, want["kafka"][committed], committed)
	}
}

// upgradeRecords is what each topic must hold, in the order a consumer
// reads it; "sql" has three partitions, kept apart as "sql/0".."sql/2".
type upgradeRecords map[string][]string

// topic is what topic must hold, partition by partition.
func (w upgradeRecords) topic(name string) []string {
	if name != "sql" {
		return w[name]
	}
	var all []string
	for p := 0; p < 3; p++ {
		all = append(all, w[fmt.Sprintf("sql/%d", p)]...)
	}
	return all
}

// produce writes records from..to-1 through every source, one record a
// transaction or request: a Kafka producer to "kafka", SQL to the
// partitions of "sql" in turn, and CDC inserts into orders (order-events).
func (w upgradeRecords) produce(t *testing.T, c *harness.Cluster, conn *pgx.Conn, from, to int) {
	t.Helper()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("kafka"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := from; i < to; i++ {
		v := fmt.Sprintf("kafka-%d", i)
		if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		w["kafka"] = append(w["kafka"], v)
	}
	for i := from; i < to; i++ {
		v := fmt.Sprintf("sql-%d", i)
		if _, err := conn.Exec(ctx, `SELECT kafgres_produce('sql', NULL::text, $1::text, partition => $2)`, v, i%3); err != nil {
			t.Fatalf("kafgres_produce %s: %v", v, err)
		}
		w[fmt.Sprintf("sql/%d", i%3)] = append(w[fmt.Sprintf("sql/%d", i%3)], v)
		mustExec(t, conn, fmt.Sprintf(`INSERT INTO orders VALUES (%d, 1, %d, 'placed')`, i, i))
		w["order-events"] = append(w["order-events"], fmt.Sprintf("order-%d", i))
	}

}

// bulk writes records from..to-1 in one transaction each for SQL and
// CDC, as produce does one by one.
func (w upgradeRecords) bulk(t *testing.T, conn *pgx.Conn, from, to int) {
	t.Helper()
	mustExec(t, conn,
		fmt.Sprintf(`SELECT count(kafgres_produce('sql', NULL::text, 'sql-' || g, partition => g %% 3))
		               FROM generate_series(%d, %d) AS g`, from, to-1),
		fmt.Sprintf(`INSERT INTO orders SELECT g, 1, g, 'placed' FROM generate_series(%d, %d) AS g`, from, to-1))
	for i := from; i < to; i++ {
		w[fmt.Sprintf("sql/%d", i%3)] = append(w[fmt.Sprintf("sql/%d", i%3)], fmt.Sprintf("sql-%d", i))
		w["order-events"] = append(w["order-events"], fmt.Sprintf("order-%d", i))
	}
}

func requireMajor(t *testing.T, conn *pgx.Conn, major int) {
	t.Helper()
	var num int
	if err := conn.QueryRow(context.Background(), `SELECT current_setting('server_version_num')::int`).Scan(&num); err != nil {
		t.Fatal(err)
	}
	if num/10000 != major {
		t.Fatalf("server_version_num %d, want PostgreSQL %d", num, major)
	}
}

// readExactly reads topic from the start and fails unless it holds
// exactly n records (readTopic waits a second for any beyond them); it
// returns their values partition by partition. CDC values (JSON) are
// reduced to "order-<order_id>".
func readExactly(t *testing.T, addr, topic string, n int) []string {
	t.Helper()
	recs := readTopic(t, addr, topic, n)
	if len(recs) != n {
		t.Fatalf("%s holds %d records, want %d", topic, len(recs), n)
	}
	slices.SortStableFunc(recs, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	vs := make([]string, len(recs))
	for i, r := range recs {
		vs[i] = string(r.Value)
		if topic == "order-events" {
			var v struct {
				OrderID int `json:"order_id"`
			}
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatalf("order-events value %q: %v", r.Value, err)
			}
			vs[i] = fmt.Sprintf("order-%d", v.OrderID)
		}
	}
	return vs
}

// commitGroupOffset commits offset for partition 0 of topic as group.
func commitGroupOffset(t *testing.T, addr, topic, group string, offset int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("commit %s offset %d: %v", group, offset, err)
	}
}

// groupResume is the first record group reads from topic.
func groupResume(t *testing.T, addr, topic, group string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("group %s read nothing from %s: %v", group, topic, err)
		}
		for _, r := range fs.Records() {
			return string(r.Value)
		}
	}
}
