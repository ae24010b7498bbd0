package broker

// ListOffsets: v1-11
//
// Behavior:
//   - -1 latest: the high watermark, or with read_committed (isolation 1)
//     the last stable offset, with the current leader epoch
//   - lookups by timestamp (-3 and t >= 0) only see batches below that
//     same bound, as Kafka filters them by its last fetchable offset
//   - -2 earliest and -4 earliest-local: the log start offset
//   - -3 max timestamp (v7+): the first record carrying the largest timestamp
//   - -5 latest-tiered and -6 earliest-pending-upload: no tiered storage, so
//     offset -1 as Kafka answers for a topic without remote storage
//   - t >= 0: the first record whose timestamp is >= t, or offset -1.
//     Compressed batches are read as a stream within the bounds produce
//     validation uses (compress.go); one stored before them that inflates
//     beyond them answers with its first offset and max timestamp
//   - the same partition twice in a request: INVALID_REQUEST for each
//   - current leader epoch checked (v4+) as Fetch does
//
//   - DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED on its
//     partitions (timestamp and offset -1), after the authorized topics,
//     existence hidden
//
// Version notes:
//   - v2: isolation level; v4: leader epochs; v6: flexible; v7: -3;
//     v8: -4; v9: -5; v10: timeout; v11: -6

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

const (
	latestTimestamp                = -1
	earliestTimestamp              = -2
	maxTimestamp                   = -3
	earliestLocalTimestamp         = -4
	latestTieredTimestamp          = -5
	earliestPendingUploadTimestamp = -6
)

func handleListOffsets(ctx context.Context, b *Broker, cc *conn, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	type tp struct {
		topic string
		part  int32
	}
	seen := map[tp]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[tp{rt.Topic, rp.Partition}]++
		}
	}
	var denied []kmsg.ListOffsetsResponseTopic
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		if !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, rt.Topic) {
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			denied = append(denied, st)
			continue
		}
		t := b.catalog.lookup(ctx, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			var err error
			if seen[tp{rt.Topic, rp.Partition}] > 1 {
				err = kerr.InvalidRequest
			} else {
				err = b.listOffset(req, t, rp, &sp)
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}

func (b *Broker) listOffset(req *kmsg.ListOffsetsRequest, t *topic, rp kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) error {
	if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts) {
		return kerr.UnknownTopicOrPartition
	}
	p := t.parts[rp.Partition]
	if err := checkLeaderEpoch(p, rp.CurrentLeaderEpoch, req.Version >= 4); err != nil {
		return err
	}
	hw := p.highWatermark()
	if req.IsolationLevel == 1 {
		hw = p.lastStableOffset()
	}
	var (
		off, ts int64 = -1, -1
		found   bool
		err     error
	)
	switch rp.Timestamp {
	case latestTimestamp:
		sp.Offset, sp.LeaderEpoch = hw, p.epoch
		return nil
	case earliestTimestamp, earliestLocalTimestamp:
		off, found = p.log.LogStartOffset(), true
	case maxTimestamp:
		off, ts, found, err = p.log.MaxTimestamp(hw)
	case latestTieredTimestamp, earliestPendingUploadTimestamp:
		return nil
	default:
		off, ts, found, err = p.log.OffsetForTimestamp(rp.Timestamp, hw)
	}
	if errors.Is(err, segment.ErrClosed) {
		return kerr.UnknownTopicOrPartition
	}
	if err != nil {
		b.log.Error("list offsets", "topic", t.name, "partition", rp.Partition, "err", err)
		return kerr.KafkaStorageError
	}
	if !found {
		return nil
	}
	sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, ts, p.epochAt(off, hw)
	return nil
}
