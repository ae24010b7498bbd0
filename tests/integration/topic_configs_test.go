package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// segmentFiles counts the .log files of one partition directory.
func segmentFiles(t *testing.T, dir string) int {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return len(logs)
}

// TestRetentionDeletesSegments: retention.ms and retention.bytes delete
// whole segments, the log start offset advances (also in Postgres) and the
// files are gone; segment.ms rolls segments.
func TestRetentionDeletesSegments(t *testing.T) {
	c := harness.Start(t, "kafgres.log_retention_check_interval = 200", "kafgres.storage_engine = segment") // it counts segment files
	adm, _ := newAdmin(t, c.Addr)
	ctx := ctxT(t)
	r, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{"segment.ms": sp("100"), "retention.ms": sp("2000")}, "ret-ms")
	if err != nil || r["ret-ms"].Err != nil {
		t.Fatalf("create ret-ms: %v %+v", err, r["ret-ms"])
	}
	r, err = adm.CreateTopics(ctx, 1, 1, map[string]*string{"segment.ms": sp("100"), "retention.bytes": sp("1")}, "ret-bytes")
	if err != nil || r["ret-bytes"].Err != nil {
		t.Fatalf("create ret-bytes: %v %+v", err, r["ret-bytes"])
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 5; i++ {
		for _, topic := range []string{"ret-ms", "ret-bytes"} {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte("r"), 100)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(150 * time.Millisecond) // past segment.ms: the next append rolls
	}
	// retention.bytes=1 keeps only the active segment: the four sealed ones
	// go at the next check
	waitStart := func(topic string, want int64, within time.Duration) {
		t.Helper()
		harness.Eventually(t, within, func() error {
			starts, err := adm.ListStartOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := starts.Lookup(topic, 0); o.Offset != want {
				return fmt.Errorf("%s: log start offset %d, want %d", topic, o.Offset, want)
			}
			return nil
		})
	}
	waitStart("ret-bytes", 4, 5*time.Second)
	if n := segmentFiles(t, filepath.Join(c.DataDir(), "ret-bytes-0")); n != 1 {
		t.Fatalf("ret-bytes: %d segment files after retention, want 1", n)
	}
	// retention.ms: every record is older than 2 s after a while, even the
	// active segment's, which is rolled and deleted
	waitStart("ret-ms", 5, 10*time.Second)
	if n := segmentFiles(t, filepath.Join(c.DataDir(), "ret-ms-0")); n != 1 {
		t.Fatalf("ret-ms: %d segment files after retention, want 1 (empty, active)", n)
	}
	conn := c.Conn(t)
	harness.Eventually(t, 5*time.Second, func() error {
		var start int64
		if err := conn.QueryRow(ctx, `SELECT log_start_offset FROM kafgres_partition_offsets('ret-ms')`).Scan(&start); err != nil {
			t.Fatal(err)
		}
		if start != 5 {
			return fmt.Errorf("kafgres.partition.log_start_offset of ret-ms is %d, want 5", start)
		}
		return nil
	})
	// the log goes on where it was
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ret-ms", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if first := firstOffset(t, c.Addr, "ret-ms"); first != 5 {
		t.Fatalf("first offset after retention: %d, want 5", first)
	}
}

// TestTopicConfigsChangeBehaviour: max.message.bytes, message.timestamp.type
// (also for records produced in SQL), segment.bytes and the timestamp range
// take effect when altered on a live topic.
func TestTopicConfigsChangeBehaviour(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "tc", 1)
	adm, _ := newAdmin(t, c.Addr)
	ctx := ctxT(t)
	alter := func(key, value string) {
		t.Helper()
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: &value}}, "tc")
		if err != nil || rs[0].Err != nil {
			t.Fatalf("set %s=%s: %v %+v", key, value, err, rs)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(r *kgo.Record) (*kgo.Record, error) {
		r.Topic = "tc"
		res := cl.ProduceSync(ctx, r)
		return res[0].Record, res.FirstErr()
	}

	alter("max.message.bytes", "2000")
	if _, err := produce(&kgo.Record{Value: bytes.Repeat([]byte("x"), 5000)}); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("5000-byte record with max.message.bytes=2000: %v", err)
	}
	if _, err := produce(&kgo.Record{Value: bytes.Repeat([]byte("x"), 1000)}); err != nil {
		t.Fatalf("1000-byte record: %v", err)
	}

	if _, err := produce(&kgo.Record{Value: []byte("future"), Timestamp: time.Now().Add(2 * time.Hour)}); !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("timestamp 2 h ahead: %v, want INVALID_TIMESTAMP", err)
	}

	alter("message.timestamp.type", "LogAppendTime")
	before := time.Now()
	if _, err := produce(&kgo.Record{Value: []byte("lat"), Timestamp: time.UnixMilli(1500000000000)}); err != nil {
		t.Fatal(err)
	}
	c.Exec(t, `SELECT kafgres_produce('tc', 'k', 'from sql')`)
	recs := consumeN(t, c.Addr, "tc", 3)
	for _, r := range recs[1:] {
		if r.Timestamp.Before(before.Add(-time.Second)) || r.Timestamp.After(time.Now().Add(time.Second)) || !(r.Attrs.TimestampType() == 1) {
			t.Fatalf("record %q: timestamp %v (type log-append %v), want the broker's clock", r.Value, r.Timestamp, (r.Attrs.TimestampType() == 1))
		}
	}

	alter("max.message.bytes", "1048588")
	alter("segment.bytes", "1048576") // Kafka's minimum
	dir := filepath.Join(c.DataDir(), "tc-0")
	for i := 0; i < 30; i++ {
		if _, err := produce(&kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 100_000)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := segmentFiles(t, dir); n < 3 {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("3 MB with segment.bytes=1 MiB: %d segments (%s)", n, strings.Join(names, " "))
	}
}

// consumeN reads the first n records of partition 0 of topic.
func consumeN(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d of %d records from %s", len(out), n, topic)
		}
		out = append(out, fs.Records()...)
	}
	return out[:n]
}
