package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

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
	var buf frameBuffers
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
			got, lent, err := readFrame(bytes.NewReader(c.in), c.max, &buf)
			defer buf.release(got, lent)
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

// A frame announcing the cap must not be allocated before its bytes arrive:
// only the first pooled chunk is.
func TestReadFrameDoesNotPreallocate(t *testing.T) {
	var buf frameBuffers
	in := binary.BigEndian.AppendUint32(nil, 90<<20)
	in = append(in, "only a few bytes"...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, _, err := readFrame(bytes.NewReader(in), 100<<20, &buf); err == nil {
		t.Fatal("truncated frame accepted")
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2*maxPooledFrame {
		t.Fatalf("allocated %d bytes for 16 received", grew)
	}
}

// Frames up to the pooled size reuse buffers; a larger one gets its exact
// size and is reported when dropped, so its memory can be handed back.
func TestFrameBuffers(t *testing.T) {
	dropped := 0
	f := frameBuffers{bigReleased: func() { dropped++ }, bigMax: 64 << 20}
	for _, n := range []int{8, minFrameBuffer, minFrameBuffer + 1, 3 << 20, maxPooledFrame, maxPooledFrame + 1, 20 << 20} {
		body := bytes.Repeat([]byte{byte(n)}, n)
		got, lent, err := f.read(bytes.NewReader(body), n)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if pooled := n <= maxPooledFrame; pooled != (lent != nil) {
			t.Fatalf("%d bytes: lent %v", n, lent != nil)
		}
		if lent != nil && cap(*lent) < n {
			t.Fatalf("%d bytes in a %d-byte buffer", n, cap(*lent))
		}
		f.release(got, lent)
	}
	if dropped != 2 {
		t.Fatalf("%d large frames reported, want 2", dropped)
	}
	// Large buffers are kept and reused, up to bigMax, until dropped.
	if len(f.big) != 2 || f.bigHeld != maxPooledFrame+1+20<<20 {
		t.Fatalf("kept %d large buffers, %d bytes", len(f.big), f.bigHeld)
	}
	again := f.getBig(15 << 20)
	if cap(again) != 20<<20 || len(f.big) != 1 {
		t.Fatalf("reused a %d-byte buffer for 15 MiB", cap(again))
	}
	if tiny := f.getBig(maxPooledFrame + 1); cap(tiny) != maxPooledFrame+1 || len(f.big) != 0 {
		t.Fatalf("reused a %d-byte buffer", cap(tiny))
	}
	if other := f.getBig(5 << 20); cap(other) != 5<<20 {
		t.Fatal("a buffer more than twice too large was reused")
	}
	f.putBig(make([]byte, 50<<20))
	if f.bigHeld != 50<<20 {
		t.Fatalf("held %d", f.bigHeld)
	}
	f.putBig(again)
	if f.bigHeld != 50<<20 {
		t.Fatalf("kept beyond bigMax: %d", f.bigHeld)
	}
	f.dropBig()
	if f.bigHeld != 0 || len(f.big) != 0 {
		t.Fatal("dropBig kept buffers")
	}
	// A frame cut short gives its buffer back too.
	if _, lent, err := f.read(bytes.NewReader(make([]byte, 100)), 200); err == nil || lent == nil {
		t.Fatalf("short frame: %v", err)
	} else {
		f.release(nil, lent)
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

// A response whose fsync is done must reach the client while the one
// queued behind it still waits for its own: a pipelining producer would
// otherwise wait for two group commits per request.
func TestReadyResponseNotHeldBehindWaitingOne(t *testing.T) {
	server, client := net.Pipe()
	defer server.Close()
	defer client.Close()
	cc := &conn{nc: server}
	in := make(chan response, 2)
	second := make(chan struct{})
	in <- response{correlation: 1, resp: kmsg.NewPtrProduceResponse()}
	in <- response{correlation: 2, resp: kmsg.NewPtrProduceResponse(), wait: second}
	close(in)
	done := make(chan error, 1)
	go func() { done <- cc.writeResponses(context.Background(), in, time.Minute, 0) }()

	var buf frameBuffers
	readCorrelation := func() int32 {
		t.Helper()
		if err := client.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		body, lent, err := readFrame(client, 1<<20, &buf)
		if err != nil {
			t.Fatalf("read a response: %v", err)
		}
		defer buf.release(body, lent)
		return int32(binary.BigEndian.Uint32(body))
	}
	if c := readCorrelation(); c != 1 {
		t.Fatalf("first response has correlation %d, want 1", c)
	}
	close(second)
	if c := readCorrelation(); c != 2 {
		t.Fatalf("second response has correlation %d, want 2", c)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
