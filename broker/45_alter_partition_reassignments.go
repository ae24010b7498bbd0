package broker

// AlterPartitionReassignments: v0-1
//
// Behavior:
//   - the only replica set a one-broker cluster can have is [1], which
//     every partition already has: reassigning to it succeeds and changes
//     nothing; any other set fails as Kafka's controller fails it
//     (INVALID_REPLICA_ASSIGNMENT for other brokers, duplicates or an
//     empty list)
//   - cancelling (null replicas) gets NO_REASSIGNMENT_IN_PROGRESS: none
//     ever is
//   - unknown topics and partitions: UNKNOWN_TOPIC_OR_PARTITION with
//     Kafka's messages
//
// Version notes:
//   - v0: flexible; v1: allowReplicationFactorChange (no replication
//     factor but 1 is reachable, so it changes nothing)

import (
	"context"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleAlterPartitionReassignments(ctx context.Context, b *Broker, _ *conn, req *kmsg.AlterPartitionAssignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if req.Version >= 1 {
		resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	}
	for _, in := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = in.Topic
		t := b.catalog.lookup(ctx, in.Topic)
		for _, ip := range in.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = ip.Partition
			var err error
			switch {
			case t == nil:
				err = apierr.New(kerr.UnknownTopicOrPartition, "Unable to find a topic named %s.", in.Topic)
			case t.partition(ip.Partition) == nil:
				err = apierr.New(kerr.UnknownTopicOrPartition, "Unable to find partition %s:%d.", in.Topic, ip.Partition)
			case ip.Replicas == nil:
				err = kerr.NoReassignmentInProgress
			default:
				err = b.checkAssignment(ip.Replicas)
			}
			rp.ErrorCode, rp.ErrorMessage = b.codeAndMessage("alter partition reassignments", err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// deniedAlterPartitionReassignments: the error at the top and on every
// listed partition (AlterPartitionReassignmentsRequest.getErrorResponse).
func deniedAlterPartitionReassignments(r kmsg.Request, code int16, msg *string) kmsg.Response {
	req := r.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.ErrorCode, resp.ErrorMessage = code, msg
	for _, in := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = in.Topic
		for _, p := range in.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, code, msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
