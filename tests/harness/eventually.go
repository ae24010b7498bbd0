package harness

// Most of what the tests check happens asynchronously: a broker restarts,
// a status is written in batches, a group settles, a log line appears.
// They wait for it by polling the condition, never by sleeping a guessed
// time, and these are the one polling loop they share.

import (
	"fmt"
	"testing"
	"time"
)

// The first retry comes quickly, for conditions that are nearly true
// already; later ones back off so a slow condition costs few queries.
const (
	pollFirst = 10 * time.Millisecond
	pollMax   = 250 * time.Millisecond
)

// Eventually calls cond until it returns nil, and fails the test with
// cond's last error if that has not happened within timeout. cond runs on
// the test's goroutine, so it may fail the test itself (t.Fatal) on an
// error that retrying cannot fix.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// Poll is Eventually for callers that must not fail the test where they
// run (a goroutine other than the test's, a function that returns errors)
// or that add to the failure message: it returns nil once cond does, or
// cond's last error once timeout has passed. cond is tried one last time
// at the deadline.
func Poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	wait := pollFirst
	for {
		err := cond()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		time.Sleep(min(wait, left))
		wait = min(2*wait, pollMax)
	}
}
