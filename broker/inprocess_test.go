package broker

// In-process handler tests: a broker on metadata.Memory and a temp-dir log,
// spoken to over TCP with kmsg, as a client would. They need no Postgres;
// what depends on Postgres's own semantics (SQL functions, NOTIFY, the
// producer) is tested in tests/integration.

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/metadata"
)

type testBroker struct {
	*Broker
	meta *metadata.Memory
	addr string
}

// startTestBroker serves a broker on an ephemeral port until the test ends.
func startTestBroker(t *testing.T, adjust ...func(*Config)) *testBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		ListenAddr:                 ln.Addr().String(),
		AdvertisedHost:             "127.0.0.1",
		AdvertisedPort:             int32(ln.Addr().(*net.TCPAddr).Port),
		DataDir:                    t.TempDir(),
		DSN:                        "unused: the store is in memory",
		NodeID:                     1,
		DefaultPartition:           1,
		GroupInitialRebalanceDelay: -1,
		MirrorInterval:             time.Millisecond,
	}
	for _, f := range adjust {
		f(&cfg)
	}
	mem := metadata.NewMemory()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	b, err := open(ctx, cfg, mem, log)
	if err != nil {
		cancel()
		t.Fatalf("open broker: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &testBroker{Broker: b, meta: mem, addr: ln.Addr().String()}
}

// testClient is one Kafka connection.
type testClient struct {
	t           *testing.T
	nc          net.Conn
	r           *bufio.Reader
	correlation int32
}

func (tb *testBroker) dial(t *testing.T) *testClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", tb.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &testClient{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// do sends req at the highest version the broker serves for its key
// (unless the caller set one) and returns the response.
func (c *testClient) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	c.correlation++
	if err := c.nc.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(frame(encodeRequest(req, c.correlation, "inprocess"))); err != nil {
		c.t.Fatalf("write %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		c.t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, body); err != nil {
		c.t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.correlation {
		c.t.Fatalf("correlation id %d, want %d", got, c.correlation)
	}
	body = body[4:]
	resp := req.ResponseKind()
	// Flexible responses carry a tagged-field byte after the correlation
	// id, except ApiVersions, whose header is always v0.
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}
