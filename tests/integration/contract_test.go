package integration

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/decoder"
	"github.com/kafgres/kafgres/tests/harness"
)

// TestPluginDecoderContract: the output plugin and the Go decoder agree on
// every frame of the contract matrix (outputplugin/sql/contract.sql). The
// expected frames are stated once, in outputplugin/expected/contract.out:
// the extension's regression test holds the plugin's output, read by its
// SQL frame decoder, to those lines; this test runs the same statements on
// a real cluster, reads a slot of its own with the Go decoder and must
// describe every frame with the same line. A frame the decoder refuses (a
// DELETE without a key, say) or reads differently fails here.
func TestPluginDecoderContract(t *testing.T) {
	cases := contractCases(t)
	expected := contractExpected(t)
	if len(cases) != len(expected) {
		t.Fatalf("contract.sql has %d cases, expected/contract.out %d results", len(cases), len(expected))
	}

	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()
	// what pg_regress runs the plugin's side with: the text output of
	// dates, times and type names depends on them
	mustExec(t, conn,
		`SET search_path = regress, public`,
		`SET DateStyle = 'Postgres, MDY'`,
		`SET TimeZone = 'PST8PDT'`,
		`SET IntervalStyle = postgres_verbose`,
		`SELECT 'init' FROM pg_create_logical_replication_slot('contract', 'kafgres')`)
	d := &contractDescriber{conn: conn, types: map[uint32]string{}}

	for i, stmts := range cases {
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				t.Fatalf("case %d: %s: %v", i+1, s, err)
			}
		}
		got := d.decode(t, "contract")
		if strings.Join(got, "\n") != strings.Join(expected[i], "\n") {
			t.Errorf("case %d (before line %q): the Go decoder reads\n%s\nexpected/contract.out says\n%s",
				i+1, firstLine(stmts), strings.Join(got, "\n"), strings.Join(expected[i], "\n"))
		}
	}
	mustExec(t, conn, `SELECT pg_drop_replication_slot('contract')`)
}

func firstLine(stmts []string) string {
	if len(stmts) == 0 {
		return ""
	}
	return strings.SplitN(stmts[0], "\n", 2)[0]
}

const contractCheckpoint = "SELECT * FROM decode();"

// contractCases splits contract.sql at each checkpoint into the statements
// before it: psql's meta-commands and comments left out, a statement
// ending at a line that ends in ";".
func contractCases(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(harness.RepoRoot(), "outputplugin", "sql", "contract.sql"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		cases [][]string
		stmts []string
		cur   []string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == contractCheckpoint:
			if len(cur) > 0 {
				t.Fatalf("contract.sql: a statement does not end before %q", contractCheckpoint)
			}
			cases, stmts = append(cases, stmts), nil
			continue
		case len(cur) == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--") || strings.HasPrefix(trimmed, `\`)):
			continue
		}
		cur = append(cur, line)
		if strings.HasSuffix(trimmed, ";") {
			stmts = append(stmts, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// contractExpected is the frame column of every decode() result in
// expected/contract.out, in order.
func contractExpected(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "outputplugin", "expected", "contract.out"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out [][]string
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != contractCheckpoint {
			continue
		}
		// the header and its rule, then " n | frame" rows up to "(N rows)"
		var frames []string
		for i += 3; i < len(lines) && !strings.HasPrefix(lines[i], "("); i++ {
			_, frame, ok := strings.Cut(lines[i], " | ")
			if !ok {
				t.Fatalf("expected/contract.out line %d: %q is no result row", i+1, lines[i])
			}
			frames = append(frames, strings.TrimRight(frame, " "))
		}
		out = append(out, frames)
	}
	return out
}

// contractDescriber writes frames as regress.describe (outputplugin/sql/
// setup.sql) does, asking Postgres only for what depends on the catalog:
// type names, mapping names and quoted relation names.
type contractDescriber struct {
	conn  *pgx.Conn
	types map[uint32]string
}

// decode consumes slot and describes its frames, then "frames_ok: ok" if
// they make whole transactions (or what is wrong).
func (d *contractDescriber) decode(t *testing.T, slot string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := d.conn.Query(ctx, `SELECT data FROM pg_logical_slot_get_binary_changes($1, NULL, NULL)`, slot)
	if err != nil {
		t.Fatalf("read slot %s: %v", slot, err)
	}
	msgs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatalf("read slot %s: %v", slot, err)
	}
	var (
		frames []decoder.Frame
		p      decoder.Parser
	)
	for _, m := range msgs {
		fs, err := p.Parse(m)
		if err != nil {
			t.Fatalf("the Go decoder refuses a message of the plugin: %v\nmessage: %x", err, m)
		}
		frames = append(frames, fs...)
	}
	var out []string
	for _, f := range frames {
		out = append(out, d.describe(t, f))
	}
	ok := "ok"
	if _, err := decoder.Assemble(frames); err != nil {
		ok = err.Error()
	}
	return append(out, "frames_ok: "+ok)
}

func (d *contractDescriber) describe(t *testing.T, f decoder.Frame) string {
	t.Helper()
	switch it := f.Item.(type) {
	case nil:
		return string(f.Kind)
	case *decoder.Produced:
		s := fmt.Sprintf("M topic=%s partition=%d key=%s value=%s", it.Topic, it.Partition, showBytes(it.Key), showBytes(it.Value))
		if len(it.Headers) > 0 {
			hs := make([]string, len(it.Headers))
			for i, h := range it.Headers {
				hs[i] = quoteLiteral(h.Key) + "=" + showBytes(h.Value)
			}
			s += " headers=" + strings.Join(hs, ",")
		}
		return s
	case *decoder.SnapshotRow:
		return fmt.Sprintf("M snapshot of %s: %s", d.mappingNames(t, []int64{it.MappingID}), it.Row)
	case *decoder.Unreadable:
		return fmt.Sprintf("M unreadable: %v", it.Err)
	case *decoder.Change:
		s := string(f.Kind) + " " + d.relation(t, it.RelID, it.Schema, it.Table, it.Mappings)
		if it.New != nil {
			s += " new" + d.tuple(t, it.New)
		}
		if it.Old != nil {
			s += " old" + d.tuple(t, it.Old)
		}
		return s
	case *decoder.Truncate:
		parts := make([]string, len(it.Relations))
		for i, r := range it.Relations {
			parts[i] = d.relation(t, r.RelID, r.Schema, r.Table, r.Mappings)
		}
		return string(f.Kind) + " " + strings.Join(parts, ", ")
	default:
		t.Fatalf("frame %c: item %T", f.Kind, it)
		return ""
	}
}

// relation is "schema.table [mapping,...]", as regress.describe writes it.
func (d *contractDescriber) relation(t *testing.T, relid uint32, schema, table string, ids []int64) string {
	t.Helper()
	var name string
	var mismatch bool
	err := d.conn.QueryRow(context.Background(),
		`SELECT quote_ident($1) || '.' || quote_ident($2),
		        coalesce(to_regclass(quote_ident($1) || '.' || quote_ident($2))::oid <> $3::oid, false)`,
		schema, table, relid).Scan(&name, &mismatch)
	if err != nil {
		t.Fatal(err)
	}
	s := name + " [" + d.mappingNames(t, ids) + "]"
	if mismatch {
		s += " (relid mismatch)"
	}
	return s
}

func (d *contractDescriber) mappingNames(t *testing.T, ids []int64) string {
	t.Helper()
	names := make([]string, len(ids))
	for i, id := range ids {
		err := d.conn.QueryRow(context.Background(), `
SELECT coalesce((SELECT name FROM kafgres.mapping WHERE mapping_id = $1
                 UNION ALL
                 SELECT name FROM kafgres.mapping_retired WHERE mapping_id = $1 LIMIT 1), '#unknown')`, id).Scan(&names[i])
		if err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(names, ",")
}

// tuple is "(name:type=value, ...)" with NULL and UNCHANGED-TOAST for
// those kinds, and values over 40 bytes as their size.
func (d *contractDescriber) tuple(t *testing.T, tu *decoder.Tuple) string {
	t.Helper()
	cols := make([]string, len(tu.Columns))
	for i, c := range tu.Columns {
		typ := d.typeName(t, c.TypeOID)
		switch c.Kind {
		case decoder.ColumnNull:
			cols[i] = fmt.Sprintf("%s:%s NULL", c.Name, typ)
		case decoder.ColumnUnchanged:
			cols[i] = fmt.Sprintf("%s:%s UNCHANGED-TOAST", c.Name, typ)
		default:
			v := string(c.Value)
			if len(c.Value) > 40 {
				v = fmt.Sprintf("<%d bytes>", len(c.Value))
			}
			cols[i] = fmt.Sprintf("%s:%s=%s", c.Name, typ, v)
		}
	}
	return "(" + strings.Join(cols, ", ") + ")"
}

func (d *contractDescriber) typeName(t *testing.T, oid uint32) string {
	t.Helper()
	if n, ok := d.types[oid]; ok {
		return n
	}
	var n string
	if err := d.conn.QueryRow(context.Background(), `SELECT $1::oid::regtype::text`, oid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	d.types[oid] = n
	return n
}

// showBytes is regress.show: NULL, short printable UTF-8 as a literal,
// other short bytes in hex, long ones as their size.
func showBytes(b []byte) string {
	switch {
	case b == nil:
		return "NULL"
	case len(b) > 40:
		return fmt.Sprintf("<%d bytes>", len(b))
	case !utf8.Valid(b) || strings.IndexFunc(string(b), unicode.IsControl) >= 0:
		return `\x` + hex.EncodeToString(b)
	}
	return quoteLiteral(string(b))
}

// quoteLiteral is Postgres's quote_literal.
func quoteLiteral(s string) string {
	q := "'" + strings.ReplaceAll(s, "'", "''") + "'"
	if strings.Contains(s, `\`) {
		return "E" + strings.ReplaceAll(q, `\`, `\\`)
	}
	return q
}
