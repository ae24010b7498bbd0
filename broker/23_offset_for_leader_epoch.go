package broker

// OffsetForLeaderEpoch: v2-4
//
// Behavior:
//   - the end offset of the requested leader epoch from the partition's
//     epoch cache (partition.endOffsetForEpoch): the start of the next
//     epoch, or the log end for the current one; an epoch above every known
//     epoch is undefined (-1/-1), as in Kafka. Consumers use it after a
//     leader epoch change (every broker restart is one) to detect
//     truncation, which kafgres never does.
//   - a current leader epoch newer than ours is UNKNOWN_LEADER_EPOCH, an
//     older one FENCED_LEADER_EPOCH (KIP-320); unknown partitions are
//     UNKNOWN_TOPIC_OR_PARTITION
//
//   - CLUSTER_ACTION on the cluster, or DESCRIBE on each topic, else
//     TOPIC_AUTHORIZATION_FAILED on its partitions, after the others
//
// Version notes:
//   - v2: current leader epoch; v3: replica id; v4: flexible

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleOffsetForLeaderEpoch(ctx context.Context, b *Broker, cc *conn, req *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	clusterAction := b.allowedCluster(cc, kmsg.ACLOperationClusterAction)
	var denied []kmsg.OffsetForLeaderEpochResponseTopic
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		if !clusterAction && !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, rt.Topic) {
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			denied = append(denied, st)
			continue
		}
		t := b.catalog.lookup(ctx, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			p := t.partition(rp.Partition)
			if p == nil {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if err := checkLeaderEpoch(p, rp.CurrentLeaderEpoch, true); err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				sp.LeaderEpoch, sp.EndOffset = p.endOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}
