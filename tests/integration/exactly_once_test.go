package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestExactlyOnceThroughCrashes: 10,000 committed transactions, each
// producing one record — half through kafgres_produce, half through a
// mapped INSERT — interleaved with 1,000 rolled-back ones, while the broker
// is killed with SIGKILL five times and Postgres is stopped once with
// -m immediate. A consumer must then read every committed record exactly
// once, none of the rolled-back ones, in commit order within each partition.
func TestExactlyOnceThroughCrashes(t *testing.T) {
	const committed, rolledBack = 10_000, 1_000
	c := harness.Start(t)
	c.CreateTopic(t, "eo", 3)
	c.Exec(t, `CREATE TABLE eo_src (id int PRIMARY KEY, v text)`)
	// The ledger commits with each transaction, so it says which ones did
	// even when a crash hid the COMMIT's outcome from the writer.
	c.Exec(t, `CREATE TABLE eo_ledger (i int PRIMARY KEY)`)
	c.Exec(t, `SELECT kafgres_add_mapping('eo', 'public.eo_src', 'eo',
		value_expr => $$ new.v $$, key_expr => $$ new.id::text $$)`)

	var (
		done    atomic.Bool
		written atomic.Int64
		werr    = make(chan error, 1)
	)
	go func() { werr <- writeTransactions(c.DSN(), committed, rolledBack, &written); done.Store(true) }()

	// Crash at moments spread over the write stream: five broker kills and
	// one immediate Postgres stop.
	rng := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < 6 && !done.Load(); k++ {
		target := int64((k+1)*committed/8 + rng.IntN(committed/40))
		for written.Load() < target && !done.Load() {
			time.Sleep(time.Duration(5+rng.IntN(20)) * time.Millisecond)
		}
		if k == 3 {
			c.StopPG(t, "immediate")
			time.Sleep(200 * time.Millisecond) // an outage the writer runs into and reconnects after
			c.StartPG(t)
			t.Logf("postgres stopped -m immediate and restarted after %d transactions", written.Load())
			continue
		}
		old := c.KillBroker(t)
		c.WaitBroker(t, old, 20*time.Second)
		t.Logf("broker killed after %d transactions", written.Load())
	}
	if err := <-werr; err != nil {
		t.Fatalf("writer: %v", err)
	}

	conn := c.Conn(t)
	ctx := context.Background()
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '60 seconds')`).Scan(&ok); err != nil || !ok {
		t.Fatalf("records not delivered: %v %v\n%s", ok, err, c.LogTail())
	}
	want := map[string]bool{}
	rows, err := conn.Query(ctx, `SELECT i FROM eo_ledger`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var i int
		rows.Scan(&i)
		want[recordValue(i)] = true
	}
	if rows.Err() != nil || len(want) != committed {
		t.Fatalf("ledger holds %d transactions, want %d (%v)", len(want), committed, rows.Err())
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ConsumeTopics("eo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	last := map[int32]int{} // partition -> last transaction number
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for len(seen) < len(want) {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			var missing []string
			for v := range want {
				if !seen[v] && len(missing) < 10 {
					missing = append(missing, v)
				}
			}
			var dead int
			conn.QueryRow(ctx, `SELECT count(*) FROM kafgres.dead_letter`).Scan(&dead)
			t.Fatalf("consumed %d of %d records; missing %v; %d dead letters\n%s", len(seen), len(want), missing, dead, c.LogTail())
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			switch {
			case strings.HasPrefix(v, "rb-"):
				t.Fatalf("rolled-back record %q at %d/%d", v, r.Partition, r.Offset)
			case !want[v]:
				t.Fatalf("record %q at %d/%d was never committed", v, r.Partition, r.Offset)
			case seen[v]:
				t.Fatalf("record %q delivered twice (again at %d/%d)", v, r.Partition, r.Offset)
			}
			seen[v] = true
			i, _ := strconv.Atoi(v[2:])
			if i <= last[r.Partition] && last[r.Partition] != 0 {
				t.Fatalf("partition %d: transaction %d after %d, not in commit order", r.Partition, i, last[r.Partition])
			}
			last[r.Partition] = i
		})
	}
	// Nothing beyond the committed set may follow.
	shortCtx, cancel2 := context.WithTimeout(ctx, 2*time.Second)
	defer cancel2()
	if fs := cl.PollFetches(shortCtx); fs.NumRecords() > 0 {
		t.Fatalf("%d extra records after every committed one was read", fs.NumRecords())
	}
	parts := make([]int, 0, len(last))
	for p := range last {
		parts = append(parts, int(p))
	}
	sort.Ints(parts)
	t.Logf("%d records read exactly once across partitions %v", len(seen), parts)
}

// recordValue is the value transaction i produces: p- for kafgres_produce,
// m- for the mapped insert.
func recordValue(i int) string {
	if i%2 == 0 {
		return fmt.Sprintf("p-%06d", i)
	}
	return fmt.Sprintf("m-%06d", i)
}

// writeTransactions commits transactions 1..committed, each writing its
// ledger row and one record, with a rolled-back one every tenth. It
// reconnects across crashes; a transaction whose outcome was lost is
// decided by the ledger, and retried only if it did not commit.
func writeTransactions(dsn string, committed, rolledBack int, written *atomic.Int64) error {
	ctx := context.Background()
	var conn *pgx.Conn
	connect := func() error {
		return harness.Poll(60*time.Second, func() (err error) {
			conn, err = pgx.Connect(ctx, dsn)
			return err
		})
	}
	if err := connect(); err != nil {
		return err
	}
	defer func() { conn.Close(ctx) }()

	one := func(i int, commit bool) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		v := recordValue(i)
		if !commit {
			v = "rb-" + v
		} else if _, err := tx.Exec(ctx, `INSERT INTO eo_ledger VALUES ($1)`, i); err != nil {
			return err
		}
		if i%2 == 0 {
			_, err = tx.Exec(ctx, `SELECT kafgres_produce('eo', $1::text, $2::text)`, strconv.Itoa(i), v)
		} else {
			id := i
			if !commit {
				id = -i
			}
			_, err = tx.Exec(ctx, `INSERT INTO eo_src VALUES ($1, $2)`, id, v)
		}
		if err != nil || !commit {
			return err
		}
		return tx.Commit(ctx)
	}
	inLedger := func(i int) (bool, error) {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM eo_ledger WHERE i = $1`, i).Scan(&n)
		return n > 0, err
	}

	reconnect := func(cause error) error {
		conn.Close(ctx)
		if err := connect(); err != nil {
			return fmt.Errorf("reconnect after %v: %w", cause, err)
		}
		return nil
	}
	rb := 0
	for i := 1; i <= committed; i++ {
		if i%10 == 5 && rb < rolledBack {
			for {
				err := one(i, false)
				if err == nil {
					break
				}
				if err := reconnect(err); err != nil {
					return err
				}
			}
			rb++
		}
		for {
			err := one(i, true)
			if err == nil {
				break
			}
			if err := reconnect(err); err != nil {
				return err
			}
			if ok, lerr := inLedger(i); lerr == nil && ok {
				break // committed; only the answer was lost
			}
		}
		written.Add(1)
	}
	return nil
}
