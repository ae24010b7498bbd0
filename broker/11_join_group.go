package broker

// JoinGroup: v0-9
//
// Behavior:
//   - the classic group protocol of Kafka's group coordinator (groups.go):
//     the first member creates the group; a new group waits
//     group.initial.rebalance.delay.ms (3 s) for more members; the request
//     is answered when the join phase completes, the leader's answer
//     carrying every member's metadata for the selected protocol
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
)

func handleJoinGroup(ctx context.Context, b *Broker, cc *conn, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	jr := joinRequest{
		group:                req.Group,
		memberID:             req.MemberID,
		clientID:             cc.clientID,
		clientHost:           clientHost(cc),
		protocolType:         req.ProtocolType,
		sessionTimeout:       time.Duration(req.SessionTimeoutMillis) * time.Millisecond,
		rebalanceTimeout:     time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond,
		requireKnownMemberID: req.Version >= 4,
		reason:               "not provided",
	}
	if req.Version == 0 {
		jr.rebalanceTimeout = jr.sessionTimeout
	}
	if req.Version >= 5 {
		jr.instanceID = req.InstanceID
	}
	if req.Version >= 8 && req.Reason != nil {
		jr.reason = *req.Reason
	}
	for _, p := range req.Protocols {
		// Copied: request bytes alias the connection's reused frame buffer.
		jr.protocols = append(jr.protocols, protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)})
	}
	res, err := b.groups.join(ctx, jr)
	if err != nil {
		return nil, err // the connection or the broker is closing
	}
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = codeOf(res.err)
	resp.Generation = res.generation
	resp.MemberID = res.memberID
	resp.LeaderID = res.leader
	resp.Protocol = res.protocol
	if req.Version >= 7 {
		resp.ProtocolType = res.protocolType
	}
	if req.Version >= 9 {
		resp.SkipAssignment = res.skipAssignment
	}
	for _, m := range res.members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.memberID, m.metadata
		if req.Version >= 5 {
			rm.InstanceID = m.instanceID
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
