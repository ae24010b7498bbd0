package mappings

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafgres/kafgres/decoder"
)

// What a failed row's status says: the expression that failed, the
// change and its row's key, and Postgres's message.

// failedExpression is the expression a render function's error names
// (createSQL's handler puts it in the error's column field), "" for none.
func failedExpression(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return ""
	}
	switch pe.ColumnName {
	case "value_expr", "key_expr", "filter_expr":
		return pe.ColumnName
	}
	return ""
}

// failureText is a mapping's last_error for a failed row f of j, e.g.
// `value_expr failed for change U at 0/1A2B3C (xid 790, key (id)=(2)):
// division by zero`.
func (r *Renderer) failureText(j *job, f failure) string {
	row := j.rows[f.row]
	var keyColumns []string
	if fn := r.fns[j.m.ID]; fn != nil {
		keyColumns = fn.keyColumns
	}
	where := fmt.Sprintf("change %s at %s (xid %d", row.op, row.lsn, row.xid)
	if row.replay != 0 {
		where = fmt.Sprintf("replayed change %s at %s (dead letter %d, xid %d", row.op, row.lsn, row.replay, row.xid)
	}
	if k := rowKey(keyColumns, &row); k != "" {
		where += ", key " + k
	}
	where += ")"
	if e := failedExpression(f.err); e != "" {
		return e + " failed for " + where + ": " + errorText(f.err)
	}
	return errorText(f.err) + " (" + where + ")"
}

// Bounds of a key in a status: a user finds the row with it, and a status
// is no place for a whole document.
const (
	maxKeyValue = 64
	maxKeyText  = 256
)

// rowKey is the row's key as Postgres spells it in errors, "(a, b)=(1,
// x)", from the image that has it (the old one of a delete); "" if the
// table has no key or the image lacks it.
func rowKey(columns []string, row *renderRow) string {
	if len(columns) == 0 {
		return ""
	}
	deleted := row.op == "D"
	values := make([]string, len(columns))
	switch {
	case row.change != nil:
		t := row.change.New
		if deleted {
			t = row.change.Old
		}
		for i, name := range columns {
			c, ok := findColumn(t, name)
			if !ok || c.Kind == decoder.ColumnUnchanged {
				return ""
			}
			values[i] = "null"
			if c.Kind == decoder.ColumnText {
				values[i] = string(c.Value)
			}
		}
	default:
		doc := row.newJSON
		if deleted {
			doc = row.oldJSON
		}
		if doc == nil {
			return ""
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal([]byte(*doc), &fields) != nil {
			return ""
		}
		for i, name := range columns {
			raw, ok := fields[name]
			if !ok {
				return ""
			}
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw) // a number, null, or a JSON column
			}
			values[i] = s
		}
	}
	for i, v := range values {
		if len(v) > maxKeyValue {
			values[i] = truncateUTF8(v, maxKeyValue) + "..."
		}
	}
	k := "(" + strings.Join(columns, ", ") + ")=(" + strings.Join(values, ", ") + ")"
	if len(k) > maxKeyText {
		k = truncateUTF8(k, maxKeyText) + "..."
	}
	return k
}

// truncateUTF8 is s cut to at most n bytes, not inside a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
