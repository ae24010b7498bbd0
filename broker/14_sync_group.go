package broker

// SyncGroup: v0-5
//
// Behavior:
//   - the leader's request carries the assignments and makes the group
//     Stable; every member's request is answered with its own assignment
//     (empty if the leader gave it none) once the leader's has arrived
//   - a follower's request waits for the leader's without blocking
//     anything but its own connection
//   - REBALANCE_IN_PROGRESS while members are (re)joining or when a new
//     rebalance starts before the leader synced; UNKNOWN_MEMBER_ID,
//     FENCED_INSTANCE_ID, ILLEGAL_GENERATION as Heartbeat;
//     INCONSISTENT_GROUP_PROTOCOL for a protocol type or name (v5) that is
//     not the group's
//   - READ on the group (the dispatcher, apis.go), else
//     GROUP_AUTHORIZATION_FAILED with an empty assignment; v5+ without
//     protocol type or name is INCONSISTENT_GROUP_PROTOCOL before that
//     check, as Kafka's areMandatoryProtocolTypeAndNamePresent
//
// Version notes:
//   - v1: throttle; v3: group instance id; v4: flexible; v5: protocol type
//     and name in request and response (KIP-559)

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator"
)

func handleSyncGroup(ctx context.Context, b *Broker, _ *conn, req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	sr := coordinator.SyncRequest{
		Group:       req.Group,
		MemberID:    req.MemberID,
		Generation:  req.Generation,
		Assignments: make(map[string][]byte, len(req.GroupAssignment)),
	}
	if req.Version >= 3 {
		sr.InstanceID = req.InstanceID
	}
	if req.Version >= 5 {
		sr.ProtocolType, sr.Protocol = req.ProtocolType, req.Protocol
	}
	for _, a := range req.GroupAssignment {
		// Copied: request bytes alias the connection's reused frame buffer.
		sr.Assignments[a.MemberID] = bytes.Clone(a.MemberAssignment)
	}
	res, err := b.groups.Sync(ctx, sr)
	if err != nil {
		return nil, err // the connection or the broker is closing
	}
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = codeOf(res.Err)
	resp.MemberAssignment = res.Assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	if req.Version >= 5 {
		resp.ProtocolType, resp.Protocol = res.ProtocolType, res.Protocol
	}
	return resp, nil
}

// deniedSyncGroup: the error code and an empty assignment.
func deniedSyncGroup(r kmsg.Request, code int16, _ *string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode, resp.MemberAssignment = code, []byte{}
	return resp
}

// syncGroupProtocolMissing: v5+ must carry the protocol type and name;
// Kafka answers INCONSISTENT_GROUP_PROTOCOL before authorizing.
func syncGroupProtocolMissing(r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.SyncGroupRequest)
	if req.Version < 5 || req.ProtocolType != nil && req.Protocol != nil {
		return nil
	}
	return deniedSyncGroup(req, kerr.InconsistentGroupProtocol.Code, nil)
}

func syncGroupID(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).Group }
