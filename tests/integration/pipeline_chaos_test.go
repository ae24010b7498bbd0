package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// chaosTables is how many mapped tables TestPipelineChaos writes to.
const chaosTables = 50

// TestPipelineChaos: 50 mappings over tables of four shapes (a primary key,
// no key, REPLICA IDENTITY FULL, partitioned), written by two writers with
// inserts, updates and deletes of which one in twenty cannot be rendered
// (division by zero), while their columns are added and renamed (one the
// value expression uses, too) and the broker and Postgres are killed. Every committed change must then be in
// its topic exactly once or in kafgres.dead_letter with its reason; a
// record produced in SQL every half second must be delivered within a few
// seconds whatever the mappings' faults, except right after a kill; and
// kafgres.pipeline must never say stalled outside a kill.
//
// 60 s in CI; KAFGRES_CHAOS_SECONDS sets another length (make soak: 600).
func TestPipelineChaos(t *testing.T) {
	length := soakLength(t, "KAFGRES_CHAOS_SECONDS", 60*time.Second)
	c := harness.Start(t)
	dumpOnFailure(t, c)
	conn := c.Conn(t)
	ctx := context.Background()
	mustExec(t, conn,
		`CREATE TABLE chaos_ledger (seq int PRIMARY KEY, tbl int, op text, id int, bad bool)`,
		`SELECT kafgres_create_topic('chaos-probe', 1)`)
	for i := 0; i < chaosTables; i++ {
		var ddl []string
		switch i % 4 {
		case 0:
			ddl = []string{fmt.Sprintf(`CREATE TABLE ch%d (id int PRIMARY KEY, a int, b int, note text)`, i)}
		case 1:
			ddl = []string{fmt.Sprintf(`CREATE TABLE ch%d (id int, a int, b int, note text)`, i)}
		case 2:
			ddl = []string{fmt.Sprintf(`CREATE TABLE ch%d (id int PRIMARY KEY, a int, b int, note text)`, i),
				fmt.Sprintf(`ALTER TABLE ch%d REPLICA IDENTITY FULL`, i)}
		case 3:
			ddl = []string{fmt.Sprintf(`CREATE TABLE ch%d (id int, a int, b int, note text) PARTITION BY RANGE (id)`, i),
				fmt.Sprintf(`CREATE TABLE ch%d_lo PARTITION OF ch%d FOR VALUES FROM (MINVALUE) TO (1000000)`, i, i),
				fmt.Sprintf(`CREATE TABLE ch%d_hi PARTITION OF ch%d FOR VALUES FROM (1000000) TO (MAXVALUE)`, i, i)}
		}
		ddl = append(ddl,
			fmt.Sprintf(`SELECT kafgres_create_topic('chaos%d', 1)`, i),
			fmt.Sprintf(`SELECT kafgres_add_mapping('m%d', 'ch%d', 'chaos%d',
			   value_expr => $$ jsonb_build_object('op', op, 's', coalesce(new.a, old.a), 'r', new.a / new.b)::text $$,
			   key_expr => $$ coalesce(new.id, old.id)::text $$)`, i, i, i))
		mustExec(t, conn, ddl...)
	}

	var (
		seq     atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		killsMu sync.Mutex
		kills   []time.Time // when each kill began
	)
	inKill := func(at time.Time, after time.Duration) bool {
		killsMu.Lock()
		defer killsMu.Unlock()
		for _, k := range kills {
			if at.After(k.Add(-time.Second)) && at.Before(k.Add(after)) {
				return true
			}
		}
		return false
	}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chaosWriter(c.DSN(), w, &seq, stop)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		chaosDDL(c.DSN(), stop)
	}()
	type probe struct {
		at      time.Time
		latency time.Duration
		stalled string
	}
	var probes []probe
	wg.Add(1)
	go func() {
		defer wg.Done()
		pc, _ := pgx.Connect(ctx, c.DSN())
		for {
			select {
			case <-stop:
				if pc != nil {
					pc.Close(ctx)
				}
				return
			case <-time.After(500 * time.Millisecond):
			}
			if pc == nil || pc.IsClosed() {
				pc, _ = pgx.Connect(ctx, c.DSN())
				continue
			}
			p := probe{at: time.Now()}
			var state, reason string
			if err := pc.QueryRow(ctx, `SELECT state, coalesce(stall_reason, '') FROM kafgres.pipeline`).Scan(&state, &reason); err != nil {
				pc.Close(ctx)
				continue
			}
			if state != "flowing" {
				p.stalled = reason
			}
			var lsn string
			var ok bool
			if err := pc.QueryRow(ctx, `SELECT kafgres_produce('chaos-probe', NULL, 'p')::text`).Scan(&lsn); err != nil {
				pc.Close(ctx)
				continue
			}
			if err := pc.QueryRow(ctx, `SELECT kafgres_wait_delivered($1::pg_lsn, '60 seconds')`, lsn).Scan(&ok); err != nil || !ok {
				pc.Close(ctx)
				continue
			}
			p.latency = time.Since(p.at)
			probes = append(probes, p)
		}
	}()

	// the kills: the broker, Postgres, the broker, ... spread over the run
	start := time.Now()
	const every = 20 * time.Second
	for k := 0; time.Since(start)+every <= length; k++ {
		time.Sleep(every)
		killsMu.Lock()
		kills = append(kills, time.Now())
		killsMu.Unlock()
		if k%2 == 1 {
			c.KillPostgres(t)
			harness.WaitPortClosed(t, c.Addr, 30*time.Second)
			c.StartPG(t)
			t.Logf("Postgres killed and started again at %v", time.Since(start).Round(time.Second))
		} else {
			old := c.KillBroker(t)
			c.WaitBroker(t, old, 30*time.Second)
			t.Logf("broker killed and back at %v", time.Since(start).Round(time.Second))
		}
	}
	if rest := length - time.Since(start); rest > 0 {
		time.Sleep(rest)
	}
	close(stop)
	wg.Wait()

	conn = c.Conn(t)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT kafgres_wait_delivered(pg_current_wal_lsn(), '180 seconds')`).Scan(&ok); err != nil || !ok {
		t.Fatalf("not delivered after the run: %v %v", ok, err)
	}

	// what committed, from the ledger
	type change struct {
		tbl int
		op  string
		bad bool
	}
	ledger := map[int]change{}
	deletes := map[int]int{} // per table
	want, badCount := 0, 0   // changes that make a record, and that cannot
	rows, err := conn.Query(ctx, `SELECT seq, tbl, op, bad FROM chaos_ledger`)
	if err != nil {
		t.Fatal(err)
	}
	var (
		s, tbl int
		op     string
		bad    bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&s, &tbl, &op, &bad}, func() error {
		ledger[s] = change{tbl, op, bad}
		if op == "D" {
			deletes[tbl]++
		}
		if op == "D" || !bad {
			want++
		} else {
			badCount++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// dead letters: the bad ones, and whatever else could not be rendered
	dead := map[int]int{}        // seq -> dead letters of it
	deadDeletes := map[int]int{} // per table
	// (those delivered by a resume stay until delivery has passed it)
	rows, err = conn.Query(ctx, `SELECT mapping_name, op, coalesce(new_row->>'a', ''), error FROM kafgres.dead_letter
	                              WHERE mapping_name ~ '^m[0-9]+$' AND replayed_lsn IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	var name, a, reason string
	nDead := 0
	if _, err := pgx.ForEachRow(rows, []any{&name, &op, &a, &reason}, func() error {
		nDead++
		if reason == "" {
			t.Errorf("dead letter of %s without a reason", name)
		}
		i, _ := strconv.Atoi(name[1:])
		if op == "D" {
			deadDeletes[i]++
			return nil
		}
		s, err := strconv.Atoi(a)
		if err != nil {
			t.Errorf("dead letter of %s: a %q", name, a)
			return nil
		}
		dead[s]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// every record of every topic, and one look for anything beyond
	recsBySeq := map[int]int{}
	recDeletes := map[int]int{}
	total := 0
	for _, r := range readChaosTopics(t, c.Addr, want-(nDead-badCount)) {
		i, _ := strconv.Atoi(r.Topic[len("chaos"):])
		var v struct {
			Op string `json:"op"`
			S  *int   `json:"s"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("%s: record %q: %v", r.Topic, r.Value, err)
		}
		total++
		if v.Op == "D" {
			recDeletes[i]++
			continue
		}
		if v.S == nil {
			t.Fatalf("%s: record %q without its sequence", r.Topic, r.Value)
		}
		recsBySeq[*v.S]++
	}

	lost, twice := 0, 0
	for s, ch := range ledger {
		if ch.op == "D" {
			continue
		}
		n, d := recsBySeq[s], dead[s]
		switch {
		case ch.bad && (n != 0 || d != 1):
			t.Errorf("change %d (%s of ch%d) cannot be rendered: %d records, %d dead letters; want 0 and 1", s, ch.op, ch.tbl, n, d)
		case n+d == 0:
			lost++
		case n+d > 1:
			if twice++; twice <= 5 {
				var e, l string
				var at time.Time
				conn.QueryRow(ctx, `SELECT error, lsn::text, created_at FROM kafgres.dead_letter WHERE new_row->>'a' = $1`, strconv.Itoa(s)).Scan(&e, &l, &at)
				t.Logf("change %d (%s of ch%d, bad %v) is in its topic %d times and dead-lettered %d times (at %s, %v into the run: %s)", s, ch.op, ch.tbl, ch.bad, n, d, l, at.Sub(start), e)
			}
		}
		delete(recsBySeq, s)
	}
	if lost > 0 || twice > 0 {
		t.Errorf("of %d committed changes, %d are lost and %d delivered more than once", len(ledger), lost, twice)
	}
	if len(recsBySeq) > 0 {
		t.Errorf("%d records of changes that never committed", len(recsBySeq))
	}
	for i := 0; i < chaosTables; i++ {
		if got := recDeletes[i] + deadDeletes[i]; got != deletes[i] {
			t.Errorf("ch%d: %d deletes committed, %d records and %d dead letters of them", i, deletes[i], recDeletes[i], deadDeletes[i])
		}
	}

	// no fault of a mapping held the others back, and the view said so
	worst := time.Duration(0)
	for _, p := range probes {
		if inKill(p.at, 20*time.Second) {
			continue
		}
		worst = max(worst, p.latency)
		if p.latency > 10*time.Second {
			t.Errorf("a record produced at %v took %v to be delivered", p.at.Sub(start).Round(time.Second), p.latency)
		}
		if p.stalled != "" {
			t.Errorf("kafgres.pipeline said stalled at %v: %s", p.at.Sub(start).Round(time.Second), p.stalled)
		}
	}
	var state string
	if err := conn.QueryRow(ctx, `SELECT state FROM kafgres.pipeline`).Scan(&state); err != nil || state != "flowing" {
		t.Errorf("kafgres.pipeline after the run: %q %v", state, err)
	}
	t.Logf("%v: %d committed changes (%d records, %d dead letters), %d kills, %d probes, the slowest outside kills %v",
		length, len(ledger), total, nDead, len(kills), len(probes), worst)
}

// chaosWriter writes one change per transaction to a random table, with
// its ledger row, until stop: ids of its own (id mod 2 = w), spread over
// both partitions of a partitioned table; one change in twenty cannot be
// rendered (b = 0). A change whose COMMIT's outcome a crash hid leaves its
// row alone from then on: the ledger says whether it committed.
func chaosWriter(dsn string, w int, seq *atomic.Int64, stop <-chan struct{}) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(w), 41))
	live := make([][]int, chaosTables)
	next := 0
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(ctx)
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if conn == nil || conn.IsClosed() {
			var err error
			if conn, err = pgx.Connect(ctx, dsn); err != nil {
				conn = nil
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		tbl := rng.IntN(chaosTables)
		s := int(seq.Add(1))
		b := 1
		if rng.IntN(20) == 0 {
			b = 0
		}
		var (
			op, stmt string
			id, at   int
		)
		switch r := rng.IntN(10); {
		case r < 5 || len(live[tbl]) == 0:
			next++
			id = next*2 + w + next%2*1000000
			op, stmt = "I", fmt.Sprintf(`INSERT INTO ch%d VALUES (%d, %d, %d, 'n')`, tbl, id, s, b)
		case r < 8:
			at = rng.IntN(len(live[tbl]))
			id = live[tbl][at]
			op, stmt = "U", fmt.Sprintf(`UPDATE ch%d SET a = %d, b = %d WHERE id = %d`, tbl, s, b, id)
		default:
			at = rng.IntN(len(live[tbl]))
			id = live[tbl][at]
			op, stmt = "D", fmt.Sprintf(`DELETE FROM ch%d WHERE id = %d`, tbl, id)
		}
		_, err := conn.Exec(ctx, "BEGIN; "+stmt+"; "+
			fmt.Sprintf(`INSERT INTO chaos_ledger VALUES (%d, %d, '%s', %d, %v); COMMIT`, s, tbl, op, id, b == 0))
		if op != "I" {
			// the row is this writer's no longer once its fate is unknown
			// (or it is deleted)
			if err != nil || op == "D" {
				live[tbl] = append(live[tbl][:at], live[tbl][at+1:]...)
			}
		} else if err == nil {
			live[tbl] = append(live[tbl], id)
		}
		if err != nil {
			conn.Close(ctx)
			conn = nil
			continue
		}
		time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
	}
}

// chaosDDL changes the mapped tables' columns every second: adds one, or
// renames one there and back -- note, which no expression uses, or b,
// which the value expression uses: while b is renamed, the table's changes
// cannot be rendered and go to the dead letters with the reason.
func chaosDDL(dsn string, stop <-chan struct{}) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 41))
	renamed := map[[2]int]bool{} // table, 0: note / 1: b
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			continue
		}
		tbl := rng.IntN(chaosTables)
		which := min(rng.IntN(5), 1) // b four times in five
		col, key := [2]string{"note", "b"}[which], [2]int{tbl, which}
		stmt, rename := fmt.Sprintf(`ALTER TABLE ch%d ADD COLUMN x%d int`, tbl, n), rng.IntN(2) == 0
		switch {
		case rename && renamed[key]:
			stmt = fmt.Sprintf(`ALTER TABLE ch%d RENAME COLUMN %s2 TO %s`, tbl, col, col)
		case rename:
			stmt = fmt.Sprintf(`ALTER TABLE ch%d RENAME COLUMN %s TO %s2`, tbl, col, col)
		}
		if _, err := conn.Exec(ctx, stmt); err == nil && rename {
			renamed[key] = !renamed[key]
			if !renamed[key] {
				// named back: the mappings the rename paused fit again,
				// and their owner says so, which delivers what they held
				conn.Exec(ctx, `SELECT kafgres_alter_mapping(m.name, m.value_expr, m.key_expr, m.filter_expr, m.on_error)
				                  FROM kafgres.mapping AS m JOIN kafgres.mapping_pause AS p USING (mapping_id)
				                 WHERE m.source_relid = $1::regclass AND p.resume_xid IS NULL`, fmt.Sprintf("ch%d", tbl))
			}
		}
		conn.Close(ctx)
	}
}

// readChaosTopics reads every record of the chaos topics: at least n, then
// as many more as arrive within a second.
func readChaosTopics(t *testing.T, addr string, n int) []*kgo.Record {
	t.Helper()
	out, extra := consumeRecords(t, addr, n, "the chaos topics", kgo.ConsumeRegex(), kgo.ConsumeTopics(`^chaos[0-9]+$`),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	return append(out, extra...)
}

// soakLength is how long a long-running test runs: def, or the seconds in
// the environment variable env (make soak sets longer ones).
func soakLength(t *testing.T, env string, def time.Duration) time.Duration {
	t.Helper()
	return time.Duration(harness.EnvInt(t, env, int(def/time.Second))) * time.Second
}
