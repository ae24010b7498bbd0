package decoder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// A server that is not there is retried with a doubling wait, logged once
// for as long as the cause stays the same, and Run ends with its context.
func TestRunRetriesQuietly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // nothing listens there now: every connection is refused

	var logs bytes.Buffer
	d := New(Config{DSN: fmt.Sprintf("host=127.0.0.1 port=%d user=u dbname=d connect_timeout=5", port),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	d.wait = func(ctx context.Context, w time.Duration) error {
		if waits = append(waits, w); len(waits) == 8 {
			cancel()
		}
		return ctx.Err()
	}
	if err := d.Run(ctx, make(chan Event)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if n := strings.Count(logs.String(), "replication connection failed"); n != 1 {
		t.Fatalf("%d lines for one cause:\n%s", n, logs.String())
	}
}
