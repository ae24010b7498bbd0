package coordinator

import (
	"slices"
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when a test advances it. Due timers
// run in the advancing goroutine, in deadline order, so when Advance
// returns every callback has run and every answer it sent is in its
// channel: tests step through timeouts without sleeping.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Duration // since the clock was made
	made   uint64        // timers made so far; orders timers due together
	timers []*fakeTimer  // pending
}

type fakeTimer struct {
	c   *fakeClock
	at  time.Duration
	seq uint64
	f   func()
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.made++
	t := &fakeTimer{c: c, at: c.now + max(d, 0), seq: c.made, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.drop(t)
}

// drop removes t from the pending timers; false if it was not pending.
func (c *fakeClock) drop(t *fakeTimer) bool {
	n := len(c.timers)
	c.timers = slices.DeleteFunc(c.timers, func(o *fakeTimer) bool { return o == t })
	return len(c.timers) < n
}

// Advance moves the clock d forward, running the timers that come due on
// the way, including those the callbacks set.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now + d
	for {
		var next *fakeTimer
		for _, t := range c.timers {
			if t.at <= end && (next == nil || t.at < next.at || t.at == next.at && t.seq < next.seq) {
				next = t
			}
		}
		if next == nil {
			break
		}
		c.drop(next)
		c.now = next.at
		c.mu.Unlock()
		next.f() // takes a group's lock: not under c.mu
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// Now is how far the clock has been advanced.
func (c *fakeClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
