package coordinator

import "time"

// Clock is the time source of the coordinator's timers. Session expiry,
// rebalance timeouts and the initial rebalance delay are all timers, so a
// fake Clock lets tests step through them without waiting.
type Clock interface {
	// AfterFunc calls f in its own goroutine once d has passed, as
	// time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; false if it has, or
	// the timer was already stopped.
	Stop() bool
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// timer is a rescheduleable callback run under a group's lock. Stopping
// or rescheduling changes its token, so a callback that already fired and
// waits for the lock sees it lost and does nothing.
type timer struct {
	t     Timer
	token uint64
}

func (t *timer) stop() {
	t.token++
	if t.t != nil {
		t.t.Stop()
		t.t = nil
	}
}
