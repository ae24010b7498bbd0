package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kafgres/kafgres/tests/harness"
)

// javaSuiteTimeout bounds the whole Maven run, a first dependency download
// from Maven Central included; the suite itself takes a minute or two.
const javaSuiteTimeout = 10 * time.Minute

// TestJavaClients runs the Maven/JUnit suite of tests/java (docs/java.md):
// the stock kafka-clients 4.4 producer, consumer and Admin, with their
// defaults, against a fresh cluster.
func TestJavaClients(t *testing.T) {
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the Java client suite needs Java 17 and Maven", tool)
		}
	}
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	build := t.TempDir() // target/ stays out of the source tree
	out, err := runMaven(build, c.Addr)
	if err != nil {
		// Maven's own output names each failed test with its assertion and
		// stack trace; the reports matter when it died before printing them
		reports := ""
		if !strings.Contains(out, "Tests run:") {
			reports = "\n--- surefire reports ---\n" + surefireReports(build)
		}
		t.Fatalf("Java client suite failed: %v\n--- maven output ---\n%s%s\n--- broker log ---\n%s",
			err, out, reports, c.LogTail())
	}
	t.Logf("Java client suite passed\n%s", out)
}

func runMaven(buildDir, bootstrap string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), javaSuiteTimeout)
	defer cancel()
	pom := filepath.Join(harness.RepoRoot(), "tests", "java", "pom.xml")
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-Dstyle.color=never", "-f", pom, "test",
		"-Dkafgres.bootstrap="+bootstrap, "-Dkafgres.buildDir="+buildDir)
	cmd.WaitDelay = 10 * time.Second // the forked JVM may hold the pipes
	out, err := cmd.CombinedOutput()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no result within %v: %w", javaSuiteTimeout, err)
	}
	// -q still leaves jansi's colour resets behind
	return strings.ReplaceAll(string(out), "\x1b[0m", ""), err
}

// surefireReports concatenates the plain-text reports, which name each
// failed test with its assertion message and stack trace.
func surefireReports(buildDir string) string {
	files, _ := filepath.Glob(filepath.Join(buildDir, "surefire-reports", "*.txt"))
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(&b, "== %s\n%s\n", filepath.Base(f), data)
	}
	if b.Len() == 0 {
		return "(none: the suite did not get to run)"
	}
	return b.String()
}
