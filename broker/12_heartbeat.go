package broker

// Heartbeat: v0-4
//
// Behavior:
//   - keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to
//     rejoin, UNKNOWN_MEMBER_ID that it was removed (or the group is gone,
//     e.g. after a broker restart), ILLEGAL_GENERATION that it missed a
//     generation, FENCED_INSTANCE_ID that its static instance id now
//     belongs to a newer member id
//
// Version notes:
//   - v1: throttle; v3: group instance id; v4: flexible

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleHeartbeat(_ context.Context, b *Broker, _ *conn, req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	var instanceID *string
	if req.Version >= 3 {
		instanceID = req.InstanceID
	}
	resp.ErrorCode = codeOf(b.groups.Heartbeat(req.Group, req.MemberID, instanceID, req.Generation))
	return resp, nil
}

// deniedHeartbeat: the error code alone.
func deniedHeartbeat(r kmsg.Request, code int16, _ *string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = code
	return resp
}

func heartbeatGroupID(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).Group }
