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
	return producer.TopicInfo{ID: t.id, Partitions: int32(len(t.parts)), Internal: topicname.Internal(t.name)}, true, nil
}

// Limits are what topic's effective settings refuse of a record, which the
// producer checks each record against before appending it, as Produce
// does (00_produce.go).
func (b *Broker) Limits(topic string) (producer.Limits, error) {
	t := b.catalog.topicByName(topic)
	if t == nil {
		return producer.Limits{}, fmt.Errorf("%w %q", errUnknownTopic, topic)
	}
	s := b.topicSettings(t)
	return producer.Limits{MaxMessageBytes: s.MaxMessageBytes, Compacted: s.Compacted()}, nil
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
// With inTxn the batches join the SQL source's Kafka transaction (see
// CommitSourced).
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
func (b *Broker) AppendSourced(topic string, partition int32, batches []segment.SourcedBatch, inTxn bool) (<-chan struct{}, error) {
	p, err := b.appendSourced(topic, partition, batches, inTxn)
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

// The SQL source's Kafka transactions (docs/producing.md, "SQL transactions
// as Kafka transactions"): the producer makes a group that holds an SQL
// transaction writing to more than one partition one transaction of the
// source's own producer id, so read_committed consumers see all of it or
// none. The id comes from
// kafgres.producer_id_seq once and is kept in the data directory, beside
// the log whose open transactions it names; its epoch is always 0, as
// nothing else ever writes with it and the source never aborts.

// sourceEpoch is the epoch of every batch and marker of the source.
const sourceEpoch = 0

// sourceProducer returns the source's producer id, allocating and
// recording it the first time.
func (b *Broker) sourceProducer() (int64, error) {
	b.sourceMu.Lock()
	defer b.sourceMu.Unlock()
	if b.sourcePID >= 0 {
		return b.sourcePID, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := b.meta.NextProducerID(ctx)
	if err != nil {
		return -1, fmt.Errorf("allocate the SQL source's producer id: %w", err)
	}
	if err := b.data.SetSourceProducer(id); err != nil {
		return -1, err
	}
	b.sourcePID = id
	return id, nil
}

// knownSourceProducer is the source's producer id, or -1 if it has none
// yet (and so no open transaction).
func (b *Broker) knownSourceProducer() int64 {
	b.sourceMu.Lock()
	defer b.sourceMu.Unlock()
	return b.sourcePID
}

// sourceTxnPartitions lists the partitions where the source's transaction
// is open.
func (b *Broker) sourceTxnPartitions() []*partition {
	pid := b.knownSourceProducer()
	if pid < 0 {
		return nil
	}
	var out []*partition
	for _, t := range b.catalog.topics() {
		for _, p := range t.parts {
			p.mu.Lock()
			_, open := p.txns.open[pid]
			p.mu.Unlock()
			if open {
				out = append(out, p)
			}
		}
	}
	return out
}

// SourcedTxn says whether the source's transaction is open somewhere, and
// the highest source position appended in it.
func (b *Broker) SourcedTxn() (open bool, end uint64) {
	for _, p := range b.sourceTxnPartitions() {
		open, end = true, max(end, p.log.SourceApplied())
	}
	return open, end
}

// CommitSourced writes the source's COMMIT markers on every partition
// where its transaction is open, durably.
func (b *Broker) CommitSourced(ctx context.Context) error {
	parts := b.sourceTxnPartitions()
	if len(parts) == 0 {
		return nil
	}
	m := txnMarker{producerID: b.knownSourceProducer(), epoch: sourceEpoch, commit: true}
	if err := b.writeTxnMarkers(ctx, m, parts); err != nil {
		return fmt.Errorf("commit the SQL source's transaction: %w", err)
	}
	for _, p := range parts {
		b.mirror.mark(p)
	}
	return nil
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

// appendSourced writes batches (not yet durable) to a partition; with
// inTxn, as the source's transactional batches.
func (b *Broker) appendSourced(topic string, partition int32, batches []segment.SourcedBatch, inTxn bool) (*partition, error) {
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
	pid := int64(-1)
	if inTxn {
		var err error
		if pid, err = b.sourceProducer(); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	err := p.appendSourcedLocked(batches, pid)
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

// appendSourcedLocked appends batches, first making them transactional
// batches of producer pid (sequences continuing its window here) unless pid
// is -1. Callers hold p.mu.
func (p *partition) appendSourcedLocked(batches []segment.SourcedBatch, pid int64) error {
	if err := p.saveEpochs(); err != nil {
		return err
	}
	active := p.activeBase()
	if pid < 0 {
		// No producer state changes: a roll snapshots it as it is.
		bases, err := p.log.AppendSourced(batches, p.epoch)
		for _, base := range bases {
			if p.snapshotIfRolled(active, base) {
				break
			}
		}
		return err
	}
	hs := make([]segment.BatchHeader, len(batches))
	seq := p.producers.nextSequence(pid, sourceEpoch)
	for i, sb := range batches {
		if err := segment.SetTransactional(sb.Batch, pid, sourceEpoch, seq); err != nil {
			return fmt.Errorf("make a sourced batch transactional: %w", err)
		}
		h, err := segment.ParseBatchHeader(sb.Batch)
		if err != nil {
			return fmt.Errorf("make a sourced batch transactional: %w", err)
		}
		hs[i], seq = h, nextSeq(lastSeq(h))
	}
	bases, err := p.log.AppendSourced(batches, p.epoch)
	if err != nil {
		return err
	}
	rolled := false
	for i, base := range bases {
		rolled = rolled || p.snapshotIfRolled(active, base)
		p.applyBatch(hs[i], base)
	}
	p.refreshUnstable()
	return nil
}
