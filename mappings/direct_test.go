package mappings

import (
	"testing"

	"github.com/kafgres/kafgres/decoder"
)

var directTestColumns = []directColumn{
	{"id", oidInt8}, {"total", oidNumeric}, {"status", oidText}, {"ok", oidBool}, {"doc", oidJSONB},
}

func directTestTuple(vals ...string) *decoder.Tuple {
	t := &decoder.Tuple{}
	for i, c := range directTestColumns {
		col := decoder.Column{Name: c.name, TypeOID: c.typ, Kind: decoder.ColumnNull}
		if i < len(vals) && vals[i] != "\x00" {
			col.Kind, col.Value = decoder.ColumnText, []byte(vals[i])
		}
		t.Columns = append(t.Columns, col)
	}
	return t
}

// TestCompileDirect: what is rendered directly and what is left to the
// render function.
func TestCompileDirect(t *testing.T) {
	for _, tc := range []struct {
		value, key, filter *string
		path               string
		shadowed           string
		keyType, valueType uint32
		direct             bool
	}{
		{direct: true, valueType: oidJSONB},
		{value: strp(`jsonb_build_object('id', new.id, 'op', op)`), key: strp(`new.id::text`), keyType: oidText, valueType: oidJSONB, direct: true},
		{value: strp(`pg_catalog.json_build_object('a', 1, 'b', NULL, 'c', 'x')`), valueType: oidJSON, direct: true},
		{value: strp(`row_to_json(old)`), valueType: oidJSON, direct: true},
		{value: strp(`new.status`), key: strp(`new.id`), keyType: oidInt8, valueType: oidText, direct: true},
		{value: strp(`jsonb_build_object('j', json_build_object('a', 1))`), valueType: oidJSONB},           // json in jsonb
		{value: strp(`jsonb_build_object('id', new.id)`), filter: strp(`true`), valueType: oidJSONB},       // a filter
		{value: strp(`jsonb_build_object('id', new.id)`), path: `public, pg_catalog`, valueType: oidJSONB}, // author's schema first
		{value: strp(`jsonb_build_object('id', new.id)`), path: `pg_catalog, public`, valueType: oidJSONB, direct: true},
		{value: strp(`jsonb_build_object('id', new.id)`), shadowed: "jsonb_build_object", valueType: oidJSONB},
		{value: strp(`jsonb_build_object('id', new.id)`), valueType: oidJSON},       // the probe disagrees
		{value: strp(`jsonb_build_object('id', new.missing)`), valueType: oidJSONB}, // no such column
		{value: strp(`jsonb_build_object('at', commit_ts)`), valueType: oidJSONB},   // not known here
		{value: strp(`jsonb_build_object(new.status, 1)`), valueType: oidJSONB},     // a key from the row
		{value: strp(`jsonb_build_object('id')`), valueType: oidJSONB},              // odd arguments
		{value: strp(`'x'`), valueType: oidText},                                    // a constant at the top
		{value: strp(`new.id::varchar`), valueType: oidVarchar},                     // another cast
		{value: strp(`lower(new.status)`), valueType: oidText},                      // another function
		{value: strp(`to_jsonb(new.status)`), valueType: oidJSONB},                  // to_jsonb of a value
	} {
		m := &Mapping{ValueExpr: tc.value, KeyExpr: tc.key, FilterExpr: tc.filter, SearchPath: tc.path}
		name := "default"
		if tc.value != nil {
			name = *tc.value
		}
		shadowed := map[string]bool{tc.shadowed: tc.shadowed != ""}
		got := compileDirect(m, directTestColumns, shadowed, "UTF8", tc.keyType, tc.valueType) != nil
		if got != tc.direct {
			t.Errorf("%s (path %q, filter %v): direct %v, want %v", name, tc.path, tc.filter != nil, got, tc.direct)
		}
	}
	if compileDirect(&Mapping{}, directTestColumns, nil, "LATIN1", 0, oidJSONB) != nil {
		t.Error("a database not in UTF8 is rendered directly")
	}
	cols := append([]directColumn{{"op", oidText}}, directTestColumns...)
	if compileDirect(&Mapping{ValueExpr: strp(`jsonb_build_object('op', op)`)}, cols, nil, "UTF8", 0, oidJSONB) != nil {
		t.Error("op is taken for the change's op in a table with a column op")
	}
}

// TestDirectRender: the text Postgres makes of each form (the integration
// test TestDirectRenderAgrees compares with Postgres itself).
func TestDirectRender(t *testing.T) {
	row := directTestTuple("42", "9.90", "a \"quoted\"\\ \x01\ttab ü", "t", `{"k": [1, "x"]}`)
	for _, tc := range []struct {
		value, key string
		typ        uint32
		op         string
		new, old   *decoder.Tuple
		want, kw   string
	}{
		{value: `to_jsonb(new)`, typ: oidJSONB, op: "I", new: row,
			want: `{"id": 42, "ok": true, "doc": {"k": [1, "x"]}, "total": 9.90, "status": "a \"quoted\"\\ \u0001\ttab ü"}`},
		{value: `row_to_json(new)`, typ: oidJSON, op: "I", new: row,
			want: `{"id":42,"total":9.90,"status":"a \"quoted\"\\ \u0001\ttab ü","ok":true,"doc":{"k": [1, "x"]}}`},
		{value: `jsonb_build_object('b', 1, 'a', new.id::text, 'b', 'two', 'op', op, 'n', NULL)`, typ: oidJSONB, op: "U", new: row,
			key: `new.ok::text`, kw: `true`,
			want: `{"a": "42", "b": "two", "n": null, "op": "U"}`},
		{value: `json_build_object('b', 1, 'a', new.id, 'b', to_jsonb(old))`, typ: oidJSON, op: "I", new: row,
			want: `{"b" : 1, "a" : 42, "b" : null}`},
		{value: `to_jsonb(new)`, typ: oidJSONB, op: "D", old: directTestTuple("7"), key: `old.id::text`, kw: "7"}, // a tombstone
		{value: `jsonb_build_object('t', new.total, 's', new.status)`, typ: oidJSONB, op: "I",
			new: directTestTuple("1", "NaN", "\x00"), want: `{"s": null, "t": "NaN"}`},
	} {
		m := &Mapping{ValueExpr: &tc.value}
		keyType := uint32(0)
		if tc.key != "" {
			m.KeyExpr, keyType = &tc.key, oidText
		}
		plan := compileDirect(m, directTestColumns, nil, "UTF8", keyType, tc.typ)
		if plan == nil {
			t.Fatalf("%s: not rendered directly", tc.value)
		}
		res, ok := plan.render([]renderRow{{change: &decoder.Change{New: tc.new, Old: tc.old}, op: tc.op}}, 0)
		if !ok || len(res) != 1 {
			t.Fatalf("%s: not rendered (%v)", tc.value, ok)
		}
		if got := string(res[0].v); got != tc.want || (res[0].v == nil) != (tc.want == "") {
			t.Errorf("%s:\n got %s\nwant %s", tc.value, got, tc.want)
		}
		if got := string(res[0].k); got != tc.kw {
			t.Errorf("%s: key %q, want %q", tc.key, got, tc.kw)
		}
	}
}

// TestDirectRenderSized: a row surely larger than the limit is sized from
// its values, not made.
func TestDirectRenderSized(t *testing.T) {
	value := `to_jsonb(new)`
	plan := compileDirect(&Mapping{ValueExpr: &value}, directTestColumns, nil, "UTF8", 0, oidJSONB)
	row := renderRow{change: &decoder.Change{New: directTestTuple("12345")}, op: "I"}
	full, ok := plan.render([]renderRow{row}, 0)
	if !ok || full[0].v == nil {
		t.Fatalf("without a limit: %+v %v", full, ok)
	}
	sized, ok := plan.render([]renderRow{row}, 4) // the id alone is 5 bytes
	if !ok || sized[0].v != nil || sized[0].size <= 4 || sized[0].size > int64(len(full[0].v)) {
		t.Fatalf("with a limit of 4 bytes: %+v %v (whole: %d bytes)", sized, ok, len(full[0].v))
	}
	if fits, _ := plan.render([]renderRow{row}, int64(len(full[0].v))); fits[0].v == nil {
		t.Fatal("a row of the limit's size was not made")
	}
}

// TestDirectRenderDeclines: rows the plan was not made for go to the
// render function.
func TestDirectRenderDeclines(t *testing.T) {
	plan := compileDirect(&Mapping{}, directTestColumns, nil, "UTF8", 0, oidJSONB)
	retyped := directTestTuple("1")
	retyped.Columns[2].TypeOID = oidVarchar
	renamed := directTestTuple("1")
	renamed.Columns[1].Name = "sum"
	snapshot := `{"id": 1}`
	for name, row := range map[string]renderRow{
		"snapshot row":     {newJSON: &snapshot},
		"column retyped":   {change: &decoder.Change{New: retyped}},
		"column renamed":   {change: &decoder.Change{New: renamed}},
		"column missing":   {change: &decoder.Change{New: &decoder.Tuple{Columns: directTestTuple("1").Columns[:4]}}},
		"old column other": {change: &decoder.Change{Old: renamed}},
	} {
		if _, ok := plan.render([]renderRow{row}, 0); ok {
			t.Errorf("%s: rendered directly", name)
		}
	}
	if _, ok := plan.render([]renderRow{{change: &decoder.Change{Old: &decoder.Tuple{Columns: directTestTuple("1").Columns[:1]}}}}, 0); !ok {
		t.Error("a key-only old image is not rendered directly")
	}
}

func strp(s string) *string { return &s }
