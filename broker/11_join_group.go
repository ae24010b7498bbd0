package broker

// JoinGroup: v0-9
//
// Behavior:
//   - the classic group protocol of Kafka's group coordinator
//     (coordinator/groups.go): the first member creates the group; a new
//     group waits group.initial.rebalance.delay.ms (3 s) for more members;
//     the request is answered when the join phase completes, the leader's
//     answer carrying every member's metadata for the selected protocol
//   - session timeouts outside [group.min.session.timeout.ms,
//     group.max.session.timeout.ms] get INVALID_SESSION_TIMEOUT; an empty
//     group id INVALID_GROUP_ID; a member id the group does not know
//     UNKNOWN_MEMBER_ID; protocols no member shares
//     INCONSISTENT_GROUP_PROTOCOL
//   - static members (group.instance.id) rejoining under a new member id
//     replace the old one (which gets FENCED_INSTANCE_ID) and keep their
//     assignment without a rebalance when nothing changed
//   - the request waits without blocking anything but its own connection
//
// Version notes:
//   - v0: the session timeout is also the rebalance timeout; v1: rebalance
//     timeout; v2: throttle; v4: a new dynamic member first gets
//     MEMBER_ID_REQUIRED with its member id (KIP-394); v5: group instance
//     id; v6: flexible; v7: protocol type in the response, nullable
//     protocol; v8: reason; v9: skip assignment (static leader rejoin)

import (
	"bytes"
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator"
)

func handleJoinGroup(ctx context.Context, b *Broker, cc *conn, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	jr := coordinator.JoinRequest{
		Group:                req.Group,
		MemberID:             req.MemberID,
		ClientID:             cc.clientID,
		ClientHost:           clientHost(cc),
		ProtocolType:         req.ProtocolType,
		SessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		RebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		RequireKnownMemberID: req.Version >= 4,
		Reason:               "not provided",
	}
	if req.Version == 0 {
		jr.RebalanceTimeout = jr.SessionTimeout
	}
	if req.Version >= 5 {
		jr.InstanceID = req.InstanceID
	}
	if req.Version >= 8 && req.Reason != nil {
		jr.Reason = *req.Reason
	}
	for _, p := range req.Protocols {
		// Copied: request bytes alias the connection's reused frame buffer.
		jr.Protocols = append(jr.Protocols, coordinator.Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)})
	}
	res, err := b.groups.Join(ctx, jr)
	if err != nil {
		return nil, err // the connection or the broker is closing
	}
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = codeOf(res.Err)
	resp.Generation = res.Generation
	resp.MemberID = res.MemberID
	resp.LeaderID = res.Leader
	resp.Protocol = res.Protocol
	if req.Version >= 7 {
		resp.ProtocolType = res.ProtocolType
	}
	if req.Version >= 9 {
		resp.SkipAssignment = res.SkipAssignment
	}
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.MemberID, m.Metadata
		if req.Version >= 5 {
			rm.InstanceID = m.InstanceID
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// clientHost is the peer address as Kafka shows it (InetAddress.toString).
func clientHost(cc *conn) string {
	host, _, err := net.SplitHostPort(cc.nc.RemoteAddr().String())
	if err != nil {
		return "/" + cc.nc.RemoteAddr().String()
	}
	return "/" + host
}

// deniedJoinGroup is JoinGroupRequest.getErrorResponse: generation -1, no
// leader, member or members, protocol name null from v7 ("" before).
func deniedJoinGroup(r kmsg.Request, code int16, _ *string) kmsg.Response {
	req := r.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation = code, -1
	if req.Version < 7 {
		empty := ""
		resp.Protocol = &empty
	} else {
		resp.Protocol = nil
	}
	return resp
}

func joinGroupID(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).Group }
