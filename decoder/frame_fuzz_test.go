package decoder

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// Frames captured from the output plugin (pg_logical_slot_peek_binary_changes
// on a slot of plugin kafgres, frame version 2, which differs from 3 only
// in the version byte and in how frames are put into messages; the bytes
// here have the version byte of 3) for: kafgres_produce with a
// key, binary value and a header; inserts, an update and a delete of a table
// with REPLICA IDENTITY FULL and two mappings (NULL, empty and non-ASCII
// values); TRUNCATE; an update leaving a TOASTed column unchanged; and an
// insert into a partition whose partitioned parent has the mapping.
var capturedFrames = []string{
	"0342000000000162fac0000002fa000000000162fa900003048b37dd7325",
	"034d000000000162fac0000002fa000000000162f8400000002a01000c6f72646572732d746f706963ffffffff000000016b0000000400ff7b7d00010001680000000176",
	"0349000000000162fac0000002fa000000000162f840000040f800067075626c696300066f7264657273000200000000000000010000000000000002010004000269640000001774000000013100046e6f7465000000196e0003646f6300000019740000000a7878787878787878787800016e000006a47400000003312e3500",
	"0349000000000162fac0000002fa000000000162f930000040f800067075626c696300066f7264657273000200000000000000010000000000000002010004000269640000001774000000013200046e6f746500000019740000000ac3bc6ec3af27636f64650003646f6300000019740000000000016e000006a474000000013000",
	"0355000000000162fac0000002fa000000000162f9c0000040f800067075626c696300066f7264657273000200000000000000010000000000000002010004000269640000001774000000013100046e6f74650000001974000000076368616e6765640003646f6300000019740000000a7878787878787878787800016e000006a47400000003312e35010004000269640000001774000000013100046e6f7465000000196e0003646f6300000019740000000a7878787878787878787800016e000006a47400000003312e35",
	"0344000000000162fac0000002fa000000000162fa40000040f800067075626c696300066f726465727300020000000000000001000000000000000200010004000269640000001774000000013200046e6f746500000019740000000ac3bc6ec3af27636f64650003646f6300000019740000000000016e000006a4740000000130",
	"0343000000000162fac0000002fa000000000162fa900003048b37dd7325",
	"03540000000001630890000002fc00000000016306f00001000040f800067075626c696300066f7264657273000200000000000000010000000000000002",
	"035500000000016327f8000002ff0000000001632768000040f800067075626c696300066f7264657273000200000000000000010000000000000002010004000269640000001774000000013300046e6f7465000000197400000005746f6173740003646f63000000197500016e000006a46e00",
	"03490000000001632fa0000003010000000001632f280000410200067075626c696300097061727465645f65750001000000000000000301000300026964000000177400000001370006726567696f6e00000019740000000265750001760000001974000000046c65616600",
}

// hostileFrames are hand-made attacks on the lengths and counts.
func hostileFrames() []enc {
	change := func(kind byte) enc { return header(kind, endLSN, 7).u64(1).u32(1).str("s").str("t").ids(1) }
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
		header('T', 1, 1).u64(1).u16(1).u32(1).str("s").str("t").u16(0xffff),
		header('T', 1, 1).u64(1).u16(1).u32(1).str("s").str("t").ids(-1, 0, 1),
		header('I', 1, 1).u64(1).u32(1).str("s").str("t").u16(0xffff).u64(1),
		header('I', 1, 1).u64(1).u32(1).str("s").str("t").ids(1<<62, 1<<63-1).u8(1).u16(0).u8(0),
		header('B', 1, 1).u64(1).u64(^uint64(0)),
		header('C', 1, 1).u64(1).u64(1 << 63),
	}
}

// encodeFrame is the inverse of ParseFrame: the bytes of f in the plugin's
// format.
func encodeFrame(f Frame) []byte {
	if raw := unreadableFrame(f); raw != nil {
		return raw
	}
	e := header(f.Kind, f.CommitEndLSN, f.Xid)
	switch it := f.Item.(type) {
	case nil:
		e = e.u64(uint64(f.CommitLSN)).u64(pgTime(f.CommitTime))
	case *Produced:
		c := enc{FormatRecord}.str(it.Topic).u32(uint32(it.Partition)).bytes32(it.Key).bytes32(it.Value).u16(uint16(len(it.Headers)))
		for _, h := range it.Headers {
			c = c.str(h.Key).bytes32(h.Value)
		}
		e = e.u64(uint64(it.LSN)).u32(uint32(len(c))).raw(c)
	case *SnapshotRow:
		c := enc{FormatSnapshot}.u64(uint64(it.MappingID)).raw([]byte(it.Row))
		e = e.u64(uint64(it.LSN)).u32(uint32(len(c))).raw(c)
	case *MappingRequest:
		c := enc{FormatRequest}.u8(it.Kind).u64(uint64(it.MappingID)).u64(uint64(it.First)).u64(uint64(it.Last))
		e = e.u64(uint64(it.LSN)).u32(uint32(len(c))).raw(c)
	case *Unreadable:
		e = e.u64(uint64(it.LSN)).u32(uint32(len(it.Content))).raw(it.Content)
	case *Truncate:
		e = e.u64(uint64(it.LSN)).u16(uint16(len(it.Relations)))
		for _, r := range it.Relations {
			e = e.u32(r.RelID).str(r.Schema).str(r.Table).ids(r.Mappings...)
		}
	case *Change:
		e = e.u64(uint64(it.LSN)).u32(it.RelID).str(it.Schema).str(it.Table).ids(it.Mappings...)
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

// unreadableFrame is the frame's bytes when its body did not parse, else nil.
func unreadableFrame(f Frame) []byte {
	switch it := f.Item.(type) {
	case *Change:
		if it.Err != nil {
			return it.Raw
		}
	case *Unreadable:
		if it.Whole {
			return it.Content
		}
	}
	return nil
}

// frameErr is err, or the error of the frame's body when it did not parse.
func frameErr(f Frame, err error) error {
	switch it := f.Item.(type) {
	case *Change:
		if err == nil && it.Err != nil {
			return it.Err
		}
	case *Unreadable:
		if err == nil && it.Whole {
			return it.Err
		}
	}
	return err
}

// FuzzFrame: ParseFrame never panics, and whatever it accepts is exactly
// the bytes it was given (the format has no slack: every length, count
// and flag is checked, trailing bytes refused), parsed the same way every
// time, held in memory of its own (the replication connection reuses its
// buffer), with values that cannot grow into their neighbours. The input
// is also parsed as a message (ParseFrames), which accepts only what
// consists of whole frames, and as the message of that one frame, which
// parses as the frame does.
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
		f.Add(append([]byte{2}, b[1:]...)) // the previous version
		f.Add(message(b, b))               // a message of two frames
	}
	for _, b := range hostileFrames() {
		f.Add([]byte(b))
	}
	// mapping requests, which no captured stream holds
	for _, kind := range []byte{RequestReplay, RequestPause, RequestResume} {
		f.Add([]byte(rawMessageFrame(7, 0x1000, 0x900, enc{FormatRequest}.u8(kind).u64(12).u64(3).u64(9))))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		if frames, err := ParseFrames(b); err == nil {
			var e []enc
			for _, fr := range frames {
				e = append(e, encodeFrame(fr))
			}
			if out := message(e...); !bytes.Equal(out, in) {
				t.Fatalf("message of %d frames encodes to\n%x\nparsed from\n%x", len(frames), out, in)
			}
		} else if frames != nil {
			t.Fatalf("error %v with frames %+v", err, frames)
		}
		fr, err := ParseFrame(b)
		again, err2 := ParseFrame(b)
		if (err == nil) != (err2 == nil) || !reflect.DeepEqual(fr, again) {
			t.Fatalf("two parses differ: %+v, %v and %+v, %v", fr, err, again, err2)
		}
		one, err3 := ParseFrames(message(in))
		if (err == nil) != (err3 == nil) || (err == nil && (len(one) != 1 || !reflect.DeepEqual(one[0], fr))) {
			t.Fatalf("as a message of one frame: %+v, %v; as a frame: %+v, %v", one, err3, fr, err)
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
		case *Produced:
			for _, v := range [][]byte{it.Key, it.Value} {
				if cap(v) != len(v) {
					t.Fatalf("record key or value has room to grow into: len %d cap %d", len(v), cap(v))
				}
			}
		case *Unreadable:
			if cap(it.Content) != len(it.Content) {
				t.Fatalf("message content has room to grow into: len %d cap %d", len(it.Content), cap(it.Content))
			}
		case *Change:
			if cap(it.Raw) != len(it.Raw) {
				t.Fatalf("unreadable change has room to grow into: len %d cap %d", len(it.Raw), cap(it.Raw))
			}
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
