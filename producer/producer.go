// Package producer is the one bridge from the replication stream to the
// broker's log: it turns kafgres_produce messages and rendered CDC changes
// into record batches and appends them exactly once.
//
// Exactly once: every batch carries the end LSN of the last transaction in
// it as its source position, which the log records atomically with the
// batch (segment.AppendSourced). A transaction is skipped on a partition
// whose applied source position is already at or past its end LSN, so a
// replay after any crash appends nothing twice; and the slot is
// acknowledged only once the appended batches are durable, so nothing is
// lost either.
package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/decoder"
	"github.com/kafgres/kafgres/mappings"
)

// Log is the broker's log as the producer needs it.
type Log interface {
	// Partitions is topic's partition count, creating the topic first when
	// auto-creation allows; an error if it does not exist.
	Partitions(ctx context.Context, topic string) (int32, error)
	// MaxMessageBytes is the topic's max.message.bytes: the largest record
	// batch it stores.
	MaxMessageBytes(topic string) (int32, error)
	// SourceApplied is the highest source position appended to a partition.
	SourceApplied(topic string, partition int32) (uint64, error)
	// AppendSourced appends batches in order; the channel closes once they
	// are durable.
	AppendSourced(topic string, partition int32, batches []segment.SourcedBatch) (<-chan struct{}, error)
	// Delivered publishes that everything up to lsn is durably in the log
	// (kafgres.delivery, read by kafgres_wait_delivered).
	Delivered(lsn uint64)
}

// Source is the replication stream; *decoder.Decoder is one.
type Source interface {
	Run(ctx context.Context, out chan<- any) error
	Ack(lsn decoder.LSN)
}

// Renderer renders CDC changes; *mappings.Renderer is one. For each
// transaction it returns one entry per item: the records a change renders
// to (nil for other items).
type Renderer interface {
	Render(ctx context.Context, txns []*decoder.Transaction) ([][][]mappings.Record, error)
}

// Producer drains a Source into a Log.
type Producer struct {
	source      Source
	log         Log
	renderer    Renderer // nil: changes are ignored
	deadLetters DeadLetters
	logger      *slog.Logger

	// sticky is the partition NULL-key records of a topic go to within one
	// group of transactions, as Kafka's sticky partitioner keeps a batch on
	// one partition.
	sticky map[string]int32
}

const (
	maxGroupTxns  = 1000    // transactions appended per pass
	maxBatchBytes = 1 << 20 // soft limit: a batch holds whole transactions
	eventBuffer   = 256
)

func New(source Source, log Log, renderer Renderer, deadLetters DeadLetters, logger *slog.Logger) *Producer {
	return &Producer{source: source, log: log, renderer: renderer, deadLetters: deadLetters, logger: logger}
}

// Run streams until ctx ends.
func (p *Producer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan any, eventBuffer)
	srcErr := make(chan error, 1)
	go func() { srcErr <- p.source.Run(ctx, events) }()

	var acked uint64
	for {
		var first any
		select {
		case <-ctx.Done():
			return nil
		case err := <-srcErr:
			return fmt.Errorf("replication stream: %w", err)
		case first = <-events:
		}
		txns, progress := gather(first, events)
		if len(txns) > 0 {
			if err := p.appendWithRetry(ctx, txns); err != nil {
				return err
			}
			acked = max(acked, uint64(txns[len(txns)-1].EndLSN))
		}
		// A keepalive's position covers every transaction before it in the
		// stream, all of which are durable by now.
		acked = max(acked, progress)
		if acked > 0 {
			p.source.Ack(decoder.LSN(acked))
			p.log.Delivered(acked)
		}
	}
}

// gather takes what is already queued, up to a group's worth.
func gather(first any, events <-chan any) ([]*decoder.Transaction, uint64) {
	var (
		txns     []*decoder.Transaction
		progress uint64
	)
	add := func(ev any) {
		switch e := ev.(type) {
		case *decoder.Transaction:
			txns = append(txns, e)
		case decoder.Progress:
			progress = max(progress, uint64(e.LSN))
		}
	}
	add(first)
	for len(txns) < maxGroupTxns {
		select {
		case ev := <-events:
			add(ev)
		default:
			return txns, progress
		}
	}
	return txns, progress
}

// appendWithRetry retries a group whose rendering or append failed for a
// reason that may pass (Postgres restarting). Nothing was acknowledged, and
// partitions that did get their batches skip them on the retry.
func (p *Producer) appendWithRetry(ctx context.Context, txns []*decoder.Transaction) error {
	backoff := 100 * time.Millisecond
	for {
		err := p.appendGroup(ctx, txns)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		p.logger.Warn("append SQL-produced records; retrying", "err", err, "first_lsn", txns[0].EndLSN, "txns", len(txns))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// pending collects one partition's batches for a group.
type pending struct {
	applied uint64
	batches []segment.SourcedBatch
	open    []record // records of the batch being filled
	openTS  []int64
	size    int
	source  uint64
}

func (pd *pending) close() {
	if len(pd.open) == 0 {
		return
	}
	pd.batches = append(pd.batches, segment.SourcedBatch{Batch: encodeBatch(pd.open, pd.openTS), Source: pd.source})
	pd.open, pd.openTS, pd.size = nil, nil, 0
}

func (p *Producer) appendGroup(ctx context.Context, txns []*decoder.Transaction) error {
	var rendered [][][]mappings.Record
	if p.renderer != nil {
		var err error
		if rendered, err = p.renderer.Render(ctx, txns); err != nil {
			return fmt.Errorf("render changes: %w", err)
		}
	}
	p.sticky = map[string]int32{}
	parts := map[topicPartition]*pending{}
	var order []topicPartition // deterministic append order
	for i, tx := range txns {
		byPart := map[topicPartition][]record{}
		n := 0 // records of tx so far
		for j, item := range tx.Items {
			var (
				recs []record
				lsn  decoder.LSN
			)
			switch it := item.(type) {
			case *decoder.Message:
				lsn = it.LSN
				// format 2: a snapshot row of a CDC mapping, rendered
				// like a change (docs/producing.md)
				if len(it.Content) > 0 && it.Content[0] == mappings.SnapshotVersion {
					recs = renderedRecords(rendered, i, j)
					break
				}
				rec, err := parseMessage(it.Content)
				if err != nil {
					p.logger.Error("skip kafgres message", "lsn", it.LSN, "err", err)
					continue
				}
				recs = append(recs, rec)
			case *decoder.Change:
				lsn = it.LSN
				recs = renderedRecords(rendered, i, j)
			}
			for _, rec := range recs {
				n++
				tp, err := p.place(ctx, rec)
				if err != nil {
					p.logger.Warn("drop record", "topic", rec.topic, "lsn", tx.EndLSN, "err", err)
					continue
				}
				fits, err := p.fits(ctx, tx, lsn, n, tp, rec)
				if err != nil {
					return err
				}
				if fits {
					byPart[tp] = append(byPart[tp], rec)
				}
			}
		}
		ts := tx.CommitTime.UnixMilli()
		for tp, recs := range byPart {
			pd := parts[tp]
			if pd == nil {
				applied, err := p.log.SourceApplied(tp.topic, tp.partition)
				if err != nil {
					return err
				}
				pd = &pending{applied: applied}
				parts[tp] = pd
				order = append(order, tp)
			}
			if uint64(tx.EndLSN) <= pd.applied {
				continue // appended before a crash or restart
			}
			size := 0
			for _, r := range recs {
				size += len(r.key) + len(r.value) + 32
			}
			if pd.size > 0 && pd.size+size > maxBatchBytes {
				pd.close()
			}
			for range recs {
				pd.openTS = append(pd.openTS, ts)
			}
			pd.open = append(pd.open, recs...)
			pd.size += size
			pd.source = uint64(tx.EndLSN)
		}
	}

	var waits []<-chan struct{}
	for _, tp := range order {
		pd := parts[tp]
		pd.close()
		if len(pd.batches) == 0 {
			continue
		}
		ch, err := p.log.AppendSourced(tp.topic, tp.partition, pd.batches)
		if err != nil {
			return fmt.Errorf("append to %s-%d: %w", tp.topic, tp.partition, err)
		}
		waits = append(waits, ch)
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// fits checks a record against its topic's max.message.bytes where it is
// appended: kafgres_produce checks kafgres.max_message_bytes when it is
// called, but the topic may take less, and CDC records are only sized
// here. A record that does not fit is not appended; so that it does not
// vanish either, it goes to kafgres.dead_letter first (an error from that
// fails the group, to be retried) and the records after it flow on.
func (p *Producer) fits(ctx context.Context, tx *decoder.Transaction, lsn decoder.LSN, n int, tp topicPartition, rec record) (bool, error) {
	limit, err := p.log.MaxMessageBytes(tp.topic)
	if err != nil {
		return false, fmt.Errorf("max.message.bytes of %s: %w", tp.topic, err)
	}
	size := batchSize(rec)
	if size <= int(limit) {
		return true, nil
	}
	reason := fmt.Sprintf("record of %d bytes (as a record batch) is larger than max.message.bytes %d of topic %q; not appended", size, limit, tp.topic)
	p.logger.Error("record too large for its topic; written to kafgres.dead_letter", "topic", tp.topic, "lsn", lsn, "xid", tx.Xid, "bytes", size, "max_message_bytes", limit)
	if err := p.deadLetters.DeadLetter(ctx, DeadLetter{LSN: lsn, Xid: tx.Xid, Error: reason, Record: deadRecord(rec, n)}); err != nil {
		return false, fmt.Errorf("dead-letter a record of %s at %s: %w", tp.topic, lsn, err)
	}
	return false, nil
}

// renderedRecords are the records item j of transaction i rendered to.
func renderedRecords(rendered [][][]mappings.Record, i, j int) []record {
	if rendered == nil {
		return nil
	}
	var recs []record
	for _, r := range rendered[i][j] {
		recs = append(recs, record{topic: r.Topic, partition: -1, key: r.Key, value: r.Value})
	}
	return recs
}

var errPartition = errors.New("partition out of range")

// place resolves a record's partition: explicit, murmur2 of the key as Kafka
// clients compute it, or sticky for a NULL key.
func (p *Producer) place(ctx context.Context, rec record) (topicPartition, error) {
	n, err := p.log.Partitions(ctx, rec.topic)
	if err != nil {
		return topicPartition{}, err
	}
	tp := topicPartition{topic: rec.topic, partition: rec.partition}
	switch {
	case rec.partition >= n:
		return tp, fmt.Errorf("%w: %d of %d", errPartition, rec.partition, n)
	case rec.partition >= 0:
	case rec.key != nil:
		tp.partition = keyPartition(rec.key, n)
	default:
		s, ok := p.sticky[rec.topic]
		if !ok || s >= n {
			s = rand.Int32N(n)
			p.sticky[rec.topic] = s
		}
		tp.partition = s
	}
	return tp, nil
}
