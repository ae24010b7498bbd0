package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestTransactionCoordinator drives a franz-go transactional producer's
// coordinator requests (InitProducerId, TxnOffsetCommit, EndTxn; the
// cluster finalizes transaction.version 2) through a commit, an abort and
// a commit interrupted by kill -9 after PrepareCommit was stored, and
// checks what Postgres holds: kafgres.transaction's state, the pending
// offsets in kafgres.transaction_offset and the committed ones in
// kafgres.consumer_offset. The interrupted commit is held between
// PrepareCommit and CompleteCommit by a lock on kafgres.consumer_offset,
// which CompleteCommit writes; the restarted broker completes it.
func TestTransactionCoordinator(t *testing.T) {
	c := harness.Start(t)
	ctx := ctxT(t)
	c.CreateTopic(t, "txin", 1)
	db := c.Conn(t)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.TransactionalID("tx-int"), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}

	type row struct {
		state   string
		pid     int64
		epoch   int16
		pending int
		offset  int64 // committed offset of group g, -1 none
	}
	read := func() row {
		t.Helper()
		var r row
		err := db.QueryRow(ctx, `
SELECT t.state, t.producer_id, t.producer_epoch,
       (SELECT count(*) FROM kafgres.transaction_offset o WHERE o.transactional_id = t.transactional_id),
       coalesce((SELECT committed_offset FROM kafgres.consumer_offset WHERE group_id = convert_to('g', 'UTF8')), -1)
  FROM kafgres.transaction t WHERE t.transactional_id = convert_to('tx-int', 'UTF8')`).
			Scan(&r.state, &r.pid, &r.epoch, &r.pending, &r.offset)
		if err != nil {
			t.Fatalf("read kafgres.transaction: %v", err)
		}
		return r
	}
	if r := read(); r.state != "Empty" || r.pid != pid || r.epoch != epoch {
		t.Fatalf("after InitProducerId: %+v, want Empty %d/%d", r, pid, epoch)
	}

	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("txin")
	mreq.Topics = append(mreq.Topics, mt)
	meta, err := mreq.RequestWith(ctx, cl)
	if err != nil || len(meta.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	topicID := meta.Topics[0].TopicID // TxnOffsetCommit v6 names topics by id

	commitOffset := func(cl *kgo.Client, epoch int16, offset int64) {
		t.Helper()
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx-int", "g", pid, epoch
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = "txin", topicID
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("TxnOffsetCommit: %v", err)
		}
		if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
			t.Fatalf("TxnOffsetCommit: %v", err)
		}
	}
	end := func(cl *kgo.Client, epoch int16, commit bool) int16 {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "tx-int", pid, epoch, commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("EndTxn: %v", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			t.Fatalf("EndTxn: %v", err)
		}
		if resp.ProducerEpoch != epoch+1 {
			t.Fatalf("EndTxn v%d answered epoch %d, want %d (transaction version 2)", resp.Version, resp.ProducerEpoch, epoch+1)
		}
		return resp.ProducerEpoch
	}
	settled := func(want row) {
		t.Helper()
		harness.Eventually(t, 10*time.Second, func() error {
			if r := read(); r != want {
				return fmt.Errorf("kafgres.transaction %+v, want %+v", r, want)
			}
			return nil
		})
	}

	// Commit: the offset is pending, then committed.
	commitOffset(cl, epoch, 42)
	if r := read(); r.state != "Ongoing" || r.pending != 1 || r.offset != -1 {
		t.Fatalf("during the transaction: %+v", r)
	}
	epoch = end(cl, epoch, true)
	settled(row{"CompleteCommit", pid, epoch, 0, 42})

	// Abort: the offset is dropped.
	commitOffset(cl, epoch, 77)
	epoch = end(cl, epoch, false)
	settled(row{"CompleteAbort", pid, epoch, 0, 42})

	// A commit interrupted after PrepareCommit.
	commitOffset(cl, epoch, 99)
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(ctx, `LOCK TABLE kafgres.consumer_offset IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	epoch = end(cl, epoch, true) // answered once PrepareCommit is stored
	if r := read(); r.state != "PrepareCommit" || r.pending != 1 {
		t.Fatalf("after EndTxn with the completion held: %+v", r)
	}
	cl.Close()
	old := c.KillBroker(t)
	// The killed broker's completion, still waiting for the lock, dies
	// with it.
	if _, err := db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	if err := lock.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatal(err)
	}
	c.WaitBroker(t, old, time.Minute)
	settled(row{"CompleteCommit", pid, epoch, 0, 99})

	// The restarted coordinator knows the producer: a new InitProducerId
	// bumps its epoch.
	cl2, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.TransactionalID("tx-int"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	pid2, epoch2, err := cl2.ProducerID(ctx)
	if err != nil || pid2 != pid || epoch2 != epoch+1 {
		t.Fatalf("InitProducerId after the restart: %d/%d %v, want %d/%d", pid2, epoch2, err, pid, epoch+1)
	}
}
