package broker

// In-process tests of producer state snapshots, the leader epoch checkpoint
// and producer.id.expiration.ms (producer_state.go): after a crash or a
// clean restart the producer window, open transactions, last stable offset,
// aborted transactions and leader epochs are what they were, the open reads
// only the batches after the newest snapshot, and idle producers expire.

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// restartFromImage stops tb and serves a broker on a copy of its data
// directory (what a kill -9 leaves), after mutate changed the copy of
// topic's partition 0 directory.
func (tb *testBroker) restartFromImage(t *testing.T, topic string, image string, mutate func(partDir string)) *testBroker {
	t.Helper()
	rel, err := filepath.Rel(tb.cfg.DataDir, tb.catalog.partition(topic, 0).dir)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(filepath.Join(image, rel))
	}
	cfg := tb.cfg
	cfg.DataDir = image
	return serveTestBroker(t, cfg, tb.meta)
}

func copyDataDir(t *testing.T, tb *testBroker) string {
	t.Helper()
	image := t.TempDir()
	if err := os.CopyFS(image, os.DirFS(tb.cfg.DataDir)); err != nil {
		t.Fatalf("copy the data directory: %v", err)
	}
	return image
}

// partitionView is what a restart must preserve of partition 0 of a topic.
type partitionView struct {
	producers map[int64]kmsg.DescribeProducersResponseTopicPartitionActiveProducer
	committed fetchedTxn
	epochs    []epochStart // without this incarnation's
}

// view takes the partition's state; restarted drops the epoch of this
// incarnation, which the one before did not have.
func (tb *testBroker) view(c *testClient, topic string, restarted bool) partitionView {
	p := tb.catalog.partition(topic, 0)
	epochs := p.epochs
	if restarted {
		epochs = epochs[:len(epochs)-1]
	}
	return partitionView{
		producers: tb.describeProducers(c, topic),
		committed: tb.fetchTxn(c, topic, p.log.LogStartOffset(), 1),
		epochs:    slices.Clone(epochs),
	}
}

func TestInProcessProducerStateSnapshots(t *testing.T) {
	tb := startTestBroker(t, func(cfg *Config) { cfg.SegmentBytes = 700 })
	tb.skipTxnCheck.Store(true)
	c := tb.dial(t)
	tb.createTopic(t, c, "ps", 1, nil)
	id := kmsg.StringPtr("app")
	p := tb.catalog.partition("ps", 0)

	// Producer 1 is idempotent; 10 opens a transaction early and keeps it
	// open; 11 writes and aborts (an aborted transaction for
	// read_committed); 12 commits with an epoch bump (its next batch must
	// start at sequence 0). Plain batches in between roll segments.
	var seq1 int32
	var offs1 []int64
	idem := func() {
		got := c.produceAt(12, "ps", producerBatch(1, 0, seq1, 2, "idempotent"))
		wantProduce(t, "idempotent", got, nil, got.BaseOffset)
		offs1 = append(offs1, got.BaseOffset)
		seq1 += 2
	}
	plain := func(n int) {
		for range n {
			end := p.log.LogEndOffset()
			wantProduce(t, "plain", c.produceAt(12, "ps", producerBatch(-1, 0, 0, 3, "plain-plain-plain-plain")), nil, end)
		}
	}
	idem()
	wantProduce(t, "11 begins", c.produceTxn(id, "ps", txnBatch(11, 0, 0, 2, "t11")), nil, p.log.LogEndOffset()-2)
	plain(3)
	idem()
	if err := tb.markers(t, "ps", txnMarker{producerID: 11, epoch: 0, coordinatorEpoch: 3}); err != nil {
		t.Fatal(err)
	}
	wantProduce(t, "12", c.produceTxn(id, "ps", txnBatch(12, 0, 0, 1, "t12")), nil, p.log.LogEndOffset()-1)
	if err := tb.markers(t, "ps", txnMarker{producerID: 12, epoch: 1, coordinatorEpoch: 3, commit: true}); err != nil {
		t.Fatal(err)
	}
	txn10 := p.log.LogEndOffset()
	wantProduce(t, "10 begins", c.produceTxn(id, "ps", txnBatch(10, 0, 0, 1, "t10")), nil, txn10)
	plain(3)
	for range 6 {
		idem()
		plain(2)
	}
	// The snapshot of the last roll holds producer 1's older batches; the
	// active segment has some after it.
	if n := segmentLog(t, p).Segments(); n < 5 {
		t.Fatalf("only %d segments", n)
	}
	wantProduce(t, "10 again", c.produceTxn(id, "ps", txnBatch(10, 0, 1, 1, "t10")), nil, p.log.LogEndOffset()-1)

	before := tb.view(c, "ps", false)
	if before.producers[10].CurrentTxnStartOffset != txn10 || before.committed.lso != txn10 || len(before.committed.aborted) != 1 {
		t.Fatalf("before restart: %+v", before)
	}
	active := segmentLog(t, p).ActiveBase()
	var tail int
	if err := p.log.ScanBatches(active, func(segment.BatchHeader) error { tail++; return nil }); err != nil {
		t.Fatal(err)
	}
	snaps, err := segmentLog(t, p).ProducerSnapshotOffsets()
	if err != nil || !slices.Contains(snaps, active) {
		t.Fatalf("snapshots %v (%v), want one at the active segment's base %d", snaps, err, active)
	}
	crashed := copyDataDir(t, tb)
	scratch := copyDataDir(t, tb)
	tb.stop()

	// After a crash, only the active segment's batches are read.
	tb = tb.restartFromImage(t, "ps", crashed, nil)
	tb.skipTxnCheck.Store(true)
	c = tb.dial(t)
	p = tb.catalog.partition("ps", 0)
	if p.scanned != tail {
		t.Fatalf("open after a crash read %d batch headers, want the %d after the snapshot at %d", p.scanned, tail, active)
	}
	if after := tb.view(c, "ps", true); !reflect.DeepEqual(after, before) {
		t.Fatalf("after a crash:\n%+v\nwant\n%+v", after, before)
	}
	// The state is the log's: a full rebuild (no snapshot, no checkpoint)
	// agrees.
	tb.stop()
	tb = tb.restartFromImage(t, "ps", scratch, func(dir string) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if filepath.Ext(e.Name()) == ".snapshot" || e.Name() == segment.EpochCheckpointFile {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	})
	c = tb.dial(t)
	if full := tb.view(c, "ps", true); !reflect.DeepEqual(full, before) {
		t.Fatalf("rebuilt from the whole log:\n%+v\nwant\n%+v", full, before)
	}
	tb.stop()

	// A clean restart (from the crash image's broker, closed) reads
	// nothing, and the window is whole: producer 1's fifth-last batch, from
	// before the snapshot, is still a duplicate.
	tb = tb.restartFromImage(t, "ps", crashed, nil)
	tb.stop()
	cfg := tb.cfg
	tb = serveTestBroker(t, cfg, tb.meta)
	tb.skipTxnCheck.Store(true)
	c = tb.dial(t)
	p = tb.catalog.partition("ps", 0)
	if p.scanned != 0 {
		t.Fatalf("open after a clean close read %d batch headers, want 0", p.scanned)
	}
	if got := tb.describeProducers(c, "ps"); !reflect.DeepEqual(got, before.producers) {
		t.Fatalf("producers after a clean restart: %+v, want %+v", got, before.producers)
	}
	if got := p.epochs[:len(p.epochs)-1]; len(got) < len(before.epochs) || !slices.Equal(got[:len(before.epochs)], before.epochs) {
		t.Fatalf("epochs %v, want %v first", got, before.epochs)
	}
	n := len(offs1)
	wantProduce(t, "retry of the fifth-last batch", c.produceAt(12, "ps", producerBatch(1, 0, seq1-10, 2, "idempotent")), nil, offs1[n-5])
	wantProduce(t, "sixth-last is too old", c.produceAt(12, "ps", producerBatch(1, 0, seq1-12, 2, "idempotent")), kerr.OutOfOrderSequenceNumber, -1)
	wantProduce(t, "12 at its new epoch starts at 0", c.produceTxn(id, "ps", txnBatch(12, 1, 1, 1, "t12")), kerr.OutOfOrderSequenceNumber, -1)
	wantProduce(t, "10 still in its transaction", c.produceAt(12, "ps", producerBatch(10, 0, 2, 1, "x")), kerr.InvalidTxnState, -1)
}

// TestInProcessProducerExpiration: producers idle longer than
// producer.id.expiration.ms and without an open transaction are forgotten
// by the periodic check, and then may start at any sequence; the open
// forgets them too.
func TestInProcessProducerExpiration(t *testing.T) {
	tb := startTestBroker(t, func(cfg *Config) {
		cfg.ProducerIDExpiration = time.Hour
		cfg.ProducerIDExpirationCheckInterval = 5 * time.Millisecond
	})
	tb.skipTxnCheck.Store(true)
	c := tb.dial(t)
	tb.createTopic(t, c, "exp", 1, nil)
	id := kmsg.StringPtr("app")
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	aged := func(b []byte) []byte {
		// Move the batch's timestamps two hours back.
		h := kmsg.RecordBatch{}
		if err := h.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		h.FirstTimestamp, h.MaxTimestamp = old, old
		return recrc(h.AppendTo(nil))
	}
	wantProduce(t, "idle producer", c.produceAt(12, "exp", aged(producerBatch(1, 0, 0, 1, "a"))), nil, 0)
	wantProduce(t, "idle producer in a transaction", c.produceTxn(id, "exp", aged(txnBatch(2, 0, 0, 1, "b"))), nil, 1)
	wantProduce(t, "recent producer", c.produceAt(12, "exp", producerBatch(3, 0, 0, 1, "c")), nil, 2)

	eventually(t, 5*time.Second, "producer 1 expires", func() bool {
		_, ok := tb.describeProducers(c, "exp")[1]
		return !ok
	})
	ps := tb.describeProducers(c, "exp")
	if _, ok := ps[2]; !ok {
		t.Fatalf("producer 2 with an open transaction expired: %+v", ps)
	}
	if _, ok := ps[3]; !ok {
		t.Fatalf("recent producer 3 expired: %+v", ps)
	}
	wantProduce(t, "expired producer at any sequence", c.produceAt(12, "exp", aged(producerBatch(1, 0, 42, 1, "a"))), nil, 3)
	wantProduce(t, "gap for the recent producer", c.produceAt(12, "exp", producerBatch(3, 0, 42, 1, "c")), kerr.OutOfOrderSequenceNumber, -1)

	// The snapshot written at the clean close still holds producer 1 (aged
	// again); the open forgets it.
	tb.stop()
	tb = serveTestBroker(t, tb.cfg, tb.meta)
	c = tb.dial(t)
	ps = tb.describeProducers(c, "exp")
	if _, ok := ps[1]; ok {
		t.Fatalf("expired producer loaded from the snapshot: %+v", ps)
	}
	if _, ok := ps[2]; !ok {
		t.Fatalf("producer 2 with an open transaction lost: %+v", ps)
	}
}

// The leader epoch checkpoint holds the epochs that batches carry. A start
// does not write this incarnation's epoch, which has none yet (an open
// drops an entry at the log end), so a start of idle partitions writes no
// checkpoint; the first batch of the epoch is appended only once the
// checkpoint holds it, so that a crash right after keeps where it began.
func TestInProcessEpochCheckpointBeforeFirstBatch(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "ep", 1, nil)
	plain := func(c *testClient, p *partition) {
		t.Helper()
		end := p.log.LogEndOffset()
		wantProduce(t, "plain", c.produceAt(12, "ep", producerBatch(-1, 0, 0, 3, "plain")), nil, end)
	}
	saved := func(p *partition) []segment.EpochEntry {
		t.Helper()
		got, _, err := p.log.ReadEpochCheckpoint()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	p := tb.catalog.partition("ep", 0)
	plain(c, p)
	plain(c, p)
	first := checkpointEntries(p.epochs)

	for round := range 2 {
		tb = tb.restartAfterCrash(t)
		p = tb.catalog.partition("ep", 0)
		if got := saved(p); !slices.Equal(got, first) {
			t.Fatalf("round %d: checkpoint after a start %v, want it untouched: %v", round, got, first)
		}
		if n := len(p.epochs); n != 2 || p.epochs[1].start != 6 {
			t.Fatalf("round %d: epochs %+v, want the first and this incarnation's at 6", round, p.epochs)
		}
	}
	c = tb.dial(t)
	plain(c, p)
	all := checkpointEntries(p.epochs)
	if got := saved(p); !slices.Equal(got, all) {
		t.Fatalf("checkpoint after the epoch's first batch %v, want %v", got, all)
	}
	tb = tb.restartAfterCrash(t)
	p = tb.catalog.partition("ep", 0)
	if got := checkpointEntries(p.epochs[:len(p.epochs)-1]); !slices.Equal(got, all) {
		t.Fatalf("epochs after a crash %v, want %v", got, all)
	}
}
