package broker

// DescribeTopicPartitions: v0
//
// Behavior:
//   - the paginated topic description Kafka's Admin uses for
//     describeTopics (KIP-966): topics sorted by name (all topics when none
//     are named), their partitions in order, at most
//     min(ResponsePartitionLimit, 2000) partitions per answer, and a cursor
//     to the next partition when more remain
//   - one broker: leader 1, replicas and ISR [1], no eligible leader
//     replicas; authorized operations are every topic operation, as Kafka
//     answers without an authorizer
//   - unknown names get UNKNOWN_TOPIC_OR_PARTITION, invalid names
//     INVALID_TOPIC_EXCEPTION; topics are never created here
//   - internal topics (internal_topics.go) have IsInternal set, also when
//     named but missing
//
//   - DESCRIBE on each topic: all-topics requests leave the others out;
//     named ones get TOPIC_AUTHORIZATION_FAILED (no id, no partitions),
//     after the others, existence hidden; authorized operations from the
//     ACLs
//
// Version notes:
//   - v0: flexible

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/topicname"
)

// maxDescribePartitions is Kafka's max.request.partition.size.limit.
const maxDescribePartitions = 2000

func handleDescribeTopicPartitions(ctx context.Context, b *Broker, cc *conn, req *kmsg.DescribeTopicPartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	names := make([]string, 0, len(req.Topics))
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	describable := func(name string) bool {
		return b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name)
	}
	if len(req.Topics) == 0 {
		for _, t := range b.catalog.topics() {
			if describable(t.name) { // the others are left out silently
				names = append(names, t.name)
			}
		}
	} else {
		for _, rt := range req.Topics {
			if !describable(rt.Topic) {
				out := kmsg.NewDescribeTopicPartitionsResponseTopic()
				n := rt.Topic
				out.Topic, out.ErrorCode, out.Partitions = &n, kerr.TopicAuthorizationFailed.Code, []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
				denied = append(denied, out)
				continue
			}
			names = append(names, rt.Topic)
		}
	}
	sort.Strings(names)

	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > maxDescribePartitions {
		limit = maxDescribePartitions
	}
	var first int32
	if c := req.Cursor; c != nil {
		i := sort.SearchStrings(names, c.Topic)
		names, first = names[i:], c.Partition
	}
	for i, name := range names {
		out := kmsg.NewDescribeTopicPartitionsResponseTopic()
		n := name
		out.Topic = &n
		out.IsInternal = topicname.Internal(name) // by name, known or not, as Kafka answers
		out.AuthorizedOperations = b.authorizedOps(cc, kmsg.ACLResourceTypeTopic, name)
		t := b.catalog.lookup(ctx, name)
		switch {
		case !topicname.Valid(name):
			out.ErrorCode = kerr.InvalidTopicException.Code
		case t == nil:
			out.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			out.TopicID = t.uuid
			start := int32(0)
			if i == 0 {
				start = first
			}
			for j := start; j < int32(len(t.parts)); j++ {
				if limit == 0 {
					c := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
					c.Topic, c.Partition = name, j
					resp.NextCursor = &c
					break
				}
				out.Partitions = append(out.Partitions, b.describedPartition(t.parts[j]))
				limit--
			}
		}
		resp.Topics = append(resp.Topics, out)
		if resp.NextCursor != nil {
			break
		}
		if limit == 0 && i+1 < len(names) {
			c := kmsg.NewDescribeTopicPartitionsResponseNextCursor()
			c.Topic, c.Partition = names[i+1], 0
			resp.NextCursor = &c
			break
		}
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}

func (b *Broker) describedPartition(p *partition) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	dp.Partition = p.index
	dp.LeaderID, dp.LeaderEpoch = b.cfg.NodeID, p.epoch
	dp.Replicas, dp.ISR = []int32{b.cfg.NodeID}, []int32{b.cfg.NodeID}
	dp.EligibleLeaderReplicas, dp.LastKnownELR = []int32{}, []int32{}
	return dp
}
