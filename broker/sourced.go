package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/producer"
)

// The methods below are the broker's log as the SQL-produce / CDC producer
// sees it (producer.Log).

var errUnknownTopic = errors.New("unknown topic")

// Topic looks a topic up for the producer, creating it with the default
// partition count when auto-creation is on; ok is false when it does not
// exist.
func (b *Broker) Topic(ctx context.Context, name string) (producer.TopicInfo, bool, error) {
	t := b.catalog.lookup(ctx, name)
	if t == nil && b.cfg.AutoCreateTopics && validTopicName(name) {
		var err error
		if t, err = b.catalog.create(ctx, name, b.cfg.DefaultPartition); err != nil {
			return producer.TopicInfo{}, false, err
		}
	}
	if t == nil {
		return producer.TopicInfo{}, false, nil
	}
	return producer.TopicInfo{ID: t.id, Partitions: int32(len(t.parts))}, true, nil
}

// MaxMessageBytes is topic's effective max.message.bytes, which the
// producer checks each record against before appending it.
func (b *Broker) MaxMessageBytes(topic string) (int32, error) {
	t := b.catalog.topicByName(topic)
	if t == nil {
		return 0, fmt.Errorf("%w %q", errUnknownTopic, topic)
	}
	return b.topicSettings(t).maxMessageBytes, nil
}

// SourceApplied is the highest source LSN appended to a partition.
func (b *Broker) SourceApplied(topic string, partition int32) (uint64, error) {
	p := b.catalog.partition(topic, partition)
	if p == nil {
		return 0, fmt.Errorf("%w %s-%d", errUnknownTopic, topic, partition)
	}
	return p.log.SourceApplied(), nil
}

// AppendSourced appends batches from the replication stream; the channel
// closes when the group commit that covers them is done.
func (b *Broker) AppendSourced(topic string, partition int32, batches []segment.SourcedBatch) (<-chan struct{}, error) {
	p := b.catalog.partition(topic, partition)
	if p == nil {
		return nil, fmt.Errorf("%w %s-%d", errUnknownTopic, topic, partition)
	}
	if t := b.catalog.topicByName(topic); t != nil && b.topicSettings(t).logAppendTime {
		now := time.Now().UnixMilli()
		for _, sb := range batches {
			if err := segment.SetLogAppendTime(sb.Batch, now); err != nil {
				return nil, fmt.Errorf("stamp log append time on %s-%d: %w", topic, partition, err)
			}
		}
	}
	p.mu.Lock()
	_, err := p.log.AppendSourced(batches, p.epoch)
	p.mu.Unlock()
	if err != nil {
		if !errors.Is(err, segment.ErrClosed) {
			b.stop(err) // the log may be inconsistent; recovery will mend it
		}
		return nil, fmt.Errorf("append to %s-%d: %w", topic, partition, err)
	}
	return b.committer.enqueue(p).done, nil
}

// Delivered records that everything up to lsn is durable; the mirror
// publishes it to kafgres.delivery for kafgres_wait_delivered.
func (b *Broker) Delivered(lsn uint64, records bool) { b.mirror.delivered(lsn, records) }
