package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/topicname"
	"github.com/kafgres/kafgres/producer"
)

// The methods below are the broker's log as the SQL-produce / CDC producer
// sees it (producer.Log).

var errUnknownTopic = errors.New("unknown topic")

// Topic looks a topic up for the producer, creating it with the default
// partition count when auto-creation is on; ok is false when it does not
// exist.
func (b *Broker) Topic(ctx context.Context, name string) (producer.TopicInfo, bool, error) {
	t := b.catalog.lookupFresh(ctx, name)
	if t == nil && b.cfg.AutoCreateTopics && topicname.Valid(name) {
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
	return b.topicSettings(t).MaxMessageBytes, nil
}

// SourceApplied is the highest source LSN appended to a partition.
func (b *Broker) SourceApplied(topic string, partition int32) (uint64, error) {
	p := b.catalog.partition(topic, partition)
	if p == nil {
		return 0, fmt.Errorf("%w %s-%d", errUnknownTopic, topic, partition)
	}
	return p.log.SourceApplied(), nil
}

// AppendSourced appends batches from the replication stream and makes them
// durable before it returns (the channel it returns is already closed).
//
// The fsync runs here, on the producer's goroutine, not in the committer's
// group commit: the producer waits for it anyway, and handing it to the
// committer cost a wake-up of the committer, a goroutine per partition and
// a wake-up of the producer for every group. Under load the producer's
// cycle (this fsync included) is what gathers the next group, so a longer
// cycle means bigger groups, not more fsyncs; see docs/performance.md.
//
// When the log fails (a write or fsync error), the broker stops and the
// channel returned never closes, as a failed group commit never completes:
// an error would make the producer retry the group, and the retry would
// skip the batches that are in the log but not durable and acknowledge
// them before the broker is down.
func (b *Broker) AppendSourced(topic string, partition int32, batches []segment.SourcedBatch) (<-chan struct{}, error) {
	p, err := b.appendSourced(topic, partition, batches)
	if errors.Is(err, errLogFailed) {
		return make(chan struct{}), nil
	}
	if err != nil {
		return nil, err
	}
	end, err := p.log.Sync()
	if errors.Is(err, segment.ErrClosed) {
		// Dropped meanwhile, as the committer treats it: the records went
		// with their topic.
		return closed(), nil
	}
	if err != nil {
		b.stop(fmt.Errorf("fsync %s-%d: %w", topic, partition, err))
		return make(chan struct{}), nil
	}
	p.publish(end)
	b.mirror.mark(p)
	return closed(), nil
}

// errLogFailed marks an append error after which the broker stops.
var errLogFailed = errors.New("log failed; the broker is stopping")

// closed is the channel AppendSourced returns: its appends are durable
// when it returns.
func closed() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// appendSourced writes batches (not yet durable) to a partition.
func (b *Broker) appendSourced(topic string, partition int32, batches []segment.SourcedBatch) (*partition, error) {
	p := b.catalog.partition(topic, partition)
	if p == nil {
		return nil, fmt.Errorf("%w %s-%d", errUnknownTopic, topic, partition)
	}
	if t := b.catalog.topicByName(topic); t != nil && b.topicSettings(t).LogAppendTime {
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
			return nil, fmt.Errorf("append to %s-%d: %w: %w", topic, partition, errLogFailed, err)
		}
		return nil, fmt.Errorf("append to %s-%d: %w", topic, partition, err)
	}
	return p, nil
}

// Delivered records that everything up to lsn is durable; the mirror
// publishes it to kafgres.delivery for kafgres_wait_delivered.
func (b *Broker) Delivered(lsn uint64, records bool) { b.mirror.delivered(lsn, records) }
