package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// pgbench's built-in tpcb-like script, and the same with one more
// statement: kafgres_produce, or (to tell what any extra statement costs
// from what kafgres costs) a SELECT of the same value; each either before
// END, or right after BEGIN, where its round trip holds no row lock. The
// folded script makes no more statements: the script's own SELECT of the
// account also calls kafgres_produce, as a trigger or a function would.
const (
	tpcbScript = `\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
`
	recordValue   = `'{"account": ' || :aid || ', "delta": ' || :delta || '}'`
	produceCall   = `kafgres_produce('pgbench', :aid::text, ` + recordValue + `)`
	produceLine   = "SELECT " + produceCall + ";\n"
	selectLine    = "SELECT " + recordValue + ";\n"
	accountSelect = "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;"
	foldedSelect  = "SELECT abalance, " + produceCall + " FROM pgbench_accounts WHERE aid = :aid;"
)

var (
	tpsLine       = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	processedLine = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
)

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkPgbenchWithProduce: pgbench's TPC-B-like transaction at scale
// 10, 4 clients: plain, with one kafgres_produce added, and with a plain
// SELECT added instead, on one cluster. The arms run in rounds whose order
// rotates, so that a machine getting faster or slower during the run weighs
// on all of them; each cost is the median over rounds of that round's cost.
// cost-% is the measure (with kafgres_produce before END against
// plain); kafgres-cost-% is against the extra SELECT in the same place,
// which leaves out what any additional statement costs pgbench (a round
// trip while the branch row is locked). The -first measures are the same
// with the statement right after BEGIN, before any row is locked, and
// cost-folded-% has kafgres_produce in a statement the script makes anyway:
// what the pipeline costs with no round trip added. Each run starts after
// a CHECKPOINT and after the previous run's records were delivered, so
// none inherits another's backlog. The records are counted at the end: one
// per produce transaction pgbench reported.
//
// $KAFGRES_PGBENCH_ROUNDS (default 3) and $KAFGRES_PGBENCH_SECONDS
// (default 20) set the number of rounds and each run's length. b.N is
// ignored: the workload is fixed so that numbers compare across runs.
func BenchmarkPgbenchWithProduce(b *testing.B) {
	rounds := harness.EnvInt(b, "KAFGRES_PGBENCH_ROUNDS", 3)
	secs := harness.EnvInt(b, "KAFGRES_PGBENCH_SECONDS", 20)

	c := harness.Start(b)
	c.CreateTopic(b, "pgbench", 3)
	conn := c.Conn(b)
	ctx := context.Background()

	pgbench := func(args ...string) string {
		b.Helper()
		cmd := exec.Command("pgbench", append([]string{"-h", filepath.Join(c.Dir, "run"), "-p", strconv.Itoa(c.PGPort), "-U", "postgres"}, args...)...)
		cmd.Args = append(cmd.Args, "postgres")
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("pgbench %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	pgbench("-i", "-q", "-s", "10")

	type arm int
	const (
		plain arm = iota
		withSelect
		withProduce
		selectFirst
		produceFirst
		produceFolded
		arms
	)
	body := tpcbScript[:len(tpcbScript)-len("END;\n")]
	first := func(line string) string { return strings.Replace(tpcbScript, "BEGIN;\n", "BEGIN;\n"+line, 1) }
	armOf := [arms]struct {
		name     string // of its tps metric
		script   string
		produces bool
	}{
		plain:         {"plain", tpcbScript, false},
		withSelect:    {"with-select", body + selectLine + "END;\n", false},
		withProduce:   {"with-produce", body + produceLine + "END;\n", true},
		selectFirst:   {"select-first", first(selectLine), false},
		produceFirst:  {"produce-first", first(produceLine), true},
		produceFolded: {"produce-folded", strings.Replace(tpcbScript, accountSelect, foldedSelect, 1), true},
	}
	// Each cost is with against base, per round.
	costs := []struct {
		metric     string
		base, with arm
		rounds     []float64
	}{
		{metric: "cost-%", base: plain, with: withProduce},
		{metric: "kafgres-cost-%", base: withSelect, with: withProduce},
		{metric: "cost-first-%", base: plain, with: produceFirst},
		{metric: "kafgres-cost-first-%", base: selectFirst, with: produceFirst},
		{metric: "cost-folded-%", base: plain, with: produceFolded},
	}
	dir := b.TempDir() // pgbench reads the scripts itself, as the test's user
	var scripts [arms]string
	for a, am := range armOf {
		if am.script == tpcbScript && arm(a) != plain {
			b.Fatalf("script of arm %s is the plain one", am.name)
		}
		scripts[a] = filepath.Join(dir, fmt.Sprintf("arm%d.sql", a))
		if err := os.WriteFile(scripts[a], []byte(am.script), 0o644); err != nil {
			b.Fatal(err)
		}
	}

	var produced int64
	run := func(a arm) float64 {
		b.Helper()
		if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
			b.Fatal(err)
		}
		out := pgbench("-c", "4", "-j", "2", "-T", strconv.Itoa(secs), "-n", "-f", scripts[a])
		m := tpsLine.FindStringSubmatch(out)
		n := processedLine.FindStringSubmatch(out)
		if m == nil || n == nil {
			b.Fatalf("no tps or transaction count in pgbench output:\n%s", out)
		}
		tps, _ := strconv.ParseFloat(m[1], 64)
		if armOf[a].produces {
			count, _ := strconv.ParseInt(n[1], 10, 64)
			produced += count
			var ok bool
			if err := conn.QueryRow(ctx, `SELECT kafgres_wait_delivered(pg_current_wal_insert_lsn(), '120 s')`).Scan(&ok); err != nil || !ok {
				b.Fatalf("records of the produce run not delivered within 120 s (%v)", err)
			}
		}
		return tps
	}

	b.ResetTimer()
	var tps [arms][]float64
	for i := 0; i < rounds; i++ {
		var got [arms]float64
		for j := range arms {
			a := (arm(i) + j) % arms
			got[a] = run(a)
			tps[a] = append(tps[a], got[a])
		}
		line := fmt.Sprintf("pgbench round %d, tps:", i+1)
		for a, am := range armOf {
			line += fmt.Sprintf(" %s %.0f", am.name, got[a])
		}
		line += "; costs:"
		for k := range costs {
			cs := &costs[k]
			cs.rounds = append(cs.rounds, 100*(got[cs.base]-got[cs.with])/got[cs.base])
			line += fmt.Sprintf(" %s %.1f", cs.metric, cs.rounds[i])
		}
		fmt.Fprintln(os.Stderr, line)
	}
	b.StopTimer()

	// every produce transaction pgbench counted is one record, exactly once
	if records, err := countRecords(ctx, c.Addr, "pgbench", produced); err != nil {
		b.Fatal(err)
	} else if records != produced {
		b.Fatalf("topic pgbench holds %d records, pgbench committed %d produce transactions", records, produced)
	}

	for a, am := range armOf {
		b.ReportMetric(median(tps[a]), "tps-"+am.name)
	}
	for _, cs := range costs {
		b.ReportMetric(median(cs.rounds), cs.metric)
	}
}

// countRecords reads topic from the start, read_committed, and counts its
// records until it has want and for one second more, to see any beyond
// want (or 60 s in all). Offsets would not do: a group of SQL-produced records
// that holds an SQL transaction spanning partitions is a Kafka transaction,
// whose COMMIT markers take offsets too.
func countRecords(ctx context.Context, addr, topic string, want int64) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var n int64
	for {
		if n >= want {
			// a second more, for records beyond want
			var more context.CancelFunc
			ctx, more = context.WithTimeout(ctx, time.Second)
			defer more()
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return n, nil
		}
		if err := fs.Err0(); err != nil {
			return n, fmt.Errorf("read %s: %w", topic, err)
		}
		n += int64(fs.NumRecords())
	}
}
