package decoder

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// walsenderPeer is the server end of a replication connection already in
// copy mode: the test writes what a walsender would, and the standby status
// updates the stream sends are counted.
type walsenderPeer struct {
	be       *pgproto3.Backend
	conn     net.Conn
	statuses chan []byte
}

// connectPeer returns a PgConn talking to a walsenderPeer over loopback
// TCP, so the stream's read deadlines act on a real socket.
func connectPeer(t *testing.T) (*pgconn.PgConn, *walsenderPeer) {
	t.Helper()
	pc, p, _ := connectPeerCounted(t)
	return pc, p
}

// connectPeerCounted is connectPeer whose socket is a pausingConn over a
// countingConn, as Run makes it.
func connectPeerCounted(t *testing.T) (*pgconn.PgConn, *walsenderPeer, *countingConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })

	cfg, err := pgconn.ParseConfig("host=127.0.0.1 user=kafgres_test")
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingConn{Conn: client}
	pc, err := pgconn.Construct(&pgconn.HijackedConn{Conn: &pausingConn{Conn: counted}, Config: cfg,
		ParameterStatuses: map[string]string{}, TxStatus: 'I'})
	if err != nil {
		t.Fatal(err)
	}
	p := &walsenderPeer{be: pgproto3.NewBackend(server, server), conn: server, statuses: make(chan []byte, 1000)}
	go func() {
		for {
			msg, err := p.be.Receive()
			if err != nil {
				return
			}
			if cd, ok := msg.(*pgproto3.CopyData); ok && len(cd.Data) > 0 && cd.Data[0] == 'r' {
				p.statuses <- append([]byte(nil), cd.Data...)
			}
		}
	}()
	return pc, p, counted
}

func (p *walsenderPeer) send(t *testing.T, data []byte) {
	t.Helper()
	p.be.Send(&pgproto3.CopyData{Data: data})
	if err := p.be.Flush(); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// The receive loop on a stream of keepalives, one per commit of a busy
// database: the consumer sees a few Progress events, not one per
// keepalive; the last position arrives although nothing follows it (the
// read deadline, not another message, delivers it); and ending ctx stops
// receive at once although no status update is due for an hour.
func TestStreamReceiveCoalescesKeepalives(t *testing.T) {
	const (
		interval   = 50 * time.Millisecond
		keepalives = 300
	)
	pc, peer := connectPeer(t)
	out := make(chan Event, keepalives+10)
	s := &stream{
		d:    New(Config{StatusInterval: time.Hour, ProgressInterval: interval}),
		out:  out,
		conn: pc,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.receive(ctx) }()

	start := time.Now()
	last := LSN(0x1000)
	for i := 0; i < keepalives; i++ {
		last += 0x40
		peer.send(t, keepalive(last))
		time.Sleep(time.Millisecond)
	}
	lastSent := time.Now()

	var progress []LSN
	timeout := time.After(10 * time.Second)
	for len(progress) == 0 || progress[len(progress)-1] != last {
		select {
		case ev := <-out:
			p, ok := ev.(Progress)
			if !ok {
				t.Fatalf("unexpected event %+v", ev)
			}
			if len(progress) > 0 && p.LSN <= progress[len(progress)-1] {
				t.Fatalf("progress %s after %s", p.LSN, progress[len(progress)-1])
			}
			progress = append(progress, p.LSN)
		case err := <-done:
			t.Fatalf("receive returned %v", err)
		case <-timeout:
			t.Fatalf("last keepalive position %s never delivered; got %d progress events, last %v", last, len(progress), progress[len(progress)-1:])
		}
	}
	elapsed := time.Since(start)
	// At most one Progress per interval, plus the first one, which goes
	// out at once.
	if limit := int(elapsed/interval) + 1; len(progress) > limit {
		t.Fatalf("%d progress events for %d keepalives in %v, want at most %d", len(progress), keepalives, elapsed, limit)
	}
	t.Logf("%d keepalives in %v: %d progress events, the last %v after its keepalive",
		keepalives, elapsed, len(progress), time.Since(lastSent))
	if n := len(peer.statuses); n != 1 {
		t.Errorf("%d status updates, want 1 (the first; the next is due in an hour)", n)
	}

	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("receive returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("receive did not return after ctx ended")
	}
}

// A keepalive that asks for a reply is answered at once, and status
// updates go out on time on a stream that says nothing.
func TestStreamReceiveStatus(t *testing.T) {
	pc, peer := connectPeer(t)
	s := &stream{
		d:    New(Config{StatusInterval: 100 * time.Millisecond}),
		out:  make(chan Event, 10),
		conn: pc,
	}
	s.d.Ack(0x4242)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.receive(ctx) }()

	wantStatus := func(what string) {
		t.Helper()
		select {
		case st := <-peer.statuses:
			// 'r', then write, flush and apply positions.
			for i := 0; i < 3; i++ {
				if lsn := LSN(binary.BigEndian.Uint64(st[1+8*i:])); lsn != 0x4242 {
					t.Fatalf("%s: position %d is %s, want the acknowledged 0/4242", what, i, lsn)
				}
			}
		case err := <-done:
			t.Fatalf("%s: receive returned %v", what, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no status update", what)
		}
	}
	wantStatus("at start")
	wantStatus("after an interval of silence")
	wantStatus("after another")

	cancel()
	<-done

	// Reply requested: answered although the next update is an hour away.
	pc, peer = connectPeer(t)
	s = &stream{d: New(Config{StatusInterval: time.Hour}), out: make(chan Event, 10), conn: pc}
	s.d.Ack(0x4242)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done = make(chan error, 1)
	go func() { done <- s.receive(ctx) }()
	wantStatus("at start")
	ka := keepalive(0x5000)
	ka[len(ka)-1] = 1
	peer.send(t, ka)
	wantStatus("reply requested")
}

// countingConn counts the reads that reach the socket.
type countingConn struct {
	net.Conn
	reads atomic.Int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	c.reads.Add(1)
	return c.Conn.Read(b)
}

// A dense run of keepalives with nothing else is read a few at a time, not
// one socket read each; kafgres content after it still arrives, intact and
// at once.
func TestStreamReceivePausesBetweenKeepalives(t *testing.T) {
	const keepalives = 400
	pc, peer, counted := connectPeerCounted(t)
	out := make(chan Event, keepalives+10)
	d := New(Config{StatusInterval: time.Hour, ProgressInterval: 10 * time.Millisecond, KeepalivePause: 2 * time.Millisecond})
	d.pauseQuiet = 0 // the test's stream has had no frames at all
	s := &stream{d: d, out: out, conn: pc, paced: pausingOf(pc.Conn())}
	if s.paced == nil {
		t.Fatal("no pausingConn under the connection")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.receive(ctx) }()

	// One keepalive every 250µs, as from a database committing 4,000
	// transactions a second.
	last := LSN(0x1000)
	before := counted.reads.Load()
	start := time.Now()
	for i := 0; i < keepalives; i++ {
		last += 0x40
		peer.send(t, keepalive(last))
		for next := start.Add(time.Duration(i+1) * 250 * time.Microsecond); time.Now().Before(next); {
		}
	}
	// Content right after them: a transaction.
	peer.send(t, xlogData(beginFrame(9, last+0x100, last+0x140)))
	peer.send(t, xlogData(messageFrame(9, last+0x140, last+0x80, "after")))
	peer.send(t, xlogData(commitFrame(9, last+0x100, last+0x140)))
	sent := time.Now()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-out:
			txn, ok := ev.(*Transaction)
			if !ok {
				continue
			}
			reads := counted.reads.Load() - before
			t.Logf("%d keepalives in %v: %d socket reads; the transaction after them arrived %v after it was sent",
				keepalives, sent.Sub(start), reads, time.Since(sent))
			if txn.EndLSN != last+0x140 || len(txn.Items) != 1 {
				t.Fatalf("transaction %+v", txn)
			}
			if reads > keepalives/3 {
				t.Fatalf("%d socket reads for %d keepalives, want at most %d", reads, keepalives, keepalives/3)
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("receive returned %v", err)
			}
			return
		case err := <-done:
			t.Fatalf("receive returned %v", err)
		case <-timeout:
			t.Fatal("the transaction never arrived")
		}
	}
}

func TestStreamReadPause(t *testing.T) {
	d := New(Config{KeepalivePause: 2 * time.Millisecond})
	now := time.Now()
	for _, tt := range []struct {
		name      string
		keepalive bool
		gap       time.Duration
		frameAgo  time.Duration
		want      time.Duration
	}{
		{"keepalives close together, no frames", true, time.Millisecond, time.Hour, 2 * time.Millisecond},
		{"last message a frame", false, time.Millisecond, 0, 0},
		{"keepalives far apart", true, 10 * time.Millisecond, time.Hour, 0},
		{"a frame within the last second", true, time.Millisecond, 500 * time.Millisecond, 0},
	} {
		s := &stream{d: d, lastWasKeepalive: tt.keepalive, keepaliveGap: tt.gap, lastFrame: now.Add(-tt.frameAgo)}
		if got := s.readPause(now); got != tt.want {
			t.Errorf("%s: pause %v, want %v", tt.name, got, tt.want)
		}
	}
	off := &stream{d: New(Config{KeepalivePause: -1}), lastWasKeepalive: true, keepaliveGap: time.Microsecond}
	if got := off.readPause(now); got != 0 {
		t.Errorf("KeepalivePause < 0: pause %v", got)
	}
}
