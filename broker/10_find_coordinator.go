package broker

// FindCoordinator: v0-6
//
// Behavior:
//   - kafgres is one broker, so it coordinates every group and every
//     transactional id: node 1 at the advertised endpoint of the listener
//     the client connected through. No group or transactional id is
//     created by asking (as in Kafka, whose coordinator for an unknown
//     transactional id is simply the leader of its partition), but the
//     first lookup of a group creates __consumer_offsets and that of a
//     transactional id __transaction_state, where Kafka creates them
//     (internal_topics.go); kafgres answers at once where Kafka answers
//     COORDINATOR_NOT_AVAILABLE until the topic is ready
//   - share-group keys (type 2) get INVALID_REQUEST: share groups are not
//     served (Kafka answers the same when its share coordinator is off);
//     unknown key types get INVALID_REQUEST, as Kafka's CoordinatorType.forId
//   - v0-3 error answers carry node -1 and an empty host, like Kafka's
//     error response
//
// Version notes:
//   - v1: key type, throttle, error message; v3: flexible;
//     v4: batched keys (KIP-699), one result per key; v6: share keys

import (
	"context"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleFindCoordinator(ctx context.Context, b *Broker, cc *conn, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	host, port := b.endpoint(cc)
	switch req.CoordinatorType {
	case 0:
		b.groupsUsed(ctx)
	case 1:
		b.transactionsUsed(ctx)
	}
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			if err := b.coordinatorKeyDenied(cc, req.CoordinatorType, key); err != nil {
				c.NodeID, c.ErrorCode = -1, err.Code
			} else if err := coordinatorKeyError(req.CoordinatorType); err != nil {
				c.NodeID, c.ErrorCode = -1, err.Code
			} else {
				c.NodeID, c.Host, c.Port = b.cfg.NodeID, host, port
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp, nil
	}
	err := b.coordinatorKeyDenied(cc, req.CoordinatorType, req.CoordinatorKey)
	if err == nil {
		err = coordinatorKeyError(req.CoordinatorType)
	}
	if err != nil {
		resp.ErrorCode, resp.NodeID = err.Code, -1
		msg := err.Message
		if err != coordinatorKeyError(req.CoordinatorType) {
			msg = apierr.DefaultMessage(err) // Kafka's prepareOldResponse: Errors.message()
		}
		resp.ErrorMessage = &msg
		return resp, nil
	}
	resp.NodeID, resp.Host, resp.Port = b.cfg.NodeID, host, port
	none := "NONE" // Kafka sends Errors.NONE.message()
	resp.ErrorMessage = &none
	return resp, nil
}

// coordinatorKeyError is nil for the key types we coordinate: 0 group,
// 1 transaction.
func coordinatorKeyError(keyType int8) *kerr.Error {
	if keyType == 0 || keyType == 1 {
		return nil
	}
	return kerr.InvalidRequest
}

// coordinatorKeyDenied is Kafka's check before a coordinator lookup:
// DESCRIBE on the group, or on the transactional id.
func (b *Broker) coordinatorKeyDenied(cc *conn, keyType int8, key string) *kerr.Error {
	switch keyType {
	case 0:
		if !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, key) {
			return kerr.GroupAuthorizationFailed
		}
	case 1:
		if !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, key) {
			return kerr.TransactionalIDAuthorizationFailed
		}
	}
	return nil
}
