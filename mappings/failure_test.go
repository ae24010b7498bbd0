package mappings

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafgres/kafgres/decoder"
)

// TestRowKey: the key of a failed row, as Postgres spells one, from the
// image that has it, bounded.
func TestRowKey(t *testing.T) {
	text := func(name, v string) decoder.Column {
		return decoder.Column{Name: name, TypeOID: 25, Kind: decoder.ColumnText, Value: []byte(v)}
	}
	tuple := func(cols ...decoder.Column) *decoder.Tuple { return &decoder.Tuple{Columns: cols} }
	doc := func(s string) *string { return &s }
	long := strings.Repeat("é", 100)
	for _, tt := range []struct {
		name    string
		columns []string
		row     renderRow
		want    string
	}{
		{"insert", []string{"id"}, renderRow{op: "I", change: &decoder.Change{New: tuple(text("id", "5"), text("a", "x"))}}, "(id)=(5)"},
		{"delete reads the old image", []string{"a", "id"},
			renderRow{op: "D", change: &decoder.Change{Old: tuple(text("id", "7"), text("a", "x"))}}, "(a, id)=(x, 7)"},
		{"null", []string{"id"}, renderRow{op: "I", change: &decoder.Change{New: tuple(decoder.Column{Name: "id", Kind: decoder.ColumnNull})}}, "(id)=(null)"},
		{"no key", nil, renderRow{op: "I", change: &decoder.Change{New: tuple(text("id", "5"))}}, ""},
		{"image without it", []string{"id"}, renderRow{op: "D", change: &decoder.Change{}}, ""},
		{"replayed", []string{"id", "n"}, renderRow{op: "U", newJSON: doc(`{"id": "3", "n": 4}`)}, "(id, n)=(3, 4)"},
		{"replayed delete", []string{"id"}, renderRow{op: "D", oldJSON: doc(`{"id": "3"}`)}, "(id)=(3)"},
		{"long value", []string{"id"}, renderRow{op: "I", change: &decoder.Change{New: tuple(text("id", long))}},
			"(id)=(" + strings.Repeat("é", maxKeyValue/2) + "...)"},
	} {
		if got := rowKey(tt.columns, &tt.row); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	many := make([]string, 20)
	cols := make([]decoder.Column, 20)
	for i := range many {
		many[i] = fmt.Sprintf("column_%d", i)
		cols[i] = text(many[i], long)
	}
	if got := rowKey(many, &renderRow{op: "I", change: &decoder.Change{New: tuple(cols...)}}); len(got) > maxKeyText+3 {
		t.Errorf("a key of 20 long columns is %d bytes", len(got))
	}
}

// TestFailedExpression: only the names the render function's handler
// sets count.
func TestFailedExpression(t *testing.T) {
	for col, want := range map[string]string{"value_expr": "value_expr", "filter_expr": "filter_expr", "key_expr": "key_expr", "id": "", "": ""} {
		err := fmt.Errorf("render: %w", &pgconn.PgError{Code: "22012", Message: "division by zero", ColumnName: col})
		if got := failedExpression(err); got != want {
			t.Errorf("column %q: %q, want %q", col, got, want)
		}
	}
	if got := failedExpression(errors.New("no")); got != "" {
		t.Errorf("not a Postgres error: %q", got)
	}
}

// TestTooLarge: a record larger than its topic takes fails its row,
// whether the function refused to send it (size) or the broker rendered
// it (its bytes); one that fits, or is filtered out, does not.
func TestTooLarge(t *testing.T) {
	j := &job{m: &Mapping{Topic: "t"}, maxBytes: 10}
	res := []rendered{
		{ord: 0, pass: true, k: []byte("k"), v: []byte("fits")},
		{ord: 1, pass: true, size: 11},
		{ord: 2, pass: true, v: []byte("eleven byte")},
		{ord: 3, pass: false, v: []byte("filtered out, whatever its size")},
	}
	failed := tooLarge(j, res, 4)
	if len(failed) != 2 || failed[0].row != 1 || failed[1].row != 2 ||
		!strings.Contains(failed[0].err.Error(), "record of 11 bytes (key and value) is larger than max.message.bytes 10 of topic \"t\"") {
		t.Fatalf("failed %+v", failed)
	}
	if !res[0].pass || res[1].pass || res[2].pass || res[2].v != nil {
		t.Fatalf("rendered after: %+v", res)
	}
	if tooLarge(&job{m: j.m}, []rendered{{pass: true, size: 1 << 40}}, 1) != nil {
		t.Fatal("a topic of unknown limit refused a record")
	}
}
