package mappings

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kafgres/kafgres/decoder"
)

const (
	oidJSON  = 114
	oidJSONB = 3802
	oidBytea = 17

	// SnapshotVersion is the first byte of a snapshot row message written
	// by kafgres_snapshot_mapping (docs/producing.md, "Message format 2").
	SnapshotVersion = 2
)

// tupleJSON renders a decoded row image as the JSON object
// jsonb_populate_record turns back into a row: every value as the JSON
// string of its text form, which the column type's input function parses
// again, except json and jsonb values, which are JSON already. NULL
// columns are null. An unchanged TOASTed column ('u', only in the new image
// of an update) is taken from other when it has the column, and left out
// otherwise, which the render function sees as NULL.
func tupleJSON(t, other *decoder.Tuple) *string {
	if t == nil {
		return nil
	}
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for _, c := range t.Columns {
		if c.Kind == 'u' {
			var ok bool
			if c, ok = findColumn(other, c.Name); !ok || c.Kind == 'u' {
				continue
			}
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONString(&b, c.Name)
		b.WriteByte(':')
		switch {
		case c.Kind == 'n':
			b.WriteString("null")
		case c.TypeOID == oidJSON || c.TypeOID == oidJSONB:
			b.Write(c.Value)
		default:
			writeJSONString(&b, string(c.Value))
		}
	}
	b.WriteByte('}')
	s := b.String()
	return &s
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

var errSnapshotMessage = errors.New("malformed snapshot row message")

// parseSnapshot decodes a format-2 message: version byte 2, mapping id as
// a big-endian int64, then the row as JSON text.
func parseSnapshot(content []byte) (mappingID int64, row string, err error) {
	if len(content) < 9 || content[0] != SnapshotVersion {
		return 0, "", fmt.Errorf("%w: %d bytes", errSnapshotMessage, len(content))
	}
	row = string(content[9:])
	if !json.Valid(content[9:]) {
		return 0, "", fmt.Errorf("%w: row is not JSON", errSnapshotMessage)
	}
	return int64(binary.BigEndian.Uint64(content[1:9])), row, nil
}
