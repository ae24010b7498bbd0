package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// scriptedListener returns the scripted errors from Accept (nil: a real
// connection), then blocks until closed.
type scriptedListener struct {
	script []error
	closed chan struct{}
	calls  atomic.Int32
}

func (l *scriptedListener) Accept() (net.Conn, error) {
	i := int(l.calls.Add(1)) - 1
	if i < len(l.script) {
		if err := l.script[i]; err != nil {
			return nil, err
		}
		a, b := net.Pipe()
		b.Close()
		return a, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *scriptedListener) Close() error   { close(l.closed); return nil }
func (l *scriptedListener) Addr() net.Addr { return &net.TCPAddr{} }

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// Running out of descriptors is survived: logged once, counted, retried
// with backoff, and connections are served again after it.
func TestAcceptLoopBacksOff(t *testing.T) {
	emfile := acceptErr(syscall.EMFILE)
	ln := &scriptedListener{closed: make(chan struct{}), script: []error{nil, emfile, emfile, emfile, acceptErr(syscall.ENFILE), nil}}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var failures atomic.Uint64
	served := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	start := time.Now()
	go func() {
		done <- acceptLoop(ctx, ln, log, &failures, func(nc net.Conn) { nc.Close(); served <- struct{}{} })
	}()
	<-served
	<-served
	took := time.Since(start)
	cancel()
	ln.Close()
	if err := <-done; err != nil {
		t.Fatalf("loop ended with %v after its context", err)
	}
	if failures.Load() != 4 {
		t.Fatalf("%d failures counted, want 4", failures.Load())
	}
	// 5 + 10 + 20 + 40 ms of backoff.
	if took < 70*time.Millisecond {
		t.Fatalf("retried without backing off (%v)", took)
	}
	out := logs.String()
	if strings.Count(out, "accept failed; retrying") != 1 || !strings.Contains(out, "too many open files") || !strings.Contains(out, "accepting connections again") {
		t.Fatalf("log:\n%s", out)
	}
}

// A failure that does not go away ends the loop with an error (the broker
// exits non-zero), never silently.
func TestAcceptLoopPermanentError(t *testing.T) {
	ln := &scriptedListener{closed: make(chan struct{}), script: []error{fmt.Errorf("accept: %w", net.ErrClosed)}}
	var logs bytes.Buffer
	var failures atomic.Uint64
	err := acceptLoop(context.Background(), ln, slog.New(slog.NewTextHandler(&logs, nil)), &failures, func(net.Conn) {})
	if !errors.Is(err, net.ErrClosed) || !strings.Contains(logs.String(), "accepting connections failed") {
		t.Fatalf("err %v, log %s", err, logs.String())
	}
}
