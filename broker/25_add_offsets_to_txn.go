package broker

// AddOffsetsToTxn: v0-4
//
// Behavior:
//   - the group's offsets join the producer's transaction (Kafka adds the
//     group's __consumer_offsets partition): TxnOffsetCommit may then
//     commit offsets for the group, which become visible when the
//     transaction commits. Written to kafgres.transaction before the
//     answer; the coordinator's errors as AddPartitionsToTxn's
//     (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED — INVALID_PRODUCER_EPOCH
//     before v2 —, CONCURRENT_TRANSACTIONS)
//   - WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
//     then READ on the group (GROUP_AUTHORIZATION_FAILED)
//
// Version notes:
//   - v2: PRODUCER_FENCED; v3: flexible; v4: same shape (transaction
//     version 2 clients skip this request)

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleAddOffsetsToTxn(ctx context.Context, b *Broker, cc *conn, req *kmsg.AddOffsetsToTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !b.allowed(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !b.allowed(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	default:
		err := b.txns.AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, 1)
		resp.ErrorCode = codeOf(fencedFor(err, req.Version < 2))
	}
	return resp, nil
}
