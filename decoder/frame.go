package decoder

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
)

// FrameVersion is the only frame format version this package reads
// (docs/producing.md, "Output plugin frames").
const FrameVersion = 3

// Frame kinds, the second byte of every frame.
const (
	KindBegin    byte = 'B'
	KindMessage  byte = 'M'
	KindInsert   byte = 'I'
	KindUpdate   byte = 'U'
	KindDelete   byte = 'D'
	KindTruncate byte = 'T'
	KindCommit   byte = 'C'
)

// Column kinds in a tuple.
const (
	ColumnNull      byte = 'n'
	ColumnUnchanged byte = 'u' // TOASTed value not in the WAL: no payload
	ColumnText      byte = 't'
)

// headerLen is version, kind, commit_end_lsn and xid.
const headerLen = 1 + 1 + 8 + 4

// LSN is a position in the WAL: pglogrepl's, so that positions pass
// between the decoder and the replication protocol without conversion.
type LSN = pglogrepl.LSN

// Item is one entry of a transaction, its kind decided once, here:
// *Produced, *SnapshotRow, *MappingRequest or *Unreadable for a kafgres message, *Change or
// *Truncate for a mapped table, and *Unreadable for a frame of the
// transaction whose body does not parse.
type Item interface{ isItem() }

// Change is a row inserted ('I'), updated ('U') or deleted ('D') in a mapped
// table. New and Old are nil when the frame does not carry them. Mappings
// are the ids of the mappings that matched the change where it is in the
// WAL -- on the table or, for a partition, on a partitioned table above it
// -- strictly ascending; ParseFrame always fills it (a frame says at least
// one), so it is nil only in a Change made otherwise.
//
// Err is set when the frame's body after its mapping ids could not be
// read (Raw then holds the whole frame, New and Old are nil): the change
// cannot be rendered, and goes to its mappings' dead letters.
type Change struct {
	LSN           LSN
	Op            byte
	RelID         uint32
	Schema, Table string
	New, Old      *Tuple
	Mappings      []int64
	Err           error
	Raw           []byte
}

// Truncate is a TRUNCATE of one or more mapped tables.
type Truncate struct {
	LSN       LSN
	Relations []Relation
}

// Relation names a truncated table, with the ids of the mappings that
// matched it, as Change.Mappings.
type Relation struct {
	RelID         uint32
	Schema, Table string
	Mappings      []int64
}

// Tuple is a row image: every non-dropped column, in attribute order.
type Tuple struct {
	Columns []Column
}

// Column is one column of a tuple. Value holds the type's text output when
// Kind is ColumnText and is nil otherwise.
type Column struct {
	Name    string
	TypeOID uint32
	Kind    byte
	Value   []byte
}

func (*Change) isItem()   {}
func (*Truncate) isItem() {}

// Frame is one parsed plugin frame. CommitLSN and CommitTime are set for
// begin and commit frames, Item for all others.
type Frame struct {
	Kind         byte
	CommitEndLSN LSN
	Xid          uint32
	CommitLSN    LSN
	CommitTime   time.Time
	Item         Item
}

// pgEpochMicros is 2000-01-01 00:00:00 UTC in Unix microseconds.
const pgEpochMicros = 946684800 * 1_000_000

// Parser parses the messages of one replication stream, keeping what
// repeats from row to row (schema, table and column names) so that a name
// costs one allocation per stream rather than one per row. The zero value
// is ready to use; it is not safe for concurrent use.
type Parser struct {
	names      map[string]string
	namesBytes int
}

// Bounds of Parser.names: identifiers are at most 63 bytes (NAMEDATALEN),
// and a stream names few tables, so these are never reached in practice;
// a longer name is not kept, and a full map is emptied.
const (
	maxInternedName  = 64
	maxInternedBytes = 256 << 10
)

// intern returns b as a string, the same string for the same bytes.
func (p *Parser) intern(b []byte) string {
	if len(b) > maxInternedName {
		return string(b)
	}
	if s, ok := p.names[string(b)]; ok {
		return s
	}
	if p.names == nil || p.namesBytes+len(b) > maxInternedBytes {
		p.names, p.namesBytes = map[string]string{}, 0
	}
	s := string(b)
	p.names[s] = s
	p.namesBytes += len(b)
	return s
}

// ParseFrames parses one message of the kafgres output plugin (see
// Parser.Parse) with a parser of its own.
func ParseFrames(b []byte) ([]Frame, error) {
	var p Parser
	return p.Parse(b)
}

// Parse parses one message of the kafgres output plugin: one or more
// frames, each preceded by its length as a uint32. It does not retain b:
// the replication connection reuses its read buffer, so the frames refer
// to a private copy, one for the whole message.
func (p *Parser) Parse(b []byte) ([]Frame, error) {
	n := 0
	for off := 0; off < len(b); n++ {
		if len(b)-off < 4 {
			return nil, fmt.Errorf("frame %d: %d bytes left for a 4-byte length", n, len(b)-off)
		}
		l := binary.BigEndian.Uint32(b[off:])
		if uint64(l) > uint64(len(b)-off-4) {
			if off == 0 && b[0] == 2 {
				// version 2 sent a frame per message, without a length
				return nil, fmt.Errorf("frame version 2, want %d (the kafgres.so Postgres loaded is older than the broker)", FrameVersion)
			}
			return nil, fmt.Errorf("frame %d: length %d at offset %d, only %d bytes left", n, l, off, len(b)-off-4)
		}
		off += 4 + int(l)
	}
	if n == 0 {
		return nil, fmt.Errorf("message without frames")
	}
	buf := append([]byte(nil), b...)
	frames := make([]Frame, 0, n)
	// the changes of the message, their tuples and columns, allocated
	// together: most messages are rows of one table
	a := &arena{changes: make([]changeAlloc, 0, n)}
	for off := 0; off < len(buf); {
		l := int(binary.BigEndian.Uint32(buf[off:]))
		f, err := parseFrame(buf[off+4:off+4+l:off+4+l], p, a)
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", len(frames), err)
		}
		frames = append(frames, f)
		off += 4 + l
	}
	return frames, nil
}

// ParseFrame parses one frame (without the length that precedes it in a
// message). It does not retain b.
func ParseFrame(b []byte) (Frame, error) {
	return parseFrame(append([]byte(nil), b...), &Parser{}, &arena{})
}

// arena hands out the changes and columns of one message's frames from
// shared slices. Each piece is capped to its length, so that appending to
// one cannot overwrite the next.
type arena struct {
	changes []changeAlloc
	columns []Column
}

// arenaColumns is how many columns an arena allocates at a time.
const arenaColumns = 256

func (a *arena) change() *changeAlloc {
	if len(a.changes) == cap(a.changes) {
		a.changes = make([]changeAlloc, 0, 16)
	}
	a.changes = a.changes[:len(a.changes)+1]
	return &a.changes[len(a.changes)-1]
}

// columnsFor returns room for n columns: length 0, capacity n.
func (a *arena) columnsFor(n int) []Column {
	if n == 0 {
		return []Column{}
	}
	if cap(a.columns)-len(a.columns) < n {
		a.columns = make([]Column, 0, max(n, arenaColumns))
	}
	start := len(a.columns)
	a.columns = a.columns[:start+n]
	return a.columns[start : start : start+n]
}

// parseFrame parses one frame in b, which it may keep, taking names from p
// and changes and columns from a.
func parseFrame(b []byte, p *Parser, a *arena) (Frame, error) {
	var f Frame
	if len(b) < headerLen {
		return f, fmt.Errorf("frame of %d bytes is shorter than the %d-byte header", len(b), headerLen)
	}
	if b[0] != FrameVersion {
		return f, fmt.Errorf("frame version %d, want %d", b[0], FrameVersion)
	}
	r := reader{b: b, off: 2, p: p, a: a}
	f.Kind = b[1]
	f.CommitEndLSN = LSN(r.uint64())
	f.Xid = r.uint32()

	switch f.Kind {
	case KindBegin, KindCommit:
		f.CommitLSN = LSN(r.uint64())
		f.CommitTime = time.UnixMicro(pgEpochMicros + int64(r.uint64())).UTC()
	case KindMessage:
		lsn := LSN(r.uint64())
		content := r.bytes(int(r.uint32()))
		if r.err == nil {
			f.Item = parseContent(lsn, content, p)
		}
	case KindInsert, KindUpdate, KindDelete:
		f.Item = r.change(f.Kind)
	case KindTruncate:
		t := &Truncate{LSN: LSN(r.uint64())}
		n := int(r.uint16())
		// Each relation takes at least 18 bytes (relid, two string16, a
		// mapping count and one id): check before allocating so a garbage
		// count cannot make us allocate much.
		if r.need(n * 18) {
			t.Relations = make([]Relation, 0, n)
			for i := 0; i < n && r.err == nil; i++ {
				t.Relations = append(t.Relations, Relation{RelID: r.uint32(), Schema: r.string16(), Table: r.string16(), Mappings: r.mappingIDs()})
			}
		}
		f.Item = t
	default:
		return Frame{}, fmt.Errorf("unknown frame kind 0x%02x", f.Kind)
	}
	err := r.err
	if err == nil && r.off != len(r.b) {
		err = fmt.Errorf("%d trailing bytes at offset %d", len(r.b)-r.off, r.off)
	}
	if err == nil {
		return f, nil
	}
	err = fmt.Errorf("frame %c xid %d: %w", f.Kind, f.Xid, err)
	if f.Kind == KindBegin || f.Kind == KindCommit {
		// without them the transaction's bounds are unknown
		return Frame{}, err
	}
	// The header is whole, so the frame's transaction is known: what its
	// body held is lost to its mappings (or, not knowing them, to the
	// pipeline's dead letters), not to every transaction after it.
	if c, ok := f.Item.(*Change); ok && c.Mappings != nil {
		c.New, c.Old, c.Err, c.Raw = nil, nil, err, b[:len(b):len(b)]
		return f, nil
	}
	var lsn LSN
	if len(b) >= headerLen+8 {
		lsn = LSN(binary.BigEndian.Uint64(b[headerLen:]))
	}
	f.Item = &Unreadable{LSN: lsn, Content: b[:len(b):len(b)], Whole: true, Err: err}
	return f, nil
}

// reader walks a frame; the first short read sets err and every later read
// returns zero values, so parsing code needs no error check per field.
type reader struct {
	b   []byte
	off int
	err error
	p   *Parser // names
	a   *arena  // changes and columns
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || n > len(r.b)-r.off {
		r.err = fmt.Errorf("need %d bytes at offset %d, have %d", n, r.off, len(r.b)-r.off)
		return false
	}
	return true
}

func (r *reader) bytes(n int) []byte {
	if !r.need(n) {
		return nil
	}
	// Cap the slice so appending to a value cannot overwrite the next field.
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

func (r *reader) uint8() byte {
	if !r.need(1) {
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) uint16() uint16 {
	if !r.need(2) {
		return 0
	}
	r.off += 2
	return binary.BigEndian.Uint16(r.b[r.off-2:])
}

func (r *reader) uint32() uint32 {
	if !r.need(4) {
		return 0
	}
	r.off += 4
	return binary.BigEndian.Uint32(r.b[r.off-4:])
}

func (r *reader) uint64() uint64 {
	if !r.need(8) {
		return 0
	}
	r.off += 8
	return binary.BigEndian.Uint64(r.b[r.off-8:])
}

func (r *reader) string16() string {
	b := r.bytes(int(r.uint16()))
	if r.err != nil {
		return ""
	}
	return r.p.intern(b)
}

// flag reads a has_new/has_old byte, which must be 0 or 1.
func (r *reader) flag(name string) bool {
	at := r.off
	v := r.uint8()
	if v > 1 && r.err == nil {
		r.err = fmt.Errorf("%s is %d at offset %d, want 0 or 1", name, v, at)
	}
	return v == 1
}

// mappingIDs reads the ids of the mappings a change matched: a uint16
// count, at least 1 (the plugin sends no change that matches nothing), then
// that many int64, strictly ascending (each mapping once).
func (r *reader) mappingIDs() []int64 {
	at := r.off
	n := int(r.uint16())
	if r.err != nil {
		return nil
	}
	if n == 0 {
		r.err = fmt.Errorf("no mapping ids at offset %d", at)
		return nil
	}
	if !r.need(n * 8) {
		return nil
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(r.uint64())
		if i > 0 && ids[i] <= ids[i-1] {
			r.err = fmt.Errorf("mapping ids not ascending at offset %d: %d after %d", r.off-8, ids[i], ids[i-1])
			return nil
		}
	}
	return ids
}

// changeAlloc is a change with its tuples, allocated at once (and with the
// message's other changes, by arena).
type changeAlloc struct {
	c          Change
	newT, oldT Tuple
}

func (r *reader) change(op byte) *Change {
	a := r.a.change()
	a.c = Change{Op: op, LSN: LSN(r.uint64()), RelID: r.uint32(), Schema: r.string16(), Table: r.string16()}
	c := &a.c
	c.Mappings = r.mappingIDs()
	if r.flag("has_new") && r.tuple(&a.newT) {
		c.New = &a.newT
	}
	if r.flag("has_old") && r.tuple(&a.oldT) {
		c.Old = &a.oldT
	}
	if r.err != nil {
		return c
	}
	// The plugin's contract per operation (docs/producing.md, and the
	// contract test both sides run); anything else means the frame is not
	// what we think it is. A delete carries the old tuple only when the
	// replica identity logs one: with NOTHING, or DEFAULT on a table
	// without a primary key, it carries no tuple at all.
	switch {
	case op == KindInsert && (c.New == nil || c.Old != nil):
		r.err = fmt.Errorf("insert must carry a new tuple only")
	case op == KindUpdate && c.New == nil:
		r.err = fmt.Errorf("update without a new tuple")
	case op == KindDelete && c.New != nil:
		r.err = fmt.Errorf("delete must not carry a new tuple")
	}
	return c
}

// tuple reads a tuple into t; false when not even its columns' minimal
// size is there.
func (r *reader) tuple(t *Tuple) bool {
	n := int(r.uint16())
	// name length, type oid and kind: at least 7 bytes per column.
	if !r.need(n * 7) {
		return false
	}
	t.Columns = r.a.columnsFor(n)
	for i := 0; i < n && r.err == nil; i++ {
		c := Column{Name: r.string16(), TypeOID: r.uint32()}
		at := r.off
		c.Kind = r.uint8()
		switch c.Kind {
		case ColumnNull, ColumnUnchanged:
		case ColumnText:
			c.Value = r.bytes(int(r.uint32()))
		default:
			if r.err == nil {
				r.err = fmt.Errorf("column %q: unknown kind 0x%02x at offset %d", c.Name, c.Kind, at)
			}
		}
		t.Columns = append(t.Columns, c)
	}
	return true
}
