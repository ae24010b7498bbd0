package broker

// InitProducerId: v0-5
//
// Behavior:
//   - without a transactional id: a new producer id from the Postgres
//     sequence kafgres.producer_id_seq (never reused, survives restarts),
//     epoch 0 — as Kafka does for idempotent producers, even when the
//     request names an existing producer id and epoch (v3+)
//   - with a transactional id: the transaction coordinator (package txn,
//     txn_coordinator.go): epoch 0 for a new id, else the next epoch,
//     fencing older producers of the id; a new producer id once the epoch
//     is exhausted; an ongoing transaction is aborted first (at a bumped
//     epoch) and CONCURRENT_TRANSACTIONS answered until it is; the
//     timeout over transaction.max.timeout.ms (or not positive):
//     INVALID_TRANSACTION_TIMEOUT; an empty id: INVALID_REQUEST. Written
//     to kafgres.transaction before the answer.
//   - v3+ producer id and epoch: both -1 or neither, else INVALID_REQUEST;
//     a producer id that is not the id's: PRODUCER_FENCED
//     (INVALID_PRODUCER_EPOCH before v4, as Kafka)
//
//   - authorization first: a transactional id needs WRITE on it
//     (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer
//     IDEMPOTENT_WRITE on the cluster or WRITE on any topic
//     (CLUSTER_AUTHORIZATION_FAILED)
//
// Version notes:
//   - v2: flexible; v3: producer id/epoch in the request; v4/v5: same shape

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator/txn"
)

func handleInitProducerID(ctx context.Context, b *Broker, cc *conn, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if !b.allowed(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionalID) {
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp, nil
		}
		var expected *txn.ProducerIDAndEpoch
		switch {
		case req.ProducerID == -1 && req.ProducerEpoch == -1:
		case req.ProducerID == -1 || req.ProducerEpoch == -1:
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		default:
			expected = &txn.ProducerIDAndEpoch{ProducerID: req.ProducerID, Epoch: req.ProducerEpoch}
		}
		id, epoch, err := b.txns.InitProducerID(ctx, *req.TransactionalID, req.TransactionTimeoutMillis, expected)
		if err != nil {
			resp.ErrorCode = fencedFor(err, req.Version < 4).Code
			return resp, nil
		}
		resp.ProducerID, resp.ProducerEpoch = id, epoch
		return resp, nil
	}
	// An idempotent producer needs IDEMPOTENT_WRITE on the cluster, or
	// WRITE on some topic (KIP-679).
	if !b.allowedCluster(cc, kmsg.ACLOperationIdempotentWrite) &&
		!b.allowedByResourceType(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	id, err := b.meta.NextProducerID(ctx)
	if err != nil {
		b.log.Error("allocate producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code // retriable: Postgres may come back
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}
