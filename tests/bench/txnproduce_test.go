package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kafgres/kafgres/tests/harness"
)

// BenchmarkTransactionalProduce: the Java client's transactional produce
// against kafgres and the reference Apache Kafka 4.4 (startReference) on
// the same machine,
// alternating, three rounds each, medians compared (issue #14). Two
// workloads, 1 KiB records into 3 partitions: transactions of exactly 100
// records (tests/bench/java/TxnProducerBench.java), and ProducerPerformance
// with --transactional-id, which commits every 3 s. It ignores b.N.
func BenchmarkTransactionalProduce(b *testing.B) {
	needTools(b, "java", "mvn")
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
			out, err := java(context.Background(), cp, src, addrs[name], "txbench",
				strconv.Itoa(records), strconv.Itoa(size), strconv.Itoa(perTxn), id).CombinedOutput()
			if err != nil {
				b.Fatalf("%s: TxnProducerBench: %v\n%s\n--- kafgres log ---\n%s", name, err, out, c.LogTail())
			}
			rate := field(b, string(out), `records/s=([0-9.]+)`)
			results[name].txn100 = append(results[name].txn100, rate)
			b.Logf("round %d %s, transactions of %d: %s", round, name, perTxn, strings.TrimSpace(lastLine(string(out))))

			out, err = java(context.Background(), cp, "org.apache.kafka.tools.ProducerPerformance",
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
