package mappings

import (
	"errors"
	"fmt"
	"strings"

	pg_query "github.com/pganalyze/pg_query_go/v5"
	"github.com/pganalyze/pg_query_go/v5/parser"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ErrNotExpression is what every refusal of Validate wraps.
var ErrNotExpression = errors.New("not a single SQL expression")

// ValidationError says why an expression was refused. Detail is worded to
// follow "it", like the errdetail of kafgres_validate_expression, which
// applies the same rules in C when a mapping is added.
type ValidationError struct {
	Detail string
}

func (e *ValidationError) Error() string { return ErrNotExpression.Error() + ": " + e.Detail }
func (e *ValidationError) Unwrap() error { return ErrNotExpression }

// Validate checks that expr is exactly one SQL expression, safe to splice
// into a statement as "(" + expr + ")": it is parsed as the only target of
// "SELECT (" + expr + ")" and refused if that statement gains anything an
// expression cannot add (another statement, a FROM or WHERE clause, a
// second target, an alias, ...), if it writes anywhere in its tree (a
// data-modifying CTE in a subquery), or if its parentheses do not close
// exactly at its end, so it cannot escape the parentheses it is spliced
// into or comment out what follows.
//
// Validate says nothing about whether the expression's names exist or its
// types fit; Postgres finds that out when the mapping is added.
//
// The expression is bounded before it is parsed (MaxExpressionBytes,
// MaxExpressionTokens), so that no expression can make the parse deep
// enough to overflow the C stack it runs on.
func Validate(expr string) error {
	if len(expr) > MaxExpressionBytes {
		return &ValidationError{Detail: fmt.Sprintf("it is %d bytes long, more than the %d an expression may have", len(expr), MaxExpressionBytes)}
	}
	if err := checkEmpty(expr); err != nil {
		return err
	}
	query := "SELECT (" + expr + ")"
	tree, err := parse(query)
	if err != nil {
		return fmt.Errorf("%w: syntax error: %w", ErrNotExpression, err)
	}
	if n := len(tree.Stmts); n != 1 {
		return &ValidationError{Detail: fmt.Sprintf("it contains %d statements", n)}
	}
	sel := tree.Stmts[0].GetStmt().GetSelectStmt()
	if sel == nil {
		return &ValidationError{Detail: "it is not a SELECT target"}
	}
	if err := checkSelect(sel); err != nil {
		return err
	}
	if err := checkWrites(sel.ProtoReflect()); err != nil {
		return err
	}
	return checkParens(query)
}

// Bounds of an expression, checked before it is parsed, here and by
// kafgres_validate_expression (outputplugin/validate.c) alike. A parse tree
// is at most about one level deeper per token, and the parser's C code
// recurses per level, so MaxExpressionTokens bounds the C stack the parse
// takes (a chain of 25,000 "+1" overflowed 8 MB; 10,000 levels take under
// half of it). A real mapping's expression has a few hundred tokens.
const (
	MaxExpressionBytes  = 64 << 10
	MaxExpressionTokens = 10000
)

// parse is pg_query.Parse, with room in the protobuf decoding for every
// tree the bounds allow: its default limit (10,000 nested messages, about
// two per tree level) would refuse trees Postgres accepts.
func parse(query string) (*pg_query.ParseResult, error) {
	b, err := parser.ParseToProtobuf(query)
	if err != nil {
		return nil, err
	}
	tree := &pg_query.ParseResult{}
	opts := proto.UnmarshalOptions{RecursionLimit: 8*MaxExpressionTokens + 100}
	if err := opts.Unmarshal(b, tree); err != nil {
		return nil, err
	}
	return tree, nil
}

// checkEmpty refuses an expression with no tokens (empty, blank or only
// comments), and one with more than MaxExpressionTokens.
func checkEmpty(expr string) error {
	if strings.TrimSpace(expr) == "" {
		return &ValidationError{Detail: "it is empty"}
	}
	scan, err := pg_query.Scan(expr)
	if err != nil {
		return fmt.Errorf("%w: syntax error: %w", ErrNotExpression, err)
	}
	n := 0
	for _, tok := range scan.GetTokens() {
		if tok.Token != pg_query.Token_SQL_COMMENT && tok.Token != pg_query.Token_C_COMMENT {
			n++
		}
	}
	switch {
	case n == 0:
		return &ValidationError{Detail: "it is empty (only a comment)"}
	case n > MaxExpressionTokens:
		return &ValidationError{Detail: fmt.Sprintf("it has %d tokens, more than the %d an expression may have", n, MaxExpressionTokens)}
	}
	return nil
}

// checkSelect refuses every part of a SELECT an expression cannot be.
func checkSelect(s *pg_query.SelectStmt) error {
	switch {
	case s.Op != pg_query.SetOperation_SETOP_NONE && s.Op != pg_query.SetOperation_SET_OPERATION_UNDEFINED:
		return &ValidationError{Detail: "it adds a set operation (UNION, INTERSECT or EXCEPT)"}
	case len(s.ValuesLists) > 0:
		return &ValidationError{Detail: "it adds a VALUES list"}
	case s.WithClause != nil:
		return &ValidationError{Detail: "it adds a WITH clause"}
	case s.IntoClause != nil:
		return &ValidationError{Detail: "it adds an INTO clause"}
	case len(s.DistinctClause) > 0:
		return &ValidationError{Detail: "it adds DISTINCT"}
	case len(s.FromClause) > 0:
		return &ValidationError{Detail: "it adds a FROM clause"}
	case s.WhereClause != nil:
		return &ValidationError{Detail: "it adds a WHERE clause"}
	case len(s.GroupClause) > 0:
		return &ValidationError{Detail: "it adds a GROUP BY clause"}
	case s.HavingClause != nil:
		return &ValidationError{Detail: "it adds a HAVING clause"}
	case len(s.WindowClause) > 0:
		return &ValidationError{Detail: "it adds a WINDOW clause"}
	case len(s.SortClause) > 0:
		return &ValidationError{Detail: "it adds an ORDER BY clause"}
	case s.LimitCount != nil || s.LimitOffset != nil:
		return &ValidationError{Detail: "it adds a LIMIT or OFFSET clause"}
	case len(s.LockingClause) > 0:
		return &ValidationError{Detail: "it adds a locking clause (FOR UPDATE/SHARE)"}
	case len(s.TargetList) != 1:
		return &ValidationError{Detail: fmt.Sprintf("it makes %d columns", len(s.TargetList))}
	}
	rt := s.TargetList[0].GetResTarget()
	switch {
	case rt == nil:
		return &ValidationError{Detail: "it is not a SELECT target"}
	case rt.Name != "":
		return &ValidationError{Detail: "it names its column (AS)"}
	case len(rt.Indirection) > 0:
		return &ValidationError{Detail: "it adds an indirection"}
	}
	return nil
}

// writers are the statements that must not appear anywhere in the tree
// (they can hide in a data-modifying CTE of a scalar subquery).
var writers = map[protoreflect.Name]string{
	"InsertStmt": "an INSERT",
	"UpdateStmt": "an UPDATE",
	"DeleteStmt": "a DELETE",
	"MergeStmt":  "a MERGE",
}

// checkWrites walks the whole parse tree, every message of it, so that no
// node kind can be missed by a hand-written walker.
func checkWrites(m protoreflect.Message) error {
	if what, ok := writers[m.Descriptor().Name()]; ok {
		return &ValidationError{Detail: "it contains " + what}
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = checkWrites(l.Get(i).Message())
			}
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					err = checkWrites(mv.Message())
				}
				return err == nil
			})
		default:
			err = checkWrites(v.Message())
		}
		return err == nil
	})
	return err
}

// checkParens makes sure the parenthesis opened before the expression is
// closed by the one after it, and by nothing earlier: a token-level check,
// so parentheses in strings and comments do not count and a trailing
// comment cannot swallow the closing one.
func checkParens(query string) error {
	scan, err := pg_query.Scan(query)
	if err != nil {
		return fmt.Errorf("%w: syntax error: %w", ErrNotExpression, err)
	}
	var toks []*pg_query.ScanToken
	for _, t := range scan.GetTokens() {
		if t.Token != pg_query.Token_SQL_COMMENT && t.Token != pg_query.Token_C_COMMENT {
			toks = append(toks, t)
		}
	}
	last := len(toks) - 1
	if len(toks) < 3 || toks[1].Token != pg_query.Token_ASCII_40 ||
		toks[last].Token != pg_query.Token_ASCII_41 || int(toks[last].End) != len(query) {
		return &ValidationError{Detail: "it does not end where its parentheses close"}
	}
	depth := 0
	for i, t := range toks[1:] {
		switch t.Token {
		case pg_query.Token_ASCII_40:
			depth++
		case pg_query.Token_ASCII_41:
			depth--
		}
		if depth == 0 && i+1 != last {
			return &ValidationError{Detail: "it closes a parenthesis it did not open"}
		}
	}
	return nil
}
