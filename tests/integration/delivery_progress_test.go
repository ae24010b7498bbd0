package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kafgres/kafgres/tests/harness"
)

// kafgres_wait_delivered of a position without kafgres content returns
// soon, on a database busy with other commits (the walsender sends a
// keepalive after nearly every one, which the decoder coalesces: the
// stream never goes quiet, so the bound must hold without a pause) and on
// an idle one (a lone keepalive, nothing after it).
func TestWaitDeliveredWithoutKafgresContent(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()
	mustExec(t, conn, `CREATE TABLE busy (id bigserial PRIMARY KEY, v int)`)

	// The bound is the decoder's ProgressInterval plus the mirror's gap for
	// such positions plus the function's polling: well under a second.
	// Allow for a loaded machine, not for a stream that stalls.
	const bound = 3 * time.Second
	waitPlain := func(what string) time.Duration {
		t.Helper()
		var lsn string
		if err := conn.QueryRow(ctx, `INSERT INTO busy (v) VALUES (0) RETURNING pg_catalog.pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT kafgres_wait_delivered($1::pg_lsn, '10 seconds')`, lsn).Scan(&ok); err != nil || !ok {
			t.Fatalf("%s: %s not delivered within 10s: %v %v", what, lsn, ok, err)
		}
		took := time.Since(start)
		if took > bound {
			t.Fatalf("%s: kafgres_wait_delivered(%s) took %v, want under %v", what, lsn, took, bound)
		}
		return took
	}

	waitPlain("idle")

	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var commits int
	load := c.Conn(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for loadCtx.Err() == nil {
			if _, err := load.Exec(loadCtx, `INSERT INTO busy (v) VALUES (1)`); err != nil {
				return
			}
			commits++
		}
	}()
	var worst time.Duration
	for i := 0; i < 10; i++ {
		worst = max(worst, waitPlain("busy"))
	}
	stop()
	wg.Wait()
	t.Logf("busy: %d other commits meanwhile, slowest wait %v", commits, worst)
	if commits < 100 {
		t.Fatalf("only %d other commits: the database was not busy", commits)
	}

	// the load's last commits delivered, the stream is idle again
	waitDelivered(t, conn)
	waitPlain("idle again")
}
