package broker

// LeaveGroup: v0-5
//
// Behavior:
//   - removes members and rebalances the rest; a member parked in JoinGroup
//     is answered UNKNOWN_MEMBER_ID
//   - per member: UNKNOWN_MEMBER_ID if unknown, FENCED_INSTANCE_ID if its
//     instance id belongs to another member id; an instance id with an
//     empty member id removes that static member (administrative removal)
//   - an unknown group is UNKNOWN_MEMBER_ID for the whole request, as Kafka
//
// Version notes:
//   - v1: throttle; v3: batch of members with instance ids (KIP-345), the
//     top-level error is then only for group-level failures; v0-2 carry one
//     member and its error at top level; v4: flexible; v5: reason

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator"
)

func handleLeaveGroup(_ context.Context, b *Broker, _ *conn, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	var ms []coordinator.LeaveMember
	if req.Version < 3 {
		ms = []coordinator.LeaveMember{{MemberID: req.MemberID, Reason: "not provided"}}
	}
	for _, m := range req.Members {
		lm := coordinator.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID, Reason: "not provided"}
		if m.Reason != nil {
			lm.Reason = *m.Reason
		}
		ms = append(ms, lm)
	}
	top, errs := b.groups.Leave(req.Group, ms)
	resp.ErrorCode = codeOf(top)
	if req.Version < 3 {
		if top == nil && errs[0] != nil {
			resp.ErrorCode = errs[0].Code
		}
		return resp, nil
	}
	if top != nil {
		return resp, nil
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		rm.ErrorCode = codeOf(errs[i])
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// deniedLeaveGroup: the error code alone, no member results.
func deniedLeaveGroup(r kmsg.Request, code int16, _ *string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.ErrorCode = code
	return resp
}

func leaveGroupID(r kmsg.Request) string { return r.(*kmsg.LeaveGroupRequest).Group }
