package topicname

import (
	"strings"
	"testing"
)

func TestProblem(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a.b_c-D9", true},
		{strings.Repeat("x", 249), true},
		{"...", true},
		{"", false},
		{".", false},
		{"..", false},
		{strings.Repeat("x", 250), false},
		{"a b", false},
		{"a/b", false},
		{"ä", false},
		{"a\x00", false},
	} {
		if got := Valid(c.name); got != c.ok {
			t.Errorf("Valid(%q) = %v, want %v (%s)", c.name, got, c.ok, Problem(c.name))
		}
	}
	if got := Problem("a b"); got != "'a b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'" {
		t.Errorf("message: %s", got)
	}
}
