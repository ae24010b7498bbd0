package broker

// ConsumerGroupDescribe: v0-1
//
// Behavior:
//   - a consumer (KIP-848) group: state (Empty, Assigning, Reconciling,
//     Stable), group epoch, assignment epoch, the assignor the group uses,
//     and its members in member id order with epoch, subscription, current
//     assignment and target assignment (topic ids and names)
//   - GROUP_ID_NOT_FOUND for an unknown group and for a classic one, as
//     Kafka; an empty group id: INVALID_GROUP_ID
//   - authorized operations (when asked): every group operation, as Kafka
//     without an authorizer; else the "not asked" sentinel MinInt32
//
//   - DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED, answered
//     first; authorized operations from the ACLs; with an authorizer,
//     DESCRIBE on every topic in a member's assignment or target
//     assignment: a group holding one denied is replaced by {group,
//     TOPIC_AUTHORIZATION_FAILED, "The group has described topic(s) that
//     the client is not authorized to describe.", no members}, as Kafka 4.2
//
// Version notes:
//   - v1: member type (1, consumer protocol; classic members are never
//     mixed into consumer groups here)

import (
	"context"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleConsumerGroupDescribe(_ context.Context, b *Broker, cc *conn, req *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	names := func(id [16]byte) string {
		if t := b.catalog.topicByID(id); t != nil {
			return t.name
		}
		return ""
	}
	// Groups cc may not DESCRIBE come first, as in Kafka.
	var allowed []string
	for _, name := range req.Groups {
		if b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, name) {
			allowed = append(allowed, name)
			continue
		}
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.ErrorCode, rg.AuthorizedOperations = name, kerr.GroupAuthorizationFailed.Code, math.MinInt32
		resp.Groups = append(resp.Groups, rg)
	}
	for _, name := range allowed {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group = name
		rg.AuthorizedOperations = math.MinInt32
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = b.authorizedOps(cc, kmsg.ACLResourceTypeGroup, name)
		}
		switch {
		case name == "":
			rg.ErrorCode = kerr.InvalidGroupID.Code
		case !b.groups.DescribeConsumer(name, names, &rg):
			rg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := fmt.Sprintf("Group %s not found.", name)
			if b.groups.Exists(name) {
				msg = fmt.Sprintf("Group %s is not a consumer group.", name)
			}
			rg.ErrorMessage = &msg
		}
		resp.Groups = append(resp.Groups, rg)
	}
	if b.authz.current() != nil {
		hideUndescribableTopics(b, cc, resp)
	}
	return resp, nil
}

// hideUndescribableTopics replaces each group whose members hold a topic
// cc may not DESCRIBE by Kafka's TOPIC_AUTHORIZATION_FAILED entry.
func hideUndescribableTopics(b *Broker, cc *conn, resp *kmsg.ConsumerGroupDescribeResponse) {
	topics := func(g *kmsg.ConsumerGroupDescribeResponseGroup) []string {
		var names []string
		for _, m := range g.Members {
			for _, t := range m.Assignment.TopicPartitions {
				names = append(names, t.Topic)
			}
			for _, t := range m.TargetAssignment.TopicPartitions {
				names = append(names, t.Topic)
			}
		}
		return names
	}
	var all []string
	for i := range resp.Groups {
		all = append(all, topics(&resp.Groups[i])...)
	}
	ok := b.allowedNames(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, all)
	for i := range resp.Groups {
		for _, t := range topics(&resp.Groups[i]) {
			if !ok[t] {
				rg := kmsg.NewConsumerGroupDescribeResponseGroup()
				rg.Group, rg.ErrorCode = resp.Groups[i].Group, kerr.TopicAuthorizationFailed.Code
				rg.ErrorMessage = kmsg.StringPtr("The group has described topic(s) that the client is not authorized to describe.")
				rg.AuthorizedOperations = math.MinInt32
				resp.Groups[i] = rg
				break
			}
		}
	}
}
