package broker

// ConsumerGroupHeartbeat: v0-1
//
// Behavior:
//   - the consumer group protocol (KIP-848): joining (member epoch 0),
//     heartbeating, leaving (-1; static members -2) and the server-side
//     assignment (coordinator/consumer_groups.go): revoke-before-assign
//     reconciliation, assignors "uniform" (default) and "range", heartbeat
//     interval 5 s, session timeout 45 s
//   - requests are validated as Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid:
//     INVALID_REQUEST for an empty group id, instance id, rack id or (v1+,
//     or not joining) member id, a first heartbeat without rebalance
//     timeout, with owned partitions or without subscription, an epoch
//     below -2, an epoch -2 without instance id; INVALID_REGULAR_EXPRESSION
//     for a regex RE2 rejects; UNSUPPORTED_ASSIGNOR for unknown assignors
//   - GROUP_ID_NOT_FOUND for an unknown group when not joining, and for a
//     classic group with members; an Empty classic group becomes a
//     consumer group (its offsets stay)
//   - UNSUPPORTED_VERSION while group.version is finalized at 0
//     (UpdateFeatures), as Kafka answers when the protocol is disabled
//
//   - READ on the group (the dispatcher, apis.go): GROUP_AUTHORIZATION_FAILED;
//     then DESCRIBE on every subscribed topic name, before the request's
//     validation as in Kafka: one denied makes the whole answer
//     TOPIC_AUTHORIZATION_FAILED without a message, existence unchecked;
//     the topics a regex matches are filtered to those the member's
//     principal may DESCRIBE, silently (Kafka filters with the principal
//     of the heartbeat that refreshed the group's regexes; here each
//     member's own, kept from its latest heartbeat)
//
// Version notes:
//   - v1: SubscribedTopicRegex; the client generates the member id

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator"
)

func handleConsumerGroupHeartbeat(_ context.Context, b *Broker, cc *conn, req *kmsg.ConsumerGroupHeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	hreq := coordinator.ConsumerHeartbeatRequest{ConsumerGroupHeartbeatRequest: req, ClientID: cc.clientID, ClientHost: clientHost(cc)}
	if b.features.level("group.version") < 1 { // disabled with UpdateFeatures
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	if len(req.SubscribedTopicNames) > 0 {
		for _, ok := range b.allowedNames(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, req.SubscribedTopicNames) {
			if !ok {
				resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				return resp, nil
			}
		}
	}
	if b.authz.current() != nil {
		hreq.MayDescribe = func(topic string) bool {
			return b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
		}
	}
	if err, msg := validateConsumerHeartbeat(req); err != nil {
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp, nil
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		re, err := coordinator.CompileSubscription(*req.SubscribedTopicRegex)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			resp.ErrorMessage = kmsg.StringPtr("SubscribedTopicRegex is not a valid regular expression: " + err.Error())
			return resp, nil
		}
		hreq.Regex = re
	}
	if req.MemberEpoch == coordinator.JoinEpoch && req.MemberID == "" {
		// v0: the coordinator names new members.
		req.MemberID = coordinator.NewMemberID(cc.clientID, req.InstanceID)
	}
	b.groups.ConsumerHeartbeat(hreq, resp)
	return resp, nil
}

// validateConsumerHeartbeat is Kafka's request validation, before the
// group is looked at.
func validateConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (*kerr.Error, string) {
	empty := func(s *string) bool { return s != nil && *s == "" }
	switch {
	case req.Group == "":
		return kerr.InvalidRequest, "GroupId can't be empty."
	case empty(req.InstanceID):
		return kerr.InvalidRequest, "InstanceId can't be empty."
	case empty(req.RackID):
		return kerr.InvalidRequest, "RackId can't be empty."
	case req.ServerAssignor != nil && !coordinator.IsServerAssignor(*req.ServerAssignor):
		return kerr.UnsupportedAssignor, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %s.", *req.ServerAssignor, strings.Join(coordinator.ServerAssignors(), ", "))
	}
	switch {
	case req.MemberEpoch == coordinator.JoinEpoch:
		if req.Version >= 1 && req.MemberID == "" {
			return kerr.InvalidRequest, "MemberId can't be empty."
		}
		if req.RebalanceTimeoutMillis == -1 {
			return kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining."
		}
		names := len(req.SubscribedTopicNames) > 0
		regex := req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != ""
		if !names && !regex {
			return kerr.InvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	case req.MemberEpoch == coordinator.StaticLeaveEpoch:
		if req.MemberID == "" {
			return kerr.InvalidRequest, "MemberId can't be empty."
		}
		if req.InstanceID == nil {
			return kerr.InvalidRequest, "InstanceId can't be null."
		}
	case req.MemberEpoch < coordinator.StaticLeaveEpoch:
		return kerr.InvalidRequest, "MemberEpoch is invalid."
	case req.MemberID == "":
		return kerr.InvalidRequest, "MemberId can't be empty."
	}
	return nil, ""
}

// deniedConsumerGroupHeartbeat: the error code, no message.
func deniedConsumerGroupHeartbeat(r kmsg.Request, code int16, _ *string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code
	return resp
}

func consumerGroupHeartbeatGroupID(r kmsg.Request) string {
	return r.(*kmsg.ConsumerGroupHeartbeatRequest).Group
}
