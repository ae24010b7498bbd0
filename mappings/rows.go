package mappings

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

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
	// one buffer of about the right size: a row can be of any size, and
	// growing by doubling (or escaping through copies) would hold several
	// times it at once
	size := 2
	for _, c := range t.Columns {
		size += len(c.Name) + len(c.Value) + 8
	}
	var err error
	b := make([]byte, 0, size+size/16)
	b = append(b, '{')
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
			b = append(b, ',')
		}
		first = false
		b = append(appendJSONString(b, c.Name), ':')
		switch {
		case c.Kind == decoder.ColumnNull:
			b = append(b, "null"...)
		case c.TypeOID == oidJSON || c.TypeOID == oidJSONB:
			b = append(b, c.Value...)
		case !utf8.Valid(c.Value):
			// sent as UTF-8 text: what is not UTF-8 (a database of
			// another encoding) is replaced, as encoding/json would
			b = appendJSONString(b, bytes.ToValidUTF8(c.Value, []byte("\uFFFD")))
		default:
			b = appendJSONString(b, c.Value)
		}
	}
	b = append(b, '}')
	// the buffer is the string, as strings.Builder makes one: it is not
	// written again, and a copy would be one more row's worth held
	s := unsafe.String(unsafe.SliceData(b), len(b))
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
	names := make([]string, 0, len(t.Columns))
	for _, col := range t.Columns {
		names = append(names, col.Name)
	}
	var oldNames []string
	if c.Old != nil && c.Old != t {
		for _, col := range c.Old.Columns {
			oldNames = append(oldNames, col.Name)
		}
	}
	return namesChanged(columns, names, oldNames, pgx.Identifier{c.Schema, c.Table}.Sanitize())
}

// jsonShapeChanged is shapeChanged for a row whose images are JSON
// objects (a replayed dead letter): their keys are its columns.
func jsonShapeChanged(columns []string, newJSON, oldJSON *string, table string) error {
	keys := func(doc *string) []string {
		if doc == nil {
			return nil
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal([]byte(*doc), &fields) != nil {
			return nil
		}
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		slices.Sort(names)
		return names
	}
	names, oldNames := keys(newJSON), keys(oldJSON)
	if newJSON == nil {
		names, oldNames = oldNames, nil
	}
	return namesChanged(columns, names, oldNames, table)
}

// namesChanged says why a row of columns names (and an old image of
// oldNames) cannot be read by name as a table of columns now, or nil.
func namesChanged(columns, names, oldNames []string, table string) error {
	var extra []string
	for i, name := range names {
		// a row of the table's shape now has its columns in their order:
		// no search for those
		if i < len(columns) && columns[i] == name || slices.Contains(columns, name) {
			continue
		}
		extra = append(extra, name)
	}
	for _, name := range oldNames {
		if !slices.Contains(columns, name) && !slices.Contains(extra, name) {
			extra = append(extra, name)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	var missing []string
	for _, name := range columns {
		if !slices.Contains(names, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the change's row has column %s, which table %s no longer has, and lacks column %s, which it has now: "+
		"a column was renamed (or dropped and another added) since the change, so the row cannot be read as the table is now",
		strings.Join(extra, ", "), table, strings.Join(missing, ", "))
}
