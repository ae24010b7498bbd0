package mappings

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/decoder"
)

// Mapping is one definition: a row of kafgres.mapping, or of
// kafgres.mapping_retired for a removed mapping whose changes may still be
// on their way, with the names the renderer needs.
type Mapping struct {
	ID          int64
	Name        string
	SourceRelID uint32
	Source      string // schema-qualified, quoted; "" if the table is gone
	Shape       string // the table's columns and their types, as of loading; "" if it is gone
	Topic       string
	ValueExpr   *string // nil: to_jsonb(new)
	KeyExpr     *string // nil: NULL key
	FilterExpr  *string // nil: every change
	OnError     string  // "dead_letter" or "stall"
	OwnerRole   uint32
	Owner       string // role name; "" if the role is gone
	SearchPath  string // as stored: current_setting('search_path') at creation

	// Retired: removed (kafgres.mapping_retired), RetiredReason says why.
	// A retired mapping renders the changes that matched it before its
	// removal, and never stalls: what it cannot render is dead-lettered.
	Retired       bool
	RetiredReason string
	// Unknown: a change named this id but no definition of it is left
	// (removed before kafgres kept removed definitions).
	Unknown bool

	// Pause: a schema change broke the mapping (kafgres.mapping_pause);
	// nil if none.
	Pause *Pause
}

// Pause is a mapping's pause: its changes committed after PausedLSN are
// held until the resume request of the transaction ResumeXid, whose end
// the broker writes as ResumedEnd where it delivers them.
type Pause struct {
	Reason     string
	PausedLSN  decoder.LSN
	ResumeXid  int64       // the resuming transaction's 32-bit xid; -1: none yet
	ResumedEnd decoder.LSN // 0: not resumed yet
}

// active says whether the mapping is paused and not resumed yet.
func (p *Pause) active() bool { return p != nil && p.ResumedEnd == 0 }

// holds says whether the change of a transaction ending at end is held.
func (p *Pause) holds(end decoder.LSN) bool {
	return p != nil && end > p.PausedLSN && (p.ResumedEnd == 0 || end < p.ResumedEnd)
}

// stalls says whether a change m fails to render holds everything up.
func (m *Mapping) stalls() bool { return m.OnError == OnErrorStall && !m.Retired }

const (
	OnErrorDeadLetter = "dead_letter"
	OnErrorStall      = "stall"
)

// key identifies a definition: a render function made for one key is
// recreated when the key changes.
func (m *Mapping) key() string {
	s := func(p *string) string {
		if p == nil {
			return "\x00"
		}
		return *p
	}
	return strings.Join([]string{m.Name, m.Source, m.Shape, m.Topic, s(m.ValueExpr), s(m.KeyExpr), s(m.FilterExpr),
		m.Owner, m.SearchPath}, "\x01")
}

// loadMappingsSQL reads the live and the retired definitions. Nothing in
// it may fail because of one mapping's state: a table or role that is gone
// is an empty name (format('%I', NULL) raises an error, hence the CASEs),
// which Renderer.check reports for that mapping alone. Shape changes when
// a column is added, dropped or changes type, so that the render function
// is made again.
const loadMappingsSQL = `
WITH defs AS (
    SELECT m.mapping_id, m.name, m.source_relid, m.topic, m.value_expr, m.key_expr, m.filter_expr,
           m.on_error, m.owner_role, m.search_path, false AS retired, ''::text AS reason
      FROM kafgres.mapping AS m
    UNION ALL
    SELECT m.mapping_id, m.name, m.source_relid, m.topic, m.value_expr, m.key_expr, m.filter_expr,
           m.on_error, m.owner_role, m.search_path, true, m.reason
      FROM kafgres.mapping_retired AS m
     WHERE NOT EXISTS (SELECT 1 FROM kafgres.mapping AS l WHERE l.mapping_id OPERATOR(pg_catalog.=) m.mapping_id))
SELECT d.mapping_id, d.name, d.source_relid,
       p.reason, p.paused_lsn::pg_catalog.text,
       coalesce(p.resume_xid::pg_catalog.text::pg_catalog.int8 OPERATOR(pg_catalog.%) 4294967296, -1),
       p.resumed_end_lsn::pg_catalog.text,
       CASE WHEN c.oid IS NULL OR n.oid IS NULL THEN '' ELSE pg_catalog.format('%I.%I', n.nspname, c.relname) END,
       CASE WHEN c.oid IS NULL THEN '' ELSE
           coalesce((SELECT pg_catalog.string_agg(pg_catalog.format('%s %s %s', a.attname, a.atttypid, a.atttypmod),
                                                  ',' ORDER BY a.attnum)
                       FROM pg_catalog.pg_attribute AS a
                      WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid
                        AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped), '') END,
       d.topic, d.value_expr, d.key_expr, d.filter_expr, d.on_error,
       d.owner_role, coalesce(r.rolname::text, ''), d.search_path, d.retired, d.reason
  FROM defs AS d
  LEFT JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) d.source_relid
  LEFT JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
  LEFT JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) d.owner_role
  LEFT JOIN kafgres.mapping_pause AS p ON p.mapping_id OPERATOR(pg_catalog.=) d.mapping_id AND NOT d.retired
 ORDER BY d.mapping_id`

// loadMappings reads every definition, live and retired, in id order.
func loadMappings(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) ([]*Mapping, error) {
	rows, err := q.Query(ctx, loadMappingsSQL)
	if err != nil {
		return nil, fmt.Errorf("load mappings: %w", err)
	}
	ms, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Mapping, error) {
		var (
			m               Mapping
			reason          *string
			paused, resumed *string
			resumeXid       int64
		)
		err := row.Scan(&m.ID, &m.Name, &m.SourceRelID, &reason, &paused, &resumeXid, &resumed,
			&m.Source, &m.Shape, &m.Topic, &m.ValueExpr, &m.KeyExpr,
			&m.FilterExpr, &m.OnError, &m.OwnerRole, &m.Owner, &m.SearchPath, &m.Retired, &m.RetiredReason)
		if err != nil || reason == nil || paused == nil {
			return &m, err
		}
		m.Pause = &Pause{Reason: *reason, ResumeXid: resumeXid}
		if m.Pause.PausedLSN, err = pglogrepl.ParseLSN(*paused); err != nil {
			return nil, err
		}
		if resumed != nil {
			if m.Pause.ResumedEnd, err = pglogrepl.ParseLSN(*resumed); err != nil {
				return nil, err
			}
		}
		return &m, nil
	})
	if err != nil {
		return nil, fmt.Errorf("load mappings: %w", err)
	}
	return ms, nil
}

var errSearchPath = errors.New("malformed search_path")

// parseSearchPath splits a search_path setting the way Postgres does
// (SplitIdentifierString): comma-separated, unquoted names folded to lower
// case, "quoted" names kept with "" as an escaped quote. The render
// function's SET clause is rebuilt from the quoted names, so that nothing
// stored in kafgres.mapping is spliced into SQL unquoted.
func parseSearchPath(s string) ([]string, error) {
	var names []string
	rest := strings.TrimSpace(s)
	if rest == "" {
		return nil, nil
	}
	for {
		var name string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for {
				j := strings.IndexByte(rest[i:], '"')
				if j < 0 {
					return nil, fmt.Errorf("%w: unterminated quoted name in %q", errSearchPath, s)
				}
				b.WriteString(rest[i : i+j])
				i += j + 1
				if i < len(rest) && rest[i] == '"' {
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			name, rest = b.String(), strings.TrimSpace(rest[i:])
		} else {
			j := strings.IndexByte(rest, ',')
			if j < 0 {
				j = len(rest)
			}
			name = strings.ToLower(strings.TrimSpace(rest[:j]))
			if name == "" || strings.ContainsAny(name, " \t\n\"") {
				return nil, fmt.Errorf("%w: %q", errSearchPath, s)
			}
			rest = rest[j:]
		}
		names = append(names, name)
		if rest == "" {
			return names, nil
		}
		if rest[0] != ',' {
			return nil, fmt.Errorf("%w: %q", errSearchPath, s)
		}
		rest = strings.TrimSpace(rest[1:])
	}
}

// quoteSearchPath is the SET clause value for a parsed search_path.
func quoteSearchPath(names []string) string {
	if len(names) == 0 {
		return `''`
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = pgx.Identifier{n}.Sanitize()
	}
	return strings.Join(q, ", ")
}
