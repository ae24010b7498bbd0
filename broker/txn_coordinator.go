package broker

// The transaction coordinator (package txn) wired into the broker: its
// state in Postgres (metadata.Postgres is its Store), producer ids from
// kafgres.producer_id_seq, markers through writeTxnMarkers, and the
// transaction.version feature deciding the version of what it starts.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/broker/coordinator/txn"
)

func (b *Broker) startTxnCoordinator(ctx context.Context) error {
	b.txns = txn.New(txn.Config{
		MaxTimeout:   b.cfg.TransactionMaxTimeout,
		IDExpiration: b.cfg.TransactionalIDExpiration,
		Version:      b.transactionVersion,
	}, b.meta, txnMarkerWriter{b}, b.meta, nil, b.log.With("component", "transactions"))
	if err := b.txns.Load(ctx); err != nil {
		return fmt.Errorf("load transactions: %w", err)
	}
	return nil
}

// transactionVersion is the finalized transaction.version.
func (b *Broker) transactionVersion() int16 { return b.features.level("transaction.version") }

// txnMarkerWriter adapts writeTxnMarkers to txn.Markers. Partitions of
// topics deleted since they joined the transaction get no marker.
type txnMarkerWriter struct{ b *Broker }

func (w txnMarkerWriter) WriteMarkers(ctx context.Context, m txn.Marker, parts []txn.Partition) error {
	byID := map[int64]*topic{}
	for _, t := range w.b.catalog.topics() {
		byID[t.id] = t
	}
	var ps []*partition
	for _, p := range parts {
		if t := byID[p.TopicID]; t != nil && p.Partition >= 0 && int(p.Partition) < len(t.parts) {
			ps = append(ps, t.parts[p.Partition])
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return w.b.writeTxnMarkers(ctx, txnMarker{producerID: m.ProducerID, epoch: m.Epoch, coordinatorEpoch: m.CoordinatorEpoch, commit: m.Commit}, ps)
}

// fencedFor is PRODUCER_FENCED as a request of that age understands it:
// INVALID_PRODUCER_EPOCH before KIP-588 (old is true for those versions).
func fencedFor(err *kerr.Error, old bool) *kerr.Error {
	if err == kerr.ProducerFenced && old {
		return kerr.InvalidProducerEpoch
	}
	return err
}

// txnNow is the coordinator's clock in milliseconds (ListTransactions'
// duration filter).
func (b *Broker) txnNow() int64 { return time.Now().UnixMilli() }
