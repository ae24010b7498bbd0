package mappings

import (
	"encoding/json"
	"fmt"
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
