package broker

// In-process handler tests: a broker on metadata.Memory and a temp-dir log,
// spoken to over TCP with kmsg, as a client would. They need no Postgres;
// what depends on Postgres's own semantics (SQL functions, NOTIFY, the
// producer) is tested in tests/integration.

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/security/acl"
)

type testBroker struct {
	*Broker
	t    testing.TB
	meta *metadata.Memory
	addr string
	stop func() // stops serving and closes the broker; runs once

	// principals maps a client's address to the principal dialAs gave it,
	// standing in for authentication.
	principals *sync.Map
	// skipTxnCheck lets transactional batches in without the transaction
	// coordinator, for tests of the log side alone.
	skipTxnCheck *atomic.Bool
}

// startTestBroker serves a broker on an ephemeral port until the test ends.
func startTestBroker(t *testing.T, adjust ...func(*Config)) *testBroker {
	t.Helper()
	cfg := Config{
		AdvertisedHost:             "127.0.0.1",
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
	return serveTestBroker(t, cfg, metadata.NewMemory())
}

// serveTestBroker opens a broker on cfg and mem and serves it on an
// ephemeral port (cfg's listen address and advertised port are replaced)
// until stop or the end of the test.
func serveTestBroker(t *testing.T, cfg Config, mem *metadata.Memory) *testBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ListenAddr = ln.Addr().String()
	cfg.AdvertisedPort = int32(ln.Addr().(*net.TCPAddr).Port)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	b, err := open(ctx, cfg, mem, log)
	if err != nil {
		cancel()
		ln.Close()
		t.Fatalf("open broker: %v", err)
	}
	principals := new(sync.Map)
	b.testPrincipal = func(remote string) (acl.Principal, bool) {
		p, ok := principals.Load(remote)
		if !ok {
			return acl.Principal{}, false
		}
		return p.(acl.Principal), true
	}
	skipTxnCheck := new(atomic.Bool)
	b.testSkipTxnCheck = skipTxnCheck.Load
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			ln.Close()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &testBroker{Broker: b, t: t, meta: mem, addr: ln.Addr().String(), stop: stop, principals: principals, skipTxnCheck: skipTxnCheck}
}

// restartAfterCrash stands for a kill -9 of the broker process and its
// restart. The data directory is copied as it is now, which is what a
// killed process leaves (what it wrote is in the page cache, whatever it
// held in memory is gone, nothing was closed); this broker stops, and a
// new one opens on the copy and on the same metadata store, which, being
// Postgres, outlives the broker.
func (tb *testBroker) restartAfterCrash(t *testing.T) *testBroker {
	t.Helper()
	image := t.TempDir()
	if err := os.CopyFS(image, os.DirFS(tb.cfg.DataDir)); err != nil {
		t.Fatalf("copy the data directory: %v", err)
	}
	tb.stop()
	cfg := tb.cfg
	cfg.DataDir = image
	return serveTestBroker(t, cfg, tb.meta)
}

// eventually waits up to timeout for cond to hold, and fails the test,
// naming what was awaited, if it never does. Tests order events with it
// rather than with sleeps.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
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

// do sends req at the version it carries (latest sets the highest the
// broker serves) and returns the response; a failure ends the test.
func (c *testClient) do(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	resp, err := c.roundTrip(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// roundTrip is do for goroutines other than the test's: it returns what
// went wrong rather than failing the test.
func (c *testClient) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	name := kmsg.NameForKey(req.Key())
	c.correlation++
	if err := c.nc.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := c.nc.Write(frame(encodeRequest(req, c.correlation, "inprocess"))); err != nil {
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return nil, fmt.Errorf("read %s response: %w", name, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, fmt.Errorf("read %s response: %w", name, err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.correlation {
		return nil, fmt.Errorf("%s: correlation id %d, want %d", name, got, c.correlation)
	}
	body = body[4:]
	resp := req.ResponseKind()
	// Flexible responses carry a tagged-field byte after the correlation
	// id, except ApiVersions, whose header is always v0.
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", name, err)
	}
	return resp, nil
}

// segmentLog is p's log as the segment engine's, for tests of what only
// segment files have (rolling, snapshots at segment bases, cleaning).
func segmentLog(t *testing.T, p *partition) *segment.Log {
	t.Helper()
	l, ok := p.log.(*segment.Log)
	if !ok {
		t.Fatalf("%s-%d: log is a %T, not the segment engine's", p.topic.name, p.index, p.log)
	}
	return l
}
