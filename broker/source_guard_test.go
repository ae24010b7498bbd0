package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/broker/storage"
)

// guardBroker is sourcedBroker with a data directory and a metadata store
// for the source guard, its partition at source position applied and the
// WAL insert position at wal.
func guardBroker(t *testing.T, applied, wal uint64) (*Broker, *partition, *metadata.Memory) {
	t.Helper()
	b, p := sourcedBroker(t)
	data, err := storage.Open(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	mem := metadata.NewMemory()
	b.data, b.meta, b.sourceGuardPoll = data, mem, 5*time.Millisecond
	if _, err := b.AppendSourced("t", 0, sourcedBatch(applied), false); err != nil {
		t.Fatal(err)
	}
	mem.SetWALInsertLSN(wal)
	return b, p, mem
}

// startGuard runs GuardSource in the background until the end of the
// test and waits for the refusal it reports; done gets what GuardSource
// returns.
func startGuard(t *testing.T, b *Broker, mem *metadata.Memory) (metadata.SourceGuard, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- b.GuardSource(ctx) }()
	for {
		if g, ok := mem.SourceGuard(); ok {
			return g, done
		}
		select {
		case err := <-done:
			t.Fatalf("GuardSource returned %v for a log ahead of the WAL", err)
		case <-ctx.Done():
			t.Fatal("no refusal reported")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestSourceGuardNothingAhead: a log at or below the WAL passes at once,
// and a refusal left in SQL by an earlier run is cleared.
func TestSourceGuardNothingAhead(t *testing.T) {
	b, _, mem := guardBroker(t, 500, 500)
	if err := mem.ReportSourceGuard(context.Background(), metadata.SourceGuard{WAL: 1, Log: 2, Partitions: "stale"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.GuardSource(ctx); err != nil {
		t.Fatalf("GuardSource = %v, want nil for a log at the WAL position", err)
	}
	if g, ok := mem.SourceGuard(); ok {
		t.Fatalf("stale refusal %+v left in SQL", g)
	}
}

// TestSourceGuardRefusesUntilRebased: a log ahead of the WAL holds the
// source back, with the refusal in SQL naming the partition and both
// positions; the refusal is latched, so a WAL that grows past the log does
// not lift it; the operator's confirmation makes the partition forget its
// positions, and lower sources append again.
func TestSourceGuardRefusesUntilRebased(t *testing.T) {
	b, p, mem := guardBroker(t, 0x1000, 0x500)
	g, done := startGuard(t, b, mem)
	want := metadata.SourceGuard{WAL: 0x500, Log: 0x1000, Partitions: "t-0 at 0/1000"}
	if g != want {
		t.Fatalf("refusal %+v, want %+v", g, want)
	}
	if wal, ok, err := b.data.SourceGuard(); err != nil || !ok || wal != 0x500 {
		t.Fatalf("latch = %d, %v, %v; want 0x500", wal, ok, err)
	}

	// The WAL passes the log: the transactions between would still be
	// skipped, so the refusal stands.
	mem.SetWALInsertLSN(0x2000)
	select {
	case err := <-done:
		t.Fatalf("GuardSource returned %v once the WAL passed the log", err)
	case <-time.After(50 * time.Millisecond):
	}
	if g, _ := mem.SourceGuard(); g != want {
		t.Fatalf("refusal %+v after the WAL grew, want %+v", g, want)
	}

	if err := mem.ConfirmSourceRebase(0x1000, 0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("GuardSource after the rebase = %v", err)
	}
	if got := p.log.SourceApplied(); got != 0 {
		t.Fatalf("SourceApplied after the rebase = %#x, want 0", got)
	}
	if g, ok := mem.SourceGuard(); ok {
		t.Fatalf("refusal %+v left in SQL after the rebase", g)
	}
	if _, ok, err := b.data.SourceGuard(); err != nil || ok {
		t.Fatalf("latch left after the rebase (%v)", err)
	}
	end := p.log.LogEndOffset()
	if _, err := b.AppendSourced("t", 0, sourcedBatch(0x600), false); err != nil {
		t.Fatalf("append below the forgotten position: %v", err)
	}
	if p.log.LogEndOffset() == end || p.log.SourceApplied() != 0x600 {
		t.Fatalf("append after the rebase: end %d (was %d), applied %#x", p.log.LogEndOffset(), end, p.log.SourceApplied())
	}
}

// TestSourceGuardEndsWithContext: a refusing guard returns the refusal
// when its context ends.
func TestSourceGuardEndsWithContext(t *testing.T) {
	b, _, _ := guardBroker(t, 0x1000, 0x500)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.GuardSource(ctx); !errors.Is(err, errSourceAhead) {
		t.Fatalf("GuardSource = %v, want errSourceAhead", err)
	}
}

// TestInProcessSourceGuardCommitsOpenTransaction: a source transaction a
// crash left open in a log ahead of the WAL cannot be completed by this
// WAL's replay; the rebase commits it, so read_committed consumers see
// its records and the producer does not start inside it.
func TestInProcessSourceGuardCommitsOpenTransaction(t *testing.T) {
	tb := startTestBroker(t)
	tb.sourceGuardPoll = 5 * time.Millisecond
	c := tb.dial(t)
	tb.createTopic(t, c, "sa", 1, nil)
	tb.createTopic(t, c, "sb", 1, nil)
	for _, topic := range []string{"sa", "sb"} {
		if _, err := tb.AppendSourced(topic, 0, sourcedBatch(0x1000), true); err != nil {
			t.Fatal(err)
		}
	}
	tb.meta.SetWALInsertLSN(0x500)
	g, done := startGuard(t, tb.Broker, tb.meta)
	if g.Partitions != "sa-0 at 0/1000, sb-0 at 0/1000" {
		t.Fatalf("refusal names %q", g.Partitions)
	}
	if err := tb.meta.ConfirmSourceRebase(0x1000, 0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("GuardSource after the rebase = %v", err)
	}
	if open, end := tb.SourcedTxn(); open {
		t.Fatalf("source transaction still open (up to %#x) after the rebase", end)
	}
	for _, topic := range []string{"sa", "sb"} {
		wantFetch(t, topic+" read_committed after the rebase", tb.fetchTxn(c, topic, 0, 1), 6, 6, []int64{0, 5}, []int64{5})
		if got, err := tb.SourceApplied(topic, 0); err != nil || got != 0 {
			t.Fatalf("%s SourceApplied after the rebase = %#x, %v; want 0", topic, got, err)
		}
	}
}
