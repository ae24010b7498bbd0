package integration

import (
	"fmt"
	"path/filepath"
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

	if _, err := conn.Exec(ctx, "SELECT kafgres_drop_topic('tsql')"); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname LIKE $1",
		fmt.Sprintf("log\\_batch\\_%d%%", sqlID)).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d tables of the dropped topic left", tables)
	}
	if n := rows(kafkaID); n == 0 {
		t.Fatal("the other topic lost its rows")
	}
	consumeAll(t, c.Addr, "tkafka", more)
}
