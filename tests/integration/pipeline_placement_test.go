package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/producer"
	"github.com/kafgres/kafgres/tests/harness"
)

// TestPipelinePlacementThroughCrashes: SQL-produced records with and
// without keys, to a topic with several partitions, survive the broker
// dying after some of a group's partitions were appended and before the
// slot was acknowledged (the producer's failpoint), with partitions added
// before the replay: every record is in the topic exactly once, for
// read_uncommitted and read_committed consumers alike.
func TestPipelinePlacementThroughCrashes(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "placed", 3)
	conn := c.Conn(t)
	ctx := context.Background()
	want := map[string]bool{}
	partitions := 3
	for round, appends := range []int{1, 2, 1, 3} {
		// Arm the failpoint for the next broker start.
		if err := os.WriteFile(filepath.Join(c.DataDir(), producer.FailpointFile), fmt.Appendf(nil, "crash-after-appends %d", appends), 0o644); err != nil {
			t.Fatal(err)
		}
		c.WaitBroker(t, c.KillBroker(t), 30*time.Second)
		armed := c.BrokerPID(t)

		// One transaction with keyed and NULL-key records, and a few
		// single-record ones committed at the same time, so that the
		// producer gets them as one group spanning several partitions.
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 24; i++ {
			v := fmt.Sprintf("r%d-big-%d", round, i)
			key := any(nil)
			if i%2 == 0 {
				key = fmt.Sprintf("key-%d-%d", round, i)
			}
			if _, err := tx.Exec(ctx, `SELECT kafgres_produce('placed', $1::text, $2::text)`, key, v); err != nil {
				t.Fatal(err)
			}
			want[v] = true
		}
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for i := 0; i < 6; i++ {
			v := fmt.Sprintf("r%d-small-%d", round, i)
			want[v] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				cn, err := pgx.Connect(ctx, c.DSN())
				if err != nil {
					errs <- err
					return
				}
				defer cn.Close(ctx)
				_, err = cn.Exec(ctx, `SELECT kafgres_produce('placed', NULL::text, $1::text)`, v)
				errs <- err
			}()
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}

		// The broker dies at the failpoint; the supervisor restarts it a
		// second later. Add a partition in that second, before the replay.
		// A fixed 10 ms poll, not harness.Eventually: its backoff could
		// spend a quarter of that second noticing the death.
		deadline := time.Now().Add(30 * time.Second)
		for syscall.Kill(armed, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the broker did not reach its failpoint (after %d appends)\n%s", round, appends, c.LogTail())
			}
			time.Sleep(10 * time.Millisecond)
		}
		partitions++
		c.Exec(t, `SELECT kafgres_create_partitions('placed', $1)`, partitions)
		c.WaitBroker(t, armed, 30*time.Second)
		waitDelivered(t, conn)
	}

	// read_committed too: every group holding a transaction that spans
	// partitions was a Kafka transaction, and the ones a crash left open
	// were committed by the replay, so nothing is held back behind the last
	// stable offset.
	for isolation, level := range map[string]kgo.IsolationLevel{"read_uncommitted": kgo.ReadUncommitted(), "read_committed": kgo.ReadCommitted()} {
		got := map[string]int{}
		for _, r := range readTopicAs(t, c.Addr, "placed", len(want), level) {
			got[string(r.Value)]++
		}
		for v := range want {
			if got[v] != 1 {
				t.Errorf("%s: record %s is in the topic %d times, want once", isolation, v, got[v])
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d distinct records in the topic, want %d", isolation, len(got), len(want))
		}
	}
}
