package integration

// A consumer group under churn: members of mixed clients (franz-go
// in-process, kcat -G processes, kafka-python through
// testdata/group_member.py) join, leave and get SIGKILLed while a producer
// produces. Every member records the offsets it processed; at the end the
// group's committed offsets must reach the log end of every partition and
// every offset below them must have been processed at least once
// (duplicates are allowed: a killed member's uncommitted work is redone).

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// franzMember is a franz-go group member that records what it polled and
// then commits it (at least once).
type franzMember struct {
	*ledger
	label  string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *franzMember) name() string { return m.label }

func startFranz(t *testing.T, label, addr, group, topic string) *franzMember {
	t.Helper()
	m := &franzMember{ledger: newLedger(), label: label, done: make(chan struct{})}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		// range: the assignor kcat (librdkafka) and kafka-python also offer;
		// franz-go's default (cooperative-sticky) alone would make the group
		// refuse them with INCONSISTENT_GROUP_PROTOCOL, as Kafka does.
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, c *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			m.owned = len(a[topic])
			m.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, c *kgo.Client, _ map[string][]int32) {
			c.CommitUncommittedOffsets(ctx) // what we processed is ours to commit
			m.mu.Lock()
			m.owned = 0
			m.mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			var got []partOff
			fs.EachRecord(func(r *kgo.Record) { got = append(got, partOff{r.Partition, r.Offset}) })
			if len(got) == 0 {
				continue
			}
			m.mu.Lock()
			m.recs = append(m.recs, got...)
			m.mu.Unlock()
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			cl.CommitUncommittedOffsets(cctx)
			ccancel()
		}
	}()
	t.Cleanup(m.stop)
	return m
}

func (m *franzMember) stop() {
	m.cancel()
	<-m.done
	m.cl.Close() // commits nothing more, leaves the group
}

func (m *franzMember) kill() { m.stop() }

// startKcat runs a kcat group member that commits nothing: librdkafka
// stores a message's offset when kcat polls it, and kcat drops a polled
// message unprinted once SIGTERM has arrived (consume_cb returns when
// !conf.run), so its commits could cover records it never showed. It still
// joins, rebalances and consumes like any member.
func startKcat(t *testing.T, label, addr, group, topic string) *procMember {
	return startProc(t, label, exec.Command("kcat", "-b", addr, "-G", group, topic,
		"-o", "beginning", "-u", "-q", "-f", "rec %p %o\n",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
		"-X", "enable.auto.offset.store=false"))
}

func TestGroupChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("about a minute of churn")
	}
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	python := pythonVenv(t)
	const topic, group, partitions = "churn", "churn-g", 4
	c.CreateTopic(t, topic, partitions)

	// the producer: one record every few ms, round robin over partitions
	// A buffered record waits for delivery whatever ProduceSync's context
	// says; the delivery timeout makes a dead cluster fail the test
	// rather than hang it.
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var produced atomic.Int64
	pctx, pstop := context.WithCancel(context.Background())
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for i := 0; pctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(fmt.Sprint(i))}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				cancel()
				return
			}
			cancel()
			produced.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()

	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var all, live []member
	n := 0
	start := func(kind int) {
		n++
		var m member
		switch kind % 3 {
		case 0:
			m = startFranz(t, fmt.Sprintf("franz-%d", n), c.Addr, group, topic)
		case 1:
			m = startKcat(t, fmt.Sprintf("kcat-%d", n), c.Addr, group, topic)
		default:
			m = startPython(t, python, "kafka-python", "classic", fmt.Sprintf("kafka-python-%d", n), c.Addr, group, topic)
		}
		all = append(all, m)
		live = append(live, m)
	}
	for k := 0; k < 3; k++ {
		start(k)
	}
	var log []string
	// 30 s in CI (a dozen joins, leaves and kills); make soak: 5 minutes
	churnEnd := time.Now().Add(soakLength(t, "KAFGRES_CHURN_SECONDS", 30*time.Second))
	for time.Now().Before(churnEnd) && !t.Failed() {
		time.Sleep(time.Duration(1500+rng.Intn(2500)) * time.Millisecond)
		switch a := rng.Intn(3); {
		case a == 0 && len(live) < 6 || len(live) < 2:
			start(rng.Intn(3))
			log = append(log, "+"+live[len(live)-1].name())
		case a == 1:
			i := rng.Intn(len(live))
			live[i].stop()
			log = append(log, "-"+live[i].name())
			live = append(live[:i], live[i+1:]...)
		default:
			// SIGKILL a kafka-python member when there is one. It prints and
			// flushes a batch before committing it, so a kill loses nothing
			// committed. (kcat members commit nothing at all, see
			// startKcat.)
			var procs []int
			for i, m := range live {
				if _, ok := m.(*procMember); ok && strings.HasPrefix(m.name(), "kafka-python") {
					procs = append(procs, i)
				}
			}
			if len(procs) == 0 {
				continue
			}
			i := procs[rng.Intn(len(procs))]
			live[i].kill()
			log = append(log, "kill "+live[i].name())
			live = append(live[:i], live[i+1:]...)
		}
	}
	pstop()
	pwg.Wait()
	t.Logf("churn: %v; %d records produced, %d members in all", log, produced.Load(), len(all))

	// kcat members commit nothing (startKcat), so they leave before the
	// end; a last franz member makes sure someone is left to finish the
	// work
	kept := live[:0]
	for _, m := range live {
		if strings.HasPrefix(m.name(), "kcat") {
			m.stop()
			log = append(log, "-"+m.name())
			continue
		}
		kept = append(kept, m)
	}
	live = kept
	start(0)
	ends := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		ends[p] = int64(produced.Load()+int64(partitions-1)-int64(p)) / partitions
	}
	conn := c.Conn(t) // one connection for the whole poll
	harness.Eventually(t, 60*time.Second, func() error {
		rows, err := conn.Query(context.Background(),
			`SELECT partition, committed_offset, log_end_offset FROM kafgres.consumer_lag WHERE group_id = $1`, group)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		done := 0
		state := ""
		for rows.Next() {
			var p int32
			var committed, end int64
			if err := rows.Scan(&p, &committed, &end); err != nil {
				t.Fatal(err)
			}
			// kafgres.consumer_lag's log end is the mirror's, which
			// follows the log a moment later: short of what was
			// produced is not yet, beyond it is wrong
			if end > ends[p] {
				t.Fatalf("partition %d: log end %d, produced %d", p, end, ends[p])
			}
			if end == ends[p] && committed == end {
				done++
			}
			state += fmt.Sprintf(" p%d=%d/%d", p, committed, end)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if done != partitions {
			return fmt.Errorf("committed offsets did not reach the log end:%s", state)
		}
		return nil
	})
	for _, m := range live {
		m.stop()
	}

	seen := processedCount(all...)
	dups := 0
	for p := int32(0); p < partitions; p++ {
		for o := int64(0); o < ends[p]; o++ {
			switch k := seen[partOff{p, o}]; {
			case k == 0:
				t.Errorf("partition %d offset %d committed but never processed", p, o)
			case k > 1:
				dups++
			}
		}
	}
	t.Logf("%d offsets processed more than once (at least once after kills and rebalances)", dups)
}
