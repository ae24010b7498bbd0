package broker

// In-process tests of the log side of transactions: transactional produce,
// markers, the last stable offset, read_committed fetches and their aborted
// transactions, ListOffsets, DescribeProducers, and all of it rebuilt after
// a restart. The transaction coordinator is bypassed (skipTxnCheck), so
// produce lets every transactional batch in.

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// txnBatch is producerBatch with the transactional attribute.
func txnBatch(pid int64, epoch int16, seq int32, n int, value string) []byte {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{offsetDelta: int32(i), value: []byte(value)}
	}
	s := plainSpec(recs)
	s.producerID, s.producerEpoch, s.baseSequence, s.attributes = pid, epoch, seq, 0x10
	return s.build()
}

func (c *testClient) produceTxn(txnID *string, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 12, -1, 5000, txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

type fetchedTxn struct {
	hw, lso  int64
	offsets  []int64 // base offsets of the batches returned
	control  []int64 // those of them that are markers
	aborted  []kmsg.FetchResponseTopicPartitionAbortedTransaction
	abortNil bool
}

func (tb *testBroker) fetchTxn(c *testClient, topic string, offset int64, isolation int8) fetchedTxn {
	c.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel = 0, 0, 1<<20, isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, tb.metadata(c, topic).Topics[0].TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := c.do(tb.latest(req)).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		c.t.Fatalf("fetch %s at %d: %v", topic, offset, kerr.ErrorForCode(p.ErrorCode))
	}
	f := fetchedTxn{hw: p.HighWatermark, lso: p.LastStableOffset, aborted: p.AbortedTransactions, abortNil: p.AbortedTransactions == nil}
	for data := p.RecordBatches; len(data) > 0; {
		h, err := segment.ParseBatchHeader(data)
		if err != nil {
			c.t.Fatal(err)
		}
		f.offsets = append(f.offsets, h.BaseOffset)
		if h.IsControl() {
			f.control = append(f.control, h.BaseOffset)
		}
		data = data[h.Length:]
	}
	return f
}

func (tb *testBroker) describeProducers(c *testClient, topic string) map[int64]kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
	c.t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	out := map[int64]kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}
	for _, ap := range c.do(tb.latest(req)).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ActiveProducers {
		out[ap.ProducerID] = ap
	}
	return out
}

func (tb *testBroker) listOffsetIsolated(c *testClient, topic string, ts int64, isolation int8) int64 {
	c.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := c.do(tb.latest(req)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		c.t.Fatalf("list offsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

func (tb *testBroker) markers(t *testing.T, topic string, m txnMarker) error {
	t.Helper()
	p := tb.catalog.partition(topic, 0)
	return tb.writeTxnMarkers(context.Background(), m, []*partition{p})
}

func wantFetch(t *testing.T, what string, got fetchedTxn, hw, lso int64, offsets, control []int64, aborted ...int64) {
	t.Helper()
	var gotAborted []int64
	for _, a := range got.aborted {
		gotAborted = append(gotAborted, a.ProducerID, a.FirstOffset)
	}
	if got.hw != hw || got.lso != lso || !slices.Equal(got.offsets, offsets) || !slices.Equal(got.control, control) || !slices.Equal(gotAborted, aborted) {
		t.Fatalf("%s: hw %d lso %d batches %v markers %v aborted (pid, first) %v;\nwant hw %d lso %d batches %v markers %v aborted %v",
			what, got.hw, got.lso, got.offsets, got.control, gotAborted, hw, lso, offsets, control, aborted)
	}
}

func TestInProcessTransactionsInTheLog(t *testing.T) {
	tb := startTestBroker(t)
	tb.skipTxnCheck.Store(true)
	c := tb.dial(t)
	tb.createTopic(t, c, "tx", 1, nil)
	id := kmsg.StringPtr("app")

	// Kafka's whole-request checks.
	if got := c.produceTxn(nil, "tx", txnBatch(10, 0, 0, 2, "a")); got.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || got.BaseOffset != -1 {
		t.Fatalf("transactional batch without a transactional id: %v", kerr.ErrorForCode(got.ErrorCode))
	}

	wantProduce(t, "plain", c.produceTxn(nil, "tx", producerBatch(-1, 0, 0, 1, "p")), nil, 0)
	wantProduce(t, "pid 10 begins", c.produceTxn(id, "tx", txnBatch(10, 0, 0, 2, "a")), nil, 1)
	wantProduce(t, "pid 11 begins", c.produceTxn(id, "tx", txnBatch(11, 0, 0, 1, "b")), nil, 3)
	wantProduce(t, "plain", c.produceTxn(id, "tx", producerBatch(-1, 0, 0, 1, "p")), nil, 4)
	wantProduce(t, "pid 10 outside its transaction", c.produceTxn(nil, "tx", producerBatch(10, 0, 2, 1, "x")), kerr.InvalidTxnState, 0)

	wantFetch(t, "read_uncommitted", tb.fetchTxn(c, "tx", 0, 0), 5, 1, []int64{0, 1, 3, 4}, nil)
	wantFetch(t, "read_committed", tb.fetchTxn(c, "tx", 0, 1), 5, 1, []int64{0}, nil)
	if f := tb.fetchTxn(c, "tx", 1, 1); len(f.offsets) != 0 || f.abortNil {
		t.Fatalf("read_committed at the LSO: %+v, want no records and an empty aborted list", f)
	}
	if got := tb.listOffsetIsolated(c, "tx", -1, 1); got != 1 {
		t.Fatalf("read_committed latest offset %d, want 1", got)
	}
	if got := tb.listOffsetIsolated(c, "tx", -1, 0); got != 5 {
		t.Fatalf("read_uncommitted latest offset %d, want 5", got)
	}
	if got := tb.listOffsetIsolated(c, "tx", 0, 1); got != 0 {
		t.Fatalf("read_committed offset for timestamp 0: %d, want 0", got)
	}
	ps := tb.describeProducers(c, "tx")
	if ps[10].CurrentTxnStartOffset != 1 || ps[11].CurrentTxnStartOffset != 3 || ps[10].CoordinatorEpoch != -1 {
		t.Fatalf("producers %+v", ps)
	}

	// Abort 10 (transaction version 1: same epoch); 11 is still open.
	if err := tb.markers(t, "tx", txnMarker{producerID: 10, epoch: 0, coordinatorEpoch: 4}); err != nil {
		t.Fatal(err)
	}
	wantFetch(t, "after the abort", tb.fetchTxn(c, "tx", 0, 1), 6, 3, []int64{0, 1}, nil, 10, 1)
	// Commit 11 with an epoch bump (transaction version 2).
	if err := tb.markers(t, "tx", txnMarker{producerID: 11, epoch: 1, coordinatorEpoch: 4, commit: true}); err != nil {
		t.Fatal(err)
	}
	wantFetch(t, "after the commit", tb.fetchTxn(c, "tx", 0, 1), 7, 7, []int64{0, 1, 3, 4, 5, 6}, []int64{5, 6}, 10, 1)
	wantFetch(t, "from the plain batch", tb.fetchTxn(c, "tx", 4, 1), 7, 7, []int64{4, 5, 6}, []int64{5, 6}, 10, 1)
	wantFetch(t, "after the aborted transaction", tb.fetchTxn(c, "tx", 6, 1), 7, 7, []int64{6}, []int64{6})
	if got := tb.listOffsetIsolated(c, "tx", -1, 1); got != 7 {
		t.Fatalf("read_committed latest offset %d, want 7", got)
	}

	ps = tb.describeProducers(c, "tx")
	if p := ps[10]; p.CurrentTxnStartOffset != -1 || p.CoordinatorEpoch != 4 || p.ProducerEpoch != 0 || p.LastSequence != 1 {
		t.Fatalf("producer 10 after its abort: %+v", p)
	}
	if p := ps[11]; p.CurrentTxnStartOffset != -1 || p.CoordinatorEpoch != 4 || p.ProducerEpoch != 1 || p.LastSequence != -1 {
		t.Fatalf("producer 11 after its commit: %+v", p)
	}

	// A marker from an older epoch is fenced; a second one for the same
	// transaction is harmless.
	if err := tb.markers(t, "tx", txnMarker{producerID: 11, epoch: 0, coordinatorEpoch: 4}); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("stale marker: %v, want PRODUCER_FENCED", err)
	}
	if err := tb.markers(t, "tx", txnMarker{producerID: 10, epoch: 0, coordinatorEpoch: 4}); err != nil {
		t.Fatal(err)
	}
	// After the epoch bump, 11 starts again at sequence 0.
	wantProduce(t, "11 at a new epoch, old sequence", c.produceTxn(id, "tx", txnBatch(11, 1, 1, 1, "c")), kerr.OutOfOrderSequenceNumber, 0)
	wantProduce(t, "11 at a new epoch", c.produceTxn(id, "tx", txnBatch(11, 1, 0, 1, "c")), nil, 8)
	wantFetch(t, "11 open again", tb.fetchTxn(c, "tx", 7, 1), 9, 8, []int64{7}, []int64{7})

	// Everything is rebuilt from the log after a crash.
	tb = tb.restartAfterCrash(t)
	tb.skipTxnCheck.Store(true)
	c = tb.dial(t)
	wantFetch(t, "after restart", tb.fetchTxn(c, "tx", 0, 1), 9, 8, []int64{0, 1, 3, 4, 5, 6, 7}, []int64{5, 6, 7}, 10, 1)
	ps = tb.describeProducers(c, "tx")
	if p := ps[11]; p.CurrentTxnStartOffset != 8 || p.CoordinatorEpoch != 4 || p.ProducerEpoch != 1 || p.LastSequence != 0 {
		t.Fatalf("producer 11 after restart: %+v", p)
	}
	if p := ps[10]; p.CurrentTxnStartOffset != -1 || p.CoordinatorEpoch != 4 {
		t.Fatalf("producer 10 after restart: %+v", p)
	}
	if err := tb.markers(t, "tx", txnMarker{producerID: 11, epoch: 2, coordinatorEpoch: 4}); err != nil {
		t.Fatal(err)
	}
	wantFetch(t, "11 aborted after restart", tb.fetchTxn(c, "tx", 7, 1), 10, 10, []int64{7, 8, 9}, []int64{7, 9}, 11, 8)
	wantFetch(t, "read_uncommitted after restart", tb.fetchTxn(c, "tx", 0, 0), 10, 10, []int64{0, 1, 3, 4, 5, 6, 7, 8, 9}, []int64{5, 6, 7, 9})
}
