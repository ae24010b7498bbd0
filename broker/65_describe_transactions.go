package broker

// DescribeTransactions: v0
//
// Behavior:
//   - the transaction coordinator's state of each transactional id:
//     state (Kafka's names: Empty, Ongoing, PrepareCommit, ...), producer
//     id and epoch, timeout, start time of the ongoing transaction (-1
//     none) and its partitions by topic (topics since deleted left out)
//   - an unknown (or expired) id: TRANSACTIONAL_ID_NOT_FOUND; an empty
//     one: INVALID_REQUEST
//   - DESCRIBE on each transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it; topics the client may
//     not DESCRIBE are left out silently, as Kafka does

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeTransactions(_ context.Context, b *Broker, cc *conn, req *kmsg.DescribeTransactionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	names := map[int64]string{}
	for _, t := range b.catalog.topics() {
		names[t.id] = t.name
	}
	for _, id := range req.TransactionalIDs {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID = id
		s.ProducerID, s.ProducerEpoch, s.StartTimestamp = -1, -1, -1
		if !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, id) {
			s.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, s)
			continue
		}
		if id == "" {
			s.ErrorCode = kerr.InvalidRequest.Code
			resp.TransactionStates = append(resp.TransactionStates, s)
			continue
		}
		t, ok := b.txns.Describe(id)
		if !ok {
			s.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, s)
			continue
		}
		s.State, s.ProducerID, s.ProducerEpoch = t.State.String(), t.ProducerID, t.Epoch
		s.TimeoutMillis, s.StartTimestamp = t.TimeoutMs, t.StartMs
		byTopic := map[string][]int32{}
		for _, p := range t.Partitions {
			name, ok := names[p.TopicID]
			if ok && b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
				byTopic[name] = append(byTopic[name], p.Partition)
			}
		}
		topics := make([]string, 0, len(byTopic))
		for name := range byTopic {
			topics = append(topics, name)
		}
		sort.Strings(topics)
		for _, name := range topics {
			st := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			st.Topic, st.Partitions = name, byTopic[name]
			s.Topics = append(s.Topics, st)
		}
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return resp, nil
}
