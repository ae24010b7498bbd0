package mappings

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kafgres/kafgres/decoder"
)

func col(name string, oid uint32, kind byte, v string) decoder.Column {
	c := decoder.Column{Name: name, TypeOID: oid, Kind: kind}
	if kind == 't' {
		c.Value = []byte(v)
	}
	return c
}

func TestTupleJSON(t *testing.T) {
	old := &decoder.Tuple{Columns: []decoder.Column{
		col("id", 23, 't', "1"),
		col("big", 25, 't', "old big text"),
	}}
	for _, tc := range []struct {
		name         string
		tuple, other *decoder.Tuple
		want         string
	}{
		{"kinds", &decoder.Tuple{Columns: []decoder.Column{
			col("id", 23, 't', "1"),
			col("name", 25, 't', "a \"quoted\" \\ name\n"),
			col("gone", 25, 'n', ""),
			col("doc", oidJSONB, 't', `{"a": [1, 2]}`),
			col("raw", oidJSON, 't', `[1,2]`),
			col("tags", 1009, 't', `{a,"b c"}`),
		}}, nil, `{"id":"1","name":"a \"quoted\" \\ name\n","gone":null,"doc":{"a": [1, 2]},"raw":[1,2],"tags":"{a,\"b c\"}"}`},
		{"unchanged toast from old", &decoder.Tuple{Columns: []decoder.Column{
			col("id", 23, 't', "1"),
			col("big", 25, 'u', ""),
		}}, old, `{"id":"1","big":"old big text"}`},
		{"empty", &decoder.Tuple{}, nil, `{}`},
	} {
		got, err := tupleJSON(tc.tuple, tc.other)
		if err != nil || got == nil || *got != tc.want {
			t.Errorf("%s: got %v %v, want %s", tc.name, got, err, tc.want)
		}
	}
	if got, err := tupleJSON(nil, old); got != nil || err != nil {
		t.Error("nil tuple must give nil")
	}
	// never a NULL that was not in the row: an unchanged TOASTed value the
	// old image cannot fill is an error naming the column and the fix
	noBig := &decoder.Tuple{Columns: []decoder.Column{col("id", 23, 't', "1")}}
	keyOnly := &decoder.Tuple{Columns: []decoder.Column{col("id", 23, 't', "1"), col("Big", 25, 'n', "")}}
	for _, other := range []*decoder.Tuple{nil, noBig, keyOnly} {
		got, err := tupleJSON(&decoder.Tuple{Columns: []decoder.Column{
			col("id", 23, 't', "1"),
			col("Big", 25, 'u', ""),
		}}, other)
		var te *unchangedToastError
		if !errors.As(err, &te) || got == nil || *got != `{"id":"1"}` {
			t.Fatalf("unchanged toast without old: got %v, %v", got, err)
		}
		te.table = `"public"."docs"`
		if msg := te.Error(); !strings.Contains(msg, `column "Big"`) || !strings.Contains(msg, "REPLICA IDENTITY FULL") {
			t.Fatalf("error %q", msg)
		}
	}
}

func TestParseSearchPath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		set  string
	}{
		{`"$user", public`, []string{"$user", "public"}, `"$user", "public"`},
		{`Public,  "My ""Schema"""`, []string{"public", `My "Schema"`}, `"public", "My ""Schema"""`},
		{``, nil, `''`},
		{`pg_catalog`, []string{"pg_catalog"}, `"pg_catalog"`},
	} {
		got, err := parseSearchPath(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseSearchPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		if set := quoteSearchPath(got); set != tc.set {
			t.Errorf("quoteSearchPath(%q) = %s, want %s", got, set, tc.set)
		}
	}
	for _, bad := range []string{`a,`, `"unterminated`, `a b`, `a; DROP TABLE x`, `"a"b`, `,a`} {
		if got, err := parseSearchPath(bad); err == nil {
			t.Errorf("parseSearchPath(%q) = %q, want an error", bad, got)
		}
	}
}

func TestDollarTag(t *testing.T) {
	if tag := dollarTag("x $kafgres0$ y $kafgres1$"); tag != "$kafgres2$" {
		t.Fatalf("dollarTag = %s", tag)
	}
}

func TestRecordLiteral(t *testing.T) {
	old := &decoder.Tuple{Columns: []decoder.Column{col("id", 23, 't', "1"), col("big", 25, 't', "old, big")}}
	for _, tc := range []struct {
		name         string
		tuple, other *decoder.Tuple
		columns      []string
		want         string
	}{
		{"kinds", &decoder.Tuple{Columns: []decoder.Column{
			col("id", 23, 't', "1"),
			col("name", 25, 't', `a "quoted" \ (name), `),
			col("gone", 25, 'n', ""),
			col("empty", 25, 't', ""),
		}}, nil, []string{"id", "name", "gone", "empty"}, `("1","a \"quoted\" \\ (name), ",,"")`},
		// by name: a column the tuple lacks is NULL, one the function
		// was not made for is left out, whatever the order
		{"by name", &decoder.Tuple{Columns: []decoder.Column{
			col("b", 25, 't', "bee"),
			col("extra", 25, 't', "x"),
			col("id", 23, 't', "2"),
		}}, nil, []string{"id", "a", "b"}, `("2",,"bee")`},
		{"unchanged toast from old", &decoder.Tuple{Columns: []decoder.Column{
			col("id", 23, 't', "1"),
			col("big", 25, 'u', ""),
		}}, old, []string{"id", "big"}, `("1","old, big")`},
		{"no columns", &decoder.Tuple{}, nil, nil, `()`},
	} {
		if got := string(appendRecordLiteral(nil, tc.tuple, tc.other, tc.columns)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestUnchangedToast(t *testing.T) {
	full := &decoder.Tuple{Columns: []decoder.Column{col("id", 23, 't', "1"), col("big", 25, 't', "v")}}
	keyOnly := &decoder.Tuple{Columns: []decoder.Column{col("id", 23, 't', "1"), col("big", 25, 'n', "")}}
	upd := &decoder.Tuple{Columns: []decoder.Column{col("id", 23, 't', "1"), col("big", 25, 'u', "")}}
	if err := unchangedToast(upd, full); err != nil {
		t.Fatalf("filled from old: %v", err)
	}
	for _, other := range []*decoder.Tuple{nil, keyOnly} {
		if err := unchangedToast(upd, other); err == nil || err.column != "big" {
			t.Fatalf("not filled: %v", err)
		}
		// the same verdict as tupleJSON's
		if _, err := tupleJSON(upd, other); err == nil {
			t.Fatal("tupleJSON disagrees")
		}
	}
}

// TestShapeChanged: a row with a column the table no longer has and
// without one it has now (a rename since the change) is refused; a column
// added since (missing, NULL) or dropped since (extra, unused) alone is
// not, nor is a key-only old image of the same shape.
func TestShapeChanged(t *testing.T) {
	tuple := func(names ...string) *decoder.Tuple {
		tu := &decoder.Tuple{}
		for _, n := range names {
			tu.Columns = append(tu.Columns, decoder.Column{Name: n, Kind: decoder.ColumnText, Value: []byte("1")})
		}
		return tu
	}
	now := []string{"id", "a", "b"}
	for _, tc := range []struct {
		name     string
		new, old *decoder.Tuple
		refused  bool
	}{
		{"same", tuple("id", "a", "b"), nil, false},
		{"column added since", tuple("id", "a"), nil, false},
		{"column dropped since", tuple("id", "a", "b", "gone"), nil, false},
		{"column renamed since", tuple("id", "a", "b2"), nil, true},
		{"key-only old of a delete", nil, tuple("id"), false},
		{"key column renamed since", nil, tuple("key"), true},
		{"old of an update renamed since", tuple("id", "a", "b"), tuple("ident"), false},
	} {
		err := shapeChanged(now, &decoder.Change{Schema: "s", Table: "t", New: tc.new, Old: tc.old})
		if (err != nil) != tc.refused {
			t.Errorf("%s: %v, want refused %v", tc.name, err, tc.refused)
		}
	}
}
