package broker

// DescribeProducers: v0
//
// Behavior:
//   - the idempotent producers each partition remembers (producers.go):
//     id, epoch, last sequence (-1 after a marker bumped the epoch) and the
//     max timestamp of its last batch or marker; the coordinator epoch of
//     its last marker (-1 before any) and the first offset of its open
//     transaction here (-1 when none), as Kafka's ProducerStateEntry has
//     them
//   - per topic, in Kafka's order: an invalid name, every partition
//     {INVALID_TOPIC_EXCEPTION, "Topic name is invalid: ..."}; not READ
//     (not DESCRIBE) on the topic, {TOPIC_AUTHORIZATION_FAILED, "Topic
//     authorization failed."}, existence hidden; unknown topics
//     UNKNOWN_TOPIC_OR_PARTITION with Kafka's message, unknown partitions
//     of a known topic the same code without one (as Kafka answers them)
//
// Version notes:
//   - v0: flexible

import (
	"context"
	"sort"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/topicname"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeProducers(ctx context.Context, b *Broker, cc *conn, req *kmsg.DescribeProducersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, in := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = in.Topic
		var topicErr *apierr.Error
		var t *topic
		switch {
		case !topicname.Valid(in.Topic):
			topicErr = apierr.New(kerr.InvalidTopicException, "Topic name is invalid: %s", topicname.Problem(in.Topic))
		case !b.allowed(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, in.Topic):
			topicErr = errTopicAuthorization
		default:
			t = b.catalog.lookup(ctx, in.Topic)
		}
		for _, i := range in.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = i
			switch p := t.partition(i); {
			case topicErr != nil:
				rp.ErrorCode, rp.ErrorMessage = b.codeAndMessage("", topicErr)
			case t == nil:
				rp.ErrorCode, rp.ErrorMessage = b.codeAndMessage("", apierr.New(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition."))
			case p == nil:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				rp.ActiveProducers = p.activeProducers()
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// activeProducers lists the partition's producer state, by producer id.
func (p *partition) activeProducers() []kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []kmsg.DescribeProducersResponseTopicPartitionActiveProducer
	for id, e := range p.producers {
		ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
		ap.ProducerID, ap.ProducerEpoch = id, int32(e.epoch)
		ap.LastSequence = -1
		if n := len(e.batches); n > 0 {
			ap.LastSequence = e.batches[n-1].lastSeq
		}
		ap.LastTimestamp = e.lastTimestamp
		ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = e.coordinatorEpoch, e.txnFirst
		out = append(out, ap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
