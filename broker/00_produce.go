package broker

// Produce: v0-13
//
// Behavior:
//   - acks 0, 1 and -1; anything else is INVALID_REQUIRED_ACKS. acks=1 and
//     acks=-1 are both answered only once the batch is fsynced (group
//     commit); acks=0 gets no response, and the connection is closed if a
//     partition failed, as Kafka does, so the client notices
//   - exactly one v2 batch per partition, CRC-32C checked, stored byte for
//     byte (any codec); only baseOffset and partitionLeaderEpoch are stamped
//   - topics with message.timestamp.type=LogAppendTime get the broker's
//     clock as batch timestamp (CRC recomputed), also in the answer;
//     CreateTime batches more than message.timestamp.after.max.ms (1 h)
//     ahead of the broker's clock, or before.max.ms behind, get
//     INVALID_TIMESTAMP
//   - batches over the topic's max.message.bytes: MESSAGE_TOO_LARGE; bad CRC or framing:
//     CORRUPT_MESSAGE; more than one batch: INVALID_RECORD
//   - idempotent producers: a duplicate of one of the last 5 batches is
//     answered with its original offset, a gap with OUT_OF_ORDER_SEQUENCE_NUMBER,
//     an old epoch with INVALID_PRODUCER_EPOCH
//   - transactional batches: INVALID_TXN_STATE (transactions are not served yet)
//   - v0-v2 (message formats v0/v1, gone from Kafka 4): UNSUPPORTED_VERSION
//     per partition
//
// Version notes:
//   - v5: log start offset; v8: record errors (never set: batches are
//     not decompressed); v9: flexible;
//     v13: topics by id (UNKNOWN_TOPIC_ID)

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

func handleProduce(ctx context.Context, b *Broker, cc *conn, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var (
		last   *pass
		failed bool
	)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t *topic
		if req.Version >= 13 {
			t = b.catalog.lookupID(ctx, rt.TopicID)
		} else {
			t = b.catalog.lookup(ctx, rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			p, err := b.producePartition(req, t, rp)
			if err == nil && p != nil {
				sp.BaseOffset, sp.LogAppendTime = p.base, p.logAppendTime
				sp.LogStartOffset = p.part.log.LogStartOffset()
				if req.Acks != 0 {
					last = b.committer.enqueue(p.part)
				} else {
					b.committer.enqueue(p.part)
				}
			}
			if err != nil {
				failed = true
				sp.ErrorCode = errorCode(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		if failed {
			return nil, errors.New("acks=0 produce failed; closing so the client notices")
		}
		return nil, nil
	}
	if last != nil {
		// Passes complete in order, so the last one covers every partition.
		cc.wait = last.done
	}
	return resp, nil
}

// stampTimestamps applies the topic's timestamp rules as Kafka's
// LogValidator does and returns the log append time (-1 for CreateTime
// topics). LogAppendTime: the broker's clock becomes the batch's timestamp
// (the records keep theirs, but readers use the batch's), and a client may
// not claim LogAppendTime itself. CreateTime: the batch's timestamps must lie
// within message.timestamp.before.max.ms / after.max.ms of now; the first
// timestamp stands in for the oldest record.
func stampTimestamps(batch []byte, h *segment.BatchHeader, s topicSettings, now int64) (int64, error) {
	const logAppendTimeBit = 0x08
	if s.logAppendTime {
		if h.Attributes&logAppendTimeBit != 0 {
			return -1, kerr.InvalidTimestamp
		}
		if err := segment.SetLogAppendTime(batch, now); err != nil {
			return -1, kerr.CorruptMessage
		}
		h.Attributes |= logAppendTimeBit
		h.MaxTimestamp = now
		return now, nil
	}
	if h.MaxTimestamp-now > s.timestampAfterMaxMs || now-h.BaseTimestamp > s.timestampBeforeMaxMs {
		return -1, kerr.InvalidTimestamp
	}
	return -1, nil
}

type appended struct {
	part          *partition
	base          int64
	logAppendTime int64 // -1 unless the topic uses LogAppendTime
}

// producePartition validates and appends one partition's records. Errors are
// *kerr.Error values for the client; a storage failure also stops the broker.
func (b *Broker) producePartition(req *kmsg.ProduceRequest, t *topic, rp kmsg.ProduceRequestTopicPartition) (*appended, error) {
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		return nil, kerr.InvalidRequiredAcks
	case req.Version < 3:
		return nil, kerr.UnsupportedVersion
	case t == nil && req.Version >= 13:
		return nil, kerr.UnknownTopicID
	case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
		return nil, kerr.UnknownTopicOrPartition
	}
	settings := b.topicSettings(t)
	if len(rp.Records) > int(settings.maxMessageBytes) {
		return nil, kerr.MessageTooLarge
	}
	h, err := segment.ParseBatchHeader(rp.Records)
	if err != nil {
		if errors.Is(err, segment.ErrUnsupportedMagic) {
			return nil, kerr.UnsupportedForMessageFormat
		}
		return nil, kerr.CorruptMessage
	}
	if int(h.Length) < len(rp.Records) {
		return nil, kerr.InvalidRecord // Kafka 4 takes one batch per partition
	}
	if _, err := segment.ValidateBatch(rp.Records); err != nil {
		return nil, kerr.CorruptMessage
	}
	if h.Attributes&0x10 != 0 {
		return nil, kerr.InvalidTxnState
	}
	appendTime, err := stampTimestamps(rp.Records, &h, settings, time.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	p := t.parts[rp.Partition]
	res := p.append(rp.Records, h)
	var ke *kerr.Error
	if res.err != nil && !errors.As(res.err, &ke) {
		b.stop(res.err) // the log may be inconsistent; recovery will mend it
		return nil, kerr.KafkaStorageError
	}
	if res.err != nil {
		return nil, res.err
	}
	return &appended{part: p, base: res.baseOffset, logAppendTime: appendTime}, nil
}
