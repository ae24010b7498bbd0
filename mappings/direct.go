package mappings

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"

	pg_query "github.com/pganalyze/pg_query_go/v5"

	"github.com/kafgres/kafgres/decoder"
)

// Direct rendering: the broker evaluates a mapping's expressions itself,
// without a render call, when they are built only of what it can compute
// byte for byte as Postgres would from the decoded row's text:
//
//   - new.col and old.col of a boolean, integer, numeric, text, varchar,
//     uuid or jsonb column, and op;
//   - string and integer constants and NULL as values of an object;
//   - jsonb_build_object and json_build_object with string constant keys;
//   - to_jsonb, to_json and row_to_json of new or old;
//   - ::text of any of these;
//
// with no filter, a database in UTF8, and a search_path that puts
// pg_catalog first (where an author's function or type of the same name
// cannot win). Anything else, and every snapshot row, goes through the
// mapping's render function as before; so does a change whose columns are
// not of the types the plan was made for. The owner's access check runs
// for every group either way (checkAccess).
//
// Postgres's rules reproduced here (src/backend/utils/adt/json.c,
// jsonb.c): json escapes strings with \" \\ \b \f \n \r \t and \u00XX for
// other control characters; jsonb prints objects as {"k": v, "k2": v2}
// with keys shorter first, then bytewise, the last of equal keys kept,
// while json_build_object keeps its order and prints {"k" : v, "k2" : v2},
// and row_to_json {"k":v,"k2":v2}; numbers are their text output, except
// that numeric NaN and the infinities are strings; booleans are
// true/false, also as text (::text). The test that a direct plan renders
// exactly what the render function does is TestDirectRenderAgrees.

// directPlan is a mapping's expressions compiled for direct rendering.
type directPlan struct {
	columns []directColumn // the table's columns the plan was made for
	key     *directExpr    // nil: a NULL key
	value   *directExpr
}

type directColumn struct {
	name string
	typ  uint32
}

type exprKind uint8

const (
	exprColumn exprKind = iota // a column of an image
	exprRow                    // a whole image as a JSON object
	exprOp                     // the change's op
	exprString                 // a string constant
	exprNumber                 // an integer constant
	exprNull                   // NULL
	exprText                   // arg::text
	exprObject                 // jsonb_build_object or json_build_object
)

// Type OIDs direct rendering knows. Everything else is rendered by Postgres.
const (
	oidBool    = 16
	oidInt2    = 21
	oidVarchar = 1043
	oidNumeric = 1700
	oidUUID    = 2950
	oidUnknown = 705
)

type directExpr struct {
	kind  exprKind
	typ   uint32        // the result's type OID (oidUnknown for a string constant)
	image int           // exprColumn, exprRow: 0 new, 1 old
	col   int           // exprColumn: index in directPlan.columns
	text  string        // exprString, exprNumber: the constant
	arg   *directExpr   // exprText
	keys  [][]byte      // exprObject, exprRow: the keys as JSON strings, in output order
	vals  []*directExpr // exprObject: the values, in output order
	cols  []int         // exprRow: column indexes, in output order
}

// directColumnTypes are the column types whose text output direct
// rendering turns into JSON as Postgres does.
var directColumnTypes = map[uint32]bool{
	oidBool: true, oidInt2: true, oidInt4: true, oidInt8: true, oidNumeric: true,
	oidText: true, oidVarchar: true, oidUUID: true, oidJSONB: true,
}

// compileDirect is the direct plan of m's expressions over columns, or nil
// when they cannot be rendered directly. keyType and valueType are the
// result types the probe found (the key's is ignored when m has none): a
// plan whose own types differ is not used. shadowed names the functions
// direct rendering knows that also exist outside pg_catalog: Postgres
// weighs functions of all schemas in the search_path alike when their
// argument types differ, so one of the author's could be the better match
// wherever pg_catalog is in the path.
func compileDirect(m *Mapping, columns []directColumn, shadowed map[string]bool, encoding string, keyType, valueType uint32) *directPlan {
	if encoding != "UTF8" || m.FilterExpr != nil || !catalogFirst(m.SearchPath) {
		return nil
	}
	c := &compiler{columns: columns, shadowed: shadowed}
	p := &directPlan{columns: columns}
	value := "pg_catalog.to_jsonb(new)" // the default, as render_query has it
	if m.ValueExpr != nil {
		value = *m.ValueExpr
	}
	if p.value = c.top(value); p.value == nil || p.value.typ != valueType {
		return nil
	}
	if m.KeyExpr != nil {
		if p.key = c.top(*m.KeyExpr); p.key == nil || p.key.typ != keyType {
			return nil
		}
	}
	return p
}

// catalogFirst says whether a search_path setting has pg_catalog searched
// first: not named (then it is searched before everything), or named
// first.
func catalogFirst(searchPath string) bool {
	names, err := parseSearchPath(searchPath)
	if err != nil {
		return false
	}
	return !slices.Contains(names, "pg_catalog") || names[0] == "pg_catalog"
}

type compiler struct {
	columns  []directColumn
	shadowed map[string]bool
}

// directFunctions are the functions direct rendering evaluates.
var directFunctions = []string{"to_jsonb", "to_json", "row_to_json", "jsonb_build_object", "json_build_object"}

// top compiles an expression whose value becomes a key or value: a
// constant has no type of its own there, so it is not taken.
func (c *compiler) top(expr string) *directExpr {
	tree, err := parse("SELECT (" + expr + ")")
	if err != nil || len(tree.Stmts) != 1 {
		return nil
	}
	sel := tree.Stmts[0].GetStmt().GetSelectStmt()
	if sel == nil || len(sel.TargetList) != 1 || sel.TargetList[0].GetResTarget() == nil {
		return nil
	}
	e := c.expr(sel.TargetList[0].GetResTarget().GetVal())
	if e == nil || e.typ == oidUnknown || e.kind == exprNull || e.kind == exprNumber {
		return nil
	}
	return e
}

func (c *compiler) column(name string) int {
	return slices.IndexFunc(c.columns, func(col directColumn) bool { return col.name == name })
}

func (c *compiler) expr(n *pg_query.Node) *directExpr {
	switch {
	case n == nil:
		return nil
	case n.GetColumnRef() != nil:
		return c.columnRef(n.GetColumnRef(), false)
	case n.GetAConst() != nil:
		k := n.GetAConst()
		switch {
		case k.Isnull:
			return &directExpr{kind: exprNull, typ: oidUnknown}
		case k.GetSval() != nil:
			return &directExpr{kind: exprString, typ: oidUnknown, text: k.GetSval().Sval}
		case k.GetIval() != nil:
			return &directExpr{kind: exprNumber, typ: oidInt4, text: strconv.FormatInt(int64(k.GetIval().Ival), 10)}
		}
		return nil
	case n.GetTypeCast() != nil:
		tc := n.GetTypeCast()
		tn := tc.GetTypeName()
		if tn == nil || !isCatalogName(tn.Names, "text") || len(tn.Typmods) > 0 || len(tn.ArrayBounds) > 0 || tn.Setof || tn.PctType {
			return nil
		}
		arg := c.expr(tc.Arg)
		if arg == nil || arg.kind == exprNull {
			return nil
		}
		return &directExpr{kind: exprText, typ: oidText, arg: arg}
	case n.GetFuncCall() != nil:
		return c.funcCall(n.GetFuncCall())
	}
	return nil
}

// columnRef compiles new.col, old.col and op; with whole, new or old
// alone (the argument of to_jsonb and the like).
func (c *compiler) columnRef(ref *pg_query.ColumnRef, whole bool) *directExpr {
	var names []string
	for _, f := range ref.Fields {
		s := f.GetString_()
		if s == nil {
			return nil
		}
		names = append(names, s.Sval)
	}
	image := map[string]int{"new": 0, "old": 1}
	switch {
	case len(names) == 1 && whole && c.column(names[0]) < 0:
		// a single name is a column before it is a whole row
		if img, ok := image[names[0]]; ok {
			return &directExpr{kind: exprRow, image: img}
		}
	case len(names) == 1 && !whole && names[0] == "op" && c.column("op") < 0:
		return &directExpr{kind: exprOp, typ: oidText}
	case len(names) == 2 && !whole:
		img, ok := image[names[0]]
		col := c.column(names[1])
		if !ok || col < 0 || !directColumnTypes[c.columns[col].typ] {
			return nil
		}
		return &directExpr{kind: exprColumn, typ: c.columns[col].typ, image: img, col: col}
	}
	return nil
}

// isCatalogName says whether a parsed name is name or pg_catalog.name.
func isCatalogName(parts []*pg_query.Node, name string) bool {
	switch len(parts) {
	case 1:
		return parts[0].GetString_().GetSval() == name
	case 2:
		return parts[0].GetString_().GetSval() == "pg_catalog" && parts[1].GetString_().GetSval() == name
	}
	return false
}

func (c *compiler) funcCall(f *pg_query.FuncCall) *directExpr {
	if len(f.AggOrder) > 0 || f.AggFilter != nil || f.Over != nil || f.AggWithinGroup || f.AggStar ||
		f.AggDistinct || f.FuncVariadic {
		return nil
	}
	fn := ""
	for _, name := range directFunctions {
		if isCatalogName(f.Funcname, name) && !c.shadowed[name] {
			fn = name
		}
	}
	switch fn {
	case "to_jsonb", "to_json", "row_to_json":
		typ := uint32(oidJSON)
		if fn == "to_jsonb" {
			typ = oidJSONB
		}
		if len(f.Args) != 1 || f.Args[0].GetColumnRef() == nil {
			return nil
		}
		e := c.columnRef(f.Args[0].GetColumnRef(), true)
		if e == nil {
			return nil
		}
		return c.row(e.image, typ)
	case "":
		return nil
	}
	typ := uint32(oidJSON)
	if fn == "jsonb_build_object" {
		typ = oidJSONB
	}
	if len(f.Args)%2 != 0 {
		return nil
	}
	type pair struct {
		key   string
		val   *directExpr
		order int
	}
	pairs := make([]pair, 0, len(f.Args)/2)
	for i := 0; i < len(f.Args); i += 2 {
		k := f.Args[i].GetAConst()
		if k == nil || k.Isnull || k.GetSval() == nil {
			return nil
		}
		v := c.expr(f.Args[i+1])
		if v == nil || (typ == oidJSONB && v.typ == oidJSON) {
			// json in jsonb is parsed and printed again: not done here
			return nil
		}
		pairs = append(pairs, pair{key: k.GetSval().Sval, val: v, order: i})
	}
	if typ == oidJSONB {
		pairs = jsonbOrder(pairs, func(p pair) string { return p.key })
	}
	e := &directExpr{kind: exprObject, typ: typ}
	for _, p := range pairs {
		e.keys = append(e.keys, appendJSONString(nil, p.key))
		e.vals = append(e.vals, p.val)
	}
	return e
}

// row compiles a whole image as a jsonb (to_jsonb) or json (row_to_json)
// object of every column, if every column's type is known.
func (c *compiler) row(image int, typ uint32) *directExpr {
	idx := make([]int, len(c.columns))
	for i, col := range c.columns {
		if !directColumnTypes[col.typ] {
			return nil
		}
		idx[i] = i
	}
	if typ == oidJSONB {
		idx = jsonbOrder(idx, func(i int) string { return c.columns[i].name })
	}
	e := &directExpr{kind: exprRow, typ: typ, image: image, cols: idx}
	for _, i := range idx {
		e.keys = append(e.keys, appendJSONString(nil, c.columns[i].name))
	}
	return e
}

// jsonbOrder puts an object's members in jsonb's order: shorter keys
// first, then bytewise; of equal keys only the last is kept.
func jsonbOrder[T any](members []T, key func(T) string) []T {
	// a stable sort keeps equal keys in their order: keep the last of each
	out := slices.Clone(members)
	slices.SortStableFunc(out, func(a, b T) int {
		ka, kb := key(a), key(b)
		return cmp.Or(cmp.Compare(len(ka), len(kb)), cmp.Compare(ka, kb))
	})
	kept := out[:0]
	for i, m := range out {
		if i+1 < len(out) && key(out[i+1]) == key(m) {
			continue
		}
		kept = append(kept, m)
	}
	return kept
}

// render renders rows with the plan. ok is false when a row is not one
// the plan can render (a snapshot row, or an image whose columns are not
// those the plan was made for): the caller renders them all in Postgres.
//
// A row whose key and value would surely be larger than maxBytes (> 0)
// together is not made: its rendered row has only its size (tooLarge).
func (p *directPlan) render(rows []renderRow, maxBytes int64) (res []rendered, ok bool) {
	res = make([]rendered, len(rows))
	var arena []byte
	for i := range rows {
		row := &rows[i]
		if row.change == nil {
			return nil, false
		}
		images := [2][2]*decoder.Tuple{{row.change.New, row.change.Old}, {row.change.Old, nil}}
		if !p.fits(row.change.New, true) || !p.fits(row.change.Old, false) {
			return nil, false
		}
		if len(arena) > 32<<10 {
			arena = nil // a slab holds the keys and values of many rows
		}
		if arena == nil {
			arena = make([]byte, 0, 64<<10)
		}
		res[i] = rendered{ord: int32(i), pass: true}
		if maxBytes > 0 {
			if least := int64(p.leastBytes(p.key, images) + p.leastBytes(p.value, images)); least > maxBytes {
				res[i].size = least
				continue
			}
		}
		for _, out := range []struct {
			e   *directExpr
			dst *[]byte
		}{{p.key, &res[i].k}, {p.value, &res[i].v}} {
			if out.e == nil {
				continue
			}
			at := len(arena)
			var null bool
			arena, null = p.appendText(arena, out.e, images, row.op)
			if !null {
				*out.dst = arena[at:len(arena):len(arena)]
			}
		}
	}
	return res, true
}

// fits says whether a row image has the columns the plan was made for:
// all of them in a new image (in any order: a partition's may differ from
// its parent's), some of them in an old one (a key-only image), each of
// the type the plan knows. The render function would see the table's
// columns of now, and be made again if they are not the ones it was made
// for: a change whose columns differ from the plan's goes to it.
func (p *directPlan) fits(t *decoder.Tuple, all bool) bool {
	if t == nil {
		return true
	}
	if all && len(t.Columns) != len(p.columns) {
		return false
	}
	for i, c := range t.Columns {
		if i >= len(p.columns) || p.columns[i].name != c.Name {
			i = slices.IndexFunc(p.columns, func(col directColumn) bool { return col.name == c.Name })
		}
		if i < 0 || p.columns[i].typ != c.TypeOID {
			return false
		}
	}
	return true
}

// columnValue is column col of an image: its text, or nil for NULL. An
// unchanged TOASTed value comes from the other image, as in
// appendRecordLiteral.
func (p *directPlan) columnValue(img [2]*decoder.Tuple, col int) []byte {
	name := p.columns[col].name
	c, ok := decoder.Column{}, false
	if t := img[0]; t != nil && col < len(t.Columns) && t.Columns[col].Name == name {
		c, ok = t.Columns[col], true
	} else {
		c, ok = findColumn(img[0], name)
	}
	if ok && c.Kind == decoder.ColumnUnchanged {
		c, _ = findColumn(img[1], name)
	}
	if c.Kind != decoder.ColumnText {
		return nil
	}
	return c.Value
}

// appendText appends e's value as text (what ::text, and the render
// function's conversion of a key or value to UTF-8, make of it); null
// says it is NULL.
func (p *directPlan) appendText(b []byte, e *directExpr, images [2][2]*decoder.Tuple, op string) ([]byte, bool) {
	switch e.kind {
	case exprColumn:
		v := p.columnValue(images[e.image], e.col)
		if v == nil {
			return b, true
		}
		if e.typ == oidBool {
			return append(b, boolText(v)...), false
		}
		return append(b, v...), false
	case exprOp:
		return append(b, op...), false
	case exprString, exprNumber:
		return append(b, e.text...), false
	case exprNull:
		return b, true
	case exprText:
		return p.appendText(b, e.arg, images, op)
	case exprObject, exprRow:
		return p.appendJSON(b, e, images, op)
	}
	return b, true
}

// appendJSON appends e as a JSON value (inside an object, or an object at
// the top), except for a whole-row object of an image the change does not
// have, which is NULL (null true, nothing appended).
func (p *directPlan) appendJSON(b []byte, e *directExpr, images [2][2]*decoder.Tuple, op string) ([]byte, bool) {
	switch e.kind {
	case exprColumn:
		v := p.columnValue(images[e.image], e.col)
		return appendJSONValue(b, e.typ, v), false
	case exprOp:
		return appendJSONString(b, op), false
	case exprString:
		return appendJSONString(b, e.text), false
	case exprNumber:
		return append(b, e.text...), false
	case exprNull:
		return append(b, "null"...), false
	case exprText:
		at := len(b)
		b, null := p.appendText(b, e.arg, images, op)
		if null {
			return append(b, "null"...), false
		}
		// escaped from a copy: the text was appended in place
		t := slices.Clone(b[at:])
		return appendJSONString(b[:at], t), false
	case exprObject:
		sep, colon := ", ", " : "
		if e.typ == oidJSONB {
			colon = ": "
		}
		b = append(b, '{')
		for i, v := range e.vals {
			if i > 0 {
				b = append(b, sep...)
			}
			b = append(append(b, e.keys[i]...), colon...)
			var null bool
			if b, null = p.appendJSON(b, v, images, op); null {
				b = append(b, "null"...)
			}
		}
		return append(b, '}'), false
	case exprRow:
		img := images[e.image]
		if img[0] == nil {
			return b, true
		}
		sep, colon := ", ", ": "
		if e.typ == oidJSON {
			sep, colon = ",", ":"
		}
		b = append(b, '{')
		for i, col := range e.cols {
			if i > 0 {
				b = append(b, sep...)
			}
			b = append(append(b, e.keys[i]...), colon...)
			b = appendJSONValue(b, p.columns[col].typ, p.columnValue(img, col))
		}
		return append(b, '}'), false
	}
	return b, true
}

// leastBytes is a lower bound of e's text: the bytes of the column values
// it holds (escaping and punctuation only add), so that a record surely
// too large for its topic is refused before it is made (render).
func (p *directPlan) leastBytes(e *directExpr, images [2][2]*decoder.Tuple) int {
	if e == nil {
		return 0
	}
	switch e.kind {
	case exprColumn:
		return len(p.columnValue(images[e.image], e.col))
	case exprText:
		return p.leastBytes(e.arg, images)
	case exprObject:
		n := 0
		for _, v := range e.vals {
			n += p.leastBytes(v, images)
		}
		return n
	case exprRow:
		img := images[e.image]
		if img[0] == nil {
			return 0
		}
		n := 0
		for _, col := range e.cols {
			n += len(p.columnValue(img, col))
		}
		return n
	}
	return 0
}

// appendJSONValue appends a column value (text output, nil for NULL) of
// type typ as JSON, the same in json and jsonb.
func appendJSONValue(b []byte, typ uint32, v []byte) []byte {
	switch {
	case v == nil:
		return append(b, "null"...)
	case typ == oidBool:
		return append(b, boolText(v)...)
	case typ == oidInt2 || typ == oidInt4 || typ == oidInt8 || typ == oidJSONB:
		return append(b, v...)
	case typ == oidNumeric && !bytes.ContainsAny(v, "Nn"):
		// NaN, Infinity and -Infinity are no JSON numbers: strings
		return append(b, v...)
	}
	return appendJSONString(b, v)
}

func boolText(v []byte) string {
	if len(v) > 0 && v[0] == 't' {
		return "true"
	}
	return "false"
}

// appendJSONString appends s as a JSON string as Postgres's escape_json
// writes it.
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var esc string
		switch c {
		case '"':
			esc = `\"`
		case '\\':
			esc = `\\`
		case '\b':
			esc = `\b`
		case '\f':
			esc = `\f`
		case '\n':
			esc = `\n`
		case '\r':
			esc = `\r`
		case '\t':
			esc = `\t`
		default:
			if c >= ' ' {
				continue
			}
		}
		b = append(b, s[start:i]...)
		if esc != "" {
			b = append(b, esc...)
		} else {
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		}
		start = i + 1
	}
	return append(append(b, s[start:]...), '"')
}
