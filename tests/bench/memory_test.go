package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafgres/kafgres/tests/harness"
	"github.com/kafgres/kafgres/tests/hostile"
)

// BenchmarkMemoryBound: what hostile clients can make the broker hold
// (issue #10, findings 5 and 6). 100 connections each send a request frame
// of the largest size allowed (socket.request.max.bytes, 100 MiB) at
// once; then a 1 MB gzip batch that inflates to 900 MiB is produced and a
// ListOffsets by timestamp runs over its partition. The broker must stay
// under 1 GiB resident (VmHWM of /proc/<pid>/status) and serve a normal
// produce and fetch afterwards. The scenario runs once whatever b.N:
//
//	cd tests && go test ./bench -run '^$' -bench MemoryBound -benchtime 1x -v
func BenchmarkMemoryBound(b *testing.B) {
	const (
		conns    = 100
		maxFrame = 100 << 20
		limit    = 1 << 30
	)
	c := harness.Start(b)
	c.CreateTopic(b, "mem", 1)
	pid := c.BrokerPID(b)
	before := statusKB(b, pid, "VmRSS")
	b.ResetTimer()

	// 100 maximum-size frames at once: Produce requests whose records are
	// 100 MiB of zeros (refused, but only after the broker read them).
	frame := hostile.ProduceFrame("mem", 0, maxFrame-64)
	if len(frame)-4 > maxFrame {
		b.Fatalf("frame of %d bytes", len(frame)-4)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", c.Addr)
			if err != nil {
				errs[i] = err
				return
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Minute))
			if _, err := nc.Write(frame); err != nil {
				errs[i] = fmt.Errorf("connection %d: write: %w", i, err)
				return
			}
			if _, err := hostile.ReadResponse(nc); err != nil {
				errs[i] = fmt.Errorf("connection %d: response: %w", i, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	framesTook := time.Since(start)
	afterFrames := statusKB(b, pid, "VmHWM")

	// The gzip bomb, then a timestamp lookup on its partition.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(0, 12)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.RequestRetries(0), kgo.MaxVersions(versions))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	bomb, inflated := hostile.GzipBomb()
	bombCode := produceOne(b, cl, "mem", bomb)
	lookup := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "mem"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = 0
	lt.Partitions = append(lt.Partitions, lp)
	lookup.Topics = append(lookup.Topics, lt)
	if _, err := lookup.RequestWith(context.Background(), cl); err != nil {
		b.Fatalf("ListOffsets by timestamp: %v", err)
	}
	b.StopTimer()

	peak := statusKB(b, pid, "VmHWM")
	fmt.Printf("broker RSS: %d MiB before; peak %d MiB after %d frames of %d MiB (%v); peak %d MiB after a %d-byte gzip batch inflating to %d MiB (answered error code %d) and a ListOffsets by timestamp\n",
		before>>10, afterFrames>>10, conns, maxFrame>>20, framesTook.Round(time.Second), peak>>10, len(bomb), inflated>>20, bombCode)
	b.ReportMetric(float64(peak>>10), "peak-RSS-MiB")
	if peak<<10 > limit {
		b.Fatalf("broker peaked at %d MiB, over 1 GiB", peak>>10)
	}

	// Still serving: a normal produce and fetch.
	if pid != c.BrokerPID(b) {
		b.Fatalf("broker %d was replaced", pid)
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("after"), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("after"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 100 {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			b.Fatalf("produce after: %v", err)
		}
	}
	for got := 0; got < 100; {
		fs := p.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			b.Fatalf("fetched %d of 100 records after: %v", got, err)
		}
		got += fs.NumRecords()
	}
}

func statusKB(b *testing.B, pid int, field string) int64 {
	n, err := hostile.StatusKB(pid, field)
	if err != nil {
		b.Fatalf("broker %d: %v", pid, err)
	}
	return n
}

func produceOne(b *testing.B, cl *kgo.Client, topic string, records []byte) int16 {
	req := hostile.ProduceRequest(topic, records)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		b.Fatalf("produce: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// BenchmarkMemoryLargeValues: what 100 MiB row values cost the broker
// (issue #41, item 3). Three rows of a 100 MiB text column are inserted,
// one at a time, into a table with two mappings: one renders the whole row
// (to_jsonb(new), 100 MiB: refused in Postgres for the topic's
// max.message.bytes and dead-lettered with the row), one its length (a
// small record, delivered). The broker's peak resident memory (VmHWM) is
// reported; it must stay under 1 GiB, and the third row must not cost more
// than the first. Runs once whatever b.N:
//
//	cd tests && go test ./bench -run '^$' -bench MemoryLargeValues -benchtime 1x -v
func BenchmarkMemoryLargeValues(b *testing.B) {
	const (
		rows  = 3
		mib   = 100
		limit = 1 << 30
	)
	c := harness.Start(b)
	conn := c.Conn(b)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE huge (id int PRIMARY KEY, doc text)`,
		`SELECT kafgres_create_topic('huge-rows', 1)`,
		`SELECT kafgres_create_topic('huge-sizes', 1)`,
		`SELECT kafgres_add_mapping('huge-rows', 'huge', 'huge-rows')`,
		`SELECT kafgres_add_mapping('huge-sizes', 'huge', 'huge-sizes', value_expr => $$ length(new.doc)::text $$)`,
		`INSERT INTO huge VALUES (0, 'small')`,
		`SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '60 seconds')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	pid := c.BrokerPID(b)
	before := statusKB(b, pid, "VmHWM")
	b.ResetTimer()
	var peaks []int64
	for i := 1; i <= rows; i++ {
		// md5 text does not compress much: the WAL and the decoder carry
		// all of it
		if _, err := conn.Exec(ctx, `INSERT INTO huge SELECT $1, string_agg(md5(g::text), '') FROM generate_series(1, $2) AS g`,
			i, mib<<20/32); err != nil {
			b.Fatal(err)
		}
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '300 seconds')`).Scan(&ok); err != nil || !ok {
			b.Fatalf("row %d not delivered: %v %v", i, ok, err)
		}
		peaks = append(peaks, statusKB(b, pid, "VmHWM"))
	}
	b.StopTimer()
	var dead int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM kafgres.dead_letter WHERE mapping_name = 'huge-rows'
	                               AND error LIKE 'record of % bytes (key and value) is larger than max.message.bytes%'`).Scan(&dead); err != nil || dead != rows {
		b.Fatalf("%d dead letters of huge-rows (%v), want %d", dead, err, rows)
	}
	peak := peaks[len(peaks)-1]
	fmt.Printf("broker peak RSS: %d MiB before; after each %d MiB row: %v MiB\n", before>>10, mib, func() []int64 {
		out := make([]int64, len(peaks))
		for i, p := range peaks {
			out[i] = p >> 10
		}
		return out
	}())
	b.ReportMetric(float64(peak>>10), "peak-RSS-MiB")
	if peak<<10 > limit {
		b.Fatalf("broker peaked at %d MiB, over 1 GiB", peak>>10)
	}
}
