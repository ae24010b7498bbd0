package broker

// EndTxn: v0-5
//
// Behavior:
//   - commits or aborts the producer's ongoing transaction: PrepareCommit
//     or PrepareAbort is written to kafgres.transaction before the answer;
//     then the markers are written to every partition of the transaction
//     and CompleteCommit/CompleteAbort recorded, the transaction's offsets
//     (TxnOffsetCommit) moving into kafgres.consumer_offset in the same
//     Postgres transaction (an abort drops them)
//   - a retry of a completed end: no error; the other outcome:
//     INVALID_TXN_STATE, as is ending with nothing ongoing; ending while
//     the previous end is still writing its markers:
//     CONCURRENT_TRANSACTIONS; the wrong producer id:
//     INVALID_PRODUCER_ID_MAPPING; an old epoch: PRODUCER_FENCED
//     (INVALID_PRODUCER_EPOCH before v2)
//   - v5 (transaction version 2, KIP-890 part 2): the epoch is bumped by
//     every end, and the answer carries the producer id and epoch to use
//     next (a new producer id once the epoch is exhausted); an abort with
//     nothing ongoing is allowed and bumps the epoch. An end at the epoch
//     the previous end handed out, while that one's markers are written
//     (a Java client 4.4 ending a transaction before its first record),
//     waits up to a second for them and is then answered as above, as
//     Kafka, whose markers are quicker, nearly always answers it — not
//     PRODUCER_FENCED
//   - WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
//
// Version notes:
//   - v2: PRODUCER_FENCED; v3: flexible; v4: same shape; v5: producer id
//     and epoch in the response

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleEndTxn(ctx context.Context, b *Broker, cc *conn, req *kmsg.EndTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if !b.allowed(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	v := int16(1)
	if req.Version >= 5 {
		v = 2
	}
	id, epoch, err := b.txns.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, v)
	if err != nil {
		resp.ErrorCode = fencedFor(err, req.Version < 2).Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil
}
