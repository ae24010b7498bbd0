package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// encodeRequest builds a request frame body the way a client does.
func encodeRequest(req kmsg.Request, correlation int32, clientID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(correlation))
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func TestReadFrame(t *testing.T) {
	var buf bytes.Buffer
	cases := []struct {
		name string
		in   []byte
		max  int32
		want error // nil: the body comes back
	}{
		{"ok", frame([]byte("12345678")), 100, nil},
		{"too small", frame([]byte("1234")), 100, errFrame},
		{"over cap", frame(make([]byte, 101)), 100, errFrame},
		{"negative", []byte{0xff, 0xff, 0xff, 0xff}, 100, errFrame},
		{"truncated", frame([]byte("12345678"))[:9], 100, io.ErrUnexpectedEOF},
		{"empty", nil, 100, io.EOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readFrame(bytes.NewReader(c.in), c.max, &buf)
			if c.want == nil {
				if err != nil || !bytes.Equal(got, c.in[4:]) {
					t.Fatalf("got %q, %v", got, err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

// A frame announcing the cap must not be allocated before its bytes arrive.
func TestReadFrameDoesNotPreallocate(t *testing.T) {
	var buf bytes.Buffer
	in := binary.BigEndian.AppendUint32(nil, 90<<20)
	in = append(in, "only a few bytes"...)
	if _, err := readFrame(bytes.NewReader(in), 100<<20, &buf); err == nil {
		t.Fatal("truncated frame accepted")
	}
	if buf.Cap() > 1<<20 {
		t.Fatalf("buffer grew to %d bytes for 16 received", buf.Cap())
	}
}

func TestParseRequest(t *testing.T) {
	apis := servedAPIs()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	topic := "payments"
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	req, err := parseRequest(encodeRequest(md, 7, "kcat"), apis)
	if err != nil {
		t.Fatal(err)
	}
	got := req.body.(*kmsg.MetadataRequest)
	if req.correlation != 7 || req.clientID != "kcat" || len(got.Topics) != 1 || *got.Topics[0].Topic != "payments" {
		t.Fatalf("parsed %+v / %+v", req, got)
	}

	unknown := encodeRequest(kmsg.NewPtrMetadataRequest(), 1, "x")
	binary.BigEndian.PutUint16(unknown, 9999)
	if _, err := parseRequest(unknown, apis); !errors.Is(err, errFrame) {
		t.Fatalf("unknown key: %v", err)
	}

	tooNew := kmsg.NewPtrMetadataRequest()
	tooNew.Version = 13
	b := encodeRequest(tooNew, 1, "x")
	binary.BigEndian.PutUint16(b[2:], 99)
	if _, err := parseRequest(b, apis); !errors.Is(err, errFrame) || !strings.Contains(err.Error(), "unsupported") {
		t.Fatalf("unsupported version: %v", err)
	}

	// ApiVersions at a version we do not know is answered, not refused.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 5
	b = encodeRequest(av, 3, "x")
	binary.BigEndian.PutUint16(b[2:], 77)
	req, err = parseRequest(b, apis)
	if err != nil || req.body != nil || req.key != 18 {
		t.Fatalf("future ApiVersions: %+v %v", req, err)
	}

	truncated := encodeRequest(md, 1, "x")
	if _, err := parseRequest(truncated[:len(truncated)-3], apis); !errors.Is(err, errFrame) {
		t.Fatalf("truncated body: %v", err)
	}
}

func TestAppendResponseHeaders(t *testing.T) {
	av := kmsg.NewPtrApiVersionsResponse()
	av.Version = 3
	md := kmsg.NewPtrMetadataResponse()
	md.Version = 9
	// ApiVersions keeps response header v0 even when flexible; others add
	// an empty tag section after the correlation id.
	a := appendResponse(nil, 5, av)
	m := appendResponse(nil, 5, md)
	if int(binary.BigEndian.Uint32(a)) != len(a)-4 || int(binary.BigEndian.Uint32(m)) != len(m)-4 {
		t.Fatal("size prefix wrong")
	}
	if len(a)-8 != len(av.AppendTo(nil)) {
		t.Fatal("ApiVersions response has a header tag section")
	}
	if len(m)-9 != len(md.AppendTo(nil)) || m[8] != 0 {
		t.Fatal("flexible response lacks its header tag section")
	}
}
