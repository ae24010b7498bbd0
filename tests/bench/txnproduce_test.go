package bench

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafgres/kafgres/tests/harness"
)

// BenchmarkTransactionalProduce: the Java client's transactional produce
// against kafgres and the reference Apache Kafka 4.4 (its Maven jars and
// default configs, started by the conformance runner) on the same machine,
// alternating, three rounds each, medians compared (issue #14). Two
// workloads, 1 KiB records into 3 partitions: transactions of exactly 100
// records (tests/bench/java/TxnProducerBench.java), and ProducerPerformance
// with --transactional-id, which commits every 3 s. It ignores b.N.
func BenchmarkTransactionalProduce(b *testing.B) {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not found", tool)
		}
	}
	c := harness.Start(b)
	c.CreateTopic(b, "txbench", 3)
	ref := startReference(b)
	runner(b, ref.work, "topics", "reference", "txbench:3")
	cp := harness.KafkaClasspath(b)
	src := filepath.Join(harness.RepoRoot(), "tests", "bench", "java", "TxnProducerBench.java")

	const records, size, perTxn = 100_000, 1024, 100
	type result struct{ txn100, perf []float64 }
	results := map[string]*result{"kafgres": {}, "kafka": {}}
	addrs := map[string]string{"kafgres": c.Addr, "kafka": ref.addr}
	for round := 0; round < 3; round++ {
		for _, name := range []string{"kafgres", "kafka"} {
			id := fmt.Sprintf("bench-%s-%d", name, round)
			out, err := exec.Command("java", "-Xmx512m", "-cp", cp, src, addrs[name], "txbench",
				strconv.Itoa(records), strconv.Itoa(size), strconv.Itoa(perTxn), id).CombinedOutput()
			if err != nil {
				b.Fatalf("%s: TxnProducerBench: %v\n%s\n--- kafgres log ---\n%s", name, err, out, c.LogTail())
			}
			rate := field(b, string(out), `records/s=([0-9.]+)`)
			results[name].txn100 = append(results[name].txn100, rate)
			b.Logf("round %d %s, transactions of %d: %s", round, name, perTxn, strings.TrimSpace(lastLine(string(out))))

			out, err = exec.Command("java", "-Xmx512m", "-cp", cp, "org.apache.kafka.tools.ProducerPerformance",
				"--topic", "txbench", "--num-records", strconv.Itoa(2*records), "--record-size", strconv.Itoa(size),
				"--throughput", "-1", "--transactional-id", id+"-perf",
				"--producer-props", "bootstrap.servers="+addrs[name]).CombinedOutput()
			if err != nil {
				b.Fatalf("%s: ProducerPerformance: %v\n%s\n--- kafgres log ---\n%s", name, err, out, c.LogTail())
			}
			rate = field(b, lastLine(string(out)), `([0-9.]+) records/sec`)
			results[name].perf = append(results[name].perf, rate)
			b.Logf("round %d %s, ProducerPerformance --transactional-id: %s", round, name, strings.TrimSpace(lastLine(string(out))))
		}
	}
	for _, w := range []struct {
		name string
		get  func(*result) []float64
	}{
		{"txn100", func(r *result) []float64 { return r.txn100 }},
		{"perf", func(r *result) []float64 { return r.perf }},
	} {
		k, f := median(w.get(results["kafgres"])), median(w.get(results["kafka"]))
		b.ReportMetric(k, w.name+"_kafgres_records/s")
		b.ReportMetric(f, w.name+"_kafka_records/s")
		b.ReportMetric(k/f, w.name+"_ratio")
	}
}

type reference struct{ work, addr string }

// startReference starts the reference Kafka with the conformance runner
// and stops it when the benchmark ends.
func startReference(b *testing.B) reference {
	b.Helper()
	work := b.TempDir()
	out := runner(b, work, "reference", "start")
	addr := ""
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "bootstrap="); ok {
			addr = v
		}
	}
	if addr == "" {
		b.Fatalf("reference start printed no bootstrap address:\n%s", out)
	}
	b.Cleanup(func() { runner(b, work, "reference", "stop") })
	return reference{work: work, addr: addr}
}

func runner(b *testing.B, work string, args ...string) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./conformance/runner", "-work", work}, args...)...)
	cmd.Dir = filepath.Join(harness.RepoRoot(), "tests")
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("runner %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func field(b *testing.B, s, pattern string) float64 {
	b.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		b.Fatalf("no %s in:\n%s", pattern, s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
