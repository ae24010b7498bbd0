package decoder

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/jackc/pglogrepl"
)

// enc builds frames the way docs/producing.md describes them.
type enc []byte

func header(kind byte, endLSN LSN, xid uint32) enc {
	return enc{FrameVersion, kind}.u64(uint64(endLSN)).u32(xid)
}

// message is frames as one message of the plugin: each preceded by its
// length.
func message(frames ...enc) []byte {
	var b []byte
	for _, f := range frames {
		b = append(binary.BigEndian.AppendUint32(b, uint32(len(f))), f...)
	}
	return b
}

func (e enc) u8(v byte) enc    { return append(e, v) }
func (e enc) u16(v uint16) enc { return binary.BigEndian.AppendUint16(e, v) }
func (e enc) u32(v uint32) enc { return binary.BigEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc { return binary.BigEndian.AppendUint64(e, v) }
func (e enc) str(s string) enc { return append(e.u16(uint16(len(s))), s...) }
func (e enc) raw(b []byte) enc { return append(e, b...) }

// ids is a change's mapping ids: a uint16 count and each as int64.
func (e enc) ids(ids ...int64) enc {
	e = e.u16(uint16(len(ids)))
	for _, id := range ids {
		e = e.u64(uint64(id))
	}
	return e
}

// bytes32 is an int32 length (-1 for nil) and the bytes.
func (e enc) bytes32(b []byte) enc {
	if b == nil {
		return e.u32(^uint32(0))
	}
	return e.u32(uint32(len(b))).raw(b)
}

// pgTime is t in microseconds since 2000-01-01 UTC.
func pgTime(t time.Time) uint64 { return uint64(t.UnixMicro() - pgEpochMicros) }

func (e enc) tuple(cols ...Column) enc {
	e = e.u16(uint16(len(cols)))
	for _, c := range cols {
		e = e.str(c.Name).u32(c.TypeOID).u8(c.Kind)
		if c.Kind == ColumnText {
			e = e.u32(uint32(len(c.Value))).raw(c.Value)
		}
	}
	return e
}

var (
	commitTime = time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	endLSN     = LSN(0x1_0000_2000)
)

func beginFrame(xid uint32, commitLSN, end LSN) enc {
	return header(KindBegin, end, xid).u64(uint64(commitLSN)).u64(pgTime(commitTime))
}

func commitFrame(xid uint32, commitLSN, end LSN) enc {
	return header(KindCommit, end, xid).u64(uint64(commitLSN)).u64(pgTime(commitTime))
}

// rawMessageFrame is an M frame with content as it is.
func rawMessageFrame(xid uint32, end, lsn LSN, content []byte) enc {
	return header(KindMessage, end, xid).u64(uint64(lsn)).u32(uint32(len(content))).raw(content)
}

// recordContent is a format-1 message: value to topic t, NULL key, no
// headers.
func recordContent(value string) []byte {
	return enc{FormatRecord}.str("t").u32(^uint32(0)).u32(^uint32(0)).u32(uint32(len(value))).raw([]byte(value)).u16(0)
}

// messageFrame is an M frame holding recordContent(value).
func messageFrame(xid uint32, end, lsn LSN, value string) enc {
	return rawMessageFrame(xid, end, lsn, recordContent(value))
}

// produced is what messageFrame's content parses to.
func produced(lsn LSN, value string) *Produced {
	return &Produced{LSN: lsn, Topic: "t", Partition: -1, Value: []byte(value)}
}

func TestParseFrame(t *testing.T) {
	idCol := Column{Name: "id", TypeOID: 23, Kind: ColumnText, Value: []byte("42")}
	tests := []struct {
		name  string
		frame enc
		want  Frame
	}{
		{
			name:  "begin",
			frame: beginFrame(7, 0x1000, endLSN),
			want:  Frame{Kind: 'B', CommitEndLSN: endLSN, Xid: 7, CommitLSN: 0x1000, CommitTime: commitTime},
		},
		{
			name:  "commit",
			frame: commitFrame(7, 0x1000, endLSN),
			want:  Frame{Kind: 'C', CommitEndLSN: endLSN, Xid: 7, CommitLSN: 0x1000, CommitTime: commitTime},
		},
		{
			name:  "message",
			frame: messageFrame(7, endLSN, 0x900, "hello"),
			want:  Frame{Kind: 'M', CommitEndLSN: endLSN, Xid: 7, Item: produced(0x900, "hello")},
		},
		{
			name:  "empty value",
			frame: messageFrame(7, endLSN, 0x900, ""),
			want:  Frame{Kind: 'M', CommitEndLSN: endLSN, Xid: 7, Item: produced(0x900, "")},
		},
		{
			name: "record with key and headers",
			frame: rawMessageFrame(7, endLSN, 0x900, enc{FormatRecord}.str("orders").u32(3).u32(1).raw([]byte("k")).u32(0).
				u16(2).str("h").u32(^uint32(0)).str("").u32(1).raw([]byte("v"))),
			want: Frame{Kind: 'M', CommitEndLSN: endLSN, Xid: 7, Item: &Produced{LSN: 0x900, Topic: "orders", Partition: 3,
				Key: []byte("k"), Value: []byte{}, Headers: []Header{{Key: "h"}, {Key: "", Value: []byte("v")}}}},
		},
		{
			name:  "snapshot row",
			frame: rawMessageFrame(7, endLSN, 0x900, enc{FormatSnapshot}.u64(12).raw([]byte(`{"id": 1}`))),
			want:  Frame{Kind: 'M', CommitEndLSN: endLSN, Xid: 7, Item: &SnapshotRow{LSN: 0x900, MappingID: 12, Row: `{"id": 1}`}},
		},
		{
			name:  "mapping request",
			frame: rawMessageFrame(7, endLSN, 0x900, enc{FormatRequest}.u8(RequestReplay).u64(12).u64(3).u64(9)),
			want:  Frame{Kind: 'M', CommitEndLSN: endLSN, Xid: 7, Item: &MappingRequest{LSN: 0x900, Kind: RequestReplay, MappingID: 12, First: 3, Last: 9}},
		},
		{
			name: "insert",
			frame: header('I', endLSN, 7).u64(0x901).u32(16384).str("public").str("orders").ids(3).
				u8(1).tuple(idCol, Column{Name: "note", TypeOID: 25, Kind: ColumnNull}, Column{Name: "e", TypeOID: 25, Kind: ColumnText, Value: []byte{}}).
				u8(0),
			want: Frame{Kind: 'I', CommitEndLSN: endLSN, Xid: 7, Item: &Change{
				LSN: 0x901, Op: 'I', RelID: 16384, Schema: "public", Table: "orders", Mappings: []int64{3},
				New: &Tuple{Columns: []Column{idCol, {Name: "note", TypeOID: 25, Kind: ColumnNull}, {Name: "e", TypeOID: 25, Kind: ColumnText, Value: []byte{}}}},
			}},
		},
		{
			name: "update with old key and unchanged toast",
			frame: header('U', endLSN, 7).u64(0x902).u32(16384).str("public").str("orders").ids(-5, 2, 1<<40).
				u8(1).tuple(idCol, Column{Name: "doc", TypeOID: 25, Kind: ColumnUnchanged}).
				u8(1).tuple(idCol),
			want: Frame{Kind: 'U', CommitEndLSN: endLSN, Xid: 7, Item: &Change{
				LSN: 0x902, Op: 'U', RelID: 16384, Schema: "public", Table: "orders", Mappings: []int64{-5, 2, 1 << 40},
				New: &Tuple{Columns: []Column{idCol, {Name: "doc", TypeOID: 25, Kind: ColumnUnchanged}}},
				Old: &Tuple{Columns: []Column{idCol}},
			}},
		},
		{
			name:  "update without old",
			frame: header('U', endLSN, 7).u64(0x902).u32(1).str("s").str("t").ids(1).u8(1).tuple(idCol).u8(0),
			want: Frame{Kind: 'U', CommitEndLSN: endLSN, Xid: 7, Item: &Change{
				LSN: 0x902, Op: 'U', RelID: 1, Schema: "s", Table: "t", Mappings: []int64{1}, New: &Tuple{Columns: []Column{idCol}},
			}},
		},
		{
			name:  "delete",
			frame: header('D', endLSN, 7).u64(0x903).u32(1).str("s").str("t").ids(1).u8(0).u8(1).tuple(idCol),
			want: Frame{Kind: 'D', CommitEndLSN: endLSN, Xid: 7, Item: &Change{
				LSN: 0x903, Op: 'D', RelID: 1, Schema: "s", Table: "t", Mappings: []int64{1}, Old: &Tuple{Columns: []Column{idCol}},
			}},
		},
		{
			// REPLICA IDENTITY NOTHING, or DEFAULT without a primary key
			name:  "delete without old",
			frame: header('D', endLSN, 7).u64(0x904).u32(1).str("s").str("t").ids(1).u8(0).u8(0),
			want: Frame{Kind: 'D', CommitEndLSN: endLSN, Xid: 7, Item: &Change{
				LSN: 0x904, Op: 'D', RelID: 1, Schema: "s", Table: "t", Mappings: []int64{1},
			}},
		},
		{
			name:  "tuple with no columns",
			frame: header('I', endLSN, 7).u64(0x903).u32(1).str("s").str("t").ids(1).u8(1).tuple().u8(0),
			want: Frame{Kind: 'I', CommitEndLSN: endLSN, Xid: 7, Item: &Change{
				LSN: 0x903, Op: 'I', RelID: 1, Schema: "s", Table: "t", Mappings: []int64{1}, New: &Tuple{Columns: []Column{}},
			}},
		},
		{
			name:  "truncate",
			frame: header('T', endLSN, 7).u64(0x904).u16(2).u32(1).str("s").str("a").ids(4).u32(2).str("s").str("b").ids(4, 9),
			want: Frame{Kind: 'T', CommitEndLSN: endLSN, Xid: 7, Item: &Truncate{
				LSN: 0x904, Relations: []Relation{{1, "s", "a", []int64{4}}, {2, "s", "b", []int64{4, 9}}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFrame(tt.frame)
			if err != nil {
				t.Fatalf("ParseFrame: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseFrameDoesNotRetainInput(t *testing.T) {
	b := messageFrame(1, endLSN, 2, "hello")
	f, err := ParseFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0xff
	}
	if got := string(f.Item.(*Produced).Value); got != "hello" {
		t.Fatalf("content changed with the input buffer: %q", got)
	}
}

func TestParseFrames(t *testing.T) {
	frames := []enc{beginFrame(1, 0x100, 0x110), messageFrame(1, 0x110, 0x50, "x"), commitFrame(1, 0x100, 0x110)}
	b := message(frames...)
	got, err := ParseFrames(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(frames) {
		t.Fatalf("%d frames, want %d", len(got), len(frames))
	}
	for i, f := range frames {
		want, err := ParseFrame(f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("frame %d: got %+v, want %+v", i, got[i], want)
		}
	}
	for i := range b {
		b[i] = 0xff
	}
	if v := string(got[1].Item.(*Produced).Value); v != "x" {
		t.Fatalf("content changed with the input buffer: %q", v)
	}
}

func TestParseFramesErrors(t *testing.T) {
	begin := beginFrame(1, 2, 3)
	tests := []struct {
		name    string
		msg     []byte
		wantErr string
	}{
		{"empty", nil, "without frames"},
		{"short length", []byte{0, 0, 1}, "3 bytes left for a 4-byte length"},
		{"length beyond message", append(message(begin), 0, 0, 1, 0, 9), "frame 1: length 256 at offset 34, only 1 bytes left"},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff, 1}, "length 4294967295"},
		{"version 2 message", append(enc{2}, begin[1:]...), "frame version 2, want 3"},
		{"bad frame", message(begin, header('X', 1, 2)), "frame 1: unknown frame kind"},
		{"zero-length frame", message(begin, enc{}), "frame 1: frame of 0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFrames(tt.msg)
			if err == nil {
				t.Fatalf("no error, got %+v", f)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseFrameErrors(t *testing.T) {
	idCol := Column{Name: "id", TypeOID: 23, Kind: ColumnText, Value: []byte("1")}
	change := func(kind byte) enc { return header(kind, endLSN, 7).u64(1).u32(1).str("s").str("t").ids(1) }
	tests := []struct {
		name    string
		frame   enc
		wantErr string
	}{
		{"empty", enc{}, "shorter than"},
		{"short header", header('B', 1, 2)[:10], "shorter than"},
		{"version 2", append(enc{2}, beginFrame(1, 2, 3)[1:]...), "frame version 2, want 3"},
		{"version 4", append(enc{4}, beginFrame(1, 2, 3)[1:]...), "frame version 4, want 3"},
		{"unknown kind", header('X', 1, 2), "unknown frame kind"},
		{"begin truncated", beginFrame(1, 2, 3)[:20], "need 8 bytes"},
		{"commit trailing", commitFrame(1, 2, 3).u8(0), "trailing"},
		{"header only message", header('M', 1, 2), "need 8 bytes"},
		{"message longer than frame", header('M', 1, 2).u64(1).u32(10).raw([]byte("abc")), "need 10 bytes"},
		{"message huge length", header('M', 1, 2).u64(1).u32(0xffffffff), "need"},
		{"message trailing", messageFrame(1, 2, 3, "x").u8(9), "trailing"},
		{"change bad has_new", change('I').u8(2), "has_new is 2"},
		{"change bad has_old", change('I').u8(1).tuple(idCol).u8(7), "has_old is 7"},
		{"change missing has_old", change('I').u8(1).tuple(idCol), "need 1 bytes"},
		{"insert with old", change('I').u8(1).tuple(idCol).u8(1).tuple(idCol), "insert must carry"},
		{"insert without new", change('I').u8(0).u8(0), "insert must carry"},
		{"update without new", change('U').u8(0).u8(1).tuple(idCol), "update without"},
		{"delete with new", change('D').u8(1).tuple(idCol).u8(1).tuple(idCol), "delete must not carry"},
		{"delete with new only", change('D').u8(1).tuple(idCol).u8(0), "delete must not carry"},
		{"column count beyond frame", change('I').u8(1).u16(1000), "need 7000 bytes"},
		{"bad column kind", change('I').u8(1).u16(1).str("c").u32(23).u8('x').u8(0), "unknown kind 0x78"},
		{"column value truncated", change('I').u8(1).u16(1).str("c").u32(23).u8('t').u32(5).raw([]byte("ab")), "need 5 bytes"},
		{"schema truncated", header('D', 1, 2).u64(1).u32(1).u16(9).raw([]byte("pub")), "need 9 bytes"},
		{"change without mapping ids", header('I', 1, 2).u64(1).u32(1).str("s").str("t").ids().u8(1).tuple(idCol).u8(0), "no mapping ids"},
		{"mapping id count beyond frame", header('I', 1, 2).u64(1).u32(1).str("s").str("t").u16(0xffff).u64(1), "need 524280 bytes"},
		{"mapping ids descending", header('I', 1, 2).u64(1).u32(1).str("s").str("t").ids(5, 4).u8(1).tuple(idCol).u8(0), "not ascending"},
		{"mapping id twice", header('I', 1, 2).u64(1).u32(1).str("s").str("t").ids(5, 5).u8(1).tuple(idCol).u8(0), "not ascending"},
		{"mapping ids truncated", header('D', 1, 2).u64(1).u32(1).str("s").str("t").u16(2).u64(1).u32(0), "need 16 bytes"},
		{"truncate count beyond frame", header('T', 1, 2).u64(1).u16(3).u32(1).str("s").str("t").ids(1), "need 54 bytes"},
		{"truncate relation truncated", header('T', 1, 2).u64(1).u16(1).u32(1).str("s").u16(40).raw([]byte("t")).ids(1), "need 40 bytes"},
		{"truncate relation without mapping ids", header('T', 1, 2).u64(1).u16(1).u32(1).str("s").str("t").ids().u64(0), "no mapping ids"},
		{"truncate mapping ids descending", header('T', 1, 2).u64(1).u16(1).u32(1).str("s").str("t").ids(2, 1), "not ascending"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFrame(tt.frame)
			if err = frameErr(f, err); err == nil {
				t.Fatalf("no error, got %+v", f)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

// Every prefix of a valid frame is invalid and must be rejected cleanly.
func TestParseFrameTruncations(t *testing.T) {
	idCol := Column{Name: "id", TypeOID: 23, Kind: ColumnText, Value: []byte("1")}
	frames := []enc{
		beginFrame(1, 2, 3),
		messageFrame(1, 3, 2, "payload"),
		header('U', 3, 1).u64(2).u32(1).str("s").str("t").ids(1, 7).u8(1).tuple(idCol, Column{Name: "n", Kind: ColumnNull}).u8(1).tuple(idCol),
		header('T', 3, 1).u64(2).u16(1).u32(1).str("s").str("t").ids(3),
	}
	for _, full := range frames {
		if _, err := ParseFrame(full); err != nil {
			t.Fatalf("full frame %c: %v", full[1], err)
		}
		for n := range len(full) {
			if f, err := ParseFrame(full[:n]); frameErr(f, err) == nil {
				t.Errorf("frame %c cut to %d of %d bytes parsed without error", full[1], n, len(full))
			}
		}
	}
}

func TestLSN(t *testing.T) {
	for _, s := range []string{"0/0", "0/16B3748", "1/0", "FFFFFFFF/FFFFFFFF"} {
		l, err := pglogrepl.ParseLSN(s)
		if err != nil {
			t.Fatalf("ParseLSN(%q): %v", s, err)
		}
		if LSN(l).String() != s {
			t.Fatalf("ParseLSN(%q).String() = %q", s, l)
		}
	}
}

func TestAck(t *testing.T) {
	d := New(Config{})
	d.Ack(10)
	d.Ack(5)
	if got := d.acked.Load(); got != 10 {
		t.Fatalf("acked %d after Ack(10), Ack(5)", got)
	}
	d.Ack(11)
	if got := d.acked.Load(); got != 11 {
		t.Fatalf("acked %d after Ack(11)", got)
	}
}

// Content that does not parse is still an item: an *Unreadable with the
// content and the reason, so that the producer can keep it.
func TestParseContentUnreadable(t *testing.T) {
	rec := recordContent("v")
	tests := []struct {
		name    string
		content []byte
		wantErr string
	}{
		{"empty", []byte{}, "need 1 bytes"},
		{"unknown format", []byte{9, 1, 2}, "unknown format 9"},
		{"record truncated", rec[:len(rec)-1], "need 2 bytes"},
		{"record trailing", append(bytes.Clone(rec), 0), "1 trailing bytes"},
		{"negative key length", enc{FormatRecord}.str("t").u32(0).u32(0xfffffffe), "negative length"},
		{"header count beyond content", enc{FormatRecord}.str("t").u32(0).u32(^uint32(0)).u32(^uint32(0)).u16(100), "need 600 bytes"},
		{"snapshot without id", []byte{FormatSnapshot, 0, 1}, "need 8 bytes"},
		{"snapshot not JSON", enc{FormatSnapshot}.u64(1).raw([]byte("{")), "not JSON"},
		{"request without id", []byte{FormatRequest, RequestPause, 0, 1}, "need 8 bytes"},
		{"request trailing", enc{FormatRequest}.u8(RequestPause).u64(1).u64(0).u64(0).u8(0), "1 trailing bytes"},
		{"request unknown", enc{FormatRequest}.u8('x').u64(1).u64(0).u64(0), "unknown mapping request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFrame(rawMessageFrame(1, 2, 3, tt.content))
			if err != nil {
				t.Fatalf("frame refused: %v", err)
			}
			u, ok := f.Item.(*Unreadable)
			if !ok {
				t.Fatalf("item %+v, want *Unreadable", f.Item)
			}
			if u.LSN != 3 || !bytes.Equal(u.Content, tt.content) || !errors.Is(u.Err, errContent) || !strings.Contains(u.Err.Error(), tt.wantErr) {
				t.Fatalf("got %+v (%v), want LSN 3, the content and an error containing %q", u, u.Err, tt.wantErr)
			}
		})
	}
}

// The plugin's own frames (capturedFrames) carry what docs/producing.md
// says: the ids of every mapping of the table, ascending, and for a
// partition those of its partitioned parent, under the partition's name.
func TestParseFrameCapturedMappings(t *testing.T) {
	parse := func(i int) Frame {
		t.Helper()
		b, err := hex.DecodeString(capturedFrames[i])
		if err != nil {
			t.Fatal(err)
		}
		f, err := ParseFrame(b)
		if err != nil {
			t.Fatalf("captured frame %d: %v", i, err)
		}
		return f
	}
	for _, i := range []int{2, 3, 4, 5, 8} {
		c := parse(i).Item.(*Change)
		if c.Table != "orders" || !reflect.DeepEqual(c.Mappings, []int64{1, 2}) {
			t.Fatalf("frame %d: %s %v, want orders [1 2]", i, c.Table, c.Mappings)
		}
	}
	tr := parse(7).Item.(*Truncate)
	if len(tr.Relations) != 1 || tr.Relations[0].Table != "orders" || !reflect.DeepEqual(tr.Relations[0].Mappings, []int64{1, 2}) {
		t.Fatalf("truncate: %+v", tr)
	}
	c := parse(9).Item.(*Change)
	if c.Table != "parted_eu" || !reflect.DeepEqual(c.Mappings, []int64{3}) {
		t.Fatalf("partition insert: %s %v, want parted_eu [3]", c.Table, c.Mappings)
	}
}

// A message's changes share their names (one string per distinct name for
// the stream) and their column storage, without one change's columns
// growing into the next's.
func TestParserSharesNamesAndColumns(t *testing.T) {
	idCol := Column{Name: "id", TypeOID: 23, Kind: ColumnText, Value: []byte("1")}
	insert := func(lsn uint64) enc {
		return header('I', endLSN, 7).u64(lsn).u32(1).str("public").str("orders").ids(1).u8(1).tuple(idCol, idCol).u8(0)
	}
	var p Parser
	frames, err := p.Parse(message(insert(1), insert(2)))
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Parse(message(insert(3)))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := frames[0].Item.(*Change), frames[1].Item.(*Change), again[0].Item.(*Change)
	for _, ch := range []*Change{b, c} {
		if unsafe.StringData(ch.Table) != unsafe.StringData(a.Table) || unsafe.StringData(ch.New.Columns[1].Name) != unsafe.StringData(a.New.Columns[1].Name) {
			t.Fatal("the same name parsed twice is two strings")
		}
	}
	if cap(a.New.Columns) != 2 {
		t.Fatalf("columns of the first change have capacity %d, want 2", cap(a.New.Columns))
	}
	_ = append(a.New.Columns, Column{Name: "intruder"})
	if b.New.Columns[0].Name != "id" {
		t.Fatalf("appending to one change's columns changed the next: %+v", b.New.Columns)
	}
}

func TestParserNamesBounded(t *testing.T) {
	var p Parser
	long := strings.Repeat("x", maxInternedName+1)
	if s := p.intern([]byte(long)); s != long || len(p.names) != 0 {
		t.Fatalf("a %d-byte name was kept", len(long))
	}
	for i := 0; p.namesBytes < maxInternedBytes-maxInternedName; i++ {
		p.intern([]byte(fmt.Sprintf("%063d", i)))
	}
	p.intern([]byte(strings.Repeat("y", maxInternedName)))
	if p.namesBytes > maxInternedBytes || len(p.names) == 0 {
		t.Fatalf("names: %d entries, %d bytes (bound %d)", len(p.names), p.namesBytes, maxInternedBytes)
	}
}

// A frame whose header is whole but whose body does not parse belongs to a
// known transaction: a change whose mapping ids were read becomes a
// Change with Err (its mappings dead-letter it), any other an Unreadable
// holding the frame; only a B or C frame, without which the transaction's
// bounds are unknown, fails the message.
func TestParseFrameUnreadableBody(t *testing.T) {
	change := header('D', 0x1000, 7).u64(0x900).u32(1).str("s").str("t").ids(3, 4).u8(1).u16(1).str("c").u32(23).u8('x')
	f, err := ParseFrame(change)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := f.Item.(*Change)
	if !ok || c.Err == nil || !slices.Equal(c.Mappings, []int64{3, 4}) || c.LSN != 0x900 || c.New != nil || c.Old != nil || !bytes.Equal(c.Raw, change) {
		t.Fatalf("got %+v", f.Item)
	}
	if !strings.Contains(c.Err.Error(), "unknown kind 0x78") {
		t.Fatalf("err %v", c.Err)
	}
	truncate := header('T', 0x1000, 7).u64(0x901).u16(1).u32(1).str("s")
	f, err = ParseFrame(truncate)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := f.Item.(*Unreadable); !ok || !u.Whole || u.LSN != 0x901 || !bytes.Equal(u.Content, truncate) || u.Err == nil {
		t.Fatalf("got %+v", f.Item)
	}
	for _, b := range []enc{beginFrame(1, 2, 3).u8(0), commitFrame(1, 2, 3)[:20], header('I', 1, 2).u64(1)} {
		f, err := ParseFrame(b)
		if k := b[1]; k == KindBegin || k == KindCommit {
			if err == nil {
				t.Fatalf("%c frame with a bad body parsed: %+v", k, f)
			}
			continue
		}
		if err != nil || frameErr(f, err) == nil {
			t.Fatalf("%c frame: %+v, %v", b[1], f, err)
		}
	}
}
