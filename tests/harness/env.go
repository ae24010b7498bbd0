package harness

import (
	"os"
	"strconv"
	"testing"
)

// EnvInt is the environment variable name as a positive integer, or def
// when it is not set: how long-running tests and benchmarks take their
// sizes (make soak and make bench set larger ones).
func EnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("$%s = %q: want a positive integer", name, v)
	}
	return n
}
