package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// BenchmarkFetchSendfile (issue #16, "Fetch without copies"): one cluster,
// a topic of 3 partitions filled with $KAFGRES_SENDFILE_MB MiB (default
// 512) of 1 KiB records, then consumed from the start by one franz-go
// client again and again, kafgres.fetch_sendfile alternating between on
// (records sent from the segment files with sendfile) and off (read into
// the broker's memory and written from there), $KAFGRES_SENDFILE_PAIRS
// pairs (default 4). Prints, per mode, MB/s and the broker's CPU seconds
// per GB fetched (utime+stime from /proc), each run and the medians. The
// records are in the page cache throughout: this measures the broker's
// copies, not the disk.
func BenchmarkFetchSendfile(b *testing.B) {
	mb := harness.EnvInt(b, "KAFGRES_SENDFILE_MB", 512)
	pairs := harness.EnvInt(b, "KAFGRES_SENDFILE_PAIRS", 4)
	c := harness.Start(b)
	c.CreateTopic(b, "sendfile", 3)
	payload := newPayload()[:1024]
	n := mb << 10
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("sendfile"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var perr error
	var mu sync.Mutex
	for range n {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Value: payload}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				perr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	cl.Close()
	if perr != nil {
		b.Fatal(perr)
	}

	current := true // the default
	set := func(on bool) {
		if on == current {
			return
		}
		current = on
		old := c.BrokerPID(b)
		c.Exec(b, fmt.Sprintf("ALTER SYSTEM SET kafgres.fetch_sendfile = %v", on))
		c.Exec(b, "SELECT pg_reload_conf()")
		c.WaitBroker(b, old, 30*time.Second)
	}
	type run struct{ mbps, cpuPerGB float64 }
	runs := map[bool][]run{}
	ctx := context.Background()
	for i := range pairs * 2 {
		on := i%2 == 0
		if i/2%2 == 1 {
			on = !on // on first, then off first, alternately
		}
		set(on)
		pid := c.BrokerPID(b)
		cpu0, err := cpuSeconds(pid)
		if err != nil {
			b.Fatal(err)
		}
		r, err := consumeFranz(ctx, c.Addr, "sendfile", n)
		if err != nil {
			b.Fatal(err)
		}
		cpu1, err := cpuSeconds(pid)
		if err != nil {
			b.Fatal(err)
		}
		gb := float64(n) * 1024 / 1e9
		runs[on] = append(runs[on], run{mbps: gb * 1e3 / r.elapsed.Seconds(), cpuPerGB: (cpu1 - cpu0) / gb})
	}
	var out strings.Builder
	fmt.Fprintf(&out, "fetch of %d MiB of 1 KiB records, franz-go from the start, %d pairs\n", mb, pairs)
	for _, on := range []bool{true, false} {
		var mbps, cpu []float64
		for _, r := range runs[on] {
			mbps = append(mbps, r.mbps)
			cpu = append(cpu, r.cpuPerGB)
		}
		fmt.Fprintf(&out, "  fetch_sendfile=%-5v MB/s %s (median %.0f)  CPU s/GB %s (median %.2f)\n",
			on, joinf(mbps, "%.0f"), median(mbps), joinf(cpu, "%.2f"), median(cpu))
	}
	b.Log("\n" + out.String())
}

func joinf(xs []float64, f string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf(f, x)
	}
	return strings.Join(s, " / ")
}
