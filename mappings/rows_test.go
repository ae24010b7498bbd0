package mappings

import (
	"encoding/binary"
	"slices"
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
		{"unchanged toast without old", &decoder.Tuple{Columns: []decoder.Column{
			col("big", 25, 'u', ""),
			col("id", 23, 't', "1"),
		}}, nil, `{"id":"1"}`},
		{"empty", &decoder.Tuple{}, nil, `{}`},
	} {
		got := tupleJSON(tc.tuple, tc.other)
		if got == nil || *got != tc.want {
			t.Errorf("%s: got %v, want %s", tc.name, got, tc.want)
		}
	}
	if tupleJSON(nil, old) != nil {
		t.Error("nil tuple must give nil")
	}
}

func TestParseSnapshot(t *testing.T) {
	msg := []byte{SnapshotVersion}
	msg = binary.BigEndian.AppendUint64(msg, 42)
	msg = append(msg, `{"id": 1}`...)
	id, row, err := parseSnapshot(msg)
	if err != nil || id != 42 || row != `{"id": 1}` {
		t.Fatalf("got %d %q %v", id, row, err)
	}
	for _, bad := range [][]byte{nil, {SnapshotVersion}, {1, 0, 0, 0, 0, 0, 0, 0, 1, '{', '}'}, append(msg[:9:9], `{"id"`...)} {
		if _, _, err := parseSnapshot(bad); err == nil {
			t.Errorf("parseSnapshot(%q) accepted", bad)
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
