package bench

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// BenchmarkTenThousandPartitions: one topic of 10,000 partitions
// ($KAFGRES_SCALE_PARTITIONS): how long creating it takes, franz-go
// produce throughput across all of them (1 KiB records, round robin,
// $KAFGRES_SCALE_RECORDS of them), Metadata and ListOffsets latency over
// every partition, the broker's RSS and open descriptors, how long a
// broker killed with SIGKILL takes to serve them all again, and how long a
// clean stop and the start after it take, twice: after writes and with
// nothing written since the start (issue #16, "Scale"). Restarts
// include the supervisor's 1 s before it starts a broker again. It
// ignores b.N.
func BenchmarkTenThousandPartitions(b *testing.B) {
	n := harness.EnvInt(b, "KAFGRES_SCALE_PARTITIONS", 10_000)
	records := harness.EnvInt(b, "KAFGRES_SCALE_RECORDS", 200_000)
	ctx := context.Background()
	c := harness.Start(b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("scale"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(100_000), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()

	start := time.Now()
	c.CreateTopic(b, "scale", n)
	waitAllPartitions(b, ctx, cl, n, 10*time.Minute)
	create := time.Since(start)

	stopSampling := sampleThreads(c.BrokerPID(b))
	start = time.Now()
	produceRoundRobin(b, ctx, cl, records)
	produced := time.Since(start)
	threads := stopSampling()

	meta := timeEach(b, 30, func() error { _, err := allMetadata(ctx, cl); return err })
	lists := timeEach(b, 30, func() error { return listAllLatest(ctx, cl, n) })
	rss, fds := brokerUsage(b, c.BrokerPID(b))

	// servingAgain is how long until a broker other than old leads all n
	// partitions and answers ListOffsets for them.
	servingAgain := func(old int) time.Duration {
		start := time.Now()
		c.WaitBroker(b, old, 10*time.Minute)
		waitAllPartitions(b, ctx, cl, n, 10*time.Minute)
		if err := listAllLatest(ctx, cl, n); err != nil {
			b.Fatalf("ListOffsets after the restart: %v", err)
		}
		return time.Since(start)
	}
	restart := servingAgain(c.KillBroker(b))
	rssAfter, _ := brokerUsage(b, c.BrokerPID(b))

	// A clean stop (SIGTERM) and the start after it, which takes each
	// log's clean-stop record instead of reading its active segment. A
	// stop through the supervisor (a reload, Postgres's shutdown) that
	// takes longer than its 5 s is cut short by SIGKILL, and the logs not
	// closed by then are read at the next start as after a crash.
	start = time.Now()
	stopped := c.StopBroker(b)
	stop := time.Since(start)
	cleanRestart := servingAgain(stopped)
	// The same again with nothing written in between, as in a restart of
	// a broker whose partitions are mostly idle: a log still as its
	// record says has nothing to write at the stop or at the start.
	start = time.Now()
	stopped = c.StopBroker(b)
	idleStop := time.Since(start)
	idleRestart := servingAgain(stopped)

	b.ReportMetric(create.Seconds(), "create-s")
	b.ReportMetric(float64(records)/produced.Seconds(), "produce-records/s")
	b.ReportMetric(float64(records)*1024/produced.Seconds()/1e6, "produce-MB/s")
	b.ReportMetric(ms(percentile(meta, 0.5)), "metadata-p50-ms")
	b.ReportMetric(ms(percentile(meta, 0.99)), "metadata-p99-ms")
	b.ReportMetric(ms(percentile(lists, 0.5)), "listoffsets-p50-ms")
	b.ReportMetric(ms(percentile(lists, 0.99)), "listoffsets-p99-ms")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	b.ReportMetric(float64(fds), "open-fds")
	b.ReportMetric(float64(threads), "threads-max")
	b.ReportMetric(restart.Seconds(), "restart-s")
	b.ReportMetric(float64(rssAfter)/(1<<20), "rss-after-restart-MiB")
	b.ReportMetric(stop.Seconds(), "clean-stop-s")
	b.ReportMetric(cleanRestart.Seconds(), "clean-restart-s")
	b.ReportMetric(idleStop.Seconds(), "idle-stop-s")
	b.ReportMetric(idleRestart.Seconds(), "idle-restart-s")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func allMetadata(ctx context.Context, cl *kgo.Client) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest() // no topics listed: all of them
	return req.RequestWith(ctx, cl)
}

// waitAllPartitions waits until Metadata shows n partitions of "scale",
// each with a leader.
func waitAllPartitions(b *testing.B, ctx context.Context, cl *kgo.Client, n int, timeout time.Duration) {
	b.Helper()
	err := harness.Poll(timeout, func() error {
		resp, err := allMetadata(ctx, cl)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			if t.Topic == nil || *t.Topic != "scale" {
				continue
			}
			led := 0
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					led++
				}
			}
			if led != n {
				return fmt.Errorf("%d of %d partitions led", led, n)
			}
			return nil
		}
		return fmt.Errorf("topic scale not in metadata")
	})
	if err != nil {
		b.Fatalf("waiting for %d partitions: %v", n, err)
	}
}

func produceRoundRobin(b *testing.B, ctx context.Context, cl *kgo.Client, records int) {
	b.Helper()
	value := make([]byte, 1024)
	var wg sync.WaitGroup
	var once sync.Once
	var perr error
	for range records {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				once.Do(func() { perr = err })
			}
			wg.Done()
		})
	}
	wg.Wait()
	if perr != nil {
		b.Fatalf("produce: %v", perr)
	}
}

// listAllLatest asks for the latest offset of every partition of "scale"
// in one request.
func listAllLatest(ctx context.Context, cl *kgo.Client, n int) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "scale"
	for p := range n {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = int32(p), -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
		}
	}
	return nil
}

// timeEach runs fn rounds times and returns the sorted durations.
func timeEach(b *testing.B, rounds int, fn func() error) []time.Duration {
	b.Helper()
	ds := make([]time.Duration, 0, rounds)
	for range rounds {
		start := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

// sampleThreads watches the broker's thread count every 10 ms until the
// returned function is called, which returns the highest seen.
func sampleThreads(pid int) func() int {
	done := make(chan struct{})
	most := make(chan int)
	go func() {
		high := 0
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				for _, line := range strings.Split(string(status), "\n") {
					if rest, ok := strings.CutPrefix(line, "Threads:"); ok {
						n, _ := strconv.Atoi(strings.TrimSpace(rest))
						high = max(high, n)
					}
				}
			}
			select {
			case <-done:
				most <- high
				return
			case <-tick.C:
			}
		}
	}()
	return func() int { close(done); return <-most }
}

// brokerUsage is the broker's resident memory in bytes and its open
// descriptors, from /proc.
func brokerUsage(b *testing.B, pid int) (rss int64, fds int) {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		b.Fatal(err)
	}
	return rss, len(entries)
}
