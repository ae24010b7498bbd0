package broker

// OffsetCommit: v2-10
//
// Behavior:
//   - commits are written to kafgres.consumer_offset synchronously, all
//     partitions of a request in one statement, before the response
//   - classic-group rules through the group coordinator: a "simple" commit
//     (generation -1, no member id) is accepted for an empty or unknown
//     group; otherwise UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
//     ILLEGAL_GENERATION or REBALANCE_IN_PROGRESS as Kafka answers
//   - consumer (KIP-848) groups: the generation field is the member epoch;
//     a commit without a member only while the group is empty, else
//     UNKNOWN_MEMBER_ID; members must use v9+ (UNSUPPORTED_VERSION) and
//     their current epoch, or an older one for partitions they have owned
//     since (Kafka 4.3+), else STALE_MEMBER_EPOCH
//   - an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (v10 by id:
//     UNKNOWN_TOPIC_ID); metadata over 4096 bytes (offset.metadata.max.bytes):
//     OFFSET_METADATA_TOO_LARGE; an empty group id, or one over 2048 bytes
//     (kafgres: it must fit in a Postgres index entry): INVALID_GROUP_ID
//
//   - READ on the group first (the table, apis.go): denied, every
//     partition GROUP_AUTHORIZATION_FAILED; then READ on each topic:
//     TOPIC_AUTHORIZATION_FAILED on its partitions, existence hidden
//
// Version notes:
//   - v2-v4: retention time (ignored: offsets are kept until deleted, as
//     Kafka 4 does for groups); v6: leader epoch; v7: group instance id;
//     v8: flexible; v9: member epoch in the generation field; v10: topic ids

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator"
	"github.com/kafgres/kafgres/broker/metadata"
)

const maxOffsetMetadata = 4096 // offset.metadata.max.bytes

// maxCommitGroupID bounds the group ids whose offsets can be stored: the
// id is part of kafgres.consumer_offset's primary key, and a btree entry
// must fit in a third of a page. Kafka has no such limit; longer ids are
// refused like an empty one rather than failing in Postgres.
const maxCommitGroupID = 2048

func handleOffsetCommit(ctx context.Context, b *Broker, cc *conn, req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	var groupErr error
	switch {
	case req.Group == "" || len(req.Group) > maxCommitGroupID:
		groupErr = kerr.InvalidGroupID
	default:
		if ok, err := b.groups.ConsumerCommitAllowed(req.Group, req.MemberID, req.Generation, req.Version, b.commitPartitions(ctx, req)); ok {
			if err != nil {
				groupErr = err
			}
			break
		}
		groupErr = b.groups.CommitAllowed(req.Group, req.MemberID, req.InstanceID, req.Generation)
		if groupErr == kerr.GroupIDNotFound && req.Version < 9 {
			groupErr = kerr.IllegalGeneration // GROUP_ID_NOT_FOUND is v9+
		}
	}

	type slot struct{ topic, part int }
	var (
		offs  []metadata.CommittedOffset
		slots []slot
	)
	for ti, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t *topic
		if req.Version >= 10 {
			t = b.catalog.lookupID(ctx, rt.TopicID)
		} else {
			t = b.catalog.lookup(ctx, rt.Topic)
		}
		name := rt.Topic
		if t != nil {
			name = t.name
		}
		readable := (t == nil && req.Version >= 10) || b.allowed(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			switch {
			case t == nil && req.Version >= 10 && groupErr == nil:
				err = kerr.UnknownTopicID
			case !readable:
				err = kerr.TopicAuthorizationFailed // before existence and the group's state, as in Kafka
			case groupErr != nil:
				err = groupErr
			case t == nil && req.Version >= 10:
				err = kerr.UnknownTopicID
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				err = kerr.UnknownTopicOrPartition
			case rp.Metadata != nil && len(*rp.Metadata) > maxOffsetMetadata:
				err = kerr.OffsetMetadataTooLarge
			default:
				epoch := int32(-1)
				if req.Version >= 6 {
					epoch = rp.LeaderEpoch
				}
				offs = append(offs, metadata.CommittedOffset{TopicID: t.id, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: epoch, Metadata: rp.Metadata})
				slots = append(slots, slot{ti, len(st.Partitions)})
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if err := b.meta.CommitOffsets(ctx, req.Group, offs); err != nil {
		b.log.Error("commit offsets", "group", req.Group, "err", err)
		for _, s := range slots {
			resp.Topics[s.topic].Partitions[s.part].ErrorCode = kerr.CoordinatorNotAvailable.Code // retriable
		}
	}
	return resp, nil
}

// commitPartitions lists the known partitions a commit names, for the
// consumer-group epoch check.
func (b *Broker) commitPartitions(ctx context.Context, req *kmsg.OffsetCommitRequest) []coordinator.TopicPartition {
	var out []coordinator.TopicPartition
	for _, rt := range req.Topics {
		var t *topic
		if req.Version >= 10 {
			t = b.catalog.lookupID(ctx, rt.TopicID)
		} else {
			t = b.catalog.lookup(ctx, rt.Topic)
		}
		if t == nil {
			continue
		}
		for _, rp := range rt.Partitions {
			out = append(out, coordinator.TopicPartition{TopicID: t.uuid, Partition: rp.Partition})
		}
	}
	return out
}

// deniedOffsetCommit is OffsetCommitRequest.getErrorResponse: every
// requested partition gets the error (there is no top-level code).
func deniedOffsetCommit(r kmsg.Request, code int16, _ *string) kmsg.Response {
	req := r.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func offsetCommitGroupID(r kmsg.Request) string { return r.(*kmsg.OffsetCommitRequest).Group }
