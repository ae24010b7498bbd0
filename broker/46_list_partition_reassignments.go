package broker

// ListPartitionReassignments: v0
//
// Behavior:
//   - no reassignment is ever in progress on a one-broker cluster
//     (AlterPartitionReassignments can only confirm the current replicas),
//     so the answer is always empty, for every filter, as Kafka's is when
//     nothing moves
//
// Version notes:
//   - v0: flexible

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleListPartitionReassignments(_ context.Context, _ *Broker, _ *conn, req *kmsg.ListPartitionReassignmentsRequest) (kmsg.Response, error) {
	return req.ResponseKind(), nil
}

// deniedListPartitionReassignments: the error at the top, the listed
// topics echoed with their partitions
// (ListPartitionReassignmentsRequest.getErrorResponse).
func deniedListPartitionReassignments(r kmsg.Request, code int16, msg *string) kmsg.Response {
	req := r.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.ErrorCode, resp.ErrorMessage = code, msg
	for _, in := range req.Topics {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = in.Topic
		for _, p := range in.Partitions {
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
