package listen

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/retry"
)

// fakeServer hands out sessions whose notifications and failures the test
// drives, and records what they were asked.
type fakeServer struct {
	mu       sync.Mutex
	dials    int
	dialErrs []error // returned by the first dials
	listened []string
	open     int
	sessions chan *fakeSession
}

type fakeSession struct {
	srv    *fakeServer
	notify chan error // nil: a notification; else the connection fails
}

func (f *fakeServer) dial(context.Context) (session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials++
	if len(f.dialErrs) > 0 {
		err := f.dialErrs[0]
		f.dialErrs = f.dialErrs[1:]
		return nil, err
	}
	f.open++
	s := &fakeSession{srv: f, notify: make(chan error)}
	f.sessions <- s
	return s, nil
}

func (s *fakeSession) Exec(_ context.Context, sql string) error {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	s.srv.listened = append(s.srv.listened, sql)
	return nil
}

func (s *fakeSession) WaitForNotification(ctx context.Context) error {
	select {
	case err := <-s.notify:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *fakeSession) Close() {
	s.srv.mu.Lock()
	defer s.srv.mu.Unlock()
	s.srv.open--
}

// start runs run against srv until the returned stop, which waits for it.
func start(cfg Config, srv *fakeServer, changed func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, cfg, srv.dial, changed)
	}()
	return func() {
		cancel()
		<-done
	}
}

// Reloads after connecting and after every notification; a lost
// connection is reconnected (then reloaded again); the end of ctx ends it
// all with no connection left open.
func TestRunReloadsAndReconnects(t *testing.T) {
	srv := &fakeServer{sessions: make(chan *fakeSession, 4), dialErrs: []error{errors.New("connection refused"), errors.New("connection refused")}}
	var logs bytes.Buffer
	var waits []time.Duration
	cfg := Config{
		Channel: "kafgres_topics",
		Log:     slog.New(slog.NewTextHandler(&logs, nil)),
		Retry: retry.Policy{Min: time.Second, Max: time.Second, Wait: func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			return ctx.Err()
		}},
	}
	reloads := make(chan struct{}, 10)
	failReload := true
	changed := func(context.Context) error {
		reloads <- struct{}{}
		if failReload {
			failReload = false
			return errors.New("load topics: broken")
		}
		return nil
	}
	stop := start(cfg, srv, changed)

	<-srv.sessions // the session whose first reload fails
	<-reloads
	s := <-srv.sessions // reconnected
	<-reloads
	s.notify <- nil
	<-reloads
	s.notify <- errors.New("unexpected EOF")
	s = <-srv.sessions
	<-reloads // the full reload after reconnecting
	stop()

	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.open != 0 {
		t.Fatalf("%d connections left open", srv.open)
	}
	if srv.dials != 5 || len(srv.listened) != 3 || srv.listened[0] != "LISTEN kafgres_topics" {
		t.Fatalf("dials %d, listened %q", srv.dials, srv.listened)
	}
	if len(waits) != 4 {
		t.Fatalf("waits %v", waits)
	}
	out := logs.String()
	if strings.Count(out, "connection refused") != 1 || strings.Count(out, "load topics: broken") != 1 ||
		strings.Count(out, "notifications lost; reconnecting") != 1 {
		t.Fatalf("log:\n%s", out)
	}
}

// A reload that fails after a notification is logged; the session stays.
func TestRunNotificationReloadError(t *testing.T) {
	srv := &fakeServer{sessions: make(chan *fakeSession, 1)}
	var logs bytes.Buffer
	cfg := Config{Channel: "kafgres_mappings", Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Retry: retry.Policy{Min: time.Second, Max: time.Second}}
	calls := make(chan int, 10)
	n := 0
	changed := func(context.Context) error {
		n++
		calls <- n
		if n == 2 {
			return errors.New("broken")
		}
		return nil
	}
	stop := start(cfg, srv, changed)
	s := <-srv.sessions
	<-calls
	s.notify <- nil
	<-calls
	s.notify <- nil
	<-calls
	stop()
	if srv.dials != 1 || !strings.Contains(logs.String(), "reload after a notification") {
		t.Fatalf("dials %d, log:\n%s", srv.dials, logs.String())
	}
}

// A storm of notifications is coalesced: a burst of reloads at once, then
// a few a second, each after the notifications before it, not one per
// notification.
func TestRunCoalescesNotifications(t *testing.T) {
	srv := &fakeServer{sessions: make(chan *fakeSession, 1)}
	cfg := Config{Channel: "kafgres_topics", Log: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)),
		Retry: retry.Policy{Min: time.Second, Max: time.Second}}
	var mu sync.Mutex
	reloads := 0
	changed := func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		reloads++
		return nil
	}
	stop := start(cfg, srv, changed)
	s := <-srv.sessions
	const storm = 2000
	start := time.Now()
	for range storm {
		s.notify <- nil
	}
	took := time.Since(start)
	// the last notification is reloaded for
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := reloads
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reloads after the storm", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * minReload)
	stop()
	// the connecting reload, the burst, then at most one per minReload
	// while the storm lasted, and one after it
	if most := 1 + reloadBurst + int(took/minReload) + 1; reloads > most {
		t.Fatalf("%d notifications in %v made %d reloads; want at most %d", storm, took, reloads, most)
	}
	if srv.open != 0 {
		t.Fatalf("%d connections left open", srv.open)
	}
}
