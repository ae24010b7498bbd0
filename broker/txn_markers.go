package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// Transaction markers: the log side of Kafka's WriteTxnMarkers. The
// transaction coordinator ends a transaction by writing a COMMIT or ABORT
// control batch into every partition it touched; an ABORT of a transaction
// that wrote to the partition also gets an entry in the segment's
// transaction index (segment/txnindex.go), which read_committed fetches
// read. The marker is durable (the committer's fsync) before the call
// returns, and read_committed fetchers see the last stable offset move when
// the high watermark passes it.

// txnMarker is one COMMIT or ABORT control record.
type txnMarker struct {
	producerID       int64
	epoch            int16 // the epoch stamped on the marker batch
	coordinatorEpoch int32
	commit           bool
}

// writeTxnMarkers appends m to every partition in parts (a control batch
// each, as Kafka's WriteTxnMarkers would) and returns once all of them are
// durable (fsynced by the committer) and published. A partition whose
// producer has a newer epoch than m.epoch is left alone (Kafka:
// PRODUCER_FENCED for that partition) and reported in the error, as is one
// whose last marker came from a newer coordinator epoch
// (TRANSACTION_COORDINATOR_FENCED); the errors wrap the *kerr.Error. It is
// safe to call twice for the same transaction (recovery after a crash): a
// second marker is harmless, as in Kafka.
//
// The transaction becomes stable (the last stable offsets move past it) on
// all the partitions at once, when the last marker is durable: unlike
// Kafka, where each partition's marker lands on its own, no read_committed
// consumer can see one partition's part of a transaction and then miss
// another's.
func (b *Broker) writeTxnMarkers(ctx context.Context, m txnMarker, parts []*partition) error {
	var (
		errs     []error
		last     *pass
		appended []*partition
		released = new(atomic.Bool)
	)
	for _, p := range parts {
		err := p.appendMarker(segment.Marker{ProducerID: m.producerID, ProducerEpoch: m.epoch, CoordinatorEpoch: m.coordinatorEpoch, Commit: m.commit}, released)
		var ke *kerr.Error
		switch {
		case err == nil:
			appended = append(appended, p)
			last = b.committer.enqueue(p)
		case errors.Is(err, segment.ErrClosed):
			errs = append(errs, fmt.Errorf("write marker to %s-%d: %w", p.topic.name, p.index, kerr.UnknownTopicOrPartition))
		case errors.As(err, &ke):
			errs = append(errs, fmt.Errorf("write marker to %s-%d: %w", p.topic.name, p.index, err))
		default:
			b.stop(err) // the log may be inconsistent; recovery will mend it
			errs = append(errs, fmt.Errorf("write marker to %s-%d: %w: %w", p.topic.name, p.index, kerr.KafkaStorageError, err))
		}
	}
	if last == nil {
		return errors.Join(errs...)
	}
	// Passes complete in order, so the last one covers every partition.
	// Then the transaction becomes stable on all of them at once, whether
	// or not the caller still waits.
	release := func() {
		released.Store(true)
		for _, p := range appended {
			p.notify()
		}
	}
	select {
	case <-last.done:
		release()
	case <-ctx.Done():
		go func() {
			<-last.done
			release()
		}()
		return fmt.Errorf("write transaction markers: %w", ctx.Err())
	}
	return errors.Join(errs...)
}

// appendMarker appends the marker m to the partition, with its transaction
// index entry for an ABORT ending a transaction that wrote here; the
// transaction stays unstable until released is set.
func (p *partition) appendMarker(m segment.Marker, released *atomic.Bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.producers.checkMarker(m); err != nil {
		return err
	}
	// Appends to the log happen under mu, so this is the marker's offset.
	offset := p.log.LogEndOffset()
	var aborted *segment.AbortedTxn
	if first, open := p.txns.open[m.ProducerID]; open && !m.Commit {
		aborted = &segment.AbortedTxn{ProducerID: m.ProducerID, FirstOffset: first, LastOffset: offset, LastStableOffset: p.abortedLSO(m.ProducerID, offset)}
	}
	now := time.Now().UnixMilli()
	if err := p.saveEpochs(); err != nil {
		return err
	}
	active := p.activeBase()
	if _, err := p.log.AppendMarker(segment.NewMarkerBatch(m, now), p.epoch, aborted); err != nil {
		return fmt.Errorf("append marker to %s-%d: %w", p.topic.name, p.index, err)
	}
	p.snapshotIfRolled(active, offset)
	p.applyMarker(m, offset, now, released)
	p.refreshUnstable()
	return nil
}
