package broker

// ElectLeaders: v0-2
//
// Behavior:
//   - kafgres is one broker, the leader of every partition and every
//     partition's only (so preferred) replica: every existing partition
//     answers ELECTION_NOT_NEEDED, for preferred and unclean elections
//     alike, as a single-node Kafka does
//   - unknown topics and partitions get UNKNOWN_TOPIC_OR_PARTITION with
//     Kafka's "No such topic/partition" messages
//   - topics null (all partitions) answers every topic with no partitions:
//     there is nothing to elect
//
// Version notes:
//   - v1: election type, top-level error code; v2: flexible

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleElectLeaders(ctx context.Context, b *Broker, _ *conn, req *kmsg.ElectLeadersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.Topics == nil {
		ts := b.catalog.topics()
		sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
		for _, t := range ts {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.name
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, in := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = in.Topic
		t := b.catalog.lookup(ctx, in.Topic)
		for _, i := range in.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition = i
			var msg string
			switch {
			case t == nil:
				rp.ErrorCode, msg = kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("No such topic as %s", in.Topic)
			case t.partition(i) == nil:
				rp.ErrorCode, msg = kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("No such partition as %s-%d", in.Topic, i)
			default:
				rp.ErrorCode, msg = kerr.ElectionNotNeeded.Code, "Leader election not needed for topic partition."
			}
			rp.ErrorMessage = &msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// deniedElectLeaders is ElectLeadersRequest.getErrorResponse: the error at
// the top and on every listed partition.
func deniedElectLeaders(r kmsg.Request, code int16, msg *string) kmsg.Response {
	req := r.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = code
	for _, in := range req.Topics {
		rt := kmsg.NewElectLeadersResponseTopic()
		rt.Topic = in.Topic
		for _, i := range in.Partitions {
			rp := kmsg.NewElectLeadersResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = i, code, msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
