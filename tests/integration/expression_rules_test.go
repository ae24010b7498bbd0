package integration

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafgres/kafgres/mappings"
	"github.com/kafgres/kafgres/tests/harness"
)

// TestExpressionRulesAgree: a mapping's expressions are checked twice, by
// kafgres_validate_expression in C when the mapping is added and by
// mappings.Validate (pg_query) before the broker splices them. Both must
// give the same verdict on every case of mappings/testdata/expressions.json.
func TestExpressionRulesAgree(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "mappings", "testdata", "expressions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Expr   string `json:"expr"`
		Prefix string `json:"prefix"`
		Repeat int    `json:"repeat"`
		Suffix string `json:"suffix"`
		Valid  bool   `json:"valid"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		// a long case: prefix, expr repeated, suffix
		cases[i].Expr = tc.Prefix + strings.Repeat(tc.Expr, max(tc.Repeat, 1)) + tc.Suffix
	}
	c := harness.Start(t)
	conn := c.Conn(t)
	for _, tc := range cases {
		goValid := mappings.Validate(tc.Expr) == nil
		_, err := conn.Exec(context.Background(), `SELECT public.kafgres_validate_expression($1, 'value_expr')`, tc.Expr)
		var pgErr *pgconn.PgError
		if err != nil && (!errors.As(err, &pgErr) || (pgErr.Code != "42601" && pgErr.Code != "22023")) {
			t.Errorf("kafgres_validate_expression(%.80q): unexpected error %v", tc.Expr, err)
			continue
		}
		cValid := err == nil
		if cValid != goValid || cValid != tc.Valid {
			t.Errorf("%.80q: C says valid %v (%v), Go says %v, the table says %v", tc.Expr, cValid, err, goValid, tc.Valid)
		}
	}
}
