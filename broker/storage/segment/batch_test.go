package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestSetLogAppendTime(t *testing.T) {
	recs := []testRecord{{ts: 5, value: []byte("a")}, {ts: 1, value: []byte("b")}, {ts: 3000, value: []byte("c")}}
	for _, tc := range []struct {
		name      string
		attrs     int16
		compress  func([]byte) []byte
		wantAttrs int16
	}{
		{"plain", 0, nil, attrLogAppendTime},
		{"transactional", attrTransactional, nil, attrTransactional | attrLogAppendTime},
		{"control", attrControl | attrTransactional, nil, attrControl | attrTransactional | attrLogAppendTime},
		{"gzip", 1, gzipBytes, 1 | attrLogAppendTime},
		{"codec and delete horizon", 4 | attrDeleteHorizon, nil, 4 | attrDeleteHorizon | attrLogAppendTime},
		// Kafka rebuilds the attributes from the bits it knows.
		{"unknown bits", 0x0180 | attrTransactional, nil, attrTransactional | attrLogAppendTime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := makeBatch(recs, batchOpts{producerID: 7, producerEpoch: 1, baseSequence: 3, attributes: tc.attrs, compress: tc.compress})
			Stamp(b, 42, 5)
			orig := bytes.Clone(b)
			if err := SetLogAppendTime(b, 2000); err != nil {
				t.Fatal(err)
			}
			h, err := ValidateBatch(b)
			if err != nil {
				t.Fatalf("CRC no longer valid: %v", err)
			}
			if h.Attributes != tc.wantAttrs || h.MaxTimestamp != 2000 || h.BaseTimestamp != 5 {
				t.Fatalf("attributes %#x max %d base %d, want %#x 2000 5", h.Attributes, h.MaxTimestamp, h.BaseTimestamp, tc.wantAttrs)
			}
			// Byte for byte: only the attributes, max timestamp and CRC moved.
			want := bytes.Clone(orig)
			binary.BigEndian.PutUint16(want[offAttributes:], uint16(tc.wantAttrs))
			binary.BigEndian.PutUint64(want[offMaxTimestamp:], 2000)
			if !bytes.Equal(b, recrc(want)) {
				t.Fatal("batch differs from the original beyond attributes, max timestamp and CRC")
			}

			// Setting the same again changes nothing; another time does.
			if err := SetLogAppendTime(b, 2000); err != nil || !bytes.Equal(b, want) {
				t.Fatalf("second call: %v, changed %v", err, !bytes.Equal(b, want))
			}
			if err := SetLogAppendTime(b, 2500); err != nil {
				t.Fatal(err)
			}
			if h, err := ValidateBatch(b); err != nil || h.MaxTimestamp != 2500 || h.Attributes != tc.wantAttrs {
				t.Fatalf("after a new time: %+v, %v", h, err)
			}
		})
	}
}

// Every record of a LogAppendTime batch has the batch's timestamp.
func TestSetLogAppendTimeLookups(t *testing.T) {
	l := openTest(t, Options{Dir: t.TempDir()})
	b := makeBatch([]testRecord{{ts: 5}, {ts: 1}, {ts: 3000}}, batchOpts{producerID: -1})
	if err := SetLogAppendTime(b, 2000); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(b, 0); err != nil {
		t.Fatal(err)
	}
	if o, ts, ok, err := l.OffsetForTimestamp(1500, 3); err != nil || !ok || o != 0 || ts != 2000 {
		t.Fatalf("OffsetForTimestamp = %d %d %v %v, want 0 2000", o, ts, ok, err)
	}
	if o, ts, ok, err := l.MaxTimestamp(3); err != nil || !ok || o != 0 || ts != 2000 {
		t.Fatalf("MaxTimestamp = %d %d %v %v, want 0 2000", o, ts, ok, err)
	}
}

func TestSetLogAppendTimeRejects(t *testing.T) {
	good, _ := simpleBatch(1, 3, 100, 10)
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"short":     {bytes.Clone(good[:40]), ErrCorruptBatch},
		"truncated": {bytes.Clone(good[:len(good)-1]), ErrCorruptBatch},
		"extra":     {append(bytes.Clone(good), 0), ErrCorruptBatch},
		"magic": {func() []byte {
			b := bytes.Clone(good)
			b[offMagic] = 1
			return b
		}(), ErrUnsupportedMagic},
	} {
		orig := bytes.Clone(tc.b)
		if err := SetLogAppendTime(tc.b, 1); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		if !bytes.Equal(tc.b, orig) {
			t.Errorf("%s: batch changed", name)
		}
	}
}
