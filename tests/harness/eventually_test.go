package harness

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestPollReturnsOnceCondHolds(t *testing.T) {
	calls := 0
	err := Poll(5*time.Second, func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestPollReportsLastError(t *testing.T) {
	errLast := errors.New("not yet")
	calls := 0
	start := time.Now()
	err := Poll(100*time.Millisecond, func() error { calls++; return errLast })
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Fatalf("Poll gave up after %v, before its timeout", took)
	}
	if !errors.Is(err, errLast) || calls < 2 {
		t.Fatalf("Poll = %v after %d calls, want the condition's error after several", err, calls)
	}
}
