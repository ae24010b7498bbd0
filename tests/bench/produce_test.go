// Package bench measures kafgres with real clients against a real cluster.
// Run (from tests/): go test ./bench -run '^$' -bench . -benchtime 200000x
// Numbers are recorded in docs/performance.md.
package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// BenchmarkProduce: b.N records of 1 KiB from one franz-go client with its
// defaults (idempotent, acks=all) except no compression and 5ms linger, into
// 3 partitions, with kafgres.fsync on (every ack after an fsync) and off.
func BenchmarkProduce(b *testing.B) {
	for _, fsync := range []string{"on", "off"} {
		b.Run("fsync="+fsync, func(b *testing.B) {
			c := harness.Start(b, "kafgres.fsync = "+fsync)
			c.CreateTopic(b, "bench", 3)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("bench"),
				kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000),
				kgo.ProducerBatchCompression(kgo.NoCompression())) // measure bytes, not a codec
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			value := make([]byte, 1024)
			var wg sync.WaitGroup
			var errOnce sync.Once
			var perr error
			b.SetBytes(int64(len(value)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				wg.Add(1)
				cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						errOnce.Do(func() { perr = err })
					}
					wg.Done()
				})
			}
			wg.Wait()
			b.StopTimer()
			if perr != nil {
				b.Fatal(perr)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkConsume: read b.N 1 KiB records back from the start.
func BenchmarkConsume(b *testing.B) {
	c := harness.Start(b)
	c.CreateTopic(b, "bench", 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("bench"), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	value := make([]byte, 1024)
	var wg sync.WaitGroup
	for i := 0; i < b.N; i++ {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Value: value}, func(*kgo.Record, error) { wg.Done() })
	}
	wg.Wait()

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	for n := 0; n < b.N; {
		fs := cons.PollFetches(context.Background())
		fs.EachError(func(_ string, _ int32, err error) { b.Fatal(err) })
		n += fs.NumRecords()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
