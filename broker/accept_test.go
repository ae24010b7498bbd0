package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/retry"
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

// recordedWaits is an acceptRetry whose waits are recorded, not slept.
func recordedWaits(waits *[]time.Duration) retry.Policy {
	p := acceptRetry()
	p.Wait = func(ctx context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return ctx.Err()
	}
	return p
}

// Running out of descriptors is survived: logged once per cause, counted,
// retried with backoff, and connections are served again after it.
func TestAcceptLoopBacksOff(t *testing.T) {
	emfile := acceptErr(syscall.EMFILE)
	ln := &scriptedListener{closed: make(chan struct{}), script: []error{nil, emfile, emfile, emfile, acceptErr(syscall.ENFILE), nil}}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var failures atomic.Uint64
	served := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	var waits []time.Duration
	go func() {
		done <- acceptLoop(ctx, ln, recordedWaits(&waits), log, &failures, func(nc net.Conn) { nc.Close(); served <- struct{}{} })
	}()
	<-served
	<-served
	cancel()
	ln.Close()
	if err := <-done; err != nil {
		t.Fatalf("loop ended with %v after its context", err)
	}
	if failures.Load() != 4 {
		t.Fatalf("%d failures counted, want 4", failures.Load())
	}
	ms := time.Millisecond
	if want := []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms}; !slices.Equal(waits, want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	out := logs.String()
	if strings.Count(out, "accept failed; retrying") != 2 || !strings.Contains(out, "too many open files") ||
		!strings.Contains(out, "too many open files in system") || strings.Count(out, "accepting connections again") != 1 {
		t.Fatalf("log:\n%s", out)
	}
}

// Under a descriptor shortage every freed descriptor lets one connection
// in between failures: that must not log a line per connection.
func TestAcceptLoopFlapping(t *testing.T) {
	emfile := acceptErr(syscall.EMFILE)
	var script []error
	for range 50 {
		script = append(script, emfile, nil)
	}
	ln := &scriptedListener{closed: make(chan struct{}), script: script}
	var logs bytes.Buffer
	var failures atomic.Uint64
	served := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	var waits []time.Duration
	go func() {
		done <- acceptLoop(ctx, ln, recordedWaits(&waits), slog.New(slog.NewTextHandler(&logs, nil)), &failures,
			func(nc net.Conn) { nc.Close(); served <- struct{}{} })
	}()
	for range 50 {
		<-served
	}
	cancel()
	ln.Close()
	<-done
	out := logs.String()
	if strings.Count(out, "accept failed; retrying") != 1 || strings.Count(out, "accepting connections again") != 1 {
		t.Fatalf("log:\n%s", out)
	}
	for _, w := range waits {
		if w != 5*time.Millisecond {
			t.Fatalf("backoff not reset after a success: %v", waits)
		}
	}
}

// A failure that does not go away ends the loop with an error (the broker
// exits non-zero), never silently.
func TestAcceptLoopPermanentError(t *testing.T) {
	ln := &scriptedListener{closed: make(chan struct{}), script: []error{fmt.Errorf("accept: %w", net.ErrClosed)}}
	var logs bytes.Buffer
	var failures atomic.Uint64
	err := acceptLoop(context.Background(), ln, acceptRetry(), slog.New(slog.NewTextHandler(&logs, nil)), &failures, func(net.Conn) {})
	if !errors.Is(err, net.ErrClosed) || !strings.Contains(logs.String(), "accepting connections failed") {
		t.Fatalf("err %v, log %s", err, logs.String())
	}
}
