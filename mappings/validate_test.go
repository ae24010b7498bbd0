package mappings

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateAccepts(t *testing.T) {
	for _, expr := range []string{
		` jsonb_build_object(
    'order_id', new.id,
    'total', new.total,
    'op', op,
    'customer', (SELECT jsonb_build_object('tier', c.tier)
                   FROM customers c WHERE c.id = new.customer_id)) `,
		`new.id::text`,
		` new.id::text `,
		`new.status = 'placed'`,
		`CASE WHEN op = 'D' THEN NULL ELSE to_jsonb(new) END`,
		`lower(new.name) || '-' || upper(old.name)`,
		`(new.a + 1) * (new.b - 2)`,
		`'a ) string with ( parens'`,
		`new.x -- a comment
`,
		`/* a comment */ new.x`,
		`EXISTS (SELECT 1 FROM customers c WHERE c.id = new.customer_id ORDER BY 1 LIMIT 1)`,
		`(SELECT count(*) FROM (SELECT 1 UNION SELECT 2) s)`,
		`ARRAY[1, 2, 3]`,
		`new.tags[1]`,
	} {
		if err := Validate(expr); err != nil {
			t.Errorf("Validate(%q) = %v, want nil", expr, err)
		}
	}
}

func TestValidateRefuses(t *testing.T) {
	for _, tc := range []struct {
		expr, detail string
	}{
		{`1) FROM pg_authid --`, "FROM clause"},
		{`1; DROP TABLE x`, "syntax error"},
		{`1); DROP TABLE x; SELECT (1`, "3 statements"},
		{`1), (2`, "2 columns"},
		{`(WITH d AS (DELETE FROM t RETURNING 1) SELECT 1)`, "a DELETE"},
		{`(WITH d AS (INSERT INTO t VALUES (1) RETURNING 1) SELECT 1)`, "an INSERT"},
		{`(WITH d AS (UPDATE t SET a = 1 RETURNING 1) SELECT 1)`, "an UPDATE"},
		{`EXISTS (SELECT 1 FROM (SELECT 1) s WHERE (WITH d AS (DELETE FROM t RETURNING 1) SELECT true))`, "a DELETE"},
		{``, "empty"},
		{`   `, "empty"},
		{`-- just a comment`, "empty"},
		{`/* just a comment */`, "empty"},
		{`1) WHERE (true`, "WHERE clause"},
		{`1) UNION SELECT (2`, "set operation"},
		{`1) AS x --`, "names its column"},
		{`1) x --`, "names its column"},
		{`1) --`, "parentheses"},
		{`1) + (2`, "parenthesis it did not open"},
		{`1) ORDER BY (1`, "ORDER BY"},
		{`1) LIMIT (1`, "LIMIT"},
		{`1) FOR UPDATE --`, "locking clause"},
		{`DISTINCT 1`, "syntax error"},
		{`1) GROUP BY (1`, "GROUP BY"},
		{`1) INTO x --`, "INTO"},
		{`(`, "syntax error"},
	} {
		err := Validate(tc.expr)
		if err == nil {
			t.Errorf("Validate(%q) = nil, want an error mentioning %q", tc.expr, tc.detail)
			continue
		}
		if !errors.Is(err, ErrNotExpression) {
			t.Errorf("Validate(%q) = %v, does not wrap ErrNotExpression", tc.expr, err)
		}
		if !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("Validate(%q) = %v, want it to mention %q", tc.expr, err, tc.detail)
		}
	}
}
