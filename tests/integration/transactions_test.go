package integration

// The acceptance tests of issue #14 (Kafka transactions). Three of them run
// consume-transform-produce pipelines with stock clients — franz-go's
// GroupTransactSession, the Java client's sendOffsetsToTransaction, a Kafka
// Streams exactly_once_v2 application — while the broker is killed with
// SIGKILL and the group rebalances, and then judge the output the way an
// exactly-once application would: read_committed, every input once, no
// aborted data. The fourth checks that one SQL transaction's records
// become visible to a read_committed consumer all at once.
//
// The pipelines are client logic first, so they can run against any broker:
// with KAFGRES_TEST_BOOTSTRAP=host:port they use that broker (the reference
// Kafka 4.4 of tests/conformance/runner) instead of starting a kafgres
// cluster, and skip the kills, which need the harness's supervisor, unless
// KAFGRES_TEST_KILL_CMD says how to kill and restart that broker. That is
// how their expectations were proven against Kafka itself.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

const (
	// txnInputRecords is "tens of thousands", small enough that a pipeline
	// with three broker kills finishes in well under a minute.
	txnInputRecords = 30_000
	txnPartitions   = 3
	// txnAbortEvery: each pipeline worker aborts every txnAbortEvery-th
	// transaction on purpose, its output marked "aborted-".
	txnAbortEvery = 7
	// txnPipelineTimeout bounds a pipeline's whole run, kills included.
	txnPipelineTimeout = 3 * time.Minute
	abortedPrefix      = "aborted-"
)

// txnTarget is the broker a transaction test runs against: a kafgres
// cluster it started, or the external broker KAFGRES_TEST_BOOTSTRAP names.
type txnTarget struct {
	addr   string
	c      *harness.Cluster // nil for an external broker
	suffix string           // makes names unique on a long-lived external broker
}

func newTxnTarget(t *testing.T) *txnTarget {
	t.Helper()
	suffix := "-" + strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	if addr := os.Getenv("KAFGRES_TEST_BOOTSTRAP"); addr != "" {
		kills := "broker kills are skipped"
		if os.Getenv("KAFGRES_TEST_KILL_CMD") != "" {
			kills = "KAFGRES_TEST_KILL_CMD kills and restarts it"
		}
		t.Logf("running against the external broker %s; %s", addr, kills)
		return &txnTarget{addr: addr, suffix: suffix}
	}
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	return &txnTarget{addr: c.Addr, c: c, suffix: suffix}
}

// name makes a topic, group or transactional id unique to this run.
func (x *txnTarget) name(base string) string { return base + x.suffix }

// createTopic creates topic base (made unique) and returns its name.
func (x *txnTarget) createTopic(t *testing.T, base string, partitions int) string {
	t.Helper()
	topic := x.name(base)
	if x.c != nil {
		x.c.CreateTopic(t, topic, partitions)
		return topic
	}
	adm, cl := txnAdmin(t, x.addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	return topic
}

// killBroker kills the broker with SIGKILL and waits for the supervisor to
// bring it back. Against an external broker it runs the shell command
// KAFGRES_TEST_KILL_CMD, which must do the same (kill -9 and restart with
// the same data) and return once the broker listens again; without it the
// kill is skipped.
func (x *txnTarget) killBroker(t *testing.T, why string) {
	t.Helper()
	start := time.Now()
	switch cmd := os.Getenv("KAFGRES_TEST_KILL_CMD"); {
	case x.c != nil:
		old := x.c.KillBroker(t)
		x.c.WaitBroker(t, old, 30*time.Second)
	case cmd != "":
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "bash", "-c", cmd).CombinedOutput(); err != nil {
			t.Fatalf("KAFGRES_TEST_KILL_CMD: %v\n%s", err, out)
		}
	default:
		t.Logf("(external broker: kill %q skipped)", why)
		return
	}
	t.Logf("broker killed (%s), back after %v", why, time.Since(start).Round(time.Millisecond))
}

// killPostgres kills Postgres with SIGKILL (the broker goes with it: its
// liveness pipe closes), starts it again and waits for the supervisor's
// new broker. Against an external broker it is skipped.
func (x *txnTarget) killPostgres(t *testing.T, why string) {
	t.Helper()
	if x.c == nil {
		t.Logf("(external broker: Postgres kill %q skipped)", why)
		return
	}
	start := time.Now()
	old := x.c.BrokerPID(t)
	x.c.KillPostgres(t)
	harness.WaitPortClosed(t, x.c.Addr, 10*time.Second)
	x.c.StartPG(t)
	x.c.WaitBroker(t, old, 30*time.Second)
	t.Logf("Postgres killed (%s), broker back after %v", why, time.Since(start).Round(time.Millisecond))
}

func (x *txnTarget) logTail() string {
	if x.c == nil {
		return "(external broker: no log)"
	}
	return x.c.LogTail()
}

func txnAdmin(t *testing.T, addr string) (*kadm.Client, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	return kadm.NewClient(cl), cl
}

// inputValue is input record i; it lands on partition i % txnPartitions.
func inputValue(i int) string { return fmt.Sprintf("in-%06d", i) }

// fillInput writes txnInputRecords numbered records to topic, non
// transactionally.
func fillInput(t *testing.T, addr, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const chunk = 2000
	for lo := 0; lo < txnInputRecords; lo += chunk {
		rs := make([]*kgo.Record, 0, chunk)
		for i := lo; i < min(lo+chunk, txnInputRecords); i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % txnPartitions),
				Key: []byte(strconv.Itoa(i)), Value: []byte(inputValue(i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("fill %s: %v", topic, err)
		}
	}
}

// pipelineRun drives one pipeline: it waits for the workers' committed
// record count to pass milestones and does something there (kill the
// broker, add or remove a worker), then waits until the group has
// committed the whole input. It fails the test as soon as a worker has
// given up, or once the count has not moved for txnStall.
type pipelineRun struct {
	t         *testing.T
	x         *txnTarget
	group     string
	input     string
	committed func() int64 // input records the workers report committed
	failed    func() error // non-nil once a worker has given up

	last      int64
	lastMoved time.Time
}

// txnStall is how long a pipeline may go without committing anything:
// longer than a broker restart plus a transaction timeout (20s).
const txnStall = 90 * time.Second

type milestone struct {
	at     float64 // fraction of the input committed
	what   string
	action func()
}

// check fails the test if a worker gave up or the pipeline stalled, and
// returns the committed count.
func (r *pipelineRun) check(waitingFor string) int64 {
	t := r.t
	t.Helper()
	if err := r.failed(); err != nil {
		t.Fatalf("pipeline worker failed while waiting for %s: %v\n--- broker log ---\n%s", waitingFor, err, r.x.logTail())
	}
	n := r.committed()
	if n != r.last || r.lastMoved.IsZero() {
		r.last, r.lastMoved = n, time.Now()
	}
	if time.Since(r.lastMoved) > txnStall {
		t.Fatalf("pipeline stalled: workers have committed %d input records, none for %v, waiting for %s\n--- broker log ---\n%s",
			n, txnStall, waitingFor, r.x.logTail())
	}
	return n
}

func (r *pipelineRun) drive(steps []milestone) {
	t := r.t
	t.Helper()
	begun := time.Now()
	for _, s := range steps {
		target := int64(s.at * txnInputRecords)
		harness.Eventually(t, txnPipelineTimeout, func() error {
			if n := r.check(s.what); n < target {
				return fmt.Errorf("workers committed %d input records, waiting for %d before %q", n, target, s.what)
			}
			return nil
		})
		t.Logf("%v: at %d committed records: %s", time.Since(begun).Round(time.Millisecond), r.committed(), s.what)
		s.action()
	}
	r.waitInputCommitted()
	t.Logf("%v: the group committed the whole input", time.Since(begun).Round(time.Millisecond))
}

// waitInputCommitted waits until the group's committed offsets are the
// end of every input partition: the whole input went through committed
// transactions.
func (r *pipelineRun) waitInputCommitted() {
	t := r.t
	t.Helper()
	adm, cl := txnAdmin(t, r.x.addr)
	defer cl.Close()
	harness.Eventually(t, txnPipelineTimeout, func() error {
		n := r.check("the group to commit the whole input")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, r.input)
		if err != nil {
			return fmt.Errorf("list end offsets: %w", err)
		}
		offs, err := adm.FetchOffsets(ctx, r.group)
		if err != nil {
			return fmt.Errorf("fetch group offsets: %w", err)
		}
		var behind []string
		ends.Each(func(e kadm.ListedOffset) {
			got, ok := offs.Lookup(r.input, e.Partition)
			if !ok || got.At < e.Offset {
				behind = append(behind, fmt.Sprintf("partition %d at %d of %d", e.Partition, got.At, e.Offset))
			}
		})
		if len(behind) > 0 {
			return fmt.Errorf("group %s has not committed the whole input (workers report %d records): %s",
				r.group, n, strings.Join(behind, ", "))
		}
		return nil
	})
}

// checkPipelineOutput reads the output topic read_committed and checks it
// holds every input record exactly once, on the input's partition, in
// input order, and nothing aborted; then reads it read_uncommitted, where
// the aborted transactions' records must be (a broker that dropped them
// would make the read_committed check vacuous).
func checkPipelineOutput(t *testing.T, x *txnTarget, topic string) {
	t.Helper()
	committed := fetchWhole(t, x, topic, kgo.ReadCommitted())
	seen := make([]bool, txnInputRecords)
	at := make([]int64, txnInputRecords)
	last := map[int32]int{}
	var dups []string
	for p, recs := range committed {
		last[p] = -1
		for _, r := range recs {
			v := string(r.Value)
			if strings.HasPrefix(v, abortedPrefix) {
				t.Fatalf("read_committed returned %q at %d/%d, written by an aborted transaction", v, p, r.Offset)
			}
			i, err := strconv.Atoi(strings.TrimPrefix(v, "in-"))
			if err != nil || i < 0 || i >= txnInputRecords {
				t.Fatalf("unexpected output record %q at %d/%d", v, p, r.Offset)
			}
			if seen[i] {
				dups = append(dups, fmt.Sprintf("%d at %d/%d and %d/%d", i, p, at[i], p, r.Offset))
				continue
			}
			seen[i], at[i] = true, r.Offset
			if int32(i%txnPartitions) != p {
				t.Fatalf("input record %d (partition %d) went to output partition %d", i, i%txnPartitions, p)
			}
			if i < last[p] {
				t.Fatalf("output partition %d: input record %d after %d, out of input order", p, i, last[p])
			}
			last[p] = i
		}
	}
	if len(dups) > 0 {
		t.Fatalf("%d input records are in the output twice: first %s; last %s", len(dups), dups[0], dups[len(dups)-1])
	}
	var missing []int
	for i, ok := range seen {
		if !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d input records missing from the read_committed output, first %v", len(missing), missing[:min(10, len(missing))])
	}

	aborted := 0
	for _, recs := range fetchWhole(t, x, topic, kgo.ReadUncommitted()) {
		for _, r := range recs {
			if strings.HasPrefix(string(r.Value), abortedPrefix) {
				aborted++
			}
		}
	}
	if aborted == 0 {
		t.Fatalf("read_uncommitted shows no record of an aborted transaction: the aborts were not written, so the test proved nothing")
	}
	t.Logf("output: %d input records exactly once read_committed; read_uncommitted also shows %d records of aborted transactions",
		txnInputRecords, aborted)
}

// topicFetcher fetches one topic's partitions with raw Fetch requests, so
// that a test sees each response's high watermark and last stable offset,
// and which records came in which response.
type topicFetcher struct {
	cl    *kgo.Client
	topic string
	id    [16]byte
	iso   kgo.IsolationLevel
	level int8
	pos   []int64 // next offset to fetch, per partition
}

func newTopicFetcher(t *testing.T, cl *kgo.Client, topic string, iso kgo.IsolationLevel) *topicFetcher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var td kadm.TopicDetail
	err := harness.Poll(30*time.Second, func() error {
		tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		td = tds[topic]
		if td.Err != nil {
			return td.Err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	f := &topicFetcher{cl: cl, topic: topic, id: td.ID, iso: iso, pos: make([]int64, len(td.Partitions))}
	if iso == kgo.ReadCommitted() {
		f.level = 1
	}
	return f
}

// fetchedPartition is one partition of a Fetch response.
type fetchedPartition struct {
	partition int32
	records   []*kgo.Record
	hw, lso   int64
	next      int64 // the fetcher's position after this response
}

// caughtUp reports whether the fetcher has read everything this response's
// isolation level made visible.
func (fp fetchedPartition) caughtUp(level int8) bool {
	end := fp.hw
	if level == 1 && fp.lso >= 0 {
		end = fp.lso
	}
	return fp.next >= end
}

// fetch sends one Fetch for every partition at the fetcher's positions and
// advances them past what it returned (control and aborted batches
// included).
func (f *topicFetcher) fetch(ctx context.Context) ([]fetchedPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = 16 << 20
	req.IsolationLevel = f.level
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = f.topic
	rt.TopicID = f.id
	for p, off := range f.pos {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		rp.FetchOffset = off
		rp.PartitionMaxBytes = 4 << 20
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, f.cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch %s: %w", f.topic, err)
	}
	var out []fetchedPartition
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("fetch %s partition %d: %w", f.topic, rp.Partition, err)
			}
			if rp.Partition < 0 || int(rp.Partition) >= len(f.pos) {
				return nil, fmt.Errorf("fetch %s: answer for unknown partition %d", f.topic, rp.Partition)
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: f.pos[rp.Partition], IsolationLevel: f.iso, Topic: f.topic, Partition: rp.Partition,
			}, rp, kgo.DefaultDecompressor(), nil)
			if fp.Err != nil {
				return nil, fmt.Errorf("fetch %s partition %d: %w", f.topic, rp.Partition, fp.Err)
			}
			f.pos[rp.Partition] = max(f.pos[rp.Partition], next)
			out = append(out, fetchedPartition{partition: rp.Partition, records: fp.Records,
				hw: rp.HighWatermark, lso: rp.LastStableOffset, next: f.pos[rp.Partition]})
		}
	}
	return out, nil
}

// fetchWhole reads every partition of topic from the start to its high
// watermark at the given isolation level. Reading read_committed to the
// high watermark also proves no transaction was left open (hanging) on it:
// the last stable offset would stop short.
func fetchWhole(t *testing.T, x *txnTarget, topic string, iso kgo.IsolationLevel) map[int32][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(x.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f := newTopicFetcher(t, cl, topic, iso)
	out := map[int32][]*kgo.Record{}
	done := map[int32]bool{}
	var state string
	err = harness.Poll(time.Minute, func() error {
		for len(done) < len(f.pos) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			fps, err := f.fetch(ctx)
			cancel()
			if err != nil {
				return err
			}
			progress := false
			var st []string
			for _, fp := range fps {
				out[fp.partition] = append(out[fp.partition], fp.records...)
				progress = progress || len(fp.records) > 0
				if fp.next >= fp.hw {
					done[fp.partition] = true
				}
				st = append(st, fmt.Sprintf("partition %d at %d, last stable %d, high watermark %d", fp.partition, fp.next, fp.lso, fp.hw))
			}
			state = strings.Join(st, "; ")
			if !progress && len(done) < len(f.pos) {
				return fmt.Errorf("no progress: %s", state)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s %v to its high watermark: %v (an open transaction holds the last stable offset back?)\n%s",
			topic, iso, err, x.logTail())
	}
	return out
}

// TestTransactionsFranzGroupTransactSession: consume-transform-produce
// with franz-go's GroupTransactSession, read_committed, over 30,000 input
// records; workers join and leave (rebalances), each aborts every 7th
// transaction on purpose, and the broker is killed twice and Postgres once
// (kill -9 each). The read_committed output must hold every input record
// exactly once and no aborted record.
func TestTransactionsFranzGroupTransactSession(t *testing.T) {
	x := newTxnTarget(t)
	in := x.createTopic(t, "txn-franz-in", txnPartitions)
	out := x.createTopic(t, "txn-franz-out", txnPartitions)
	fillInput(t, x.addr, in)

	p := &franzPipeline{addr: x.addr, group: x.name("txn-franz"), in: in, out: out, logf: t.Logf}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("what the workers saw, in order:\n%s", p.history.String())
		}
	})
	workers := map[string]*franzWorker{}
	start := func(id string) func() {
		return func() { workers[id] = p.start(x.name("txn-franz-" + id)) }
	}
	stop := func(id string) func() {
		return func() {
			if err := workers[id].stop(30 * time.Second); err != nil {
				t.Fatalf("worker %s: %v\n%s", id, err, x.logTail())
			}
			delete(workers, id)
		}
	}
	t.Cleanup(func() {
		for _, w := range workers {
			w.stop(10 * time.Second)
		}
	})
	start("a")()
	start("b")()
	run := &pipelineRun{t: t, x: x, group: p.group, input: in, committed: p.committed.Load, failed: func() error {
		for id, w := range workers {
			if err := w.exited(); err != nil {
				return fmt.Errorf("worker %s: %w", id, err)
			}
		}
		return nil
	}}
	run.drive([]milestone{
		{0.10, "kill the broker", func() { x.killBroker(t, "franz pipeline, 1st") }},
		{0.25, "worker c joins", start("c")},
		{0.40, "kill Postgres", func() { x.killPostgres(t, "franz pipeline") }},
		{0.55, "worker a leaves", stop("a")},
		{0.70, "kill the broker", func() { x.killBroker(t, "franz pipeline, 2nd") }},
	})
	for id := range workers {
		stop(id)()
	}
	if p.aborts.Load() == 0 {
		t.Fatalf("no transaction was aborted on purpose")
	}
	t.Logf("workers: %d records committed, %d transactions aborted on purpose, %d sessions restarted after errors",
		p.committed.Load(), p.aborts.Load(), p.restarts.Load())
	checkPipelineOutput(t, x, out)
}

// franzPipeline is the shared configuration and counters of the franz-go
// workers.
type franzPipeline struct {
	addr, group, in, out string
	logf                 func(string, ...any)
	committed            atomic.Int64 // input records in committed transactions
	aborts               atomic.Int64 // transactions aborted on purpose
	restarts             atomic.Int64
	history              eventLog // assignments and transaction ends, for a failure's report
}

// eventLog collects timestamped lines from several goroutines.
type eventLog struct {
	mu    sync.Mutex
	start time.Time
	b     strings.Builder
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start.IsZero() {
		l.start = time.Now()
	}
	fmt.Fprintf(&l.b, "%8.3fs ", time.Since(l.start).Seconds())
	fmt.Fprintf(&l.b, format, args...)
	l.b.WriteByte('\n')
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// inputRanges describes the input offsets of fs per partition, "p0 [a, b]".
func inputRanges(fs kgo.Fetches) string {
	lo, hi := map[int32]int64{}, map[int32]int64{}
	fs.EachRecord(func(r *kgo.Record) {
		if _, ok := lo[r.Partition]; !ok {
			lo[r.Partition] = r.Offset
		}
		hi[r.Partition] = r.Offset
	})
	var parts []string
	for p := range int32(txnPartitions) {
		if l, ok := lo[p]; ok {
			parts = append(parts, fmt.Sprintf("p%d [%d, %d]", p, l, hi[p]))
		}
	}
	return strings.Join(parts, " ")
}

type franzWorker struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done closes
}

func (p *franzPipeline) start(txnID string) *franzWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &franzWorker{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = p.run(ctx, txnID)
	}()
	return w
}

func (w *franzWorker) stop(timeout time.Duration) error {
	w.cancel()
	select {
	case <-w.done:
		return w.err
	case <-time.After(timeout):
		return fmt.Errorf("did not stop within %v", timeout)
	}
}

// exited is non-nil once the worker has stopped on its own (given up).
func (w *franzWorker) exited() error {
	select {
	case <-w.done:
		if w.err == nil {
			return errors.New("stopped unasked")
		}
		return w.err
	default:
		return nil
	}
}

// run is one worker: sessions one after another, since an error from a
// session's End is not retryable (franz-go's documentation): the worker
// closes it and starts a new session with the same transactional id, which
// fences and recovers the old one, as an application would.
func (p *franzPipeline) run(ctx context.Context, txnID string) error {
	for failures := 0; ; failures++ {
		err := p.session(ctx, txnID)
		if ctx.Err() != nil {
			return nil
		}
		if failures == 30 {
			return fmt.Errorf("%s: gave up after %d failed sessions, last: %w", txnID, failures, err)
		}
		p.restarts.Add(1)
		p.logf("%s: session ended (%v); starting a new one", txnID, err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (p *franzPipeline) session(ctx context.Context, txnID string) error {
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(p.addr),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(p.group),
		kgo.ConsumeTopics(p.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(30*time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			p.history.add("%s: assigned %v", txnID, m[p.in])
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			p.history.add("%s: revoked %v", txnID, m[p.in])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			p.history.add("%s: lost %v", txnID, m[p.in])
		}),
	)
	if err != nil {
		return err
	}
	p.history.add("%s: session starts", txnID)
	defer func() {
		s.Close()
		p.history.add("%s: session closed", txnID)
	}()
	for batches := 1; ; batches++ {
		fs := s.PollRecords(ctx, 300)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return ctx.Err()
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("poll: %w", err)
		}
		n := fs.NumRecords()
		if n == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		abort := batches%txnAbortEvery == 0
		e := kgo.AbortingFirstErrPromise(s.Client())
		fs.EachRecord(func(r *kgo.Record) {
			v := r.Value
			if abort {
				v = append([]byte(abortedPrefix), v...)
			}
			s.Produce(ctx, &kgo.Record{Topic: p.out, Partition: r.Partition, Key: r.Key, Value: v}, e.Promise())
		})
		perr := e.Err()
		committed, err := s.End(ctx, kgo.TransactionEndTry(!abort && perr == nil))
		p.history.add("%s: end of %s: committed %v, error %v", txnID, inputRanges(fs), committed, err)
		if err != nil {
			return fmt.Errorf("end (produce error %v): %w", perr, err)
		}
		switch {
		case committed:
			p.committed.Add(int64(n))
		case abort:
			p.aborts.Add(1)
		}
	}
}

// javaTxnClasspath compiles tests/java (its test classes hold the programs
// of these tests, in io.kafgres.txn) into a temporary directory and returns
// the classpath to run them with: kafka-clients and kafka-streams 4.4 from
// Maven Central.
func javaTxnClasspath(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the Java programs need Java 17 and Maven", tool)
		}
	}
	build := t.TempDir()
	cpFile := filepath.Join(build, "classpath.txt")
	pom := filepath.Join(harness.RepoRoot(), "tests", "java", "pom.xml")
	ctx, cancel := context.WithTimeout(context.Background(), javaSuiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-Dstyle.color=never", "-f", pom,
		"test-compile", "dependency:build-classpath", "-Dmdep.outputFile="+cpFile, "-Dkafgres.buildDir="+build)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the Java programs: %v\n%s", err, out)
	}
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(build, "test-classes") + string(os.PathListSeparator) + strings.TrimSpace(string(cp))
}

// javaProc is one running Java program. Its stdout lines go to onLine;
// the tail of its stderr goes into failure messages.
type javaProc struct {
	name   string
	cmd    *exec.Cmd
	stderr *tailBuffer
	done   chan struct{}
	err    error // set before done closes
}

func startJavaProgram(t *testing.T, name, classpath, class string, onLine func(string), args ...string) *javaProc {
	t.Helper()
	cmd := exec.Command("java", append([]string{"-Xmx256m", "-XX:+UseSerialGC", "-cp", classpath, class}, args...)...)
	p := &javaProc{name: name, cmd: cmd, stderr: &tailBuffer{max: 8000}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			onLine(sc.Text())
		}
		io.Copy(io.Discard, stdout)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop asks the program to finish (SIGTERM runs its shutdown hook) and
// waits for it.
func (p *javaProc) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("%s had exited already: %v\n%s", p.name, p.err, p.stderr)
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not stop within %v of SIGTERM\n%s", p.name, timeout, p.stderr)
	}
}

// alive fails the test if the program died.
func (p *javaProc) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.stderr)
	default:
		return nil
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if len(b.b) > b.max {
		b.b = b.b[len(b.b)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}

// TestTransactionsJavaSendOffsets is the franz-go pipeline with the Java
// client (tests/java: io.kafgres.txn.TxnPipeline): poll, produce, then
// sendOffsetsToTransaction with the consumer's group metadata and commit
// (or, every 7th transaction, abort and rewind). Two workers, a third
// joining and one leaving, three broker kills.
func TestTransactionsJavaSendOffsets(t *testing.T) {
	cp := javaTxnClasspath(t)
	x := newTxnTarget(t)
	in := x.createTopic(t, "txn-java-in", txnPartitions)
	out := x.createTopic(t, "txn-java-out", txnPartitions)
	fillInput(t, x.addr, in)
	group := x.name("txn-java")

	var committed, aborts, restarts atomic.Int64
	onLine := func(line string) {
		kind, n, _ := strings.Cut(line, " ")
		v, _ := strconv.ParseInt(n, 10, 64)
		switch kind {
		case "committed":
			committed.Add(v)
		case "aborted":
			aborts.Add(1)
		case "restart":
			restarts.Add(1)
		}
	}
	workers := map[string]*javaProc{}
	start := func(id string) func() {
		return func() {
			workers[id] = startJavaProgram(t, "java worker "+id, cp, "io.kafgres.txn.TxnPipeline", onLine,
				x.addr, in, out, group, x.name("txn-java-"+id), strconv.Itoa(txnAbortEvery))
		}
	}
	stop := func(id string) func() {
		return func() { workers[id].stop(t, 60*time.Second); delete(workers, id) }
	}
	start("a")()
	start("b")()
	run := &pipelineRun{t: t, x: x, group: group, input: in, committed: committed.Load, failed: func() error {
		for _, w := range workers {
			if err := w.alive(); err != nil {
				return err
			}
		}
		return nil
	}}
	run.drive([]milestone{
		{0.10, "kill the broker", func() { x.killBroker(t, "java pipeline, 1st") }},
		{0.25, "worker c joins", start("c")},
		{0.40, "kill the broker", func() { x.killBroker(t, "java pipeline, 2nd") }},
		{0.55, "worker a leaves", stop("a")},
		{0.70, "kill the broker", func() { x.killBroker(t, "java pipeline, 3rd") }},
	})
	for id := range workers {
		stop(id)()
	}
	if aborts.Load() == 0 {
		t.Fatalf("no transaction was aborted on purpose")
	}
	t.Logf("workers: %d records committed, %d transactions aborted on purpose, %d restarts after errors",
		committed.Load(), aborts.Load(), restarts.Load())
	checkPipelineOutput(t, x, out)
}

// TestTransactionsKafkaStreamsWordCount: a Kafka Streams 4.4 word count
// (tests/java: io.kafgres.txn.WordCount) with processing.guarantee =
// exactly_once_v2. Half the text goes in, the broker is killed while the
// application works on it, the other half follows; the read_committed
// output's last count per word must then be the exact count.
func TestTransactionsKafkaStreamsWordCount(t *testing.T) {
	cp := javaTxnClasspath(t)
	x := newTxnTarget(t)
	in := x.createTopic(t, "wc-in", txnPartitions)
	out := x.createTopic(t, "wc-out", txnPartitions)

	words := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike " +
		"november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu")
	rng := rand.New(rand.NewPCG(14, 14))
	const lines = 20_000
	text := make([]string, lines)
	want := map[string]int64{}
	for i := range text {
		ws := make([]string, 1+rng.IntN(8))
		for j := range ws {
			ws[j] = words[rng.IntN(len(words))]
			want[ws[j]]++
		}
		text[i] = strings.Join(ws, " ")
	}
	// The text goes in through one idempotent producer that outlives the
	// kill: a quarter before the application starts, the rest fed in
	// chunks while it runs, so that the kill hits it mid-stream.
	pcl, err := kgo.NewClient(kgo.SeedBrokers(x.addr), kgo.RecordRetries(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	produce := func(part []string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rs := make([]*kgo.Record, len(part))
		for i, l := range part {
			rs[i] = &kgo.Record{Topic: in, Value: []byte(l)}
		}
		return pcl.ProduceSync(ctx, rs...).FirstErr()
	}
	if err := produce(text[:lines/4]); err != nil {
		t.Fatalf("produce text: %v", err)
	}
	begun := time.Now()
	app := startJavaProgram(t, "word count", cp, "io.kafgres.txn.WordCount", func(l string) { t.Logf("word count: %s", l) },
		x.addr, x.name("wc-app"), in, out, t.TempDir())

	cl, err := kgo.NewClient(kgo.SeedBrokers(x.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f := newTopicFetcher(t, cl, out, kgo.ReadCommitted())
	counts := map[string]int64{}
	poll := func() error {
		if err := app.alive(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		fps, err := f.fetch(ctx)
		if err != nil {
			return err
		}
		for _, fp := range fps {
			for _, r := range fp.records {
				if len(r.Value) != 8 {
					t.Fatalf("output record %q = %x is not a long", r.Key, r.Value)
				}
				counts[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
			}
		}
		return nil
	}
	err = harness.Poll(90*time.Second, func() error {
		if err := poll(); err != nil {
			return err
		}
		if len(counts) == 0 {
			return fmt.Errorf("no committed count in %s yet", out)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("word counts: %v\n--- application stderr ---\n%s\n--- broker log ---\n%s", err, app.stderr, x.logTail())
	}
	t.Logf("first committed counts after %v", time.Since(begun).Round(time.Millisecond))

	// Feed the rest at a steady pace (the pauses only spread it out), and
	// kill the broker a third of the way through.
	const chunk = 250
	var fed atomic.Int64
	feedErr := make(chan error, 1)
	go func() {
		for lo := lines / 4; lo < lines; lo += chunk {
			if err := produce(text[lo:min(lo+chunk, lines)]); err != nil {
				feedErr <- fmt.Errorf("produce text lines %d..: %w", lo, err)
				return
			}
			fed.Store(int64(min(lo+chunk, lines)))
			time.Sleep(50 * time.Millisecond)
		}
		feedErr <- nil
	}()
	harness.Eventually(t, time.Minute, func() error {
		if n := fed.Load(); n < lines/2 {
			return fmt.Errorf("%d of %d lines fed", n, lines)
		}
		return nil
	})
	x.killBroker(t, "streams word count, mid-way")
	if err := <-feedErr; err != nil {
		t.Fatal(err)
	}

	err = harness.Poll(2*time.Minute, func() error {
		if err := poll(); err != nil {
			return err
		}
		return diffCounts(counts, want)
	})
	if err != nil {
		t.Fatalf("word counts: %v\n--- application stderr ---\n%s\n--- broker log ---\n%s", err, app.stderr, x.logTail())
	}
	t.Logf("counts exact after %v", time.Since(begun).Round(time.Millisecond))
	// Stay exact: nothing may follow once the counts are right.
	for range 10 {
		if err := poll(); err != nil {
			t.Fatal(err)
		}
	}
	if err := diffCounts(counts, want); err != nil {
		t.Fatalf("word counts changed after they were exact: %v", err)
	}
	app.stop(t, 60*time.Second)
	t.Logf("%d words counted exactly over %d lines", len(want), lines)
}

func diffCounts(got, want map[string]int64) error {
	var diffs []string
	for w, n := range want {
		if got[w] != n {
			diffs = append(diffs, fmt.Sprintf("%s: %d, want %d", w, got[w], n))
		}
	}
	for w, n := range got {
		if _, ok := want[w]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: %d, not in the text", w, n))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		return fmt.Errorf("%d counts differ: %s", len(diffs), strings.Join(diffs[:min(8, len(diffs))], "; "))
	}
	return nil
}

// TestSQLTransactionAtomicReadCommitted: 2,000 SQL transactions each
// kafgres_produce one record to each of the 3 partitions of a topic, while
// a read_committed consumer fetches. One SQL transaction's records must
// become visible all at once: once the consumer has seen one of them, any
// later fetch that reaches the last stable offset of another partition
// must have brought that partition's record of the transaction too. (The
// partitions of one response may come from moments a little apart, so the
// check compares a response only with what earlier responses showed.)
// At the end every transaction is read exactly once.
func TestSQLTransactionAtomicReadCommitted(t *testing.T) {
	if os.Getenv("KAFGRES_TEST_BOOTSTRAP") != "" {
		t.Skip("SQL transactions are kafgres's own: nothing to run against another broker")
	}
	const txns = 2000
	x := newTxnTarget(t)
	topic := x.createTopic(t, "sqlatomic", txnPartitions)

	werr := make(chan error, 1)
	var written atomic.Int64
	conn := x.c.Conn(t)
	go func() {
		ctx := context.Background()
		for i := range txns {
			v := fmt.Sprintf("%05d", i)
			_, err := conn.Exec(ctx, `SELECT kafgres_produce($1, NULL::text, $2 || '/0', partition => 0),
				kafgres_produce($1, NULL::text, $2 || '/1', partition => 1),
				kafgres_produce($1, NULL::text, $2 || '/2', partition => 2)`, topic, v)
			if err != nil {
				werr <- fmt.Errorf("transaction %d: %w", i, err)
				return
			}
			written.Add(1)
		}
		werr <- nil
	}()

	cl, err := kgo.NewClient(kgo.SeedBrokers(x.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f := newTopicFetcher(t, cl, topic, kgo.ReadCommitted())
	type seenTxn struct {
		parts    uint8 // bit p: the record on partition p was read
		response int   // the response that first showed one of them
	}
	seen := make([]seenTxn, txns)
	complete := 0
	var open []int // transactions seen partly, ascending
	writerDone := false
	deadline := time.Now().Add(2 * time.Minute)
	for response := 1; complete < txns; response++ {
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d transactions completely within 2 minutes (%d written); %d seen partly\n%s",
				complete, txns, written.Load(), len(open), x.logTail())
		}
		if !writerDone {
			select {
			case err := <-werr:
				if err != nil {
					t.Fatalf("writer: %v", err)
				}
				writerDone = true
			default:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		fps, err := f.fetch(ctx)
		cancel()
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		for _, fp := range fps {
			for _, r := range fp.records {
				tx, part, ok := parseSQLAtomic(string(r.Value), txns)
				if !ok || part != fp.partition {
					t.Fatalf("unexpected record %q at %d/%d", r.Value, fp.partition, r.Offset)
				}
				s := &seen[tx]
				if s.parts&(1<<part) != 0 {
					t.Fatalf("record %q read twice (again at %d/%d)", r.Value, fp.partition, r.Offset)
				}
				if s.parts == 0 {
					s.response = response
					open = append(open, tx)
				}
				s.parts |= 1 << part
			}
		}
		// Partitions this response read up to their last stable offset
		// must hold every transaction an earlier response showed.
		for _, fp := range fps {
			if !fp.caughtUp(1) {
				continue
			}
			for _, tx := range open {
				s := seen[tx]
				if s.response < response && s.parts&(1<<fp.partition) == 0 {
					t.Fatalf("strict subset of SQL transaction %d visible read_committed: partitions %03b were read by fetch response %d, "+
						"but response %d reached partition %d's last stable offset %d (high watermark %d) without its record",
						tx, s.parts, s.response, response, fp.partition, fp.lso, fp.hw)
				}
			}
		}
		kept := open[:0]
		for _, tx := range open {
			if seen[tx].parts == 1<<txnPartitions-1 {
				complete++
			} else {
				kept = append(kept, tx)
			}
		}
		open = kept
	}
	if !writerDone {
		if err := <-werr; err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	t.Logf("%d SQL transactions over %d partitions read whole, never in part", txns, txnPartitions)
}

// parseSQLAtomic parses "TTTTT/P", transaction T (of txns) on partition P.
func parseSQLAtomic(v string, txns int) (tx int, part int32, ok bool) {
	a, b, found := strings.Cut(v, "/")
	if !found {
		return 0, 0, false
	}
	tx, err1 := strconv.Atoi(a)
	p, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || tx < 0 || tx >= txns || p < 0 || p >= txnPartitions {
		return 0, 0, false
	}
	return tx, int32(p), true
}
