package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestTableEngineBroker: on a cluster whose kafgres.storage_engine is
// table, topics created by SQL and by CreateTopics are table topics; a
// real client's records go into kafgres.log_batch rows and read back with
// their offsets, also after the broker is killed and restarted (the log is
// what Postgres committed); dropping a topic drops its tables with it, and
// the broker goes on serving the others.
func TestTableEngineBroker(t *testing.T) {
	c := harness.Start(t, "kafgres.storage_engine = table")
	ctx := ctxT(t)
	conn := c.Conn(t)
	c.CreateTopic(t, "tsql", 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if res, err := adm.CreateTopics(ctx, 3, 1, nil, "tkafka"); err != nil || res.Error() != nil {
		t.Fatalf("create topic: %v, %v", err, res.Error())
	}
	engine := func(name string) (id int64, e string) {
		t.Helper()
		if err := conn.QueryRow(ctx, "SELECT topic_id, storage_engine FROM kafgres.topic WHERE name = $1", name).Scan(&id, &e); err != nil {
			t.Fatal(err)
		}
		return id, e
	}
	sqlID, e1 := engine("tsql")
	kafkaID, e2 := engine("tkafka")
	if e1 != "table" || e2 != "table" {
		t.Fatalf("engines: %s, %s; want table", e1, e2)
	}

	if _, err := conn.Exec(ctx, "UPDATE kafgres.topic SET storage_engine = 'segment' WHERE name = 'tsql'"); err == nil {
		t.Fatal("a topic's engine changed")
	}

	out := produceAll(t, c.Addr, "tsql", 300)
	consumeAll(t, c.Addr, "tsql", out)
	// The internal topics are compacted, which the table engine does not
	// do yet: they stay segment topics.
	commit := kadm.Offsets{}
	commit.AddOffset("tsql", 0, 10, -1)
	if res, err := adm.CommitOffsets(ctx, "g", commit); err != nil || res.Error() != nil {
		t.Fatalf("commit offsets: %v, %v", err, res.Error())
	}
	if _, e := engine("__consumer_offsets"); e != "segment" {
		t.Fatalf("__consumer_offsets is a %s topic", e)
	}
	rows := func(id int64) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM kafgres.log_batch WHERE topic_id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(sqlID); n == 0 {
		t.Fatal("no batch rows for the table topic")
	}
	// Nothing of a table topic is in a segment file.
	if logs, _ := filepath.Glob(filepath.Join(c.DataDir(), "tsql-*", "*.log")); len(logs) > 0 {
		t.Fatalf("segment files of a table topic: %v", logs)
	}

	old := c.KillBroker(t)
	c.WaitBroker(t, old, 15*time.Second)
	more := produceAll(t, c.Addr, "tkafka", 200, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	consumeAll(t, c.Addr, "tsql", out)
	consumeAll(t, c.Addr, "tkafka", more)

	// Dropped while a producer writes to it: the appends in flight fail
	// as on a closed log, and the broker does not stop.
	pid := c.BrokerPID(t)
	pcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("tsql"), kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	pctx, stop := context.WithCancel(ctx)
	producing := make(chan struct{})
	go func() {
		defer close(producing)
		for pctx.Err() == nil {
			pcl.ProduceSync(pctx, &kgo.Record{Value: []byte("late")})
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := conn.Exec(ctx, "SELECT kafgres_drop_topic('tsql')"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	<-producing
	if now := c.BrokerPID(t); now != pid {
		t.Fatalf("the broker restarted (%d, was %d) when a topic was dropped under a producer\n%s", now, pid, c.LogTail())
	}
	var tables int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname LIKE $1",
		fmt.Sprintf("log\\_batch\\_%d%%", sqlID)).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d tables of the dropped topic left", tables)
	}
	// The dropped partitions' logs were closed without a producer
	// snapshot, whose row would refer to a deleted partition row.
	logText, err := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"log_producer_snapshot_topic_id_partition_fkey", `msg="write producer snapshot" topic=tsql`} {
		if strings.Contains(string(logText), bad) {
			t.Fatalf("dropping a table topic logged %q\n%s", bad, c.LogTail())
		}
	}
	if n := rows(kafkaID); n == 0 {
		t.Fatal("the other topic lost its rows")
	}
	consumeAll(t, c.Addr, "tkafka", more)
}

// TestTableEngineLogNotDecoded: the log writer's connections carry a
// replication origin of their own, whose transactions the output plugin
// drops before the walsender decodes them: hundreds of produces to a table
// topic, each its own commit, add almost no decoded transactions to the
// kafgres slot. SQL produce into a table
// topic (decoded, then appended exactly once) still works beside it.
func TestTableEngineLogNotDecoded(t *testing.T) {
	c := harness.Start(t, "kafgres.storage_engine = table")
	ctx := ctxT(t)
	conn := c.Conn(t)
	c.CreateTopic(t, "big", 1)
	decoded := func() int64 {
		t.Helper()
		var n int64
		if err := conn.QueryRow(ctx, "SELECT COALESCE(sum(total_txns), 0)::bigint FROM pg_stat_replication_slots WHERE slot_name = 'kafgres'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := decoded()
	// 4 MB of incompressible values, in batches of one record each.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("big"), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	out := map[tpo]produced{}
	for range 400 {
		v := make([]byte, 10<<10)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		r, err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).First()
		if err != nil {
			t.Fatal(err)
		}
		out[tpo{r.Partition, r.Offset}] = produced{value: v}
	}
	// A record produced in SQL goes through the slot after the log rows:
	// once it is delivered, the walsender has read past them.
	var lsn string
	if err := conn.QueryRow(ctx, "SELECT kafgres_produce('big', 'k', 'from sql') IS NOT NULL, pg_current_wal_lsn()::text").Scan(new(bool), &lsn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT kafgres_wait_delivered($1::pg_lsn, '30s')", lsn); err != nil {
		t.Fatal(err)
	}
	var origins int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_origin_status s JOIN pg_replication_origin o ON o.roident = s.local_id WHERE o.roname LIKE 'kafgres\\_log\\_%'").Scan(&origins); err != nil {
		t.Fatal(err)
	}
	var logBytes int64
	if err := conn.QueryRow(ctx, "SELECT sum(octet_length(batch))::bigint FROM kafgres.log_batch").Scan(&logBytes); err != nil {
		t.Fatal(err)
	}
	d := decoded() - before
	t.Logf("%d bytes of batches in the log, %d transactions decoded by the slot, %d log origins in use", logBytes, d, origins)
	if origins == 0 {
		t.Fatal("no kafgres_log_ replication origin in use")
	}
	if d > 100 {
		t.Fatalf("the slot decoded %d transactions for 400 produces", d)
	}
	out[tpo{0, 400}] = produced{key: []byte("k"), value: []byte("from sql")}
	consumeAll(t, c.Addr, "big", out)
}

// TestTableEngineNonSuperuserBroker: a broker connected as a role that is
// not a superuser, granted what docs/sql.md lists, creates, fills, reads
// and drops table topics, and its log connections still take their
// replication origins (through the SECURITY DEFINER functions).
func TestTableEngineNonSuperuserBroker(t *testing.T) {
	c := harness.Start(t, "kafgres.storage_engine = table")
	ctx := ctxT(t)
	for _, sql := range brokerRoleGrants(`GRANT EXECUTE ON FUNCTION kafgres.log_prepare_partition(bigint, int),
		kafgres.log_add_segment(bigint, int, bigint), kafgres.log_drop_segment(bigint, int, bigint),
		kafgres.log_session_origin() TO kbroker`) {
		c.Exec(t, sql)
	}
	conn := c.Conn(t)
	harness.Eventually(t, 30*time.Second, func() error {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = 'kbroker' AND application_name = 'kafgres'`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("the broker is not connected as kbroker")
		}
		return nil
	})
	c.CreateTopic(t, "nsu", 2)
	out := produceAll(t, c.Addr, "nsu", 200)
	consumeAll(t, c.Addr, "nsu", out)
	var logConns, origins int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = 'kbroker' AND application_name = 'kafgres log'`).Scan(&logConns); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_origin_status s JOIN pg_replication_origin o ON o.roident = s.local_id
		WHERE o.roname LIKE 'kafgres\_log\_%'`).Scan(&origins); err != nil {
		t.Fatal(err)
	}
	if logConns == 0 || origins == 0 {
		t.Fatalf("%d log connections as kbroker, %d log origins", logConns, origins)
	}
	if _, err := conn.Exec(ctx, "SELECT kafgres_drop_topic('nsu')"); err != nil {
		t.Fatal(err)
	}
	out = produceAll(t, c.Addr, "after", 10, kgo.AllowAutoTopicCreation())
	consumeAll(t, c.Addr, "after", out)
}

// TestTableEnginePerTopic: in a segment cluster, kafgres_create_topic(name,
// partitions, storage_engine) makes a table topic beside segment topics
// (one made with storage_engine => NULL, one with the two-argument
// function); each keeps its engine through a broker kill, and every
// acknowledged record is read back from each.
func TestTableEnginePerTopic(t *testing.T) {
	c := harness.Start(t, "kafgres.storage_engine = segment")
	ctx := ctxT(t)
	conn := c.Conn(t)
	c.Exec(t, "SELECT kafgres_create_topic('per-table', 2, 'table')")
	c.Exec(t, "SELECT kafgres_create_topic('per-null', 2, storage_engine => NULL)")
	c.CreateTopic(t, "per-segment", 2)
	rows := func(topic string) (engine string, n int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT t.storage_engine, (SELECT count(*) FROM kafgres.log_batch AS b WHERE b.topic_id = t.topic_id)
			FROM kafgres.topic AS t WHERE t.name = $1`, topic).Scan(&engine, &n); err != nil {
			t.Fatal(err)
		}
		return engine, n
	}
	topics := []string{"per-table", "per-null", "per-segment"}
	acked := map[string]map[tpo]produced{}
	for _, topic := range topics {
		acked[topic] = produceAll(t, c.Addr, topic, 200)
	}
	check := func(when string) {
		t.Helper()
		for _, topic := range topics {
			engine, n := rows(topic)
			logs, _ := filepath.Glob(filepath.Join(c.DataDir(), topic+"-*", "*.log"))
			switch {
			case topic == "per-table" && (engine != "table" || n == 0 || len(logs) > 0):
				t.Fatalf("%s: %s: a %s topic with %d rows and segment files %v; want a table topic", when, topic, engine, n, logs)
			case topic != "per-table" && (engine != "segment" || n > 0 || len(logs) == 0):
				t.Fatalf("%s: %s: a %s topic with %d rows and segment files %v; want a segment topic", when, topic, engine, n, logs)
			}
			consumeAll(t, c.Addr, topic, acked[topic])
		}
	}
	check("after producing")
	old := c.KillBroker(t)
	c.WaitBroker(t, old, 15*time.Second)
	for _, topic := range topics {
		for k, v := range produceAll(t, c.Addr, topic, 100) {
			acked[topic][k] = v
		}
	}
	check("after a broker kill")
}
