package main

// Transaction scenarios (issue #14): Sarama's transactional SyncProducer
// (BeginTxn / CommitTxn / AbortTxn / AddOffsetsToTxn), read_committed
// consumers, and Sarama's request types sent straight to a broker where
// its clients have no call of their own (ListOffsets with an isolation
// level, OffsetFetch with require_stable).

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafgres/kafgres/tests/conformance/clients/protocol"
)

func init() {
	scenarios["txn-commit"] = txnCommit
	scenarios["txn-abort"] = txnAbort
	scenarios["txn-fencing"] = txnFencing
	scenarios["txn-timeout-abort"] = txnTimeoutAbort
	scenarios["txn-offsets"] = txnOffsets
	scenarios["transactions-tool"] = func(r *runner, emit emitFunc) error {
		emit(map[string]any{"skip": "a kafka-*.sh tool scenario (java-tools)"})
		return nil
	}
	scenarios["compaction"] = func(r *runner, emit emitFunc) error {
		emit(map[string]any{"skip": "the brokers' log cleaners are compared, not clients: franz and java run it"})
		return nil
	}
}

func (r *runner) txnID() string { return fmt.Sprintf("%s-%s-tx", r.Prefix, r.Scenario) }

// txnConfig is a transactional producer of r.txnID() writing to the
// partitions its messages name. Sarama wants idempotence, acks=all and
// one request in flight for it.
func (r *runner) txnConfig(timeout time.Duration) *sarama.Config {
	c := config()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Transaction.ID = r.txnID()
	c.Producer.Transaction.Timeout = timeout
	// Sarama's default (50 retries, backoff growing to 1 s) would spend
	// the scenario's budget retrying a fenced or timed-out commit
	c.Producer.Transaction.Retry.Max = 5
	return c
}

// txnProducer makes the producer: NewSyncProducer sends InitProducerId
// itself, so its error is the "init" step's.
func (r *runner) txnProducer(timeout time.Duration) (sarama.SyncProducer, error) {
	return sarama.NewSyncProducer([]string{r.Bootstrap}, r.txnConfig(timeout))
}

// txnErrName is secureErrName: the transaction manager hands some broker
// errors back wrapped with sarama.Wrap (errors.Is, not errors.As, finds
// them).
func txnErrName(err error) string { return secureErrName(err) }

// step emits obs with the step's error (null for none) and reports
// whether it succeeded.
func (r *runner) step(emit emitFunc, err error, obs map[string]any) bool {
	if err != nil {
		fmt.Fprintf(os.Stderr, "sarama: %s: %v\n", r.Scenario, err)
		obs["error"] = txnErrName(err)
	} else {
		obs["error"] = nil
	}
	emit(obs)
	return err == nil
}

// send produces msgs synchronously, returning the first delivery error.
func send(p sarama.SyncProducer, msgs ...*sarama.ProducerMessage) error {
	if err := p.SendMessages(msgs); err != nil {
		var perrs sarama.ProducerErrors
		if errors.As(err, &perrs) && len(perrs) > 0 {
			return fmt.Errorf("producing to %s[%d]: %w", perrs[0].Msg.Topic, perrs[0].Msg.Partition, perrs[0].Err)
		}
		return fmt.Errorf("producing: %w", err)
	}
	return nil
}

// inTxn begins a transaction, produces msgs and commits or aborts it.
func inTxn(p sarama.SyncProducer, commit bool, msgs ...*sarama.ProducerMessage) error {
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := send(p, msgs...); err != nil {
		return err
	}
	if commit {
		return p.CommitTxn()
	}
	return p.AbortTxn()
}

func msgAt(topic string, partition int32, key, value string) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Partition: partition, Value: sarama.StringEncoder(value)}
	if key != "" {
		m.Key = sarama.StringEncoder(key)
	}
	return m
}

func isolationName(committed bool) string {
	if committed {
		return "read_committed"
	}
	return "read_uncommitted"
}

// consumeIsolated reads partitions of topic from the start with the
// isolation level for wait, or until want+1 records arrived (one more
// than expected, so that a record that should not be seen shows).
func (r *runner) consumeIsolated(topic string, partitions int32, committed bool, want int, wait time.Duration) ([]*sarama.ConsumerMessage, error) {
	c := config()
	c.Consumer.IsolationLevel = sarama.ReadUncommitted
	if committed {
		c.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	recs, err := r.consume(c, topic, partitions, want+1, wait)
	if err != nil && len(recs) >= want {
		err = nil // the time ran out waiting for the extra record
	}
	return recs, err
}

func (r *runner) printIsolated(emit emitFunc, committed bool, want int) error {
	recs, err := r.consumeIsolated(r.Topic(0), 1, committed, want, 3*time.Second+time.Duration(want)*500*time.Millisecond)
	for _, m := range recs {
		emit(map[string]any{"isolation": isolationName(committed), "offset": m.Offset, "value": protocol.Printable(m.Value)})
	}
	return err
}

// latestOffset is ListOffsets(latest) of topic[partition] with the
// isolation level (the high watermark, or the last stable offset), sent
// to the leader: Sarama's Client.GetOffset always reads uncommitted.
func (r *runner) latestOffset(topic string, partition int32, committed bool) (int64, error) {
	c := config()
	cl, err := r.client(c)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	leader, err := cl.Leader(topic, partition)
	if err != nil {
		return 0, fmt.Errorf("leader of %s[%d]: %w", topic, partition, err)
	}
	req := sarama.NewOffsetRequest(c.Version)
	if committed {
		req.IsolationLevel = sarama.ReadCommitted
	}
	req.AddBlock(topic, partition, sarama.OffsetNewest, 1)
	resp, err := leader.GetAvailableOffsets(req)
	if err != nil {
		return 0, fmt.Errorf("list offsets of %s[%d]: %w", topic, partition, err)
	}
	block := resp.GetBlock(topic, partition)
	if block == nil {
		return 0, fmt.Errorf("list offsets of %s[%d]: partition missing from the response", topic, partition)
	}
	if block.Err != sarama.ErrNoError {
		return 0, fmt.Errorf("list offsets of %s[%d]: %w", topic, partition, block.Err)
	}
	return block.Offset, nil
}

func txnCommit(r *runner, emit emitFunc) error {
	p, err := r.txnProducer(time.Minute)
	if !r.step(emit, err, map[string]any{"op": "init"}) {
		return nil
	}
	defer p.Close()
	t := r.Topic(0)
	if !r.step(emit, inTxn(p, true, msgAt(t, 0, "k0", "v0"), msgAt(t, 1, "k1", "v1"), msgAt(t, 0, "k2", "v2")), map[string]any{"op": "commit", "transaction": 1}) {
		return nil
	}
	r.step(emit, inTxn(p, true, msgAt(t, 1, "k3", "v3")), map[string]any{"op": "commit", "transaction": 2})
	recs, cerr := r.consumeIsolated(t, 2, true, 4, 5*time.Second)
	for _, m := range recs {
		emit(map[string]any{"partition": m.Partition, "offset": m.Offset, "key": protocol.Printable(m.Key), "value": protocol.Printable(m.Value)})
	}
	for part := int32(0); part < 2; part++ {
		off, err := r.latestOffset(t, part, false)
		if err != nil {
			return err
		}
		emit(map[string]any{"partition": part, "query": "latest", "offset": off})
	}
	return cerr
}

func txnAbort(r *runner, emit emitFunc) error {
	p, err := r.txnProducer(time.Minute)
	if !r.step(emit, err, map[string]any{"op": "init"}) {
		return nil
	}
	defer p.Close()
	t := r.Topic(0)
	r.step(emit, inTxn(p, false, msgAt(t, 0, "", "a0"), msgAt(t, 0, "", "a1")), map[string]any{"op": "abort"})
	r.step(emit, inTxn(p, true, msgAt(t, 0, "", "c0")), map[string]any{"op": "commit"})
	if err := r.printIsolated(emit, true, 1); err != nil {
		return err
	}
	if err := r.printIsolated(emit, false, 3); err != nil {
		return err
	}
	for _, committed := range []bool{true, false} {
		off, err := r.latestOffset(t, 0, committed)
		if err != nil {
			return err
		}
		emit(map[string]any{"query": "latest", "isolation": isolationName(committed), "offset": off})
	}
	return nil
}

func txnFencing(r *runner, emit emitFunc) error {
	t := r.Topic(0)
	who := func(p, op string) map[string]any { return map[string]any{"producer": p, "op": op} }
	first, err := r.txnProducer(time.Minute)
	if !r.step(emit, err, who("first", "init")) {
		return nil
	}
	defer first.Close()
	if err := first.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if !r.step(emit, send(first, msgAt(t, 0, "", "f0")), who("first", "send")) {
		return nil
	}
	second, err := r.txnProducer(time.Minute)
	if !r.step(emit, err, who("second", "init")) {
		return nil
	}
	defer second.Close()
	r.step(emit, send(first, msgAt(t, 0, "", "f1")), who("first", "send"))
	r.step(emit, first.CommitTxn(), who("first", "commit"))
	r.step(emit, inTxn(second, true, msgAt(t, 0, "", "s0")), who("second", "commit"))
	recs, cerr := r.consumeIsolated(t, 1, true, 1, 4*time.Second)
	for _, m := range recs {
		emit(map[string]any{"offset": m.Offset, "value": protocol.Printable(m.Value)})
	}
	if cerr != nil {
		return cerr
	}
	return r.describeProducers(emit, t, 0)
}

// describeProducers emits {producer_epoch, last_sequence,
// current_txn_start_offset} per active producer of topic[partition].
func (r *runner) describeProducers(emit emitFunc, topic string, partition int32) error {
	a, err := r.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	ta, ok := a.(sarama.TransactionClusterAdmin)
	if !ok {
		return errors.New("describe producers: Sarama's admin has no DescribeProducers")
	}
	res, err := ta.DescribeProducers(map[string][]int32{topic: {partition}})
	if err != nil {
		return fmt.Errorf("describe producers: %w", err)
	}
	p, ok := res[topic][partition]
	if !ok {
		return fmt.Errorf("describe producers: %s[%d] missing from the response", topic, partition)
	}
	if p.ErrorCode != sarama.ErrNoError {
		return fmt.Errorf("describe producers of %s[%d]: %w", topic, partition, p.ErrorCode)
	}
	for _, ps := range p.ActiveProducers {
		emit(map[string]any{"producer_epoch": ps.ProducerEpoch, "last_sequence": ps.LastSequence, "current_txn_start_offset": ps.CurrentTxnStartOffset})
	}
	return nil
}

func txnTimeoutAbort(r *runner, emit emitFunc) error {
	t := r.Topic(0)
	p, err := r.txnProducer(2 * time.Second)
	if !r.step(emit, err, map[string]any{"op": "init"}) {
		return nil
	}
	defer p.Close()
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if !r.step(emit, send(p, msgAt(t, 0, "", "t0")), map[string]any{"op": "send"}) {
		return nil
	}
	time.Sleep(5 * time.Second)
	r.step(emit, p.CommitTxn(), map[string]any{"op": "commit"})
	if err := r.printIsolated(emit, true, 0); err != nil {
		return err
	}
	if err := r.printIsolated(emit, false, 1); err != nil {
		return err
	}
	off, err := r.latestOffset(t, 0, false)
	if err != nil {
		return err
	}
	emit(map[string]any{"query": "latest", "offset": off})
	return r.describeProducers(emit, t, 0)
}

// txnOffsets is consume-transform-produce with Sarama's AddOffsetsToTxn,
// which only records the offsets: Sarama sends AddOffsetsToTxn and
// TxnOffsetCommit when the transaction commits, just before EndTxn. So
// before the commit the group has no pending offset at all (require_stable
// answers without UNSTABLE_OFFSET_COMMIT, unlike clients that send them at
// once); the after-commit observations are those of the other clients.
func txnOffsets(r *runner, emit emitFunc) error {
	in, out := r.Topic(0), r.Topic(1)
	if err := r.produce(config(), valueMessages(in, "i", 3)...); err != nil {
		return err
	}
	p, err := r.txnProducer(time.Minute)
	if !r.step(emit, err, map[string]any{"op": "init"}) {
		return nil
	}
	defer p.Close()
	sendOffsets := func() error {
		if err := p.BeginTxn(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		for i := 0; i < 3; i++ {
			if err := send(p, msgAt(out, 0, "", fmt.Sprintf("I%d", i))); err != nil {
				return err
			}
		}
		offsets := map[string][]*sarama.PartitionOffsetMetadata{in: {{Partition: 0, Offset: 3, LeaderEpoch: -1}}}
		return p.AddOffsetsToTxn(offsets, r.Group())
	}
	if !r.step(emit, sendOffsets(), map[string]any{"op": "send_offsets"}) {
		return nil
	}
	cl, err := r.client(config())
	if err != nil {
		return err
	}
	defer cl.Close()
	fetchOnce := func(when string, stable bool) (map[string]any, error) {
		coord, err := cl.Coordinator(r.Group())
		if err != nil {
			return nil, fmt.Errorf("coordinator of %s: %w", r.Group(), err)
		}
		req := sarama.NewOffsetFetchRequest(cl.Config().Version, r.Group(), map[string][]int32{in: {0}})
		req.RequireStable = stable
		resp, err := coord.FetchOffset(req)
		if err != nil {
			return nil, fmt.Errorf("offset fetch: %w", err)
		}
		obs := map[string]any{"when": when, "require_stable": stable}
		if gerr := resp.GroupError(); gerr != sarama.ErrNoError {
			obs["error"] = errName(gerr)
			return obs, nil
		}
		b := resp.GetBlock(in, 0)
		switch {
		case b == nil:
			return nil, errors.New("offset fetch: partition missing from the response")
		case b.Err != sarama.ErrNoError:
			obs["error"] = errName(b.Err)
		case b.Offset >= 0:
			obs["offset"] = b.Offset
		default:
			obs["offset"] = nil
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
				emit(obs)
				return nil
			}
		}
	}
	for _, stable := range []bool{false, true} {
		if err := fetch("before_commit", stable, false); err != nil {
			return err
		}
	}
	if !r.step(emit, p.CommitTxn(), map[string]any{"op": "commit"}) {
		return nil
	}
	for _, stable := range []bool{true, false} {
		if err := fetch("after_commit", stable, stable); err != nil {
			return err
		}
	}
	recs, err := r.consumeIsolated(out, 1, true, 3, 5*time.Second)
	for _, m := range recs {
		emit(map[string]any{"offset": m.Offset, "value": protocol.Printable(m.Value)})
	}
	return err
}
