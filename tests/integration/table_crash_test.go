package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// tableLogState is what Postgres holds of a table topic's partition 0:
// its log start, its cleaner checkpoint (-1: none), its rows and its
// leaves.
type tableLogState struct {
	start, checkpoint int64
	rows, leaves      int64
}

func readTableLogState(ctx context.Context, conn *pgx.Conn, topic string) (tableLogState, error) {
	var s tableLogState
	err := conn.QueryRow(ctx, `SELECT s.log_start_offset, coalesce(s.cleaner_checkpoint, -1),
			(SELECT count(*) FROM kafgres.log_batch AS b WHERE b.topic_id = t.topic_id AND b.partition = 0),
			(SELECT count(*) FROM pg_catalog.pg_inherits AS i
				WHERE i.inhparent = format('kafgres.log_batch_%s_0', t.topic_id)::regclass)
		FROM kafgres.topic AS t JOIN kafgres.log_state AS s ON s.topic_id = t.topic_id AND s.partition = 0
		WHERE t.name = $1`, topic).Scan(&s.start, &s.checkpoint, &s.rows, &s.leaves)
	return s, err
}

// TestTableCompactionKill (issue #15: "compaction ... survive[s] kill -9
// in the middle of [its] work", on table topics): a compacted table topic
// gets thousands of one-record batches of 40 keys, its cleaner's I/O held
// to 512 KiB/s so that a clean writes its changes in several transactions
// over seconds. The broker is killed with SIGKILL, and later Postgres
// with SIGKILL, each time after the running clean has committed some of
// its deletions and before it has committed its checkpoint (seen from
// outside: fewer rows, the same checkpoint). Each restarted log must keep
// every offset (the next produce gets the old log end), and the clean
// that then runs from the old checkpoint must finish: a consumer from
// offset 0 finds each record it reads to be the one acknowledged at that
// offset, offsets only going up, every key's latest acknowledged value
// (tombstones included) at its acknowledged offset, and the old versions
// gone.
func TestTableCompactionKill(t *testing.T) {
	c := harness.Start(t, "kafgres.storage_engine = table", "kafgres.log_cleaner_backoff = 200")
	newClient := func() *kgo.Client {
		// One record a batch: the clean's rows are many.
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerBatchMaxBytes(1200), kgo.RetryTimeout(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := newClient()
	defer func() { cl.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	conn := c.Conn(t)
	sp := func(s string) *string { return &s }
	setCleanerRate(t, ctx, cl, "524288")
	const topic = "tcompact-crash"
	// Written as cleanup.policy=delete and made compact once all is
	// written, so that the first clean sees every version.
	createTopicWith(t, ctx, cl, topic, map[string]*string{
		"segment.bytes":             sp("1048576"),
		"min.cleanable.dirty.ratio": sp("0.01"),
	})

	acked := map[int64][]byte{} // offset -> value
	latest := map[string]int64{}
	end := int64(0)
	rng := rand.New(rand.NewPCG(15, 10))
	produce := func(recs []*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v\n%s", err, c.LogTail())
		}
		for _, r := range recs {
			acked[r.Offset] = r.Value
			latest[string(r.Key)] = r.Offset
			if r.Offset < end {
				t.Fatalf("record acknowledged at %d, below the log end %d it was produced after", r.Offset, end)
			}
			end = max(end, r.Offset+1)
		}
	}
	record := func(k, v int, tombstone bool) *kgo.Record {
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", k)}
		if !tombstone {
			r.Value = make([]byte, 900)
			for i := range r.Value {
				r.Value[i] = byte(rng.IntN(256))
			}
			copy(r.Value, fmt.Sprintf("key-%d version %d ", k, v))
		}
		return r
	}
	// 40 keys, 100 versions, the last version of five keys a tombstone:
	// 4000 rows of about 1 KiB in four leaves.
	const keys, versions = 40, 100
	for v := range versions {
		recs := make([]*kgo.Record, 0, keys)
		for k := range keys {
			recs = append(recs, record(k, v, v == versions-1 && k%8 == 0))
		}
		produce(recs)
	}
	before, err := readTableLogState(ctx, conn, topic)
	if err != nil {
		t.Fatal(err)
	}
	if before.rows < 3900 || before.leaves < 4 {
		t.Fatalf("%d rows in %d leaves; want one row a record, leaves of 1 MiB", before.rows, before.leaves)
	}
	if rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: sp("compact")}}, topic); err != nil || rs[0].Err != nil {
		t.Fatalf("make %s compacted: %v %v", topic, err, rs)
	}

	// midClean waits until the running clean has committed some of its
	// changes and not its checkpoint, then kills.
	midClean := func(what string, kill func()) {
		t.Helper()
		base, err := readTableLogState(ctx, conn, topic)
		if err != nil {
			t.Fatal(err)
		}
		var at tableLogState
		err = harness.Poll(60*time.Second, func() error {
			if at, err = readTableLogState(ctx, conn, topic); err != nil {
				return err
			}
			if at.checkpoint != base.checkpoint {
				base = at // a clean finished: wait for the next one's changes
				return fmt.Errorf("a clean finished before the %s kill", what)
			}
			if at.rows >= base.rows {
				return fmt.Errorf("%d rows, the clean has committed no change yet", at.rows)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s kill: %v\n%s", what, err, c.LogTail())
		}
		kill()
		conn = c.Conn(t)
		after, err := readTableLogState(ctx, conn, topic)
		if err != nil {
			t.Fatal(err)
		}
		if after.checkpoint != base.checkpoint {
			t.Fatalf("%s kill: the clean committed its checkpoint (%d) before the kill; make the clean slower", what, after.checkpoint)
		}
		t.Logf("%s killed mid-clean: %d of %d rows left, checkpoint still %d; back with %d rows", what, at.rows, base.rows, base.checkpoint, after.rows)
		cl.Close()
		cl = newClient()
		// Offsets never go backwards: the next record gets the old log end.
		want := end
		produce([]*kgo.Record{record(1, versions, false)})
		if latest["key-1"] != want {
			t.Fatalf("after the %s kill the next record got offset %d, want the log end %d", what, latest["key-1"], want)
		}
	}
	midClean("broker", func() {
		old := c.KillBroker(t)
		c.WaitBroker(t, old, 30*time.Second)
	})
	midClean("Postgres", func() {
		// A rate applies from the next clean on: set now, when the clean
		// to kill runs slowly, it makes the one after Postgres's restart
		// fast.
		setCleanerRate(t, ctx, cl, "1073741824")
		old := c.BrokerPID(t)
		c.KillPostgres(t)
		harness.WaitPortClosed(t, c.Addr, 10*time.Second)
		c.StartPG(t)
		c.WaitBroker(t, old, 30*time.Second)
	})

	harness.Eventually(t, 90*time.Second, func() error {
		last, n, err := readCompacted(ctx, c.Addr, topic, end, acked)
		if err != nil {
			return err
		}
		for k, off := range latest {
			if last[k] != off {
				return fmt.Errorf("%s: last read at %d, acknowledged last at %d", k, last[k], off)
			}
		}
		// Left: the active leaf (1 MiB: under 1200 records) and one
		// record per key below it.
		if n > 1200+keys {
			return fmt.Errorf("%d of %d records still there", n, end)
		}
		// the checkpoint is written after the cleaned rows are seen: on
		// a busy machine a read can come between the two
		st, err := readTableLogState(ctx, conn, topic)
		if err != nil {
			t.Fatal(err)
		}
		if st.start != 0 || st.checkpoint <= 0 {
			return fmt.Errorf("after cleaning: log start %d, cleaner checkpoint %d; want 0 and past it", st.start, st.checkpoint)
		}
		return nil
	})
	hi, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := hi.Lookup(topic, 0); e.Offset != end {
		t.Errorf("log end offset %d, want %d", e.Offset, end)
	}
}

// TestTableLogStartKill (issue #15): moving a table topic's log start
// commits the new start in kafgres.log_state and then drops the leaves
// wholly below it, one by one. A SIGKILL between the two leaves the new
// start committed and the leaves still there; this test makes that state
// (it commits a start in the middle of a leaf, as DeleteRecords would,
// and kills the broker before it learns of it) and checks what the
// restarted broker serves: the committed start as the earliest offset
// (ListOffsets), OFFSET_OUT_OF_RANGE for a fetch below it, every
// acknowledged record from it on, the leaves below it dropped at
// recovery and the leaf holding it kept.
func TestTableLogStartKill(t *testing.T) {
	c := harness.Start(t, "kafgres.storage_engine = table")
	ctx := ctxT(t)
	conn := c.Conn(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sp := func(s string) *string { return &s }
	const topic = "tstart-crash"
	createTopicWith(t, ctx, cl, topic, map[string]*string{"segment.bytes": sp("1048576")})
	acked := map[int64][]byte{}
	end := int64(0)
	// 5 MiB in batches of ten records: five leaves of 1 MiB.
	for i := range 100 {
		recs := make([]*kgo.Record, 10)
		for j := range recs {
			recs[j] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%d-%d %05000d", i, j, 0)}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			acked[r.Offset] = r.Value
			end = max(end, r.Offset+1)
		}
	}
	before, err := readTableLogState(ctx, conn, topic)
	if err != nil {
		t.Fatal(err)
	}
	var topicID int64
	if err := conn.QueryRow(ctx, `SELECT topic_id FROM kafgres.topic WHERE name = $1`, topic).Scan(&topicID); err != nil {
		t.Fatal(err)
	}
	rows, _ := conn.Query(ctx, `SELECT DISTINCT segment_base FROM kafgres.log_batch
		WHERE topic_id = $1 AND partition = 0 ORDER BY segment_base`, topicID)
	bases, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) < 5 || bases[4]-bases[3] < 10 {
		t.Fatalf("leaves at %v; want five of 1 MiB", bases)
	}
	// Three leaves below the new start, which is in the middle of the
	// fourth (and of a batch).
	const leavesBelow = 3
	leafBase := bases[leavesBelow]
	start := leafBase + 3
	// What advanceStart's transaction commits, then the kill before the
	// drops.
	if _, err := conn.Exec(ctx, `UPDATE kafgres.log_state SET log_start_offset = $2
		WHERE topic_id = $1 AND partition = 0`, topicID, start); err != nil {
		t.Fatal(err)
	}
	old := c.KillBroker(t)
	c.WaitBroker(t, old, 30*time.Second)

	after, err := readTableLogState(ctx, conn, topic)
	if err != nil {
		t.Fatal(err)
	}
	if after.start != start || after.leaves != before.leaves-leavesBelow {
		t.Fatalf("after the restart: log start %d with %d leaves; want %d with %d (of %d)", after.start, after.leaves, start, before.leaves-leavesBelow, before.leaves)
	}
	var kept int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM kafgres.log_batch
		WHERE topic_id = $1 AND partition = 0 AND segment_base = $2`, topicID, leafBase).Scan(&kept); err != nil || kept == 0 {
		t.Fatalf("the leaf at %d holding the new log start: %d rows (%v), want it kept", leafBase, kept, err)
	}

	_, cl2 := newAdmin(t, c.Addr)
	adm2 := kadm.NewClient(cl2)
	starts, err := adm2.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup(topic, 0); o.Err != nil || o.Offset != start {
		t.Fatalf("ListOffsets earliest: %d (%v), want %d", o.Offset, o.Err, start)
	}
	details, err := adm2.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, leafBase, start - 1} {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes = 0, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, details[topic].ID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset, fp.PartitionMaxBytes, fp.LogStartOffset = off, 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		res, err := req.RequestWith(ctx, cl2)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Topics) != 1 || len(res.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch at %d: %d topics in the response", off, len(res.Topics))
		}
		p := res.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != kerr.OffsetOutOfRange || p.LogStartOffset != start {
			t.Fatalf("fetch at %d, below the log start %d: %v with log start %d, want OFFSET_OUT_OF_RANGE", off, start, err, p.LogStartOffset)
		}
	}
	// Everything from the start on, as acknowledged.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.Addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(start)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for next := start; next < end; {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume from %d: %v", next, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next || string(r.Value) != string(acked[r.Offset]) {
				t.Fatalf("read offset %d (%.10q), want %d (%.10q)", r.Offset, r.Value, next, acked[next])
			}
			next++
		})
	}
}
