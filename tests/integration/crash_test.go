package integration

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestKillBrokerDuringProduce kills the broker with SIGKILL three times
// while an idempotent acks=all producer streams. The supervisor must restart
// it, and afterwards every acknowledged record must read back with the same
// bytes at the same offset, with dense offsets and no duplicates.
func TestKillBrokerDuringProduce(t *testing.T) {
	c := harness.Start(t)
	produceThroughCrashes(t, c, func(k int) {
		old := c.KillBroker(t)
		start := time.Now()
		c.WaitBroker(t, old, 15*time.Second)
		t.Logf("kill %d: broker %d replaced in %v", k+1, old, time.Since(start).Round(time.Millisecond))
	})
}

// TestKillPostgresDuringProduce: the same with SIGKILL of the postmaster.
// The broker must go with it (liveness pipe), and come back with every
// acknowledged record once Postgres has recovered.
func TestKillPostgresDuringProduce(t *testing.T) {
	c := harness.Start(t)
	produceThroughCrashes(t, c, func(k int) {
		old := c.BrokerPID(t)
		c.KillPostgres(t)
		harness.WaitPortClosed(t, c.Addr, 10*time.Second)
		// Not ordering but the length of the outage: the producer's
		// retries (every 100 ms) must run into it, and nothing shows
		// from outside that they did.
		time.Sleep(300 * time.Millisecond)
		c.StartPG(t)
		c.WaitBroker(t, old, 15*time.Second)
		t.Logf("postgres kill %d: broker back", k+1)
	})
}

func produceThroughCrashes(t *testing.T, c *harness.Cluster, crash func(k int)) {
	c.CreateTopic(t, "crash", 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("crash"),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	var (
		mu       sync.Mutex
		acked    = map[tpo]produced{}
		perr     error
		wg       sync.WaitGroup
		crashing atomic.Bool
		n        int
	)
	// The producer runs beside the test goroutine, which does the crashing
	// (the harness may fail the test, which only that goroutine may do).
	crashing.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	producing := make(chan struct{})
	go func() {
		defer close(producing)
		for crashing.Load() || n < 5000 {
			p := produced{key: []byte(fmt.Sprint(n % 50)), value: []byte(fmt.Sprintf("value-%08d", n))}
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: p.key, Value: p.value}, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					perr = err
					return
				}
				if _, dup := acked[tpo{r.Partition, r.Offset}]; dup {
					perr = fmt.Errorf("offset %d/%d acknowledged twice", r.Partition, r.Offset)
				}
				acked[tpo{r.Partition, r.Offset}] = p
			})
			n++
			if n%200 == 0 {
				time.Sleep(10 * time.Millisecond) // spread the stream over the crashes
			}
		}
	}()
	for k := 0; k < 3; k++ {
		// crash at different points of the produce stream, whatever it
		// has reached: the timing is the test's input, not an ordering
		time.Sleep(time.Duration(500+300*k) * time.Millisecond)
		crash(k)
	}
	crashing.Store(false)
	<-producing
	wg.Wait()
	if perr != nil {
		t.Fatalf("produce: %v", perr)
	}
	if len(acked) != n {
		t.Fatalf("%d acknowledged of %d produced", len(acked), n)
	}
	t.Logf("%d records acknowledged across 3 crashes", n)
	// consumeAll fails on any record that was not acknowledged at its offset,
	// so dense offsets and no duplicates follow from reading exactly n.
	consumeAll(t, c.Addr, "crash", acked)
}

// TestPostgresStopStopsBroker: pg_ctl stop -m fast closes 9092 by the time
// it returns; starting Postgres starts the broker again.
func TestPostgresStopStopsBroker(t *testing.T) {
	c := harness.Start(t)
	if !harness.PortOpen(c.Addr) {
		t.Fatalf("broker not serving on %s", c.Addr)
	}
	c.StopPG(t, "fast")
	if harness.PortOpen(c.Addr) {
		t.Fatalf("port %s still open after pg_ctl stop returned", c.Addr)
	}
	c.StartPG(t)
	c.CreateTopic(t, "after-restart", 1)
	out := produceAll(t, c.Addr, "after-restart", 10)
	consumeAll(t, c.Addr, "after-restart", out)
}

// TestMalformedFramesCloseOnlyThatConnection sends garbage, an oversized
// frame and an unknown API key; each connection is closed, while a client
// connected throughout keeps working.
func TestMalformedFramesCloseOnlyThatConnection(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "steady", 1)
	steady := newRaw(t, c.Addr)
	steady.initProducerID() // connection established before the abuse

	frames := map[string][]byte{
		"garbage":         []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"oversized frame": {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		"unknown api key": {0, 0, 0, 10, 0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff},
		"truncated body":  {0, 0, 0, 12, 0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0, 5},
		"short frame":     {0, 0, 0, 2, 0, 18},
	}
	for name, frame := range frames {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", c.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.Write(frame)
			nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 64)
			if n, err := nc.Read(buf); err == nil {
				t.Fatalf("connection answered %d bytes instead of closing", n)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection still open after %s", name)
			}
			code, _ := steady.produce("steady", batch(-1, -1, -1, 1, name))
			if code != 0 {
				t.Fatalf("steady client failed after %s: code %d", name, code)
			}
		})
	}
}
