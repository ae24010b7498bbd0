package broker

import (
	"os"
	"regexp"
	"testing"
)

// TestSchemaVersionMatchesControlFile: the broker waits for exactly the
// extension version the control file installs.
func TestSchemaVersionMatchesControlFile(t *testing.T) {
	b, err := os.ReadFile("../sql/kafgres.control")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^default_version = '([^']+)'`).FindSubmatch(b)
	if m == nil || string(m[1]) != SchemaVersion {
		t.Fatalf("sql/kafgres.control default_version %q, broker.SchemaVersion %q", m, SchemaVersion)
	}
}
