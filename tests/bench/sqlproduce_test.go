package bench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// latencies pairs, by record key, the time the record's transaction
// committed (as the writer saw COMMIT return) with the time a consumer
// received the record. Either may come first: the consumer can see a
// record before the writer gets to note its commit.
type latencies struct {
	mu        sync.Mutex
	committed map[string]time.Time
	received  map[string]time.Time
	first     time.Time // first commit noted
	last      time.Time // last record received
}

func newLatencies() *latencies {
	return &latencies{committed: map[string]time.Time{}, received: map[string]time.Time{}}
}

// commit notes that the transaction of the record with this key committed.
func (l *latencies) commit(key string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first.IsZero() {
		l.first = now
	}
	l.committed[key] = now
}

// consume reads topic from its start until n records arrived or ctx ends,
// noting when each arrived.
func (l *latencies) consume(ctx context.Context, addr, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Second))
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	defer cl.Close()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("consumed %d of %d records of %s: %w", got, n, topic, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("fetch %s: %w", topic, err)
		}
		now := time.Now()
		l.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			got++
			l.received[string(r.Key)] = now
		})
		l.last = now
		l.mu.Unlock()
	}
	return nil
}

// consumeAsync runs consume in the background; wait returns its error.
func (l *latencies) consumeAsync(addr, topic string, n int, timeout time.Duration) (wait func() error) {
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		errc <- l.consume(ctx, addr, topic, n)
	}()
	return func() error { return <-errc }
}

// delays are commit-to-receipt times of the committed keys, sorted; a
// receipt noted a hair before its commit counts as zero.
func (l *latencies) delays() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for k, at := range l.committed {
		if got, ok := l.received[k]; ok {
			ds = append(ds, max(got.Sub(at), 0))
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1))]
}

// report adds p50-ms and p99-ms of the commit-to-consumer delays.
func (l *latencies) report(b *testing.B) {
	ds := l.delays()
	if len(ds) == 0 {
		b.Fatal("no commit-to-consumer delay measured")
	}
	b.ReportMetric(float64(percentile(ds, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(ds, 0.99).Microseconds())/1000, "p99-ms")
}

// BenchmarkSQLProduceLatency: b.N single-statement transactions, each one
// kafgres_produce, one after another from one connection; commit-to-
// consumer latency.
func BenchmarkSQLProduceLatency(b *testing.B) {
	c := harness.Start(b)
	c.CreateTopic(b, "lat", 1)
	conn := c.Conn(b)
	l := newLatencies()
	wait := l.consumeAsync(c.Addr, "lat", b.N, 10*time.Minute)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := strconv.Itoa(i)
		if _, err := conn.Exec(ctx, `SELECT kafgres_produce('lat', $1::text, 'v')`, key); err != nil {
			b.Fatal(err)
		}
		l.commit(key)
	}
	if err := wait(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txn/s")
	l.report(b)
}
