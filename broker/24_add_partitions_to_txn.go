package broker

// AddPartitionsToTxn: v0-5
//
// Behavior:
//   - the partitions join the producer's ongoing transaction (starting one
//     if none is), written to kafgres.transaction before the answer, as
//     Kafka writes __transaction_state; the producer's id must be the
//     transactional id's (INVALID_PRODUCER_ID_MAPPING) at its current
//     epoch (PRODUCER_FENCED; INVALID_PRODUCER_EPOCH before v2); while a
//     transaction ends: CONCURRENT_TRANSACTIONS. The coordinator's error
//     applies to every partition.
//   - a partition of an unknown topic: UNKNOWN_TOPIC_OR_PARTITION, a topic
//     the client may not WRITE: TOPIC_AUTHORIZATION_FAILED; either fails
//     the whole transaction's request, the other partitions getting
//     OPERATION_NOT_ATTEMPTED, as Kafka
//   - v0-3 (clients): WRITE on the transactional id, else every partition
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//   - v4+ (broker to broker in Kafka: a partition leader verifying or
//     adding for a produce): several transactions per request; answered to
//     any client as Kafka does: CLUSTER_ACTION on the cluster needed
//     (CLUSTER_AUTHORIZATION_FAILED, top level), topics not authorized;
//     verify-only checks each partition is in the transaction
//     (TRANSACTION_ABORTABLE if not, KIP-890 part 1); v5 adds on
//     transaction version 2 (KIP-890 part 2)
//
// Version notes:
//   - v2: PRODUCER_FENCED; v3: flexible; v4: batched transactions,
//     verify-only, top-level error; v5: transaction version 2 adds

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator/txn"
)

// txnTopicParts is one topic of an AddPartitionsToTxn transaction.
type txnTopicParts struct {
	topic string
	parts []int32
}

func handleAddPartitionsToTxn(ctx context.Context, b *Broker, cc *conn, req *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		var topics []txnTopicParts
		for _, t := range req.Topics {
			topics = append(topics, txnTopicParts{t.Topic, t.Partitions})
		}
		res := b.addPartitionsToTxn(ctx, cc, req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, topics)
		for _, rt := range res.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, rp.ErrorCode
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	if !b.allowedCluster(cc, kmsg.ACLOperationClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	for _, t := range req.Transactions {
		var topics []txnTopicParts
		for _, tt := range t.Topics {
			topics = append(topics, txnTopicParts{tt.Topic, tt.Partitions})
		}
		resp.Transactions = append(resp.Transactions,
			b.addPartitionsToTxn(ctx, cc, req.Version, t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly, topics))
	}
	return resp, nil
}

// addPartitionsToTxn answers one transaction of the request.
func (b *Broker) addPartitionsToTxn(ctx context.Context, cc *conn, version int16, id string, producerID int64, epoch int16, verifyOnly bool, topics []txnTopicParts) kmsg.AddPartitionsToTxnResponseTransaction {
	out := kmsg.NewAddPartitionsToTxnResponseTransaction()
	out.TransactionalID = id
	type slot struct {
		topic, part int
		tp          txn.Partition
	}
	var (
		slots  []slot
		failed bool
	)
	set := func(code func(s slot) int16) {
		for _, s := range slots {
			out.Topics[s.topic].Partitions[s.part].ErrorCode = code(s)
		}
	}
	clientAuthz := version < 4
	idDenied := clientAuthz && !b.allowed(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, id)
	for ti, rt := range topics {
		st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
		st.Topic = rt.topic
		t := b.catalog.lookup(ctx, rt.topic)
		writable := !clientAuthz || b.allowed(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, rt.topic)
		for _, p := range rt.parts {
			sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			sp.Partition = p
			switch {
			case idDenied:
				sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			case !writable:
				sp.ErrorCode, failed = kerr.TopicAuthorizationFailed.Code, true
			case t == nil || p < 0 || int(p) >= len(t.parts):
				sp.ErrorCode, failed = kerr.UnknownTopicOrPartition.Code, true
			default:
				slots = append(slots, slot{ti, len(st.Partitions), txn.Partition{TopicID: t.id, Partition: p}})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		out.Topics = append(out.Topics, st)
	}
	if idDenied {
		return out
	}
	if failed {
		set(func(slot) int16 { return kerr.OperationNotAttempted.Code })
		return out
	}
	parts := make([]txn.Partition, len(slots))
	for i, s := range slots {
		parts[i] = s.tp
	}
	if verifyOnly {
		res, err := b.txns.VerifyPartitions(id, producerID, epoch, parts)
		set(func(s slot) int16 {
			if err != nil {
				return err.Code
			}
			return codeOf(res[s.tp])
		})
		return out
	}
	v := int16(1)
	if version >= 5 {
		v = 2
	}
	err := fencedFor(b.txns.AddPartitions(ctx, id, producerID, epoch, parts, v), version < 2)
	set(func(slot) int16 { return codeOf(err) })
	return out
}
