package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// latencies collects commit-to-consumer delays keyed by record value.
type latencies struct {
	mu        sync.Mutex
	committed map[string]time.Time
	delays    []time.Duration
}

func (l *latencies) percentile(p float64) time.Duration {
	sort.Slice(l.delays, func(i, j int) bool { return l.delays[i] < l.delays[j] })
	if len(l.delays) == 0 {
		return 0
	}
	return l.delays[int(p*float64(len(l.delays)-1))]
}

// consume reads topic until n records arrived, recording for each the time
// since its transaction's COMMIT returned.
func (l *latencies) consume(b *testing.B, addr, topic string, n int, ready chan<- struct{}) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(time.Second))
	if err != nil {
		b.Error(err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl.ForceMetadataRefresh()
	close(ready)
	got := 0
	for got < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			got++
			l.mu.Lock()
			if at, ok := l.committed[string(r.Key)]; ok {
				l.delays = append(l.delays, now.Sub(at))
			}
			l.mu.Unlock()
		})
	}
}

// BenchmarkSQLProduceLatency: single-row transactions, each with one
// kafgres_produce, one after another; commit-to-consumer latency.
func BenchmarkSQLProduceLatency(b *testing.B) {
	c := harness.Start(b)
	c.CreateTopic(b, "lat", 1)
	conn := c.Conn(b)
	l := &latencies{committed: map[string]time.Time{}}
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); l.consume(b, c.Addr, "lat", b.N, ready) }()
	<-ready
	time.Sleep(500 * time.Millisecond) // consumer positioned at the end
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := strconv.Itoa(i)
		if _, err := conn.Exec(ctx, `SELECT kafgres_produce('lat', $1::text, 'v')`, key); err != nil {
			b.Fatal(err)
		}
		l.mu.Lock()
		l.committed[key] = time.Now()
		l.mu.Unlock()
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txn/s")
	b.ReportMetric(float64(l.percentile(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(l.percentile(0.99).Microseconds())/1000, "p99-ms")
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// BenchmarkPgbenchWithProduce: pgbench's TPC-B-like transaction, alone and
// with one kafgres_produce added, on the same cluster in one run.
func BenchmarkPgbenchWithProduce(b *testing.B) {
	c := harness.Start(b)
	c.CreateTopic(b, "pgbench", 3)
	pgbench := func(args ...string) string {
		b.Helper()
		cmd := exec.Command("pgbench", append([]string{"-h", filepath.Join(c.Dir, "run"), "-p", strconv.Itoa(c.PGPort), "-U", "postgres"}, args...)...)
		cmd.Args = append(cmd.Args, "postgres")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("pgbench %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	pgbench("-i", "-q", "-s", "10")
	script := filepath.Join(b.TempDir(), "produce.sql")
	// pgbench's built-in tpcb-like script plus one produce.
	os.WriteFile(script, []byte(`\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
SELECT kafgres_produce('pgbench', :aid::text, '{"account": ' || :aid || ', "delta": ' || :delta || '}');
END;
`), 0o644)
	os.Chmod(filepath.Dir(script), 0o755)
	tps := func(out string) float64 {
		m := tpsLine.FindStringSubmatch(out)
		if m == nil {
			b.Fatalf("no tps in pgbench output:\n%s", out)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	secs := "20"
	base := tps(pgbench("-c", "4", "-j", "2", "-T", secs, "-n"))
	with := tps(pgbench("-c", "4", "-j", "2", "-T", secs, "-n", "-f", script))
	b.ReportMetric(base, "tps-plain")
	b.ReportMetric(with, "tps-with-produce")
	b.ReportMetric(100*(base-with)/base, "cost-%")
	fmt.Fprintf(os.Stderr, "pgbench: %.0f tps plain, %.0f tps with one kafgres_produce per transaction\n", base, with)
}

// BenchmarkCDC: a mapped table, one transaction after another; rows/s and
// commit-to-consumer latency of each transaction's last row, for
// single-row transactions and for 10k-row transactions.
func BenchmarkCDC(b *testing.B) {
	for _, rows := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("rows-per-txn=%d", rows), func(b *testing.B) {
			c := harness.Start(b)
			c.CreateTopic(b, "cdc", 3)
			c.Exec(b, `CREATE TABLE cdc_rows (id bigint PRIMARY KEY, customer int, total numeric, status text)`)
			c.Exec(b, `SELECT kafgres_add_mapping('cdc', 'public.cdc_rows', 'cdc',
				value_expr => $$ jsonb_build_object('id', new.id, 'total', new.total, 'status', new.status, 'op', op) $$,
				key_expr => $$ new.id::text $$)`)
			conn := c.Conn(b)
			l := &latencies{committed: map[string]time.Time{}}
			ready := make(chan struct{})
			done := make(chan struct{})
			go func() { defer close(done); l.consume(b, c.Addr, "cdc", b.N*rows, ready) }()
			<-ready
			time.Sleep(500 * time.Millisecond)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				first, last := int64(i*rows), int64((i+1)*rows-1)
				if _, err := conn.Exec(ctx, `INSERT INTO cdc_rows SELECT g, g % 100, 9.99, 'placed' FROM generate_series($1::bigint, $2::bigint) g`, first, last); err != nil {
					b.Fatal(err)
				}
				l.mu.Lock()
				l.committed[strconv.FormatInt(last, 10)] = time.Now()
				l.mu.Unlock()
			}
			<-done
			b.StopTimer()
			b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(l.percentile(0.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(l.percentile(0.99).Microseconds())/1000, "p99-ms")
		})
	}
}
