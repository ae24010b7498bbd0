package decoder

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// xlogData wraps frames the way the plugin and the walsender do: each
// preceded by its length, in one 'w' message.
func xlogData(frames ...enc) []byte {
	b := []byte{'w'}
	b = binary.BigEndian.AppendUint64(b, 0x10) // WAL start
	b = binary.BigEndian.AppendUint64(b, 0x20) // server WAL end
	b = binary.BigEndian.AppendUint64(b, 0)    // server time
	return append(b, message(frames...)...)
}

// keepalive is a 'k' message that does not ask for a reply.
func keepalive(walEnd LSN) []byte {
	b := []byte{'k'}
	b = binary.BigEndian.AppendUint64(b, uint64(walEnd))
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, 0)
}

// drain returns the events queued in out.
func drain(out chan Event) []Event {
	var got []Event
	for len(out) > 0 {
		got = append(got, <-out)
	}
	return got
}

func TestStreamHandle(t *testing.T) {
	out := make(chan Event, 10)
	// No connection: nothing here may send a status update, so the next
	// one is not due for a long time.
	s := &stream{d: New(Config{}), out: out, nextStatus: time.Now().Add(time.Hour)}
	ctx := context.Background()
	// Far apart in time: each keepalive position that is news is delivered
	// when receive next looks (flushProgress).
	now := time.Now()
	msgs := [][]byte{
		keepalive(0x100),
		xlogData(beginFrame(5, 0x200, 0x230)),
		keepalive(0x100), // not beyond what was already reported
		xlogData(messageFrame(5, 0x230, 0x1f0, "m")),
		xlogData(commitFrame(5, 0x200, 0x230)),
		keepalive(0x230), // the transaction's end says as much already
		keepalive(0x300),
	}
	for i, m := range msgs {
		if err := s.handle(ctx, m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		now = now.Add(time.Second)
		if err := s.flushProgress(ctx, now); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	got := drain(out)
	if len(got) != 3 {
		t.Fatalf("got %d events %+v, want progress, transaction, progress", len(got), got)
	}
	if p, ok := got[0].(Progress); !ok || p.LSN != 0x100 {
		t.Fatalf("event 0: %+v", got[0])
	}
	if txn, ok := got[1].(*Transaction); !ok || txn.Xid != 5 || txn.EndLSN != 0x230 || len(txn.Items) != 1 {
		t.Fatalf("event 1: %+v", got[1])
	}
	if p, ok := got[2].(Progress); !ok || p.LSN != 0x300 {
		t.Fatalf("event 2: %+v", got[2])
	}
}

// The plugin writes a transaction's frames as one message, and a message
// may end one transaction and hold the next: each is delivered whole, in
// order.
func TestStreamHandleBatchedFrames(t *testing.T) {
	out := make(chan Event, 10)
	s := &stream{d: New(Config{}), out: out, nextStatus: time.Now().Add(time.Hour)}
	ctx := context.Background()
	msgs := [][]byte{
		xlogData(beginFrame(5, 0x200, 0x230), messageFrame(5, 0x230, 0x1f0, "a"), commitFrame(5, 0x200, 0x230)),
		xlogData(beginFrame(6, 0x300, 0x330), messageFrame(6, 0x330, 0x2f0, "b")),
		xlogData(messageFrame(6, 0x330, 0x2f8, "c"), commitFrame(6, 0x300, 0x330),
			beginFrame(7, 0x400, 0x430), messageFrame(7, 0x430, 0x3f0, "d"), commitFrame(7, 0x400, 0x430)),
	}
	for i, m := range msgs {
		if err := s.handle(ctx, m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	got := drain(out)
	want := []struct {
		xid    uint32
		values []string
	}{{5, []string{"a"}}, {6, []string{"b", "c"}}, {7, []string{"d"}}}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d transactions", len(got), got, len(want))
	}
	for i, w := range want {
		txn, ok := got[i].(*Transaction)
		if !ok || txn.Xid != w.xid || len(txn.Items) != len(w.values) {
			t.Fatalf("event %d: %+v, want transaction %d with %d items", i, got[i], w.xid, len(w.values))
		}
		for j, v := range w.values {
			if p, ok := txn.Items[j].(*Produced); !ok || string(p.Value) != v {
				t.Fatalf("transaction %d item %d: %+v, want value %q", w.xid, j, txn.Items[j], v)
			}
		}
	}
}

// Keepalives only record their position: a Progress goes out at once
// after a quiet spell, then at most once per ProgressInterval, and not at
// all when a transaction delivered since covers it.
func TestStreamProgressCoalesced(t *testing.T) {
	out := make(chan Event, 100)
	const interval = 20 * time.Millisecond
	s := &stream{d: New(Config{ProgressInterval: interval}), out: out, nextStatus: time.Now().Add(time.Hour)}
	ctx := context.Background()
	t0 := time.Now()
	step := func(at time.Duration, msg []byte) {
		t.Helper()
		if msg != nil {
			if err := s.handle(ctx, msg); err != nil {
				t.Fatalf("at %v: %v", at, err)
			}
		}
		if err := s.flushProgress(ctx, t0.Add(at)); err != nil {
			t.Fatalf("at %v: %v", at, err)
		}
	}
	wantProgress := func(what string, lsns ...LSN) {
		t.Helper()
		got := drain(out)
		if len(got) != len(lsns) {
			t.Fatalf("%s: got events %+v, want progress %v", what, got, lsns)
		}
		for i, ev := range got {
			if p, ok := ev.(Progress); !ok || p.LSN != lsns[i] {
				t.Fatalf("%s: event %d is %+v, want progress %s", what, i, ev, lsns[i])
			}
		}
	}

	step(0, keepalive(0x100))
	wantProgress("first keepalive after a quiet spell", 0x100)

	// One keepalive per commit of a busy database: one Progress per
	// interval, with the latest position.
	for i := 1; i < 40; i++ {
		step(time.Duration(i)*time.Millisecond, keepalive(0x100+LSN(i)*0x10))
	}
	// 0x100 went out at 0; the next at 20ms, with the keepalive of 20ms.
	wantProgress("keepalives within 40ms", 0x100+20*0x10)
	if want := t0.Add(40 * time.Millisecond); !s.wakeAt().Equal(want) {
		t.Fatalf("receive wakes at %v, want %v (the pending Progress)", s.wakeAt().Sub(t0), want.Sub(t0))
	}
	// Nothing more arrives: receive's deadline delivers the last position.
	step(39*time.Millisecond, nil)
	wantProgress("before the interval")
	step(40*time.Millisecond, nil)
	wantProgress("stream gone quiet", 0x100+39*0x10)
	if !s.wakeAt().Equal(s.nextStatus) {
		t.Fatalf("nothing pending, yet receive wakes at %v", s.wakeAt().Sub(t0))
	}

	// A keepalive, then a transaction ending beyond it: the transaction
	// says as much, so the keepalive's position is dropped.
	step(41*time.Millisecond, keepalive(0x500))
	step(42*time.Millisecond, xlogData(beginFrame(7, 0x580, 0x5a0)))
	step(43*time.Millisecond, xlogData(messageFrame(7, 0x5a0, 0x540, "m")))
	step(44*time.Millisecond, xlogData(commitFrame(7, 0x580, 0x5a0)))
	step(45*time.Millisecond, keepalive(0x5a0))
	step(time.Second, nil)
	got := drain(out)
	if len(got) != 1 {
		t.Fatalf("got %+v, want only the transaction", got)
	}
	if txn, ok := got[0].(*Transaction); !ok || txn.EndLSN != 0x5a0 {
		t.Fatalf("got %+v, want the transaction", got[0])
	}
	if s.pending != 0 {
		t.Fatalf("pending %s after a transaction covered it", s.pending)
	}

	// A keepalive beyond it after a quiet spell goes out at once.
	step(2*time.Second, keepalive(0x600))
	wantProgress("after the transaction", 0x600)
}

func TestStreamHandleErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		msg  []byte
		kind byte
	}{
		{"empty", nil, 0},
		{"unknown message", []byte{'x', 1, 2}, 0},
		{"short keepalive", []byte{'k', 1}, 0},
		{"short XLogData", []byte{'w', 1}, 0},
		{"garbage frame", xlogData(enc{1, 'Z', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), 0},
		{"frame longer than the message", append(xlogData(beginFrame(1, 2, 3)), 0, 0, 0, 9, 1), 0},
		{"message outside transaction", xlogData(messageFrame(1, 2, 3, "x")), 'M'},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &stream{d: New(Config{}), out: make(chan Event, 1), nextStatus: time.Now().Add(time.Hour)}
			err := s.handle(context.Background(), tt.msg)
			var perr *protocolError
			if !errors.As(err, &perr) {
				t.Fatalf("error %v is not a protocol error", err)
			}
			if perr.kind != tt.kind {
				t.Fatalf("kind %q, want %q", perr.kind, tt.kind)
			}
		})
	}
}

// xlogRaw wraps a message as it is, parsable or not, in a 'w' message.
func xlogRaw(msg []byte) []byte {
	b := xlogData()
	return append(b, msg...)
}

// A transaction the stream cannot be read past stalls it: a Stall naming
// the transaction is delivered and the session ends. Once Config.Skip says
// to skip it, it is delivered as Skipped, with what could be read of it
// and the messages that could not, and the stream goes on after it --
// whether its commit frame comes, or only the next transaction or a
// keepalive past its end says it is over.
func TestStreamStallAndSkip(t *testing.T) {
	broken := append(message(messageFrame(5, 0x230, 0x1f8, "b")), 0, 0) // a length cut short
	tail := [][]byte{
		xlogData(beginFrame(5, 0x200, 0x230), messageFrame(5, 0x230, 0x1f0, "a")),
		xlogRaw(broken),
	}
	next := xlogData(beginFrame(6, 0x300, 0x330), messageFrame(6, 0x330, 0x2f0, "c"), commitFrame(6, 0x300, 0x330))
	for _, end := range []struct {
		name string
		msgs [][]byte
	}{
		{"commit frame", [][]byte{xlogData(commitFrame(5, 0x200, 0x230)), next}},
		{"next transaction", [][]byte{next}},
		{"keepalive", [][]byte{keepalive(0x230), next}},
	} {
		t.Run(end.name, func(t *testing.T) {
			ctx := context.Background()
			msgs := append(append([][]byte(nil), tail...), end.msgs...)

			// not skipped: a Stall, and the session ends at the broken message
			asked := 0
			d := New(Config{Skip: func(_ context.Context, xid uint32) (bool, error) {
				asked++
				if xid != 5 {
					t.Errorf("asked to skip xid %d", xid)
				}
				return false, nil
			}})
			out := make(chan Event, 10)
			s := &stream{d: d, out: out, nextStatus: time.Now().Add(time.Hour)}
			var err error
			for _, m := range msgs {
				if err = s.handle(ctx, m); err != nil {
					break
				}
			}
			if !errors.As(err, new(*protocolError)) || asked != 1 {
				t.Fatalf("err %v, asked %d times", err, asked)
			}
			got := drain(out)
			if st, ok := got[len(got)-1].(Stall); len(got) != 1 || !ok || st.Xid != 5 || st.EndLSN != 0x230 || st.LSN != 0x10 || st.Err == nil {
				t.Fatalf("events %+v, want one Stall of xid 5", got)
			}

			// skipped
			d.cfg.Skip = func(context.Context, uint32) (bool, error) { return true, nil }
			s = &stream{d: d, out: out, nextStatus: time.Now().Add(time.Hour)}
			for i, m := range msgs {
				if err := s.handle(ctx, m); err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
			}
			got = drain(out)
			if len(got) != 2 {
				t.Fatalf("events %+v, want the skipped transaction and the next", got)
			}
			sk, ok := got[0].(*Transaction)
			if !ok || sk.Xid != 5 || sk.EndLSN != 0x230 || sk.Skipped == nil || len(sk.Items) != 2 {
				t.Fatalf("event 0: %+v", got[0])
			}
			if p, ok := sk.Items[0].(*Produced); !ok || string(p.Value) != "a" {
				t.Fatalf("skipped item 0: %+v", sk.Items[0])
			}
			if u, ok := sk.Items[1].(*Unreadable); !ok || !u.Whole || !bytes.Equal(u.Content, broken) {
				t.Fatalf("skipped item 1: %+v", sk.Items[1])
			}
			if nx, ok := got[1].(*Transaction); !ok || nx.Xid != 6 || nx.Skipped != nil || len(nx.Items) != 1 {
				t.Fatalf("event 1: %+v", got[1])
			}
		})
	}
}

// A frame that does not fit the transaction being assembled (a begin while
// another is open: that one's commit never came) stalls on the open one;
// skipping it goes on with the frame that did not fit.
func TestStreamSkipOpenTransaction(t *testing.T) {
	ctx := context.Background()
	out := make(chan Event, 10)
	d := New(Config{Skip: func(_ context.Context, xid uint32) (bool, error) { return xid == 5, nil }})
	s := &stream{d: d, out: out, nextStatus: time.Now().Add(time.Hour)}
	for i, m := range [][]byte{
		xlogData(beginFrame(5, 0x200, 0x230), messageFrame(5, 0x230, 0x1f0, "a")),
		xlogData(beginFrame(6, 0x300, 0x330), messageFrame(6, 0x330, 0x2f0, "c"), commitFrame(6, 0x300, 0x330)),
	} {
		if err := s.handle(ctx, m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	got := drain(out)
	if len(got) != 2 {
		t.Fatalf("events %+v", got)
	}
	if sk, ok := got[0].(*Transaction); !ok || sk.Xid != 5 || sk.Skipped == nil || len(sk.Items) != 1 {
		t.Fatalf("event 0: %+v", got[0])
	}
	if nx, ok := got[1].(*Transaction); !ok || nx.Xid != 6 || nx.Skipped != nil || len(nx.Items) != 1 {
		t.Fatalf("event 1: %+v", got[1])
	}
}
