package broker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// sourcedBroker is a broker with one topic "t" of one partition, enough
// for the producer's view of the log (no Postgres).
func sourcedBroker(t *testing.T) (*Broker, *partition) {
	t.Helper()
	b := &Broker{cfg: testConfig(), catalog: newCatalog(nil), log: slog.Default(), fatal: make(chan struct{})}
	b.mirror = newMirror(nil, time.Hour, slog.Default())
	l, err := segment.Open(segment.Options{Dir: t.TempDir(), Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	tp := &topic{name: "t"}
	p := &partition{topic: tp, index: 0, log: l, producers: producerWindow{}, watchers: map[chan struct{}]struct{}{}}
	tp.parts = []*partition{p}
	b.catalog.byName["t"] = tp
	return b, p
}

func sourcedBatch(source uint64) []segment.SourcedBatch {
	return []segment.SourcedBatch{{Batch: bytes.Clone(seedBatches()[0]), Source: source}}
}

// TestAppendSourcedDurableOnReturn: the producer's appends are made durable
// on its own goroutine: when AppendSourced returns, its channel is closed,
// the batch is durable and the high watermark covers it.
func TestAppendSourcedDurableOnReturn(t *testing.T) {
	b, p := sourcedBroker(t)
	for i, source := range []uint64{100, 200} {
		ch, err := b.AppendSourced("t", 0, sourcedBatch(source), false)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		default:
			t.Fatalf("append %d: channel open on return", i)
		}
		end := p.log.LogEndOffset()
		if end != int64(5*(i+1)) || p.log.DurableEnd() != end || p.hw.Load() != end {
			t.Fatalf("append %d: end %d, durable %d, high watermark %d", i, end, p.log.DurableEnd(), p.hw.Load())
		}
	}
	if _, ok := b.mirror.dirty[p]; !ok {
		t.Fatal("the mirror was not told the partition changed")
	}
}

// TestAppendSourcedFailureNeverAcknowledges: an append the log refuses
// stops the broker, and the channel never closes, so the producer cannot
// acknowledge the group (an error would make it retry, and the retry skip
// what the log holds).
func TestAppendSourcedFailureNeverAcknowledges(t *testing.T) {
	b, _ := sourcedBroker(t)
	if _, err := b.AppendSourced("t", 0, sourcedBatch(200), false); err != nil {
		t.Fatal(err)
	}
	ch, err := b.AppendSourced("t", 0, sourcedBatch(100), false) // source going backwards
	if err != nil {
		t.Fatalf("AppendSourced = %v; want a channel that never closes", err)
	}
	select {
	case <-b.fatal:
	default:
		t.Fatal("the broker was not stopped")
	}
	select {
	case <-ch:
		t.Fatal("a failed append was reported durable")
	case <-time.After(50 * time.Millisecond):
	}
	if !errors.Is(b.fatalErr, segment.ErrSourceOrder) {
		t.Fatalf("stopped with %v", b.fatalErr)
	}
	// An unknown partition is an error the producer handles, not a stop.
	if _, err := b.AppendSourced("t", 3, sourcedBatch(300), false); !errors.Is(err, errUnknownTopic) {
		t.Fatalf("unknown partition: %v", err)
	}
}

// TestInProcessSourcedTransaction: batches the SQL producer appends in its
// transaction are withheld from read_committed consumers on every partition
// until CommitSourced; the open transaction and the source's producer id
// survive a crash, and the commit after it exposes both partitions at once.
func TestInProcessSourcedTransaction(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "sa", 1, nil)
	tb.createTopic(t, c, "sb", 1, nil)
	for _, topic := range []string{"sa", "sb"} {
		if _, err := tb.AppendSourced(topic, 0, sourcedBatch(100), true); err != nil {
			t.Fatal(err)
		}
	}
	if open, end := tb.SourcedTxn(); !open || end != 100 {
		t.Fatalf("SourcedTxn = %v, %d; want open up to 100", open, end)
	}
	for _, topic := range []string{"sa", "sb"} {
		wantFetch(t, topic+" read_committed before the commit", tb.fetchTxn(c, topic, 0, 1), 5, 0, nil, nil)
		wantFetch(t, topic+" read_uncommitted before the commit", tb.fetchTxn(c, topic, 0, 0), 5, 0, []int64{0}, nil)
	}
	pid := tb.knownSourceProducer()
	if ap, ok := tb.describeProducers(c, "sa")[pid]; !ok || ap.CurrentTxnStartOffset != 0 || ap.LastSequence != 4 {
		t.Fatalf("source producer %d on sa: %+v (found %v)", pid, ap, ok)
	}

	tb = tb.restartAfterCrash(t)
	c = tb.dial(t)
	if got := tb.knownSourceProducer(); got != pid {
		t.Fatalf("source producer after the restart %d, want %d", got, pid)
	}
	if open, end := tb.SourcedTxn(); !open || end != 100 {
		t.Fatalf("after the restart SourcedTxn = %v, %d; want open up to 100", open, end)
	}
	if err := tb.CommitSourced(context.Background()); err != nil {
		t.Fatal(err)
	}
	if open, _ := tb.SourcedTxn(); open {
		t.Fatal("still open after CommitSourced")
	}
	for _, topic := range []string{"sa", "sb"} {
		wantFetch(t, topic+" read_committed after the commit", tb.fetchTxn(c, topic, 0, 1), 6, 6, []int64{0, 5}, []int64{5})
	}
	if err := tb.CommitSourced(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantFetch(t, "a second commit with nothing open", tb.fetchTxn(c, "sa", 0, 1), 6, 6, []int64{0, 5}, []int64{5})

	// The next transaction continues the source's sequences.
	if _, err := tb.AppendSourced("sa", 0, sourcedBatch(200), true); err != nil {
		t.Fatal(err)
	}
	if ap := tb.describeProducers(c, "sa")[pid]; ap.CurrentTxnStartOffset != 6 || ap.LastSequence != 9 {
		t.Fatalf("second transaction: %+v, want it to start at 6 with sequences 5-9", ap)
	}
}
