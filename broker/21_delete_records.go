package broker

// DeleteRecords: v0-2
//
// Behavior:
//   - moves each partition's log start offset up to the requested offset
//     (-1: the high watermark); the new start is durable before the answer
//     and whole segments below it are deleted from disk
//   - the low watermark answered is the resulting log start offset, which
//     never moves back: deleting below the current start changes nothing
//   - an offset above the high watermark (or below -1) is
//     OFFSET_OUT_OF_RANGE; unknown topics and partitions
//     UNKNOWN_TOPIC_OR_PARTITION; partitions of internal topics
//     (internal_topics.go) INVALID_TOPIC_EXCEPTION, as Kafka's
//     ReplicaManager answers
//
//   - DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED (low watermark
//     -1), existence hidden
//   - transactions: as in Kafka (UnifiedLog.maybeIncrementLogStartOffset)
//     open transactions do not hold the start back; the bound is the high
//     watermark alone. Segments go with their .txnindex; the last stable
//     offset is clamped to the new start, as Kafka's
//     maybeIncrementFirstUnstableOffset does
//
// Version notes:
//   - v1: same as v0; v2: flexible

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/topicname"
)

func handleDeleteRecords(ctx context.Context, b *Broker, cc *conn, req *kmsg.DeleteRecordsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t := b.catalog.lookup(ctx, rt.Topic)
		deletable := b.allowed(cc, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			if !deletable {
				sp.ErrorCode, sp.LowWatermark = kerr.TopicAuthorizationFailed.Code, -1
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			low, err := b.deleteRecords(t, rp.Partition, rp.Offset)
			if err != nil {
				var ke *kerr.Error
				if !errors.As(err, &ke) {
					b.log.Error("delete records", "topic", rt.Topic, "partition", rp.Partition, "err", err)
					ke = kerr.KafkaStorageError
				}
				sp.ErrorCode, sp.LowWatermark = ke.Code, -1
			} else {
				sp.LowWatermark = low
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (b *Broker) deleteRecords(t *topic, index int32, offset int64) (int64, error) {
	p := t.partition(index)
	if p == nil {
		return 0, kerr.UnknownTopicOrPartition
	}
	if topicname.Internal(t.name) {
		return 0, kerr.InvalidTopicException
	}
	hw := p.highWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, kerr.OffsetOutOfRange
	}
	start, err := p.log.DeleteRecordsBefore(offset)
	if err != nil {
		return 0, err
	}
	b.mirror.mark(p)
	return start, nil
}
