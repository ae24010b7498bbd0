package broker

// WriteTxnMarkers: v1-2
//
// Behavior:
//   - writes each COMMIT or ABORT marker to the partitions it names, durably
//     before the answer, as the partition leader does for Kafka's
//     transaction coordinator. kafgres's own coordinator writes its markers
//     in-process (txn_markers.go); clients send this request to end
//     transactions no coordinator knows of: kafka-transactions.sh abort
//     (Admin.abortTransaction) for a hanging transaction
//   - per partition: an unknown topic or partition is
//     UNKNOWN_TOPIC_OR_PARTITION; a marker from an older producer epoch than
//     the partition has seen PRODUCER_FENCED, from an older coordinator epoch
//     TRANSACTION_COORDINATOR_FENCED (ProducerStateManager's checks); the
//     internal topics have no log here, so their partitions answer
//     UNKNOWN_TOPIC_OR_PARTITION too
//   - ALTER or CLUSTER_ACTION on the cluster, else every partition
//     CLUSTER_AUTHORIZATION_FAILED (KafkaApis: an inter-broker API)
//
// Version notes:
//   - v1: flexible; v2: the transaction version of each marker (the epoch
//     on the marker is what the coordinator chose either way)

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleWriteTxnMarkers(ctx context.Context, b *Broker, cc *conn, req *kmsg.WriteTxnMarkersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	allowed := b.allowedCluster(cc, kmsg.ACLOperationAlter) || b.allowedCluster(cc, kmsg.ACLOperationClusterAction)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		marker := txnMarker{producerID: m.ProducerID, epoch: m.ProducerEpoch, coordinatorEpoch: m.CoordinatorEpoch, commit: m.Committed}
		for _, mt := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = mt.Topic
			t := b.catalog.lookup(ctx, mt.Topic)
			for _, i := range mt.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = i
				switch p := t.partition(i); {
				case !allowed:
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case p == nil:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					rp.ErrorCode = markerErrorCode(b.writeTxnMarkers(ctx, marker, []*partition{p}))
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

// markerErrorCode is the code of writeTxnMarkers' error for one partition.
func markerErrorCode(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return ke.Code
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	}
	return kerr.KafkaStorageError.Code
}
