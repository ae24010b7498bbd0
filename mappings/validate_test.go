package mappings

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// expressionCase is one entry of testdata/expressions.json, the table of
// expressions both validators are held to: this package's Validate and the
// extension's C kafgres_validate_expression (TestExpressionRulesAgree in
// tests/integration reads the same file). Detail is a word of Validate's
// reason for a refusal.
//
// A long case is written as prefix, expr repeated, suffix: the expression
// is their concatenation.
type expressionCase struct {
	Expr   string `json:"expr"`
	Prefix string `json:"prefix,omitempty"`
	Repeat int    `json:"repeat,omitempty"`
	Suffix string `json:"suffix,omitempty"`
	Valid  bool   `json:"valid"`
	Detail string `json:"detail,omitempty"`
}

func expressionCases(t *testing.T) []expressionCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "expressions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []expressionCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatalf("testdata/expressions.json: %v", err)
	}
	for i, c := range cases {
		cases[i].Expr = c.Prefix + strings.Repeat(c.Expr, max(c.Repeat, 1)) + c.Suffix
	}
	return cases
}

func TestValidate(t *testing.T) {
	for _, tc := range expressionCases(t) {
		err := Validate(tc.Expr)
		switch {
		case tc.Valid && err != nil:
			t.Errorf("Validate(%.80q) = %v, want nil", tc.Expr, err)
		case tc.Valid:
		case err == nil:
			t.Errorf("Validate(%q) = nil, want an error mentioning %q", tc.Expr, tc.Detail)
		case !errors.Is(err, ErrNotExpression):
			t.Errorf("Validate(%q) = %v, does not wrap ErrNotExpression", tc.Expr, err)
		case !strings.Contains(err.Error(), tc.Detail):
			t.Errorf("Validate(%q) = %v, want it to mention %q", tc.Expr, err, tc.Detail)
		}
	}
}
