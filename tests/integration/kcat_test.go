package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafgres/kafgres/tests/harness"
)

func psqlCommand(c *harness.Cluster) string {
	return fmt.Sprintf("psql -h %s -p %d -U postgres -d postgres", filepath.Join(c.Dir, "run"), c.PGPort)
}

// runExample runs a self-checking script of examples/ twice (they must be
// rerunnable) against c.
func runExample(t *testing.T, c *harness.Cluster, script string) {
	t.Helper()
	for run := 1; run <= 2; run++ {
		cmd := exec.Command("bash", filepath.Join(harness.RepoRoot(), "examples", script))
		cmd.Env = append(os.Environ(), "BROKER="+c.Addr, "PSQL="+psqlCommand(c))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("run %d: %s failed: %v\n%s\n%s", run, script, err, out, c.LogTail())
		}
		if !strings.Contains(string(out), "all checks passed") {
			t.Fatalf("run %d: %s did not finish:\n%s", run, script, out)
		}
	}
}

// TestKcatDemo runs examples/kcat-demo.sh, which checks its own output.
func TestKcatDemo(t *testing.T) {
	runExample(t, harness.Start(t), "kcat-demo.sh")
}

// TestTransactionalProduceExample runs examples/transactional-produce.sh.
func TestTransactionalProduceExample(t *testing.T) {
	runExample(t, harness.Start(t), "transactional-produce.sh")
}

// TestKcatIdempotentProducer produces with librdkafka's idempotent producer
// and reads every record back in order.
func TestKcatIdempotentProducer(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "idem", 2)
	var in strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&in, "k%d:v%d\n", i%7, i)
	}
	prod := exec.Command("kcat", "-b", c.Addr, "-t", "idem", "-K:", "-P", "-X", "enable.idempotence=true", "-X", "linger.ms=5")
	prod.Stdin = strings.NewReader(in.String())
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	out, err := exec.Command("kcat", "-b", c.Addr, "-t", "idem", "-C", "-e", "-q", "-o", "beginning", "-f", "%p %o %k %s\n").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat consume: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2000 {
		t.Fatalf("read %d records, want 2000", len(lines))
	}
	next := map[string]int{}      // partition -> next offset
	lastByKey := map[string]int{} // key -> last value index, must increase
	for _, l := range lines {
		var p, k, v string
		var off, vi int
		if _, err := fmt.Sscanf(l, "%s %d %s %s", &p, &off, &k, &v); err != nil {
			t.Fatalf("parse %q: %v", l, err)
		}
		if off != next[p] {
			t.Fatalf("partition %s: offset %d, want %d (offsets must be dense)", p, off, next[p])
		}
		next[p]++
		fmt.Sscanf(v, "v%d", &vi)
		if last, ok := lastByKey[k]; ok && vi <= last {
			t.Fatalf("key %s: value %d after %d, order broken", k, vi, last)
		}
		lastByKey[k] = vi
	}
}
