package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func writeTxnMarkersReq(pid int64, epoch int16, commit bool, topic string, partitions ...int32) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 2
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion = pid, epoch, commit, -1, 1
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, partitions
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return req
}

func markerCodes(resp kmsg.Response) []int16 {
	var out []int16
	for _, p := range resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions {
		out = append(out, p.ErrorCode)
	}
	return out
}

// TestInProcessWriteTxnMarkers: the request kafka-transactions.sh abort
// sends ends a hanging transaction (one no coordinator knows of): the
// partition's last stable offset moves past it and read_committed fetches
// list it as aborted. Without ALTER or CLUSTER_ACTION on the cluster it is
// refused; unknown partitions and stale epochs are answered per partition.
func TestInProcessWriteTxnMarkers(t *testing.T) {
	tb := startAuthzBroker(t)
	tb.skipTxnCheck.Store(true)
	admin := tb.dialAs(t, "User:admin")
	tb.createTopic(t, admin, "hang", 1, nil)
	wantProduce(t, "hanging transaction", admin.produceTxn(kmsg.StringPtr("gone"), "hang", txnBatch(77, 3, 0, 2, "h")), nil, 0)
	wantProduce(t, "after it", admin.produceTxn(nil, "hang", producerBatch(-1, 0, 0, 1, "p")), nil, 2)
	wantFetch(t, "held back", tb.fetchTxn(admin, "hang", 0, 1), 3, 0, nil, nil)

	alice := tb.dialAs(t, "User:alice")
	if got := markerCodes(alice.do(writeTxnMarkersReq(77, 3, false, "hang", 0))); len(got) != 1 || got[0] != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("without cluster rights: %v", got)
	}
	tb.grant(t, allow("User:alice", kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, "kafka-cluster"))
	got := markerCodes(alice.do(writeTxnMarkersReq(77, 2, false, "hang", 0, 5)))
	if len(got) != 2 || got[0] != kerr.ProducerFenced.Code || got[1] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("stale epoch and unknown partition: %v", got)
	}
	if got := markerCodes(alice.do(writeTxnMarkersReq(77, 3, false, "hang", 0))); len(got) != 1 || got[0] != 0 {
		t.Fatalf("abort: %v", got)
	}
	wantFetch(t, "after the abort", tb.fetchTxn(admin, "hang", 0, 1), 4, 4, []int64{0, 2, 3}, []int64{3}, 77, 0)
}
