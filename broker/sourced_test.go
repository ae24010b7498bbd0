package broker

import (
	"bytes"
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
		ch, err := b.AppendSourced("t", 0, sourcedBatch(source))
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
	if _, err := b.AppendSourced("t", 0, sourcedBatch(200)); err != nil {
		t.Fatal(err)
	}
	ch, err := b.AppendSourced("t", 0, sourcedBatch(100)) // source going backwards
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
	if _, err := b.AppendSourced("t", 3, sourcedBatch(300)); !errors.Is(err, errUnknownTopic) {
		t.Fatalf("unknown partition: %v", err)
	}
}
