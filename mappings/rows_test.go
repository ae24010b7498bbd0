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
