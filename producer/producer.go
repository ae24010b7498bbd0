// Package producer is the one bridge from the replication stream to the
// broker's log: it turns kafgres_produce records and rendered CDC changes
// into record batches and appends them exactly once.
//
// Exactly once: every batch carries the end LSN of the last transaction in
// it as its source position, which the log records atomically with the
// batch (segment.AppendSourced). A transaction is skipped on a partition
// whose applied source position is already at or past its end LSN, so a
// replay after any crash appends nothing twice; and the slot is
// acknowledged only once the appended batches are durable, so nothing is
// lost either. That skip is per partition, so a replay must place every
// record where the first attempt did: placement depends only on what the
// WAL says (placement.go).
//
// Atomic for read_committed consumers: a group holding an SQL transaction
// that writes to more than one partition is one Kafka transaction of the
// source's own producer id. Its batches are appended as transactional and
// made durable everywhere first; only then are the COMMIT markers written
// (CommitSourced), so no crash can leave one partition's part of an SQL
// transaction visible and another's missing. A replay
// skips the batches already there and commits whatever transaction the
// crash left open, on every partition, before it appends anything else.
// read_uncommitted consumers see the records as soon as they are durable,
// in commit order, as before.
package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/kafgres/kafgres/broker/retry"
	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/decoder"
	"github.com/kafgres/kafgres/mappings"
)

// Log is the broker's log as the producer needs it.
type Log interface {
	// Topic looks a topic up by name, creating it first when
	// auto-creation allows; ok is false when it does not exist and was
	// not created.
	Topic(ctx context.Context, name string) (t TopicInfo, ok bool, err error)
	// Limits are what the topic refuses of a record.
	Limits(topic string) (Limits, error)
	// SourceApplied is the highest source position appended to a partition.
	SourceApplied(topic string, partition int32) (uint64, error)
	// AppendSourced appends batches in order; the channel closes once they
	// are durable. With inTxn they are part of the source's Kafka
	// transaction: transactional batches that read_committed consumers do
	// not see until CommitSourced.
	AppendSourced(topic string, partition int32, batches []segment.SourcedBatch, inTxn bool) (<-chan struct{}, error)
	// CommitSourced commits the source's Kafka transaction on every
	// partition where one is open (COMMIT markers), durably, before it
	// returns. With none open it does nothing.
	CommitSourced(ctx context.Context) error
	// SourcedTxn says whether the source's Kafka transaction is open on
	// some partition (a crash came between its data and its markers), and
	// the highest source position appended in it.
	SourcedTxn() (open bool, end uint64)
	// Delivered publishes that everything up to lsn is durably in the log
	// (kafgres.delivery, read by kafgres_wait_delivered); records says
	// whether records were appended, or lsn only moved past WAL without
	// kafgres content.
	Delivered(lsn uint64, records bool)
}

// Limits are what a topic refuses of a record, as it does of a Kafka
// producer's.
type Limits struct {
	MaxMessageBytes int32 // max.message.bytes: the largest record batch it stores
	Compacted       bool  // cleanup.policy includes compact: a record needs a key
}

// TopicInfo is what placement needs of a topic: its identity (a topic
// dropped and created again is another topic) and partition count now.
type TopicInfo struct {
	ID         int64
	Partitions int32
	// Internal: one of Kafka's internal topics, which producers may not
	// write to.
	Internal bool
}

// Source is the replication stream; *decoder.Decoder is one.
type Source interface {
	Run(ctx context.Context, out chan<- decoder.Event) error
	Ack(lsn decoder.LSN)
}

// Renderer renders CDC changes and snapshot rows; *mappings.Renderer is
// one.
type Renderer interface {
	Render(ctx context.Context, txns []*decoder.Transaction, log mappings.Log) (mappings.Rendered, error)
}

// Producer drains a Source into a Log.
type Producer struct {
	source      Source
	log         Log
	renderer    Renderer // nil: changes are ignored
	deadLetters DeadLetters
	status      Status // nil: the state is not published
	placement   *placement
	failpoint   Failpoint
	logger      *slog.Logger

	// txnOpen: the source's Kafka transaction is open, holding appends up
	// to source position txnEnd; every append goes into it until a group
	// reaches txnEnd and commits it.
	txnOpen bool
	txnEnd  uint64

	// stall is what holds delivery back (nil: nothing), and whether
	// that is published.
	stall          *Stall
	stallPublished bool
}

const (
	maxGroupTxns  = 1000    // transactions appended per pass
	maxBatchBytes = 1 << 20 // soft limit: a batch holds whole transactions
	eventBuffer   = 256
)

func New(source Source, log Log, renderer Renderer, deadLetters DeadLetters, epochs Epochs, status Status, logger *slog.Logger) *Producer {
	return &Producer{source: source, log: log, renderer: renderer, deadLetters: deadLetters, status: status,
		placement: newPlacement(log, epochs), logger: logger}
}

// Run streams until ctx ends.
func (p *Producer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan decoder.Event, eventBuffer)
	srcErr := make(chan error, 1)
	go func() { srcErr <- p.source.Run(ctx, events) }()

	// A transaction the last run left open (it died between its data and
	// its markers) stays open until the replay has appended everything it
	// was to hold; see startGroup.
	p.txnOpen, p.txnEnd = p.log.SourcedTxn()

	var acked uint64
	for {
		var first decoder.Event
		select {
		case <-ctx.Done():
			return nil
		case err := <-srcErr:
			return fmt.Errorf("replication stream: %w", err)
		case first = <-events:
		}
		txns, progress, stall := gather(first, events)
		records := len(txns) > 0
		if records {
			waits, err := p.appendWithRetry(ctx, txns)
			if err == nil {
				err = wait(ctx, waits)
			}
			if err != nil {
				// Stopping: the group may not be durable, so it must not
				// be acknowledged (the decoder reports the last
				// acknowledgement on its way out).
				return nil
			}
			acked = max(acked, uint64(txns[len(txns)-1].EndLSN))
		}
		// A keepalive's position covers every transaction before it in the
		// stream, all of which are durable by now.
		acked = max(acked, progress)
		if acked > 0 {
			p.source.Ack(decoder.LSN(acked))
			p.log.Delivered(acked, records)
			if p.stall == nil || p.stall.passedBy(acked) {
				p.setStall(ctx, nil) // publishes only a change
			}
		}
		if stall != nil {
			p.setStall(ctx, &Stall{Reason: "the replication stream cannot be read: " + stall.Err.Error(),
				LSN: stall.LSN, Xid: stall.Xid, EndLSN: stall.EndLSN, Skippable: stall.Xid != 0})
		}
	}
}

// setStall publishes what holds delivery back, or that nothing does
// (nil), when that changed or did not get published: a failure is logged
// and the next call publishes again.
func (p *Producer) setStall(ctx context.Context, s *Stall) {
	same := s == nil && p.stall == nil || s != nil && p.stall != nil && *s == *p.stall
	if same && p.stallPublished {
		return
	}
	if s != nil && !same {
		p.logger.Error("SQL-produced and CDC records are held back", "reason", s.Reason, "lsn", s.LSN, "xid", s.Xid)
	}
	p.stall, p.stallPublished = s, true
	if p.status == nil {
		return
	}
	var err error
	if s != nil {
		err = p.status.Stalled(ctx, *s)
	} else {
		err = p.status.Flowing(ctx)
	}
	if err != nil {
		p.logger.Warn("publish the pipeline's state", "err", err)
		p.stallPublished = false
	}
}

// gather takes what is already queued, up to a group's worth, or up to
// a Stall, which comes after everything the stream could deliver.
func gather(first decoder.Event, events <-chan decoder.Event) ([]*decoder.Transaction, uint64, *decoder.Stall) {
	var (
		txns     []*decoder.Transaction
		progress uint64
		stall    *decoder.Stall
	)
	add := func(ev decoder.Event) {
		switch e := ev.(type) {
		case *decoder.Transaction:
			txns = append(txns, e)
		case decoder.Progress:
			progress = max(progress, uint64(e.LSN))
		case decoder.Stall:
			stall = &e
		}
	}
	add(first)
	for len(txns) < maxGroupTxns && stall == nil {
		select {
		case ev := <-events:
			add(ev)
		default:
			return txns, progress, stall
		}
	}
	return txns, progress, stall
}

// appendWithRetry writes a group, retrying when its rendering or append
// failed for a reason that may pass (Postgres restarting), and returns the
// channels that close once the group is durable. Nothing was acknowledged,
// and partitions that did get their batches skip them on the retry; the
// waits of every attempt are kept, since a retry that skips a partition
// must still wait for the earlier attempt's append to it. It returns an
// error only when ctx ends first, and then the group must not be
// acknowledged.
func (p *Producer) appendWithRetry(ctx context.Context, txns []*decoder.Transaction) ([]<-chan struct{}, error) {
	var all []<-chan struct{}
	err := retry.Run(ctx, retry.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}, func(ctx context.Context) (bool, error) {
		waits, err := p.startGroup(ctx, txns)
		all = appendWaits(all, waits...)
		if err != nil || !p.txnOpen {
			return false, err
		}
		// Commit once the transaction holds all it was to: the markers go
		// only where the data is durable, and only when no record of a
		// transaction it holds is still to be appended elsewhere.
		end := uint64(txns[len(txns)-1].EndLSN)
		if p.txnEnd = max(p.txnEnd, end); end < p.txnEnd {
			return false, nil
		}
		if err := wait(ctx, all); err != nil {
			return false, err
		}
		if err := p.log.CommitSourced(ctx); err != nil {
			return false, fmt.Errorf("commit the group's transaction: %w", err)
		}
		p.txnOpen = false
		return false, nil
	}, func(f retry.Failure) {
		if errors.Is(f.Err, mappings.ErrStalled) {
			p.setStall(ctx, &Stall{Reason: f.Err.Error(), LSN: txns[0].CommitLSN, Xid: txns[0].Xid, EndLSN: txns[0].EndLSN})
		}
		level := slog.LevelDebug
		if f.Log {
			level = slog.LevelWarn
		}
		p.logger.Log(ctx, level, "append SQL-produced records; retrying", "err", f.Err, "first_lsn", txns[0].EndLSN, "txns", len(txns), "attempt", f.Attempt, "retry_in", f.Delay)
	})
	if err != nil {
		return nil, err
	}
	if groupBytes(txns) >= bigGroupBytes {
		// Rendering a group of large rows makes several copies of each
		// (the record literals sent to Postgres, a dead letter's image),
		// garbage once it is rendered; the runtime would keep them
		// resident and grow its heap goal on them, so that each large row
		// raised the broker's peak further (BenchmarkMemoryLargeValues).
		debug.FreeOSMemory()
	}
	return all, nil
}

// bigGroupBytes is the stream size of a group after which the producer
// hands freed memory back to the operating system at once.
const bigGroupBytes = 64 << 20

func groupBytes(txns []*decoder.Transaction) int {
	n := 0
	for _, tx := range txns {
		n += tx.Bytes
	}
	return n
}

// appendWaits adds waits to ws, skipping a channel equal to the last one
// (partitions appended in one group commit pass share its channel).
func appendWaits(ws []<-chan struct{}, add ...<-chan struct{}) []<-chan struct{} {
	for _, ch := range add {
		if len(ws) == 0 || ws[len(ws)-1] != ch {
			ws = append(ws, ch)
		}
	}
	return ws
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

// item is one record-producing entry of a transaction: its position, the
// records it became, and, for a message that does not parse, why.
type item struct {
	lsn        decoder.LSN
	recs       []record
	unreadable *decoder.Unreadable
}

// items lists what tx turns into, in WAL order.
func items(tx *decoder.Transaction, rendered mappings.Rendered) []item {
	var out []item
	for _, it := range tx.Items {
		switch it := it.(type) {
		case *decoder.Produced:
			out = append(out, item{lsn: it.LSN, recs: []record{producedRecord(it)}})
		case *decoder.Change:
			out = append(out, item{lsn: it.LSN, recs: renderedRecords(rendered[it])})
		case *decoder.SnapshotRow:
			out = append(out, item{lsn: it.LSN, recs: renderedRecords(rendered[it])})
		case *decoder.MappingRequest:
			// the replayed dead letters, in their order
			out = append(out, item{lsn: it.LSN, recs: renderedRecords(rendered[it])})
		case *decoder.Unreadable:
			out = append(out, item{lsn: it.LSN, unreadable: it})
		}
	}
	return out
}

// appendGroup writes a group and waits until it is durable.
func (p *Producer) appendGroup(ctx context.Context, txns []*decoder.Transaction) error {
	waits, err := p.startGroup(ctx, txns)
	if err != nil {
		return err
	}
	return wait(ctx, waits)
}

// wait waits for every channel of waits to close, or for ctx.
func wait(ctx context.Context, waits []<-chan struct{}) error {
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// startGroup renders and writes a group, and returns the channels that
// close once its appends are durable, without waiting for them (unless the
// failpoint is armed). On an error the waits returned are those of the
// partitions that were appended before it.
func (p *Producer) startGroup(ctx context.Context, txns []*decoder.Transaction) ([]<-chan struct{}, error) {
	var rendered mappings.Rendered
	if p.renderer != nil {
		var err error
		if rendered, err = p.renderer.Render(ctx, txns, renderLog{p}); err != nil {
			return nil, fmt.Errorf("render changes: %w", err)
		}
	}
	pl := p.placement.group()
	parts := map[topicPartition]*pending{}
	var order []topicPartition // deterministic append order
	spans := false             // a transaction of the group places records on more than one partition
	for _, tx := range txns {
		byPart := map[topicPartition][]record{}
		n := 0 // records of tx so far
		for _, it := range items(tx, rendered) {
			if it.unreadable != nil {
				n++
				if err := p.deadLetter(ctx, tx, it.lsn, skippedWhy(tx, it.unreadable.Err.Error()), unreadableRow(it.unreadable, n)); err != nil {
					return nil, err
				}
				continue
			}
			for _, rec := range it.recs {
				n++
				if tx.Skipped != nil {
					if err := p.deadLetter(ctx, tx, it.lsn, skippedWhy(tx, ""), deadRecord(rec, n)); err != nil {
						return nil, err
					}
					continue
				}
				tp, why, err := pl.place(ctx, tx.EndLSN, rec)
				if err != nil {
					return nil, err
				}
				if why == "" {
					pd, err := pendingOf(p.log, parts, &order, tp)
					if err != nil {
						return nil, err
					}
					// one appended before a crash or reconnect is not
					// refused now, whatever the topic says now; it still
					// counts for spans below, and is skipped there
					if uint64(tx.EndLSN) > pd.applied {
						if why, err = p.refused(tp, rec); err != nil {
							return nil, err
						}
					}
				}
				if why != "" {
					if err := p.deadLetter(ctx, tx, it.lsn, why, deadRecord(rec, n)); err != nil {
						return nil, err
					}
					continue
				}
				byPart[tp] = append(byPart[tp], rec)
			}
		}
		spans = spans || len(byPart) > 1
		ts := tx.CommitTime.UnixMilli()
		for tp, recs := range byPart {
			pd, err := pendingOf(p.log, parts, &order, tp)
			if err != nil {
				return nil, err
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

	// A group holding an SQL transaction whose records go to more than one
	// partition is one Kafka transaction, so read_committed consumers see
	// all of that SQL transaction or none of it. A group whose transactions
	// each stay on one partition needs none: one partition's append is
	// all-or-nothing already, and Kafka orders nothing across partitions,
	// so its batches are plain, with no COMMIT markers to write, fsync and
	// give offsets to. spans counts the partitions each transaction places
	// records on, appended before or not, so every attempt decides the same
	// for it; and while a transaction is open every append joins it.
	if spans {
		p.txnOpen = true
	}
	atomic := p.txnOpen
	var waits []<-chan struct{}
	for _, tp := range order {
		pd := parts[tp]
		if pd.close(); len(pd.batches) == 0 {
			continue
		}
		ch, err := p.log.AppendSourced(tp.topic, tp.partition, pd.batches, atomic)
		if err != nil {
			return waits, fmt.Errorf("append to %s-%d: %w", tp.topic, tp.partition, err)
		}
		waits = appendWaits(waits, ch)
		if p.failpoint.Appends > 0 {
			// The failpoint counts durable appends and crashes before
			// anything after the nth is written: no pipelining while armed.
			if err := wait(ctx, waits); err != nil {
				return waits, err
			}
			p.appended()
		}
	}
	return waits, nil
}

// pendingOf is tp's pending batches in parts, made (with the partition's
// applied source position, and its place in order) on first use.
func pendingOf(log Log, parts map[topicPartition]*pending, order *[]topicPartition, tp topicPartition) (*pending, error) {
	if pd := parts[tp]; pd != nil {
		return pd, nil
	}
	applied, err := log.SourceApplied(tp.topic, tp.partition)
	if err != nil {
		return nil, err
	}
	pd := &pending{applied: applied}
	parts[tp] = pd
	*order = append(*order, tp)
	return pd, nil
}

// renderLog is the log as the renderer asks it (mappings.Log).
type renderLog struct{ p *Producer }

// Delivered says whether every partition of topic has the source
// position end.
func (l renderLog) Delivered(topic string, end decoder.LSN) bool {
	p := l.p
	for part := int32(0); ; part++ {
		applied, err := p.log.SourceApplied(topic, part)
		if err != nil {
			return part > 0 // past the last partition, or no such topic
		}
		if uint64(end) > applied {
			return false
		}
	}
}

// MaxRecordBytes is the topic's max.message.bytes, 0 when it cannot be
// read (the record is then sized where it is appended, refused).
func (l renderLog) MaxRecordBytes(topic string) int64 {
	limits, err := l.p.log.Limits(topic)
	if err != nil {
		return 0
	}
	return int64(limits.MaxMessageBytes)
}

// skippedWhy is why a record of tx is dead-lettered: why, and for a
// skipped transaction what stopped the stream there.
func skippedWhy(tx *decoder.Transaction, why string) string {
	if tx.Skipped == nil {
		return why
	}
	skipped := "transaction skipped with kafgres_skip_transaction: " + tx.Skipped.Error()
	if why == "" || why == tx.Skipped.Error() {
		return skipped
	}
	return skipped + "; this message: " + why
}

// refused checks a record against its topic where it is appended, as the
// topic would check a Kafka producer's: max.message.bytes (kafgres_produce
// checks kafgres.max_message_bytes when it is called, but the topic may
// take less, and CDC records are only sized here), and a key for a
// compacted topic (kafgres_produce refuses a record without one; a CDC
// record, or one produced before the topic was compacted, is caught here).
// It says why the record is refused, or "".
func (p *Producer) refused(tp topicPartition, rec record) (string, error) {
	limits, err := p.log.Limits(tp.topic)
	if err != nil {
		return "", fmt.Errorf("limits of %s: %w", tp.topic, err)
	}
	if size := batchSize(rec); size > int(limits.MaxMessageBytes) {
		return fmt.Sprintf("record of %d bytes (as a record batch) is larger than max.message.bytes %d of topic %q; not appended", size, limits.MaxMessageBytes, tp.topic), nil
	}
	if limits.Compacted && rec.key == nil {
		return fmt.Sprintf("record without a key; topic %q is compacted (cleanup.policy), which refuses it as Kafka does; not appended", tp.topic), nil
	}
	return "", nil
}

// deadLetter keeps a committed record (or message) that cannot be
// appended in kafgres.dead_letter, so that it does not vanish; the records
// after it flow on. An error from that fails the group, to be retried.
func (p *Producer) deadLetter(ctx context.Context, tx *decoder.Transaction, lsn decoder.LSN, why string, row any) error {
	p.logger.Error("record not appended; written to kafgres.dead_letter", "lsn", lsn, "xid", tx.Xid, "reason", why)
	if err := p.deadLetters.DeadLetter(ctx, DeadLetter{LSN: lsn, Xid: tx.Xid, Error: why, Row: row}); err != nil {
		return fmt.Errorf("dead-letter a record at %s: %w", lsn, err)
	}
	return nil
}

// producedRecord is a kafgres_produce record on its way into its topic.
func producedRecord(it *decoder.Produced) record {
	rec := record{topic: it.Topic, partition: it.Partition, key: it.Key, value: it.Value}
	for _, h := range it.Headers {
		rec.headers = append(rec.headers, kmsgHeader(h))
	}
	return rec
}

// renderedRecords are the records a change or snapshot row rendered to.
func renderedRecords(rs []mappings.Record) []record {
	recs := make([]record, 0, len(rs))
	for _, r := range rs {
		recs = append(recs, record{topic: r.Topic, partition: -1, key: r.Key, value: r.Value})
	}
	return recs
}
