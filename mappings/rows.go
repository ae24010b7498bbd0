package mappings

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/decoder"
)

const (
	oidJSON  = 114
	oidJSONB = 3802
	oidBytea = 17
)

// tupleJSON renders a decoded row image as the JSON object
// jsonb_populate_record turns back into a row: every value as the JSON
// string of its text form, which the column type's input function parses
// again, except json and jsonb values, which are JSON already. NULL
// columns are null. An unchanged TOASTed column ('u', only in the new image
// of an update) is not in the WAL: it is taken from other (the old image,
// which has it with REPLICA IDENTITY FULL; a key-only old image has NULL
// in its place), and when other cannot fill it
// the row cannot be rendered truthfully, so that is an error naming the
// column (leaving it out would render a NULL that was not in the row); the
// object is then still returned, without such columns, for the dead
// letter.
func tupleJSON(t, other *decoder.Tuple) (*string, error) {
	if t == nil {
		return nil, nil
	}
	var (
		b   strings.Builder
		err error
	)
	b.WriteByte('{')
	first := true
	for _, c := range t.Columns {
		if c.Kind == decoder.ColumnUnchanged {
			// A value left unchanged was not NULL, so a NULL in other is
			// a key-only old image's placeholder, not the value.
			oc, ok := findColumn(other, c.Name)
			if !ok || oc.Kind != decoder.ColumnText {
				if err == nil {
					err = &unchangedToastError{column: c.Name}
				}
				continue
			}
			c = oc
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONString(&b, c.Name)
		b.WriteByte(':')
		switch {
		case c.Kind == decoder.ColumnNull:
			b.WriteString("null")
		case c.TypeOID == oidJSON || c.TypeOID == oidJSONB:
			b.Write(c.Value)
		default:
			writeJSONString(&b, string(c.Value))
		}
	}
	b.WriteByte('}')
	s := b.String()
	return &s, err
}

// unchangedToastError is an update whose new image lacks a TOASTed value
// it did not change. The table is filled in by the caller.
type unchangedToastError struct {
	column string
	table  string // quoted, qualified
}

func (e *unchangedToastError) Error() string {
	return fmt.Sprintf("column %s of table %s is a TOASTed value the update did not change, which is not in the WAL; "+
		"set REPLICA IDENTITY FULL on the table (ALTER TABLE %s REPLICA IDENTITY FULL) so that updates carry it",
		pgx.Identifier{e.column}.Sanitize(), e.table, e.table)
}

// unchangedToast is the error of tupleJSON(t, other), without the JSON:
// the first unchanged TOASTed column of t that other cannot fill.
func unchangedToast(t, other *decoder.Tuple) *unchangedToastError {
	if t == nil {
		return nil
	}
	for _, c := range t.Columns {
		if c.Kind != decoder.ColumnUnchanged {
			continue
		}
		if oc, ok := findColumn(other, c.Name); !ok || oc.Kind != decoder.ColumnText {
			return &unchangedToastError{column: c.Name}
		}
	}
	return nil
}

// appendRecordLiteral appends t as the text of a record of the given
// columns, in their order, which record_in (the row type's input function)
// parses: each value is the column type's text output, which the column's
// input function parses again -- what jsonb_populate_record does with the
// JSON string of tupleJSON, and with the same columns: by name, a column t
// lacks is NULL, one columns lacks is left out. An unchanged TOASTed value
// comes from other as in tupleJSON; one other cannot fill is NULL here, but
// such a row is never rendered (unchangedToast).
func appendRecordLiteral(b []byte, t, other *decoder.Tuple, columns []string) []byte {
	b = append(b, '(')
	for i, name := range columns {
		if i > 0 {
			b = append(b, ',')
		}
		var c decoder.Column
		// the tuple has the table's columns in attribute order, as the
		// function's were when it was made: look further only when not
		if i < len(t.Columns) && t.Columns[i].Name == name {
			c = t.Columns[i]
		} else if fc, ok := findColumn(t, name); ok {
			c = fc
		} else {
			continue // NULL
		}
		if c.Kind == decoder.ColumnUnchanged {
			c, _ = findColumn(other, name)
		}
		if c.Kind != decoder.ColumnText {
			continue // NULL
		}
		// always quoted, so that an empty string is not NULL and no
		// character of the value ends the field
		b = append(b, '"')
		v := c.Value
		for {
			j := bytes.IndexAny(v, `"\`)
			if j < 0 {
				break
			}
			b = append(append(b, v[:j]...), '\\', v[j])
			v = v[j+1:]
		}
		b = append(append(b, v...), '"')
	}
	return append(b, ')')
}

func findColumn(t *decoder.Tuple, name string) (decoder.Column, bool) {
	if t == nil {
		return decoder.Column{}, false
	}
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return decoder.Column{}, false
}

func writeJSONString(b *strings.Builder, s string) {
	enc, _ := json.Marshal(s) // a string always marshals
	b.Write(enc)
}

// shapeChanged says why a change cannot be rendered with a function made
// for the table's columns now, or nil. A change's row has the columns the
// table had when it was made. A column added since is missing from it, and
// rightly NULL; a column dropped since is extra, and unused. But a row
// with a column the table no longer has and without one it has now comes
// from before a rename (or a drop and an add): rendered by name, the
// renamed column would be NULL, a value the row never had. Such a change
// is not rendered: it goes to the dead letters (or stalls), with this.
func shapeChanged(columns []string, c *decoder.Change) error {
	t := c.New
	if t == nil {
		t = c.Old
	}
	if t == nil {
		return nil
	}
	var extra []string
	for i, col := range t.Columns {
		// a row of the table's shape now has its columns in their order:
		// no search for those
		if i < len(columns) && columns[i] == col.Name || slices.Contains(columns, col.Name) {
			continue
		}
		extra = append(extra, col.Name)
	}
	if c.Old != nil && c.Old != t {
		for _, col := range c.Old.Columns {
			if !slices.Contains(columns, col.Name) && !slices.Contains(extra, col.Name) {
				extra = append(extra, col.Name)
			}
		}
	}
	if len(extra) == 0 {
		return nil
	}
	var missing []string
	for _, name := range columns {
		if _, ok := findColumn(t, name); !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the change's row has column %s, which table %s no longer has, and lacks column %s, which it has now: "+
		"a column was renamed (or dropped and another added) since the change, so the row cannot be read as the table is now",
		strings.Join(extra, ", "), pgx.Identifier{c.Schema, c.Table}.Sanitize(), strings.Join(missing, ", "))
}
