// Package listen keeps a Postgres connection LISTENing on a channel, for
// the caches that follow tables by NOTIFY (the broker's topic catalog, the
// CDC renderer's mapping definitions). Notifications sent while nobody
// listens are lost, so after every (re)connection the cache must be
// reloaded in full; this package does that the same way for both, and
// retries by the project's one rule (broker/retry).
package listen

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/broker/retry"
)

// Config says where to listen and how to retry.
type Config struct {
	// Conn is copied for each connection: a connection of its own, never
	// a pool's, since it carries LISTEN state.
	Conn *pgx.ConnConfig
	// Channel is the channel's name, an identifier that needs no quoting.
	Channel string
	// Retry spaces reconnections and says which failures are logged.
	Retry retry.Policy
	Log   *slog.Logger
}

// Run listens until ctx ends. It calls changed once LISTEN is in place
// after every (re)connection, and after every notification. An error of
// changed on (re)connection is retried (reconnecting, then changed again);
// one after a notification is logged and the listening goes on, since the
// next notification reloads again.
func Run(ctx context.Context, cfg Config, changed func(context.Context) error) {
	run(ctx, cfg, func(ctx context.Context) (session, error) {
		c, err := pgx.ConnectConfig(ctx, cfg.Conn.Copy())
		if err != nil {
			return nil, err
		}
		return pgxSession{c}, nil
	}, changed)
}

// session is what Run needs of a connection; tests fake it.
type session interface {
	Exec(ctx context.Context, sql string) error
	WaitForNotification(ctx context.Context) error
	Close()
}

type pgxSession struct{ c *pgx.Conn }

func (s pgxSession) Exec(ctx context.Context, sql string) error {
	_, err := s.c.Exec(ctx, sql)
	return err
}

func (s pgxSession) WaitForNotification(ctx context.Context) error {
	_, err := s.c.WaitForNotification(ctx)
	return err
}

// closeTimeout bounds saying goodbye to a server that may be gone.
const closeTimeout = 5 * time.Second

func (s pgxSession) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	s.c.Close(ctx)
}

func run(ctx context.Context, cfg Config, dial func(context.Context) (session, error), changed func(context.Context) error) {
	log := cfg.Log.With("channel", cfg.Channel)
	_ = retry.Run(ctx, cfg.Retry, func(ctx context.Context) (bool, error) {
		return once(ctx, dial, cfg.Channel, log, changed)
	}, func(f retry.Failure) {
		switch {
		case !f.Log:
		case f.Lost:
			log.Warn("notifications lost; reconnecting", "err", f.Err, "retry_in", f.Delay)
		default:
			log.Warn("cannot listen for notifications; retrying", "err", f.Err, "attempt", f.Attempt, "retry_in", f.Delay, "held_back", f.Held)
		}
	})
}

// once is one session: connect, LISTEN, changed, then changed after
// notifications until the connection fails. It made progress once the
// first changed succeeded.
//
// Any role that may log in can NOTIFY any channel, and each reload reads a
// whole cache, so notifications are coalesced (issue #42): a reader takes
// them off the connection as they come, and the reloads that follow run
// at once for a burst and then at most once per minReload, each covering
// every notification before it. A storm of thousands costs ten reloads a
// second, not one each.
func once(ctx context.Context, dial func(context.Context) (session, error), channel string, log *slog.Logger, changed func(context.Context) error) (bool, error) {
	s, err := dial(ctx)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer s.Close()
	if err := s.Exec(ctx, "LISTEN "+channel); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	if err := changed(ctx); err != nil {
		return false, fmt.Errorf("reload after connecting: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	readerDone := make(chan struct{})
	// the reader is off the connection before it is closed
	defer func() {
		cancel()
		<-readerDone
	}()
	pending := make(chan struct{}, 1) // a notification not reloaded for yet
	failed := make(chan error, 1)
	go func() {
		defer close(readerDone)
		for {
			if err := s.WaitForNotification(ctx); err != nil {
				failed <- err
				return
			}
			select {
			case pending <- struct{}{}:
			default: // one is pending already: its reload covers this one
			}
		}
	}()
	// a token bucket: a burst of reloads (a script's grants one after
	// another) runs at once, each right after its notification, as
	// clients expect to see a change at once; beyond it, a reload waits
	// for a token, and covers every notification before it
	tokens, last := float64(reloadBurst), time.Now()
	for {
		select {
		case err := <-failed:
			return true, fmt.Errorf("wait for notification: %w", err)
		case <-pending:
		}
		now := time.Now()
		tokens = min(reloadBurst, tokens+now.Sub(last).Seconds()/minReload.Seconds())
		last = now
		if tokens < 1 {
			wait := time.Duration((1 - tokens) * float64(minReload))
			select {
			case err := <-failed:
				return true, fmt.Errorf("wait for notification: %w", err)
			case <-time.After(wait):
			}
			tokens, last = 1, time.Now()
			// what came meanwhile is covered by this reload
			select {
			case <-pending:
			default:
			}
		}
		tokens--
		if err := changed(ctx); err != nil && ctx.Err() == nil {
			log.Error("reload after a notification", "err", err)
		}
	}
}

// Reloads after notifications: up to reloadBurst at once, then one per
// minReload.
const (
	reloadBurst = 20
	minReload   = 100 * time.Millisecond
)
