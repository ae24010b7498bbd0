package broker

// DescribeGroups: v0-6
//
// Behavior:
//   - state as Kafka names it (Empty, PreparingRebalance,
//     CompletingRebalance, Stable), protocol type, and members with client
//     id and host; the selected protocol and each member's metadata and
//     assignment only while Stable, as Kafka
//   - an unknown group is described as Dead with no members: error NONE
//     below v6, GROUP_ID_NOT_FOUND from v6 (KIP-1043); so is a consumer
//     (KIP-848) group, "not a classic group" as Kafka says (describe those
//     with ConsumerGroupDescribe)
//   - authorized operations (v3+, when asked): every group operation, as
//     Kafka without an authorizer
//
// Version notes:
//   - v1: throttle; v3: authorized operations; v4: member instance ids;
//     v5: flexible; v6: GROUP_ID_NOT_FOUND and error message

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// allGroupOperations is READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS and
// ALTER_CONFIGS: the ACL operations Kafka applies to groups.
const allGroupOperations int32 = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11

func handleDescribeGroups(_ context.Context, b *Broker, cc *conn, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	// Groups cc may not DESCRIBE come first, as in Kafka.
	var allowed []string
	for _, name := range req.Groups {
		if b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, name) {
			allowed = append(allowed, name)
			continue
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	for _, name := range allowed {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		d, ok := b.groups.Describe(name)
		rg.State = d.State
		if !ok {
			if req.Version >= 6 {
				rg.ErrorCode = kerr.GroupIDNotFound.Code
				msg := fmt.Sprintf("Group %s not found.", name)
				if b.groups.IsConsumerGroup(name) {
					msg = fmt.Sprintf("Group %s is not a classic group.", name)
				}
				rg.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		rg.ProtocolType, rg.Protocol = d.ProtocolType, d.Protocol
		if req.Version >= 3 && req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = b.authorizedOps(cc, kmsg.ACLResourceTypeGroup, name)
		}
		for _, m := range d.Members {
			rm := kmsg.NewDescribeGroupsResponseGroupMember()
			rm.MemberID, rm.ClientID, rm.ClientHost = m.MemberID, m.ClientID, m.ClientHost
			if req.Version >= 4 {
				rm.InstanceID = m.InstanceID
			}
			rm.ProtocolMetadata, rm.MemberAssignment = orEmpty(m.Metadata), orEmpty(m.Assignment)
			rg.Members = append(rg.Members, rm)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
