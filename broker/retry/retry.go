// Package retry is the one rule by which kafgres's long-running loops
// retry what fails for a while (Postgres away or restarting, the extension
// not created yet, a LISTEN or replication session lost, descriptors
// exhausted), so that they wait, give up and log alike:
//
//   - the wait between attempts doubles from Policy.Min up to Policy.Max,
//     and starts again at Min after an attempt that made progress (a
//     session that got going), so a reconnect after hours of work is quick
//     and a server that stays down is not hammered;
//   - every wait ends the moment the context does, and the loop with it;
//   - a failure is logged when it is news, not on every attempt: a cause
//     (the error's text) is logged once, then again only after the loop
//     made progress or, with Policy.Repeat, after that much time. A server
//     down for an hour writes a line per cause, not one per retry.
//
// It imports nothing of the project: anything that retries may use it.
package retry

import (
	"context"
	"errors"
	"time"
)

// Policy says how a loop retries.
type Policy struct {
	// Min and Max bound the wait between attempts: Min after the first
	// failure, doubling up to Max.
	Min, Max time.Duration
	// Repeat is how long a cause already logged stays quiet. 0: until an
	// attempt makes progress. A loop whose attempts succeed between
	// failures (accepting under a descriptor shortage) sets it, so that
	// each success does not make the next failure news.
	Repeat time.Duration
	// Wait waits d, or until ctx ends and then returns ctx's error; nil
	// is Sleep. Tests inject one that does not sleep.
	Wait func(ctx context.Context, d time.Duration) error
	// Now is the clock Repeat is measured on; nil is time.Now.
	Now func() time.Time
}

// Failure is one failed attempt, as Run hands it to its caller's failed
// function, which logs it (when Log says so) and counts it.
type Failure struct {
	Err error
	// Attempt counts the failures since the last progress, this one
	// included.
	Attempt int
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// Lost: the attempt made progress before it failed (a working
	// session ended) rather than failing to get going.
	Lost bool
	// Log: the failure is news (see the package comment) and deserves a
	// line; otherwise it is held back.
	Log bool
	// Held is, on a failure that is logged, how many were held back
	// since the last one that was.
	Held int
}

// Permanent marks an error retrying cannot cure: Run returns it at once.
func Permanent(err error) error { return &permanent{err} }

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Run calls attempt until it returns nil (Run returns nil), an error made
// by Permanent (Run returns the error it wraps), or ctx ends (Run returns
// ctx's error, whatever error attempt returned). attempt reports whether it made
// progress before failing; it should end when its ctx ends. Every other
// failure goes to failed (which may be nil) before the wait.
func Run(ctx context.Context, p Policy, attempt func(context.Context) (progress bool, err error), failed func(Failure)) error {
	wait := p.Wait
	if wait == nil {
		wait = Sleep
	}
	now := p.Now
	if now == nil {
		now = time.Now
	}
	b := Backoff{Min: p.Min, Max: p.Max}
	var g gate
	attempts := 0
	for {
		progress, err := attempt(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var perm *permanent
		if errors.As(err, &perm) {
			return perm.err
		}
		if progress {
			b.Reset()
			attempts = 0
			if p.Repeat == 0 {
				g.forget()
			}
		}
		attempts++
		f := Failure{Err: err, Attempt: attempts, Delay: b.Next(), Lost: progress}
		f.Log, f.Held = g.note(err.Error(), now(), p.Repeat)
		if failed != nil {
			failed(f)
		}
		if err := wait(ctx, f.Delay); err != nil {
			return err
		}
	}
}

// Sleep waits d, or until ctx ends and then returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Backoff is a wait that doubles from Min up to Max with every Next and
// returns to Min on Reset. The zero value of its state is "next is Min".
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Next returns the wait before the next attempt and doubles the one after.
func (b *Backoff) Next() time.Duration {
	d := min(max(b.next, b.Min), b.Max)
	b.next = min(2*d, b.Max)
	return d
}

// Reset makes the next wait Min again.
func (b *Backoff) Reset() { b.next = 0 }

// maxCauses bounds the causes a gate remembers: error texts that vary
// (say with a port or a pid) must not grow it without end. Forgetting
// them all costs at most a line per cause.
const maxCauses = 16

// gate decides which failures are news: a cause it has not logged, or
// one logged at least repeat ago (repeat > 0).
type gate struct {
	logged map[string]time.Time
	held   int
}

func (g *gate) note(cause string, now time.Time, repeat time.Duration) (log bool, held int) {
	at, seen := g.logged[cause]
	if seen && (repeat <= 0 || now.Sub(at) < repeat) {
		g.held++
		return false, 0
	}
	if g.logged == nil || len(g.logged) >= maxCauses {
		g.logged = make(map[string]time.Time)
	}
	g.logged[cause] = now
	held, g.held = g.held, 0
	return true, held
}

// forget makes every cause news again: the loop made progress, so the
// next failure starts a new episode.
func (g *gate) forget() { clear(g.logged) }
