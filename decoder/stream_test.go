package decoder

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// xlogData wraps a frame the way the walsender does ('w' message).
func xlogData(frame []byte) []byte {
	b := []byte{'w'}
	b = binary.BigEndian.AppendUint64(b, 0x10) // WAL start
	b = binary.BigEndian.AppendUint64(b, 0x20) // server WAL end
	b = binary.BigEndian.AppendUint64(b, 0)    // server time
	return append(b, frame...)
}

// keepalive is a 'k' message that does not ask for a reply.
func keepalive(walEnd LSN) []byte {
	b := []byte{'k'}
	b = binary.BigEndian.AppendUint64(b, uint64(walEnd))
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, 0)
}

func TestStreamHandle(t *testing.T) {
	out := make(chan Event, 10)
	// No connection: nothing here may send a status update, so the next
	// one is not due for a long time.
	s := &stream{d: New(Config{}), out: out, nextStatus: time.Now().Add(time.Hour)}
	ctx := context.Background()
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
	}
	var got []any
	for len(out) > 0 {
		got = append(got, <-out)
	}
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
		{"garbage frame", xlogData([]byte{1, 'Z', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), 'Z'},
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
