package main

// Transaction scenarios (issue #14): franz-go's transactional producer
// (BeginTransaction / EndTransaction), read_committed consumers, and raw
// kmsg requests where franz-go has no API of its own (AddOffsetsToTxn and
// TxnOffsetCommit outside a group session, OffsetFetch with require_stable,
// DescribeProducers).

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/conformance/clients/protocol"
)

func init() {
	scenarios["txn-commit"] = txnCommit
	scenarios["txn-abort"] = txnAbort
	scenarios["txn-fencing"] = txnFencing
	scenarios["txn-timeout-abort"] = txnTimeoutAbort
	scenarios["txn-offsets"] = txnOffsets
	scenarios["transactions-tool"] = func(_ context.Context, r *runner) error {
		r.emit(map[string]any{"skip": "a kafka-*.sh tool scenario (java-tools)"})
		return nil
	}
}

func (r *runner) txnID() string { return fmt.Sprintf("%s-%s-tx", r.Prefix, r.Scenario) }

// txnClient is a transactional producer of r.txnID() writing to the
// partitions its records name.
func (r *runner) txnClient(opts ...kgo.Opt) (*kgo.Client, error) {
	return r.newClient(append([]kgo.Opt{
		kgo.TransactionalID(r.txnID()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
}

// step prints obs with the step's error (null for none) and reports
// whether it succeeded.
func (r *runner) step(err error, obs map[string]any) bool {
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz: %s: %v\n", r.Scenario, err)
		obs["error"] = errName(err)
	} else {
		obs["error"] = nil
	}
	r.emit(obs)
	return err == nil
}

// inTxn begins a transaction, produces recs synchronously and ends it.
func inTxn(ctx context.Context, cl *kgo.Client, commit bool, recs ...*kgo.Record) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := produce(ctx, cl, recs...); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
}

// consumeIsolated reads every partition of topic from the start with the
// isolation level for wait, or until want+1 records arrived (one more
// than expected, so that a record that should not be seen shows).
func (r *runner) consumeIsolated(ctx context.Context, topic string, partitions int32, level kgo.IsolationLevel, want int, wait time.Duration) ([]*kgo.Record, error) {
	recs, err := r.consume(ctx, topic, partitions, want+1, wait, kgo.FetchIsolationLevel(level))
	if err != nil && len(recs) >= want {
		err = nil // the time ran out waiting for the extra record
	}
	return recs, err
}

func isolationName(committed bool) string {
	if committed {
		return "read_committed"
	}
	return "read_uncommitted"
}

func (r *runner) printIsolated(ctx context.Context, committed bool, want int) error {
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	recs, err := r.consumeIsolated(ctx, r.Topic(0), 1, level, want, 3*time.Second+time.Duration(want)*500*time.Millisecond)
	for _, rec := range recs {
		r.emit(map[string]any{"isolation": isolationName(committed), "offset": rec.Offset, "value": protocol.Printable(rec.Value)})
	}
	return err
}

// latestOffset is ListOffsets(latest) of topic[partition] with the
// isolation level: the high watermark, or the last stable offset.
func latestOffset(ctx context.Context, cl *kgo.Client, topic string, partition int32, committed bool) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p, err := sendListOffsets(ctx, cl, req)
	return p.Offset, err
}

func txnCommit(ctx context.Context, r *runner) error {
	cl, err := r.txnClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); !r.step(err, map[string]any{"op": "init"}) {
		return nil
	}
	t := r.Topic(0)
	rec := func(p int32, i int) *kgo.Record {
		return &kgo.Record{Topic: t, Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
	}
	if !r.step(inTxn(ctx, cl, true, rec(0, 0), rec(1, 1), rec(0, 2)), map[string]any{"op": "commit", "transaction": 1}) {
		return nil
	}
	r.step(inTxn(ctx, cl, true, rec(1, 3)), map[string]any{"op": "commit", "transaction": 2})
	recs, cerr := r.consumeIsolated(ctx, t, 2, kgo.ReadCommitted(), 4, 5*time.Second)
	for _, rec := range recs {
		r.emit(map[string]any{"partition": rec.Partition, "offset": rec.Offset, "key": protocol.Printable(rec.Key), "value": protocol.Printable(rec.Value)})
	}
	for p := int32(0); p < 2; p++ {
		off, err := latestOffset(ctx, cl, t, p, false)
		if err != nil {
			return err
		}
		r.emit(map[string]any{"partition": p, "query": "latest", "offset": off})
	}
	return cerr
}

func txnAbort(ctx context.Context, r *runner) error {
	cl, err := r.txnClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); !r.step(err, map[string]any{"op": "init"}) {
		return nil
	}
	t := r.Topic(0)
	val := func(v string) *kgo.Record { return &kgo.Record{Topic: t, Value: []byte(v)} }
	r.step(inTxn(ctx, cl, false, val("a0"), val("a1")), map[string]any{"op": "abort"})
	r.step(inTxn(ctx, cl, true, val("c0")), map[string]any{"op": "commit"})
	if err := r.printIsolated(ctx, true, 1); err != nil {
		return err
	}
	if err := r.printIsolated(ctx, false, 3); err != nil {
		return err
	}
	for _, committed := range []bool{true, false} {
		off, err := latestOffset(ctx, cl, t, 0, committed)
		if err != nil {
			return err
		}
		r.emit(map[string]any{"query": "latest", "isolation": isolationName(committed), "offset": off})
	}
	return nil
}

func txnFencing(ctx context.Context, r *runner) error {
	first, err := r.txnClient()
	if err != nil {
		return err
	}
	defer first.Close()
	t := r.Topic(0)
	val := func(v string) *kgo.Record { return &kgo.Record{Topic: t, Value: []byte(v)} }
	who := func(p, op string) map[string]any { return map[string]any{"producer": p, "op": op} }
	if _, _, err := first.ProducerID(ctx); !r.step(err, who("first", "init")) {
		return nil
	}
	if err := first.BeginTransaction(); err != nil {
		return err
	}
	if !r.step(produce(ctx, first, val("f0")), who("first", "send")) {
		return nil
	}
	second, err := r.txnClient()
	if err != nil {
		return err
	}
	defer second.Close()
	if _, _, err := second.ProducerID(ctx); !r.step(err, who("second", "init")) {
		return nil
	}
	r.step(produce(ctx, first, val("f1")), who("first", "send"))
	r.step(first.EndTransaction(ctx, kgo.TryCommit), who("first", "commit"))
	r.step(inTxn(ctx, second, true, val("s0")), who("second", "commit"))
	recs, cerr := r.consumeIsolated(ctx, t, 1, kgo.ReadCommitted(), 1, 4*time.Second)
	for _, rec := range recs {
		r.emit(map[string]any{"offset": rec.Offset, "value": protocol.Printable(rec.Value)})
	}
	if cerr != nil {
		return cerr
	}
	return r.describeProducers(ctx, second, t, 0)
}

// describeProducers prints {producer_epoch, last_sequence,
// current_txn_start_offset} per active producer of topic[partition].
func (r *runner) describeProducers(ctx context.Context, cl *kgo.Client, topic string, partition int32) error {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("describe producers: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("describe producers of %s[%d]: %w", t.Topic, p.Partition, err)
			}
			for _, ps := range p.ActiveProducers {
				r.emit(map[string]any{"producer_epoch": ps.ProducerEpoch, "last_sequence": ps.LastSequence, "current_txn_start_offset": ps.CurrentTxnStartOffset})
			}
		}
	}
	return nil
}

func txnTimeoutAbort(ctx context.Context, r *runner) error {
	cl, err := r.txnClient(kgo.TransactionTimeout(2 * time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); !r.step(err, map[string]any{"op": "init"}) {
		return nil
	}
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if !r.step(produce(ctx, cl, &kgo.Record{Topic: r.Topic(0), Value: []byte("t0")}), map[string]any{"op": "send"}) {
		return nil
	}
	time.Sleep(5 * time.Second)
	r.step(cl.EndTransaction(ctx, kgo.TryCommit), map[string]any{"op": "commit"})
	if err := r.printIsolated(ctx, true, 0); err != nil {
		return err
	}
	if err := r.printIsolated(ctx, false, 1); err != nil {
		return err
	}
	admin, err := r.client()
	if err != nil {
		return err
	}
	defer admin.Close()
	off, err := latestOffset(ctx, admin, r.Topic(0), 0, false)
	if err != nil {
		return err
	}
	r.emit(map[string]any{"query": "latest", "offset": off})
	return r.describeProducers(ctx, admin, r.Topic(0), 0)
}

// txnOffsets is consume-transform-produce by hand: the records of the
// transaction through franz-go, the group's offset through AddOffsetsToTxn
// and TxnOffsetCommit (generation -1, as a producer outside the group
// sends them), then OffsetFetch without and with require_stable.
func txnOffsets(ctx context.Context, r *runner) error {
	in, out := r.Topic(0), r.Topic(1)
	plain, err := r.client()
	if err != nil {
		return err
	}
	defer plain.Close()
	if err := produce(ctx, plain, &kgo.Record{Topic: in, Value: []byte("i0")}, &kgo.Record{Topic: in, Value: []byte("i1")}, &kgo.Record{Topic: in, Value: []byte("i2")}); err != nil {
		return err
	}
	cl, err := r.txnClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); !r.step(err, map[string]any{"op": "init"}) {
		return nil
	}
	send := func() error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		for i := 0; i < 3; i++ {
			if err := produce(ctx, cl, &kgo.Record{Topic: out, Value: fmt.Appendf(nil, "I%d", i)}); err != nil {
				return err
			}
		}
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			return err
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = r.txnID(), pid, epoch, r.Group()
		aresp, err := add.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(aresp.ErrorCode); err != nil {
			return fmt.Errorf("AddOffsetsToTxn: %w", err)
		}
		commit := kmsg.NewPtrTxnOffsetCommitRequest()
		commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = r.txnID(), r.Group(), pid, epoch
		commit.Generation = -1
		meta, err := metadata(ctx, plain, in)
		if err != nil {
			return err
		}
		ct := kmsg.NewTxnOffsetCommitRequestTopic()
		ct.Topic, ct.TopicID = in, meta.Topics[0].TopicID // v6+ names topics by id
		cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.LeaderEpoch = 0, 3, -1
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
		cresp, err := commit.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		for _, t := range cresp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("TxnOffsetCommit: %w", err)
				}
			}
		}
		return nil
	}
	if !r.step(send(), map[string]any{"op": "send_offsets"}) {
		return nil
	}
	fetchOnce := func(when string, stable bool) (map[string]any, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = stable
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = r.Group()
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = in, []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, plain)
		if err != nil {
			return nil, fmt.Errorf("OffsetFetch: %w", err)
		}
		obs := map[string]any{"when": when, "require_stable": stable}
		for _, g := range resp.Groups {
			if g.ErrorCode != 0 {
				obs["error"] = errName(kerr.ErrorForCode(g.ErrorCode))
			}
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						obs["error"] = errName(kerr.ErrorForCode(p.ErrorCode))
					} else if p.Offset >= 0 {
						obs["offset"] = p.Offset
					} else {
						obs["offset"] = nil
					}
				}
			}
		}
		return obs, nil
	}
	// settle: ask again while the offsets are unstable, as the markers
	// reach the group after EndTxn's answer (on Kafka too)
	fetch := func(when string, stable, settle bool) error {
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			obs, err := fetchOnce(when, stable)
			if err != nil {
				return err
			}
			if !settle || obs["error"] != "UNSTABLE_OFFSET_COMMIT" || time.Now().After(end) {
				r.emit(obs)
				return nil
			}
		}
	}
	return r.txnOffsetsEnd(ctx, cl, out, fetch)
}

func (r *runner) txnOffsetsEnd(ctx context.Context, cl *kgo.Client, out string, fetch func(string, bool, bool) error) error {
	for _, stable := range []bool{false, true} {
		if err := fetch("before_commit", stable, false); err != nil {
			return err
		}
	}
	if !r.step(cl.EndTransaction(ctx, kgo.TryCommit), map[string]any{"op": "commit"}) {
		return nil
	}
	for _, stable := range []bool{true, false} {
		if err := fetch("after_commit", stable, stable); err != nil {
			return err
		}
	}
	recs, err := r.consumeIsolated(ctx, out, 1, kgo.ReadCommitted(), 3, 5*time.Second)
	for _, rec := range recs {
		r.emit(map[string]any{"offset": rec.Offset, "value": protocol.Printable(rec.Value)})
	}
	return err
}
