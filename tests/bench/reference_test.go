package bench

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafgres/kafgres/tests/harness"
)

// Helpers of the benchmarks that compare kafgres with the reference Apache
// Kafka 4.4 on the same machine.

type reference struct {
	work, addr string
	pid        int // the broker's JVM, for its CPU time
}

// startReference starts the reference Kafka with the conformance runner
// (its Maven jars and default configs) and stops it when the benchmark
// ends. It runs with Kafka's own JVM settings (-server-jvm: 1 GiB heap,
// G1), not the gate's small heap: the comparison is with Kafka as
// kafka-server-start.sh runs it.
func startReference(b *testing.B) reference {
	b.Helper()
	work := b.TempDir()
	out := runner(b, work, "-server-jvm", "reference", "start")
	ref := reference{work: work}
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "bootstrap="); ok {
			ref.addr = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "pid="); ok {
			ref.pid, _ = strconv.Atoi(v)
		}
	}
	if ref.addr == "" || ref.pid == 0 {
		b.Fatalf("reference start printed no bootstrap address or pid:\n%s", out)
	}
	b.Cleanup(func() { runner(b, work, "reference", "stop") })
	return ref
}

// needTools skips the benchmark when a program it runs is missing.
func needTools(b *testing.B, tools ...string) {
	b.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not found", tool)
		}
	}
}

// java runs a Java client program (a class of classpath, or a source
// file) with the same heap every time, so that both brokers see the same
// client.
func java(ctx context.Context, classpath string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "java", append([]string{"-Xmx512m", "-cp", classpath}, args...)...)
}

// runner runs the conformance runner with work as its work directory;
// args are its flags and command.
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
