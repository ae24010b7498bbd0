package broker

// ListGroups: v0-5
//
// Behavior:
//   - every group the coordinator knows, with its protocol type ("" for a
//     group that only committed offsets)
//   - v4+ states filter and v5+ types filter match case-insensitively, as
//     Kafka; classic groups are of type "classic", KIP-848 groups of type
//     "consumer" with protocol type "consumer" and their own states (Empty,
//     Assigning, Reconciling, Stable)
//
// Version notes:
//   - v1: throttle; v3: flexible; v4: states filter, group state;
//     v5: types filter, group type (KIP-848)

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleListGroups(_ context.Context, b *Broker, cc *conn, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	matches := func(filter []string, value string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool {
			return strings.EqualFold(strings.TrimSpace(f), value)
		})
	}
	// DESCRIBE on the cluster lists every group; otherwise those cc may
	// DESCRIBE, silently.
	all := b.allowedCluster(cc, kmsg.ACLOperationDescribe)
	for _, g := range b.groups.List() {
		if !all && !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, g.Name) {
			continue
		}
		if req.Version >= 4 && !matches(req.StatesFilter, g.State) {
			continue
		}
		if req.Version >= 5 && !matches(req.TypesFilter, g.Type) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType = g.Name, g.ProtocolType
		if req.Version >= 4 {
			lg.GroupState = g.State
		}
		if req.Version >= 5 {
			lg.GroupType = g.Type
		}
		resp.Groups = append(resp.Groups, lg)
	}
	return resp, nil
}
