package broker

// OffsetDelete: v0
//
// Behavior:
//   - deletes the group's committed offsets of the given partitions from
//     kafgres.consumer_offset
//   - a partition of a topic the group's live members subscribe to:
//     GROUP_SUBSCRIBED_TO_TOPIC (nothing of that topic is deleted)
//   - a group with neither members nor offsets: GROUP_ID_NOT_FOUND; an empty
//     group id: INVALID_GROUP_ID; an unknown topic or partition:
//     UNKNOWN_TOPIC_OR_PARTITION

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/metadata"
)

func handleOffsetDelete(ctx context.Context, b *Broker, _ *conn, req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	has, err := b.meta.HasOffsets(ctx, req.Group)
	if err != nil {
		b.log.Error("offset delete", "group", req.Group, "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	if !has && !b.groups.Exists(req.Group) {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp, nil
	}
	var doomed []metadata.TopicPartition
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		t := b.catalog.lookup(ctx, rt.Topic)
		subscribed := b.groups.Subscribed(req.Group, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case subscribed:
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				doomed = append(doomed, metadata.TopicPartition{TopicID: t.id, Partition: rp.Partition})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(doomed) > 0 {
		if err := b.meta.DeleteOffsets(ctx, req.Group, doomed); err != nil {
			b.log.Error("offset delete", "group", req.Group, "err", err)
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
	}
	return resp, nil
}

// deniedOffsetDelete: the group error at the top, no topics.
func deniedOffsetDelete(r kmsg.Request, code int16, _ *string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = code
	return resp
}

func offsetDeleteGroupID(r kmsg.Request) string { return r.(*kmsg.OffsetDeleteRequest).Group }
