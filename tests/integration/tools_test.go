package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestKafkaTools runs tests/tools/run.sh — Kafka 4.4's own command-line
// tools through the bin/kafka-*.sh wrappers (kafka-topics, kafka-configs,
// kafka-get-offsets, kafka-delete-records, kafka-log-dirs, kafka-features,
// kafka-broker-api-versions, the console producer and consumer,
// kafka-consumer-groups, kafka-acls, kafka-transactions; the internal topics
// as kafka-topics shows them) — against a fresh kafgres cluster
// with the authorizer on and the tools' principal (User:ANONYMOUS) a super
// user, so that kafka-acls has an authorizer and the rest may do anything.
// The tools come from Maven Central, so it skips without java and mvn.
func TestKafkaTools(t *testing.T) {
	for _, tool := range []string{"java", "mvn", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the Kafka tools need Java 17+ and Maven", tool)
		}
	}
	c := harness.Start(t, "kafgres.authorizer = on", "kafgres.super_users = 'User:ANONYMOUS'")
	cmd := exec.Command("bash", filepath.Join(harness.RepoRoot(), "tests", "tools", "run.sh"))
	cmd.Env = append(os.Environ(), "BOOTSTRAP="+c.Addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tests/tools/run.sh: %v\n%s\n%s", err, out, c.LogTail())
	}
	t.Logf("%s", out)
}
