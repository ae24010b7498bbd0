package broker

// ListTransactions: v0-2
//
// Behavior:
//   - every transactional id the coordinator knows, with its producer id
//     and state, filtered by state names (names Kafka does not know come
//     back in unknownStateFilters), producer ids, (v1+) duration — only
//     transactions started longer ago than it, as Kafka compares — and
//     (v2+) a regular expression the whole id must match (invalid:
//     INVALID_REQUEST)
//   - ids the client may not DESCRIBE are left out silently, as Kafka
//
// Version notes:
//   - v1: duration filter; v2: transactional id pattern

import (
	"context"
	"regexp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator/txn"
)

func handleListTransactions(_ context.Context, b *Broker, cc *conn, req *kmsg.ListTransactionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	var states []txn.State
	for _, name := range req.StateFilters {
		if s, ok := txn.ParseState(name); ok {
			states = append(states, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	// Kafka: only unknown filters means nothing can match.
	if len(req.StateFilters) > 0 && len(states) == 0 {
		return resp, nil
	}
	duration := int64(-1)
	if req.Version >= 1 {
		duration = req.DurationFilterMillis
	}
	var pattern *regexp.Regexp
	if req.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		re, err := regexp.Compile(`^(?:` + *req.TransactionalIDPattern + `)$`)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		}
		pattern = re
	}
	now := b.txnNow()
	for _, t := range b.txns.List() {
		switch {
		case len(states) > 0 && !slices.Contains(states, t.State),
			len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, t.ProducerID),
			duration >= 0 && now-t.StartMs <= duration,
			pattern != nil && !pattern.MatchString(t.ID),
			!b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, t.ID):
			continue
		}
		s := kmsg.NewListTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.TransactionState = t.ID, t.ProducerID, t.State.String()
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	return resp, nil
}
