/*-------------------------------------------------------------------------
 *
 * validate.c
 *	  kafgres_validate_expression(expr, argname): is expr exactly one SQL
 *	  expression?
 *
 * The render expressions of a CDC mapping (value_expr, key_expr,
 * filter_expr) are spliced into SQL, as "(" + expr + ")", both by
 * kafgres_add_mapping() and by the broker.  Splicing is only safe if the
 * text cannot change the shape of the statement around it: no second
 * statement, no FROM or WHERE of its own, no second column, no data
 * modification hidden in a subquery's CTE, and no way to escape or comment
 * out the parentheses it is put in.  The broker checks the same rules again
 * with pg_query (mappings/validate.go) before it splices; the integration
 * test TestExpressionRulesAgree holds both to one table of cases,
 * mappings/testdata/expressions.json.
 *
 * Only the raw grammar is used: nothing is looked up in the catalogs, so
 * whether names exist and types fit is left to the probe that
 * kafgres_add_mapping() runs afterwards as the caller.
 *
 * Before it is parsed, an expression is bounded: at most
 * MAX_EXPRESSION_BYTES long and MAX_EXPRESSION_TOKENS tokens, the broker's
 * bounds (mappings.MaxExpressionBytes, MaxExpressionTokens).  Postgres's
 * own parse is safe from deep trees (check_stack_depth), but the broker
 * parses the same text with pg_query, whose C code recurses per tree level
 * without such a check; a tree is at most about a level deeper per token.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "parser/scanner.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "pgcompat.h"

PG_FUNCTION_INFO_V1(kafgres_validate_expression);
PG_FUNCTION_INFO_V1(kafgres_check_expression_bounds);
PG_FUNCTION_INFO_V1(kafgres_expression_columns);

#define MAX_EXPRESSION_BYTES	(64 * 1024)
#define MAX_EXPRESSION_TOKENS	10000

typedef struct ValidateContext
{
	const char *argname;
	const char *query;
} ValidateContext;

static void validate_error_callback(void *arg);
static void refuse(const char *argname, const char *detail);
static void check_select(const char *argname, SelectStmt *stmt);
static bool find_write(Node *node, const char **what);
static void check_tokens(const char *argname, const char *query, bool whole);
static void check_size(const char *argname, text *expr);
static bool find_row_columns(Node *node, List **names);

/*
 * kafgres_validate_expression(expr text, argname text) RETURNS void
 *
 * Raises an error naming argname unless expr is one expression; returns
 * nothing otherwise.  STRICT: a NULL expression is the caller's business.
 */
Datum
kafgres_validate_expression(PG_FUNCTION_ARGS)
{
	text	   *expr_text = PG_GETARG_TEXT_PP(0);
	char	   *argname = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *expr;
	StringInfoData query;
	ValidateContext vctx;
	ErrorContextCallback errcallback;
	List	   *stmts;
	RawStmt    *raw;
	const char *what = NULL;

	check_size(argname, expr_text);
	expr = text_to_cstring(expr_text);

	initStringInfo(&query);
	appendStringInfo(&query, "SELECT (%s)", expr);

	vctx.argname = argname;
	vctx.query = query.data;
	errcallback.callback = validate_error_callback;
	errcallback.arg = &vctx;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	/*
	 * blank or only comments: say so rather than "syntax error at )"; too
	 * many tokens: refuse before parsing
	 */
	check_tokens(argname, expr, false);

	stmts = raw_parser(query.data, RAW_PARSE_DEFAULT);

	if (list_length(stmts) != 1)
		refuse(argname, psprintf("It contains %d statements.", list_length(stmts)));
	raw = linitial_node(RawStmt, stmts);
	if (!IsA(raw->stmt, SelectStmt))
		refuse(argname, "It is not a SELECT target.");
	check_select(argname, (SelectStmt *) raw->stmt);

	if (find_write(raw->stmt, &what))
		refuse(argname, psprintf("It contains %s.", what));

	check_tokens(argname, query.data, true);

	error_context_stack = errcallback.previous;
	PG_RETURN_VOID();
}

/*
 * kafgres_check_expression_bounds(expr text, argname text) RETURNS void
 *
 * Raises an error naming argname unless expr is within the bounds the
 * broker parses (MAX_EXPRESSION_BYTES, MAX_EXPRESSION_TOKENS) and has a
 * token; the rest of kafgres_validate_expression's rules are left to the
 * broker.  The trigger on kafgres.mapping calls it, so that no INSERT can
 * hand the broker an expression it cannot parse safely.
 */
Datum
kafgres_check_expression_bounds(PG_FUNCTION_ARGS)
{
	text	   *expr = PG_GETARG_TEXT_PP(0);
	char	   *argname = text_to_cstring(PG_GETARG_TEXT_PP(1));

	check_size(argname, expr);
	check_tokens(argname, text_to_cstring(expr), false);
	PG_RETURN_VOID();
}

/*
 * kafgres.expression_columns(expr text) RETURNS text[]
 *
 * The columns of the mapped table that expr names through new or old
 * (new.a, old.a, (new).a), each once, in the order first named.  A whole
 * row (new, new.*, to_jsonb(new)) names none: it follows the table.  Used
 * to tell which schema changes break a mapping (the event trigger that
 * pauses mappings).  Bounded like kafgres_validate_expression; an
 * expression that does not parse names nothing.  STRICT.
 */
Datum
kafgres_expression_columns(PG_FUNCTION_ARGS)
{
	text	   *expr = PG_GETARG_TEXT_PP(0);
	StringInfoData query;
	List	   *stmts = NIL;
	List	   *names = NIL;
	ListCell   *lc;
	Datum	   *elems;
	int			i = 0;
	MemoryContext oldcxt = CurrentMemoryContext;

	check_size("expression", expr);
	check_tokens("expression", text_to_cstring(expr), false);

	initStringInfo(&query);
	appendStringInfo(&query, "SELECT (%s)", text_to_cstring(expr));

	/* a syntax error names nothing: the broker reports it where it renders */
	PG_TRY();
	{
		stmts = raw_parser(query.data, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		FlushErrorState();
		stmts = NIL;
	}
	PG_END_TRY();

	foreach(lc, stmts)
		find_row_columns((Node *) lfirst_node(RawStmt, lc)->stmt, &names);

	elems = palloc(sizeof(Datum) * Max(list_length(names), 1));
	foreach(lc, names)
		elems[i++] = CStringGetTextDatum((char *) lfirst(lc));
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, i, TEXTOID, -1, false, TYPALIGN_INT));
}

/* Collects into *names the columns named through new or old. */
static bool
find_row_columns(Node *node, List **names)
{
	List	   *fields = NIL;
	Node	   *row = NULL;

	if (node == NULL)
		return false;
	if (IsA(node, ColumnRef))
		fields = ((ColumnRef *) node)->fields;
	else if (IsA(node, A_Indirection) && IsA(((A_Indirection *) node)->arg, ColumnRef))
	{
		/* (new).a: the row, then the field */
		A_Indirection *ind = (A_Indirection *) node;
		ColumnRef  *ref = (ColumnRef *) ind->arg;

		if (list_length(ref->fields) == 1 && list_length(ind->indirection) >= 1)
		{
			row = linitial(ref->fields);
			fields = list_make2(row, linitial(ind->indirection));
		}
	}
	if (list_length(fields) >= 2 && IsA(linitial(fields), String) && IsA(lsecond(fields), String))
	{
		const char *rel = strVal(linitial(fields));

		if (strcmp(rel, "new") == 0 || strcmp(rel, "old") == 0)
		{
			char	   *name = strVal(lsecond(fields));
			ListCell   *lc;

			foreach(lc, *names)
			{
				if (strcmp((char *) lfirst(lc), name) == 0)
					return false;
			}
			*names = lappend(*names, name);
			return false;
		}
	}
	return raw_expression_tree_walker(node, find_row_columns, (void *) names);
}

/* The first bound, checked before anything reads expr. */
static void
check_size(const char *argname, text *expr)
{
	if (VARSIZE_ANY_EXHDR(expr) > MAX_EXPRESSION_BYTES)
		refuse(argname, psprintf("It is %d bytes long, more than the %d an expression may have.",
								 (int) VARSIZE_ANY_EXHDR(expr), MAX_EXPRESSION_BYTES));
}

/*
 * Errors raised while parsing carry a cursor position into our "SELECT
 * (...)" text, not into the statement the client sent; move it to an
 * internal query so the client is shown the right text, and say which
 * argument it was.
 */
static void
validate_error_callback(void *arg)
{
	ValidateContext *vctx = (ValidateContext *) arg;
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery(vctx->query);
	}
	errcontext("validating argument %s of a CDC mapping", vctx->argname);
}

static void
refuse(const char *argname, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must be a single SQL expression", argname),
			 errdetail_internal("%s", detail),
			 errhint("Write one expression over new, old, op, lsn, xid and commit_ts, such as new.id::text.")));
}

/* Everything a SELECT can have that a lone expression target cannot. */
static void
check_select(const char *argname, SelectStmt *s)
{
	ResTarget  *rt;

	if (s->op != SETOP_NONE)
		refuse(argname, "It adds a set operation (UNION, INTERSECT or EXCEPT).");
	if (s->valuesLists != NIL)
		refuse(argname, "It adds a VALUES list.");
	if (s->withClause != NULL)
		refuse(argname, "It adds a WITH clause.");
	if (s->intoClause != NULL)
		refuse(argname, "It adds an INTO clause.");
	if (s->distinctClause != NIL)
		refuse(argname, "It adds DISTINCT.");
	if (s->fromClause != NIL)
		refuse(argname, "It adds a FROM clause.");
	if (s->whereClause != NULL)
		refuse(argname, "It adds a WHERE clause.");
	if (s->groupClause != NIL)
		refuse(argname, "It adds a GROUP BY clause.");
	if (s->havingClause != NULL)
		refuse(argname, "It adds a HAVING clause.");
	if (s->windowClause != NIL)
		refuse(argname, "It adds a WINDOW clause.");
	if (s->sortClause != NIL)
		refuse(argname, "It adds an ORDER BY clause.");
	if (s->limitCount != NULL || s->limitOffset != NULL)
		refuse(argname, "It adds a LIMIT or OFFSET clause.");
	if (s->lockingClause != NIL)
		refuse(argname, "It adds a locking clause (FOR UPDATE/SHARE).");
	if (list_length(s->targetList) != 1)
		refuse(argname, psprintf("It makes %d columns.", list_length(s->targetList)));

	rt = linitial_node(ResTarget, s->targetList);
	if (rt->name != NULL)
		refuse(argname, "It names its column (AS).");
	if (rt->indirection != NIL)
		refuse(argname, "It adds an indirection.");
}

/*
 * Is there a data-modifying statement anywhere in the tree?  They can hide
 * in a WITH of a scalar subquery: (WITH d AS (DELETE ...) SELECT 1).  The
 * raw walker descends into sublinks and CTEs.
 */
static bool
find_write(Node *node, const char **what)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_InsertStmt:
			*what = "an INSERT";
			return true;
		case T_UpdateStmt:
			*what = "an UPDATE";
			return true;
		case T_DeleteStmt:
			*what = "a DELETE";
			return true;
		case T_MergeStmt:
			*what = "a MERGE";
			return true;
		default:
			break;
	}
	return raw_expression_tree_walker(node, find_write, (void *) what);
}

/*
 * Token-level checks with the core scanner (comments are not tokens).
 *
 * !whole: expr alone must have at least one token, and at most
 * MAX_EXPRESSION_TOKENS (the scanner does not recurse).
 *
 * whole: in "SELECT (" expr ")", the parenthesis before expr must be closed
 * by the one after it and by nothing earlier, and that one must be the last
 * token, so that expr can neither escape the parentheses it is spliced into
 * ("1) + (2") nor comment out what follows ("1) --").
 */
static void
check_tokens(const char *argname, const char *query, bool whole)
{
	core_yyscan_t yyscanner;
	core_yy_extra_type yyextra;
	core_YYSTYPE yylval;
	YYLTYPE		yylloc;
	int			ntokens = 0;
	int			depth = 0;
	int			last_tok = 0;
	int			last_loc = -1;
	bool		closed_early = false;

	yyscanner = scanner_init(query, &yyextra, &ScanKeywords, ScanKeywordTokens);
	for (;;)
	{
		int			tok = core_yylex(&yylval, &yylloc, yyscanner);

		if (tok == 0)
			break;
		if (depth == 0 && ntokens > 1)
			closed_early = true;	/* a token after the outer ")" */
		if (tok == '(')
			depth++;
		else if (tok == ')')
			depth--;
		ntokens++;
		last_tok = tok;
		last_loc = yylloc;
	}
	scanner_finish(yyscanner);

	if (!whole)
	{
		if (ntokens == 0)
			refuse(argname, "It is empty.");
		if (ntokens > MAX_EXPRESSION_TOKENS)
			refuse(argname, psprintf("It has %d tokens, more than the %d an expression may have.",
									 ntokens, MAX_EXPRESSION_TOKENS));
		return;
	}
	if (closed_early || depth != 0 || last_tok != ')' ||
		last_loc != (int) strlen(query) - 1)
		refuse(argname, "Its parentheses do not close exactly at its end.");
}
