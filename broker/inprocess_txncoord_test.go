package broker

// In-process tests of the transaction coordinator's handlers (22, 24-26,
// 28, 65, 66) and of OffsetFetch's require_stable, on metadata.Memory.

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator/txn"
)

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != codeOf(want) {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

func initTxn(t *testing.T, c *testClient, version int16, id string, timeoutMs int32, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = version
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), timeoutMs
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return c.do(req).(*kmsg.InitProducerIDResponse)
}

func addPartitions(t *testing.T, c *testClient, version int16, id string, pid int64, epoch int16, topic string, parts ...int32) int16 {
	t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := c.do(req).(*kmsg.AddPartitionsToTxnResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

func addOffsets(t *testing.T, c *testClient, id string, pid int64, epoch int16, group string) int16 {
	t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, pid, epoch, group
	return c.do(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

func txnCommitOffset(t *testing.T, c *testClient, version int16, id string, pid int64, epoch int16, group, topic string, offset int64) int16 {
	t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = id, pid, epoch, group
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.do(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func endTxn(t *testing.T, c *testClient, version int16, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = version
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return c.do(req).(*kmsg.EndTxnResponse)
}

func commitOffset(t *testing.T, c *testClient, group, topic string, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	wantCode(t, "OffsetCommit", c.do(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, nil)
}

// fetchOffset is OffsetFetch v7 (one group, require_stable) of partition 0.
func fetchOffset(t *testing.T, c *testClient, group, topic string, requireStable bool) kmsg.OffsetFetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group, req.RequireStable = 7, group, requireStable
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	return c.do(req).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
}

func describeTxn(t *testing.T, c *testClient, id string) kmsg.DescribeTransactionsResponseTransactionState {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	return c.do(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
}

// TestTxnOffsetsVisibleOnlyAfterCommit: a transaction's offsets are
// pending (require_stable: UNSTABLE_OFFSET_COMMIT; otherwise the previous
// offset) until EndTxn commits; an aborted transaction's never appear.
func TestTxnOffsetsVisibleOnlyAfterCommit(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "in", 1, nil)
	commitOffset(t, c, "g", "in", 5)

	r := initTxn(t, c, 3, "tx", 60000, -1, -1)
	wantCode(t, "InitProducerId", r.ErrorCode, nil)
	pid, epoch := r.ProducerID, r.ProducerEpoch
	if epoch != 0 {
		t.Fatalf("first epoch %d", epoch)
	}
	// TV1 verification: offsets before AddOffsetsToTxn are refused.
	wantCode(t, "TxnOffsetCommit before AddOffsetsToTxn (v3)", txnCommitOffset(t, c, 3, "tx", pid, epoch, "g", "in", 42), kerr.InvalidTxnState)
	wantCode(t, "TxnOffsetCommit before AddOffsetsToTxn (v4)", txnCommitOffset(t, c, 4, "tx", pid, epoch, "g", "in", 42), kerr.TransactionAbortable)
	wantCode(t, "AddPartitionsToTxn", addPartitions(t, c, 3, "tx", pid, epoch, "in", 0), nil)
	wantCode(t, "AddPartitionsToTxn of an unknown topic", addPartitions(t, c, 3, "tx", pid, epoch, "nope", 0), kerr.UnknownTopicOrPartition)
	wantCode(t, "AddOffsetsToTxn", addOffsets(t, c, "tx", pid, epoch, "g"), nil)
	wantCode(t, "TxnOffsetCommit", txnCommitOffset(t, c, 3, "tx", pid, epoch, "g", "in", 42), nil)

	p := fetchOffset(t, c, "g", "in", true)
	wantCode(t, "OffsetFetch require_stable", p.ErrorCode, kerr.UnstableOffsetCommit)
	if p.Offset != -1 {
		t.Fatalf("unstable offset answered %d", p.Offset)
	}
	if p := fetchOffset(t, c, "g", "in", false); p.ErrorCode != 0 || p.Offset != 5 {
		t.Fatalf("OffsetFetch during the transaction: %+v, want 5", p)
	}
	if d := describeTxn(t, c, "tx"); d.State != "Ongoing" || len(d.Topics) != 1 || d.Topics[0].Topic != "in" || d.StartTimestamp < 0 {
		t.Fatalf("DescribeTransactions: %+v", d)
	}

	e := endTxn(t, c, 3, "tx", pid, epoch, true)
	wantCode(t, "EndTxn commit", e.ErrorCode, nil)
	tb.txns.Settle()
	if p := fetchOffset(t, c, "g", "in", true); p.ErrorCode != 0 || p.Offset != 42 {
		t.Fatalf("OffsetFetch after the commit: %+v, want 42", p)
	}
	if d := describeTxn(t, c, "tx"); d.State != "CompleteCommit" || len(d.Topics) != 0 {
		t.Fatalf("after the commit: %+v", d)
	}
	wantCode(t, "EndTxn commit retried", endTxn(t, c, 3, "tx", pid, epoch, true).ErrorCode, nil)
	wantCode(t, "EndTxn abort after commit", endTxn(t, c, 3, "tx", pid, epoch, false).ErrorCode, kerr.InvalidTxnState)

	// Aborted: the offset stays 42.
	wantCode(t, "AddOffsetsToTxn", addOffsets(t, c, "tx", pid, epoch, "g"), nil)
	wantCode(t, "TxnOffsetCommit", txnCommitOffset(t, c, 3, "tx", pid, epoch, "g", "in", 77), nil)
	wantCode(t, "EndTxn abort", endTxn(t, c, 3, "tx", pid, epoch, false).ErrorCode, nil)
	tb.txns.Settle()
	if p := fetchOffset(t, c, "g", "in", true); p.ErrorCode != 0 || p.Offset != 42 {
		t.Fatalf("OffsetFetch after the abort: %+v, want 42", p)
	}
}

// TestTxnFencing: a second InitProducerId aborts the first producer's
// transaction and fences it, with the error its request version knows.
func TestTxnFencing(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "out", 1, nil)
	r := initTxn(t, c, 3, "tx", 60000, -1, -1)
	pid, epoch := r.ProducerID, r.ProducerEpoch
	wantCode(t, "AddPartitionsToTxn", addPartitions(t, c, 3, "tx", pid, epoch, "out", 0), nil)
	wantCode(t, "InitProducerId while ongoing", initTxn(t, c, 3, "tx", 60000, -1, -1).ErrorCode, kerr.ConcurrentTransactions)
	tb.txns.Settle()
	if d := describeTxn(t, c, "tx"); d.State != "CompleteAbort" {
		t.Fatalf("fenced transaction: %s", d.State)
	}
	r2 := initTxn(t, c, 3, "tx", 60000, -1, -1)
	wantCode(t, "InitProducerId retried", r2.ErrorCode, nil)
	if r2.ProducerID != pid || r2.ProducerEpoch <= epoch+1 {
		t.Fatalf("new producer %d/%d", r2.ProducerID, r2.ProducerEpoch)
	}
	wantCode(t, "old producer, AddPartitionsToTxn v1", addPartitions(t, c, 1, "tx", pid, epoch, "out", 0), kerr.InvalidProducerEpoch)
	wantCode(t, "old producer, AddPartitionsToTxn v3", addPartitions(t, c, 3, "tx", pid, epoch, "out", 0), kerr.ProducerFenced)
	wantCode(t, "old producer, EndTxn v1", endTxn(t, c, 1, "tx", pid, epoch, true).ErrorCode, kerr.InvalidProducerEpoch)
	wantCode(t, "old producer, InitProducerId v3 with its id", initTxn(t, c, 3, "tx", 60000, pid+1, 0).ErrorCode, kerr.InvalidProducerEpoch)
	wantCode(t, "... v4", initTxn(t, c, 4, "tx", 60000, pid+1, 0).ErrorCode, kerr.ProducerFenced)
	wantCode(t, "unknown id", endTxn(t, c, 3, "nobody", pid, epoch, true).ErrorCode, kerr.InvalidProducerIDMapping)
	wantCode(t, "timeout over transaction.max.timeout.ms", initTxn(t, c, 3, "tx", 15*60000+1, -1, -1).ErrorCode, kerr.InvalidTransactionTimeout)
	wantCode(t, "half a producer id", initTxn(t, c, 3, "tx", 60000, pid, -1).ErrorCode, kerr.InvalidRequest)
}

// TestTxnVersion2EndTxnBumpsEpoch: EndTxn v5 (transaction.version 2)
// answers the bumped epoch; TxnOffsetCommit v5 adds the group implicitly;
// UpdateFeatures can finalize transaction.version 1.
func TestTxnVersion2EndTxnBumpsEpoch(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "in", 1, nil)
	r := initTxn(t, c, 5, "tx", 60000, -1, -1)
	pid, epoch := r.ProducerID, r.ProducerEpoch
	wantCode(t, "TxnOffsetCommit v5, implicit", txnCommitOffset(t, c, 5, "tx", pid, epoch, "g", "in", 9), nil)
	e := endTxn(t, c, 5, "tx", pid, epoch, true)
	wantCode(t, "EndTxn v5", e.ErrorCode, nil)
	if e.ProducerID != pid || e.ProducerEpoch != epoch+1 {
		t.Fatalf("EndTxn v5 answered %d/%d, want %d/%d", e.ProducerID, e.ProducerEpoch, pid, epoch+1)
	}
	tb.txns.Settle()
	if p := fetchOffset(t, c, "g", "in", true); p.Offset != 9 {
		t.Fatalf("offset %d after the commit", p.Offset)
	}
	// The implicit add of a produce (txnPartition) on TV2, and the
	// verification on older produce versions.
	part := tb.catalog.partition("in", 0)
	if err := tb.txnPartition(t.Context(), "tx", pid, epoch+1, part, 12); err != nil {
		t.Fatalf("implicit add: %v", err)
	}
	if err := tb.txnPartition(t.Context(), "tx", pid, epoch, part, 12); err != kerr.InvalidProducerEpoch {
		t.Fatalf("implicit add at the old epoch: %v", err)
	}
	if d := describeTxn(t, c, "tx"); d.State != "Ongoing" {
		t.Fatalf("after the implicit add: %s", d.State)
	}

	uf := kmsg.NewPtrUpdateFeaturesRequest()
	uf.Version = 1
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 1, upgradeTypeSafeDowngrade
	uf.FeatureUpdates = append(uf.FeatureUpdates, u)
	wantCode(t, "UpdateFeatures", c.do(uf).(*kmsg.UpdateFeaturesResponse).ErrorCode, nil)
	if v := tb.transactionVersion(); v != 1 {
		t.Fatalf("transaction.version %d", v)
	}
	if err := tb.txnPartition(t.Context(), "tx", pid, epoch+1, tb.catalog.partition("in", 0), 12); err != nil {
		t.Fatalf("verification of an added partition: %v", err)
	}
}

// TestTxnTimeoutAborts: a transaction past its timeout is aborted at a
// bumped epoch by the periodic check; the producer is fenced.
func TestTxnTimeoutAborts(t *testing.T) {
	tb := startTestBroker(t, func(c *Config) { c.TransactionAbortInterval = 5 * time.Millisecond })
	c := tb.dial(t)
	tb.createTopic(t, c, "out", 1, nil)
	r := initTxn(t, c, 3, "tx", 50, -1, -1)
	pid, epoch := r.ProducerID, r.ProducerEpoch
	wantCode(t, "AddPartitionsToTxn", addPartitions(t, c, 3, "tx", pid, epoch, "out", 0), nil)
	eventually(t, 5*time.Second, "the timed-out transaction aborted", func() bool {
		return describeTxn(t, c, "tx").State == "CompleteAbort"
	})
	if d := describeTxn(t, c, "tx"); d.ProducerEpoch <= epoch {
		t.Fatalf("epoch %d not bumped", d.ProducerEpoch)
	}
	wantCode(t, "the timed-out producer commits", endTxn(t, c, 3, "tx", pid, epoch, true).ErrorCode, kerr.ProducerFenced)

	lr := kmsg.NewPtrListTransactionsRequest()
	lr.Version = 2
	lr.StateFilters = []string{"CompleteAbort", "Bogus"}
	resp := c.do(lr).(*kmsg.ListTransactionsResponse)
	if len(resp.TransactionStates) != 1 || resp.TransactionStates[0].TransactionalID != "tx" || len(resp.UnknownStateFilters) != 1 {
		t.Fatalf("ListTransactions: %+v", resp)
	}
	lr.StateFilters, lr.TransactionalIDPattern = nil, kmsg.StringPtr("t")
	if resp := c.do(lr).(*kmsg.ListTransactionsResponse); len(resp.TransactionStates) != 0 {
		t.Fatalf("pattern t matched %+v", resp.TransactionStates)
	}
}

// TestTxnPreparedCompletesAtStart: a commit whose PrepareCommit was
// stored when the broker died is completed by the next broker: markers,
// CompleteCommit, the offsets committed.
func TestTxnPreparedCompletesAtStart(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "in", 1, nil)
	topicID := tb.catalog.topicByName("in").id
	ctx := t.Context()
	tx := txn.Txn{ID: "tx", ProducerID: 77, PrevProducerID: -1, NextProducerID: -1, Epoch: 3, LastEpoch: -1, TimeoutMs: 60000,
		State: txn.PrepareCommit, Partitions: []txn.Partition{{TopicID: topicID}}, Groups: []string{"g"}, StartMs: 1, UpdateMs: 1, Version: 1}
	if err := tb.meta.SaveTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tb.meta.SaveTxnOffsets(ctx, "tx", 77, []txn.Offset{{Group: "g", TopicID: topicID, Offset: 33, LeaderEpoch: -1}}); err != nil {
		t.Fatal(err)
	}
	tb2 := tb.restartAfterCrash(t)
	c2 := tb2.dial(t)
	eventually(t, 5*time.Second, "the prepared commit completed", func() bool {
		return describeTxn(t, c2, "tx").State == "CompleteCommit"
	})
	if p := fetchOffset(t, c2, "g", "in", true); p.ErrorCode != 0 || p.Offset != 33 {
		t.Fatalf("offset after recovery: %+v", p)
	}
}
