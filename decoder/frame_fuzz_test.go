package decoder

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// Frames captured from the output plugin (pg_logical_slot_peek_binary_changes
// on a slot of plugin kafgres) for: kafgres_produce with a key, binary value
// and a header; inserts, an update and a delete of a mapped table with
// REPLICA IDENTITY FULL (NULL, empty and non-ASCII values); TRUNCATE; and an
// update leaving a TOASTed column unchanged.
var capturedFrames = []string{
	"014200000000017705b8000016d1000000000177058800030488caaf9936",
	"014d00000000017705b8000016d100000000017703380000002a01000c6f72646572732d746f706963ffffffff000000016b0000000400ff7b7d00010001680000000176",
	"014900000000017705b8000016d10000000001770338000040d000067075626c696300066f7264657273010004000269640000001774000000013100046e6f7465000000196e0003646f6300000019740000000a7878787878787878787800016e000006a47400000003312e3500",
	"014900000000017705b8000016d10000000001770428000040d000067075626c696300066f7264657273010004000269640000001774000000013200046e6f746500000019740000000ac3bc6ec3af27636f64650003646f6300000019740000000000016e000006a474000000013000",
	"015500000000017705b8000016d100000000017704b8000040d000067075626c696300066f7264657273010004000269640000001774000000013100046e6f74650000001974000000076368616e6765640003646f6300000019740000000a7878787878787878787800016e000006a47400000003312e35010004000269640000001774000000013100046e6f7465000000196e0003646f6300000019740000000a7878787878787878787800016e000006a47400000003312e35",
	"014400000000017705b8000016d10000000001770538000040d000067075626c696300066f726465727300010004000269640000001774000000013200046e6f746500000019740000000ac3bc6ec3af27636f64650003646f6300000019740000000000016e000006a4740000000130",
	"014300000000017705b8000016d1000000000177058800030488caaf9936",
	"01540000000001772c48000016d20000000001772aa80001000040d000067075626c696300066f7264657273",
	"0155000000000177a2a0000016e4000000000177a210000040d000067075626c696300066f7264657273010004000269640000001774000000013300046e6f7465000000197400000001750003646f63000000197500016e000006a46e00",
}

// hostileFrames are hand-made attacks on the lengths and counts.
func hostileFrames() []enc {
	change := func(kind byte) enc { return header(kind, endLSN, 7).u64(1).u32(1).str("s").str("t") }
	return []enc{
		{},
		{FrameVersion},
		header(0, 0, 0),
		header('M', ^LSN(0), ^uint32(0)).u64(^uint64(0)).u32(^uint32(0)),
		header('M', 1, 1).u64(1).u32(0x7fffffff).raw([]byte("x")),
		change('I').u8(1).u16(0xffff),
		change('I').u8(1).u16(1).u16(0xffff).raw([]byte("n")),
		change('I').u8(1).u16(1).str("c").u32(25).u8('t').u32(0xffffffff),
		change('U').u8(1).u16(0).u8(1).u16(0),
		change('D').u8(0).u8(1).u16(1).str("").u32(0).u8('u'),
		change('I').u8(255),
		header('T', 1, 1).u64(1).u16(0xffff),
		header('T', 1, 1).u64(1).u16(0),
		header('B', 1, 1).u64(1).u64(^uint64(0)),
		header('C', 1, 1).u64(1).u64(1 << 63),
	}
}

// encodeFrame is the inverse of ParseFrame: the bytes of f in the plugin's
// format.
func encodeFrame(f Frame) []byte {
	e := header(f.Kind, f.CommitEndLSN, f.Xid)
	switch it := f.Item.(type) {
	case nil:
		e = e.u64(uint64(f.CommitLSN)).u64(pgTime(f.CommitTime))
	case *Message:
		e = e.u64(uint64(it.LSN)).u32(uint32(len(it.Content))).raw(it.Content)
	case *Truncate:
		e = e.u64(uint64(it.LSN)).u16(uint16(len(it.Relations)))
		for _, r := range it.Relations {
			e = e.u32(r.RelID).str(r.Schema).str(r.Table)
		}
	case *Change:
		e = e.u64(uint64(it.LSN)).u32(it.RelID).str(it.Schema).str(it.Table)
		for _, t := range []*Tuple{it.New, it.Old} {
			if t == nil {
				e = e.u8(0)
				continue
			}
			e = e.u8(1).tuple(t.Columns...)
		}
	}
	return e
}

// FuzzFrame: ParseFrame never panics, and whatever it accepts is exactly
// the bytes it was given (the format has no slack: every length, count
// and flag is checked, trailing bytes refused), parsed the same way every
// time, held in memory of its own (the replication connection reuses its
// buffer), with values that cannot grow into their neighbours.
//
//	go test -run='^$' -fuzz='^FuzzFrame$' -fuzztime=30s ./decoder/
func FuzzFrame(f *testing.F) {
	for _, h := range capturedFrames {
		b, err := hex.DecodeString(h)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := ParseFrame(b); err != nil {
			f.Fatalf("captured frame %s: %v", h[:4], err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])                // cut short
		f.Add(append(bytes.Clone(b), 0))   // trailing byte
		f.Add(append([]byte{2}, b[1:]...)) // another version
	}
	for _, b := range hostileFrames() {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		fr, err := ParseFrame(b)
		again, err2 := ParseFrame(b)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(fr, again) {
			t.Fatalf("two parses differ: %+v, %v and %+v, %v", fr, err, again, err2)
		}
		if err != nil {
			if !reflect.DeepEqual(fr, Frame{}) {
				t.Fatalf("error %v with a non-empty frame %+v", err, fr)
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("empty error message")
			}
			return
		}
		for i := range b {
			b[i] ^= 0xff // the connection reuses its buffer
		}
		// whatever parses has the shape its kind promises
		switch fr.Kind {
		case KindBegin, KindCommit:
			if fr.Item != nil {
				t.Fatalf("%c frame with an item", fr.Kind)
			}
		case KindMessage, KindInsert, KindUpdate, KindDelete, KindTruncate:
			if fr.Item == nil {
				t.Fatalf("%c frame without an item", fr.Kind)
			}
		default:
			t.Fatalf("parsed unknown kind %q", fr.Kind)
		}
		if c, ok := fr.Item.(*Change); ok && c.Op != fr.Kind {
			t.Fatalf("change op %c in %c frame", c.Op, fr.Kind)
		}
		out := encodeFrame(fr)
		if !bytes.Equal(out, in) {
			t.Fatalf("frame %+v encodes to\n%x\nparsed from\n%x", fr, out, in)
		}
		switch it := fr.Item.(type) {
		case *Message:
			if cap(it.Content) != len(it.Content) {
				t.Fatalf("message content has room to grow into: len %d cap %d", len(it.Content), cap(it.Content))
			}
		case *Change:
			for _, tu := range []*Tuple{it.New, it.Old} {
				if tu == nil {
					continue
				}
				for _, c := range tu.Columns {
					if cap(c.Value) != len(c.Value) {
						t.Fatalf("column %q value has room to grow into", c.Name)
					}
				}
			}
		}
	})
}
