package mappings

import (
	"errors"
	"strings"
	"testing"

	pg_query "github.com/pganalyze/pg_query_go/v5"
)

// validateSeeds are expressions mapping authors write, and ones written to
// get out of the parentheses the broker splices an expression into.
var validateSeeds = []string{
	// accepted
	`to_jsonb(new)`,
	`jsonb_build_object('id', new.id, 'op', op, 'c', (SELECT c.tier FROM customers c WHERE c.id = new.customer_id))`,
	`CASE WHEN op = 'D' THEN NULL ELSE to_jsonb(new) END`,
	`new.id::text`,
	`'a ) string with ( parens'`,
	`$$ ) FROM pg_authid -- $$`,
	`$q$ ); DROP TABLE t; -- $q$`,
	`E'\') FROM pg_authid --'`,
	`U&'\0029' || 'x'`,
	`"weird ) ident"`,
	`new.x -- trailing comment` + "\n",
	`/* ) */ new.x /* ( */`,
	`/* nested /* ) */ comment */ 1`,
	`EXISTS (SELECT 1 FROM t WHERE t.id = new.id ORDER BY 1 LIMIT 1)`,
	`(SELECT count(*) FROM (SELECT 1 UNION SELECT 2) s)`,
	`ARRAY[1, 2, 3][1:2]`,
	`(new).id`,
	`row(1, 2)`,
	`1::int[]`,
	`new.doc #>> '{a,b}'`,
	// refused
	`1) FROM pg_authid --`,
	`1); DROP TABLE x; SELECT (1`,
	`1), (2`,
	`1) --`,
	`1) /*`,
	`1 --`,
	`1 /* unterminated`,
	`1) + (2`,
	`1) UNION SELECT (2`,
	`1) AS x --`,
	`(WITH d AS (DELETE FROM t RETURNING 1) SELECT 1)`,
	`EXISTS (SELECT 1 FROM (SELECT 1) s WHERE (WITH d AS (UPDATE t SET a = 1 RETURNING 1) SELECT true))`,
	`(WITH m AS (MERGE INTO t USING s ON true WHEN MATCHED THEN DELETE RETURNING 1) SELECT 1)`,
	`1)` + "\x00" + ` FROM pg_authid --`,
	"\x00",
	"new.x\x00",
	`$$`,
	`$a$ ) $b$`,
	`'unterminated`,
	`)(`,
	`((((((((((1))))))))))`,
	strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200),
	strings.Repeat("(", 200) + "1",
	"\xff\xfe",
	``,
	`;`,
}

// spliced is the statement shape the broker builds around an expression
// (mappings/render.go), with markers on every side: if the expression
// could escape its parentheses, the shape would change.
func spliced(expr string) string {
	return "SELECT (" + expr + ") AS kafgres_v, (" + expr + ") AS kafgres_k FROM kafgres_t WHERE (" + expr + ") ORDER BY 1"
}

// FuzzValidate: Validate never crashes (pg_query runs C code on the
// input), wraps every refusal in ErrNotExpression, and whatever it accepts stays one expression where
// the broker puts it: the spliced statement keeps its shape, and the
// expression still passes inside another pair of parentheses.
//
//	go test -run='^$' -fuzz='^FuzzValidate$' -fuzztime=30s ./mappings/
func FuzzValidate(f *testing.F) {
	for _, s := range validateSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		err := Validate(expr)
		if err != nil {
			if !errors.Is(err, ErrNotExpression) {
				t.Fatalf("Validate(%q) = %v, not an ErrNotExpression", expr, err)
			}
			return
		}
		tree, perr := pg_query.Parse(spliced(expr))
		if perr != nil {
			t.Fatalf("accepted %q, but the spliced statement does not parse: %v", expr, perr)
		}
		if len(tree.Stmts) != 1 {
			t.Fatalf("accepted %q, spliced into %d statements", expr, len(tree.Stmts))
		}
		sel := tree.Stmts[0].GetStmt().GetSelectStmt()
		if sel == nil {
			t.Fatalf("accepted %q, spliced statement is not a SELECT", expr)
		}
		var names []string
		for _, n := range sel.TargetList {
			names = append(names, n.GetResTarget().GetName())
		}
		from := ""
		if len(sel.FromClause) == 1 {
			from = sel.FromClause[0].GetRangeVar().GetRelname()
		}
		if strings.Join(names, ",") != "kafgres_v,kafgres_k" || from != "kafgres_t" || sel.WhereClause == nil ||
			len(sel.SortClause) != 1 || sel.LimitCount != nil || sel.WithClause != nil || len(sel.GroupClause) != 0 ||
			sel.HavingClause != nil || len(sel.LockingClause) != 0 || sel.Op != pg_query.SetOperation_SETOP_NONE {
			t.Fatalf("accepted %q, but it changes the statement it is spliced into: targets %v, from %q", expr, names, from)
		}
		if err := checkWrites(tree.ProtoReflect()); err != nil {
			t.Fatalf("accepted %q, but the spliced statement writes: %v", expr, err)
		}
		if err := Validate("(" + expr + ")"); err != nil {
			t.Fatalf("accepted %q, but not in parentheses: %v", expr, err)
		}
	})
}
