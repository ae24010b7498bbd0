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
