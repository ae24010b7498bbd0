package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// fakeTime records the waits Run asks for and advances a clock by them,
// so no test sleeps.
type fakeTime struct {
	now   time.Time
	waits []time.Duration
}

func (f *fakeTime) wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.waits = append(f.waits, d)
	f.now = f.now.Add(d)
	return nil
}

func (f *fakeTime) policy(lo, hi, repeat time.Duration) Policy {
	return Policy{Min: lo, Max: hi, Repeat: repeat, Wait: f.wait, Now: func() time.Time { return f.now }}
}

// step is one scripted attempt's outcome.
type step struct {
	progress bool
	err      error
}

func script(steps ...step) func(context.Context) (bool, error) {
	i := 0
	return func(context.Context) (bool, error) {
		s := steps[i]
		i++
		return s.progress, s.err
	}
}

func TestBackoffDoublesToMaxAndResets(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 500 * time.Millisecond}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	b.Reset()
	got = append(got, b.Next())
	ms := time.Millisecond
	if want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 500 * ms, 500 * ms, 100 * ms}; !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}

// Progress resets the wait and makes the next failure news; a cause seen
// in the same episode is held back and counted.
func TestRunBacksOffAndLogsNews(t *testing.T) {
	ft := &fakeTime{now: time.Unix(0, 0)}
	down, refused := errors.New("connection refused"), errors.New("starting up")
	var fails []Failure
	err := Run(context.Background(), ft.policy(time.Second, 4*time.Second, 0), script(
		step{false, down}, step{false, down}, step{false, refused}, step{false, down},
		step{true, down}, step{false, down},
		step{false, nil},
	), func(f Failure) { fails = append(fails, f) })
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	if want := []time.Duration{s, 2 * s, 4 * s, 4 * s, s, 2 * s}; !slices.Equal(ft.waits, want) {
		t.Fatalf("waits %v, want %v", ft.waits, want)
	}
	var logged []string
	for _, f := range fails {
		if f.Log {
			logged = append(logged, fmt.Sprintf("%d %v lost=%v held=%d", f.Attempt, f.Err, f.Lost, f.Held))
		}
	}
	want := []string{
		"1 connection refused lost=false held=0",
		"3 starting up lost=false held=1",
		"1 connection refused lost=true held=1",
	}
	if !slices.Equal(logged, want) {
		t.Fatalf("logged %q, want %q", logged, want)
	}
}

// With Repeat, progress does not make a cause news again; time does.
func TestRunRepeat(t *testing.T) {
	ft := &fakeTime{now: time.Unix(0, 0)}
	emfile := errors.New("too many open files")
	var logged []int
	n := 0
	err := Run(context.Background(), ft.policy(time.Second, time.Second, 10*time.Second), func(context.Context) (bool, error) {
		n++
		if n > 25 {
			return false, nil
		}
		return true, emfile // a success between every two failures
	}, func(f Failure) {
		if f.Log {
			logged = append(logged, f.Held)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Failures at 0 s, 1 s, ... 24 s: logged at 0, 10 and 20 s.
	if want := []int{0, 9, 9}; !slices.Equal(logged, want) {
		t.Fatalf("logged with held %v, want %v", logged, want)
	}
}

func TestRunPermanent(t *testing.T) {
	ft := &fakeTime{}
	bad := errors.New("listener closed")
	err := Run(context.Background(), ft.policy(time.Second, time.Second, 0),
		script(step{false, errors.New("transient")}, step{true, Permanent(fmt.Errorf("accept: %w", bad))}), nil)
	if !errors.Is(err, bad) || errors.As(err, new(*permanent)) {
		t.Fatalf("err %v", err)
	}
	if len(ft.waits) != 1 {
		t.Fatalf("waits %v", ft.waits)
	}
}

// A context that ends stops the loop, both during an attempt and during
// a wait, with the context's error.
func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := Run(ctx, Policy{Min: time.Hour, Max: time.Hour}, func(ctx context.Context) (bool, error) {
		cancel()
		<-ctx.Done()
		return false, Permanent(ctx.Err())
	}, func(Failure) { t.Error("a failure after the context ended") })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, Policy{Min: time.Hour, Max: time.Hour}, script(step{false, errors.New("down")}),
			func(Failure) { cancel() })
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept waiting an hour after its context ended")
	}
}

// The gate remembers a bounded number of causes.
func TestGateBounded(t *testing.T) {
	var g gate
	for i := range 100 {
		if log, _ := g.note(fmt.Sprint("cause ", i), time.Time{}, 0); !log {
			t.Fatalf("new cause %d held back", i)
		}
	}
	if len(g.logged) > maxCauses {
		t.Fatalf("%d causes remembered", len(g.logged))
	}
}
