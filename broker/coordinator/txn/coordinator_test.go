package txn

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// memStore is a Store in memory that keeps committed offsets apart, as
// kafgres.consumer_offset does.
type memStore struct {
	mu        sync.Mutex
	txns      map[string]Txn
	pending   map[string][]Offset
	committed map[offsetKey]Offset
	fail      bool
}

func newMemStore() *memStore {
	return &memStore{txns: map[string]Txn{}, pending: map[string][]Offset{}, committed: map[offsetKey]Offset{}}
}

func (s *memStore) LoadTransactions(context.Context) ([]Txn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Txn
	for _, t := range s.txns {
		out = append(out, t.clone())
	}
	return out, nil
}

func (s *memStore) LoadTxnOffsets(context.Context) ([]PendingOffset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PendingOffset
	for id, offs := range s.pending {
		for _, o := range offs {
			out = append(out, PendingOffset{TransactionalID: id, ProducerID: s.txns[id].ProducerID, Offset: o})
		}
	}
	return out, nil
}

func (s *memStore) SaveTransaction(_ context.Context, t Txn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return io.ErrUnexpectedEOF
	}
	s.txns[t.ID] = t.clone()
	return nil
}

func (s *memStore) SaveTxnOffsets(_ context.Context, id string, _ int64, offs []Offset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[id] = append(s.pending[id], offs...)
	return nil
}

func (s *memStore) CompleteTransaction(_ context.Context, t Txn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.State == CompleteCommit {
		for _, o := range s.pending[t.ID] {
			s.committed[offsetKey{o.Group, o.TopicID, o.Partition}] = o
		}
	}
	delete(s.pending, t.ID)
	s.txns[t.ID] = t.clone()
	return nil
}

func (s *memStore) DeleteTransaction(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.txns, id)
	delete(s.pending, id)
	return nil
}

func (s *memStore) get(id string) Txn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.txns[id]
}

type written struct {
	m     Marker
	parts []Partition
}

type memMarkers struct {
	mu   sync.Mutex
	got  []written
	hold chan struct{} // non-nil: writes wait until it is closed
}

func (m *memMarkers) WriteMarkers(ctx context.Context, mk Marker, parts []Partition) error {
	m.mu.Lock()
	hold := m.hold
	m.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, written{mk, parts})
	return nil
}

func (m *memMarkers) last(t *testing.T) written {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.got) == 0 {
		t.Fatal("no markers written")
	}
	return m.got[len(m.got)-1]
}

type seqIDs struct {
	mu   sync.Mutex
	next int64
}

func (s *seqIDs) NextProducerID(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return s.next, nil
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	c       *Coordinator
	store   *memStore
	markers *memMarkers
	clock   *fakeClock
	version int16
}

// holdMarkers makes marker writes wait until the returned channel is closed.
func (f *fixture) holdMarkers() chan struct{} {
	hold := make(chan struct{})
	f.markers.mu.Lock()
	f.markers.hold = hold
	f.markers.mu.Unlock()
	return hold
}

func newFixture(t *testing.T, version int16, store *memStore) *fixture {
	t.Helper()
	if store == nil {
		store = newMemStore()
	}
	f := &fixture{store: store, markers: &memMarkers{}, clock: &fakeClock{now: time.UnixMilli(1_000_000)}, version: version}
	f.c = New(Config{MaxTimeout: 15 * time.Minute, IDExpiration: 7 * 24 * time.Hour, Version: func() int16 { return f.version }},
		store, f.markers, &seqIDs{next: 1000}, f.clock, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := f.c.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); f.c.Settle() })
	f.c.Start(ctx)
	return f
}

func wantErr(t *testing.T, what string, got, want *kerr.Error) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

var tp0 = Partition{TopicID: 7, Partition: 0}

func (f *fixture) init(t *testing.T, id string) (int64, int16) {
	t.Helper()
	pid, epoch, err := f.c.InitProducerID(context.Background(), id, 60000, nil)
	wantErr(t, "InitProducerId", err, nil)
	return pid, epoch
}

func TestInitProducerIDBumpsEpochAndFencesOlderProducer(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	pid, e0 := f.init(t, "t1")
	if e0 != 0 {
		t.Fatalf("first epoch %d, want 0", e0)
	}
	pid2, e1 := f.init(t, "t1")
	if pid2 != pid || e1 != 1 {
		t.Fatalf("second init: %d/%d, want %d/1", pid2, e1, pid)
	}
	wantErr(t, "old producer adds", f.c.AddPartitions(ctx, "t1", pid, e0, []Partition{tp0}, 1), kerr.ProducerFenced)
	wantErr(t, "other producer id", f.c.AddPartitions(ctx, "t1", pid+1, e1, []Partition{tp0}, 1), kerr.InvalidProducerIDMapping)
	wantErr(t, "unknown id", f.c.AddPartitions(ctx, "nope", pid, e1, []Partition{tp0}, 1), kerr.InvalidProducerIDMapping)
	// v3+ InitProducerId naming an id that is not this one's: fenced.
	_, _, err := f.c.InitProducerID(ctx, "t1", 60000, &ProducerIDAndEpoch{ProducerID: pid + 99, Epoch: 0})
	wantErr(t, "init with a foreign producer id", err, kerr.ProducerFenced)
	// ... and the current one with an old epoch: fenced too.
	_, _, err = f.c.InitProducerID(ctx, "t1", 60000, &ProducerIDAndEpoch{ProducerID: pid, Epoch: 0})
	wantErr(t, "init with a stale epoch", err, kerr.ProducerFenced)
	if got := f.store.get("t1"); got.Epoch != 1 || got.State != Empty {
		t.Fatalf("stored %+v, want epoch 1 Empty", got)
	}
}

func TestInitProducerIDTimeouts(t *testing.T) {
	f := newFixture(t, 1, nil)
	for _, ms := range []int32{0, -1, int32((15*time.Minute + time.Millisecond).Milliseconds())} {
		_, _, err := f.c.InitProducerID(context.Background(), "t", ms, nil)
		wantErr(t, "timeout", err, kerr.InvalidTransactionTimeout)
	}
	_, _, err := f.c.InitProducerID(context.Background(), "", 1000, nil)
	wantErr(t, "empty id", err, kerr.InvalidRequest)
}

func TestInitProducerIDOnOngoingAbortsItFirst(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	wantErr(t, "add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 1), nil)
	_, _, err := f.c.InitProducerID(ctx, "t", 60000, nil)
	wantErr(t, "init while ongoing", err, kerr.ConcurrentTransactions)
	f.c.Settle()
	got := f.store.get("t")
	if got.State != CompleteAbort || got.Epoch != 1 {
		t.Fatalf("after the fence: %+v, want CompleteAbort at epoch 1", got)
	}
	if w := f.markers.last(t); w.m.Commit || w.m.Epoch != 1 || w.m.ProducerID != pid || len(w.parts) != 1 {
		t.Fatalf("marker %+v", w)
	}
	_, e2 := f.init(t, "t")
	if e2 != 2 {
		t.Fatalf("retried init: epoch %d, want 2", e2)
	}
	_, _, err = f.c.EndTxn(ctx, "t", pid, e, true, 1)
	wantErr(t, "fenced producer commits", err, kerr.ProducerFenced)
}

func TestEpochExhaustionRotatesProducerID(t *testing.T) {
	store := newMemStore()
	store.txns["t"] = Txn{ID: "t", ProducerID: 5, PrevProducerID: -1, NextProducerID: -1, Epoch: math.MaxInt16 - 1, LastEpoch: -1,
		TimeoutMs: 60000, State: CompleteCommit, StartMs: -1}
	f := newFixture(t, 1, store)
	old := &ProducerIDAndEpoch{ProducerID: 5, Epoch: math.MaxInt16 - 1}
	pid, e, err := f.c.InitProducerID(context.Background(), "t", 60000, old)
	wantErr(t, "init at an exhausted epoch", err, nil)
	if pid == 5 || e != 0 {
		t.Fatalf("init at an exhausted epoch: %d/%d, want a new id at epoch 0", pid, e)
	}
	if got := f.store.get("t"); got.PrevProducerID != 5 || got.LastEpoch != math.MaxInt16-1 {
		t.Fatalf("stored %+v, want previous id 5 and last epoch %d", got, math.MaxInt16-1)
	}
	// The producer retrying (it missed the answer) is answered the same,
	// not fenced.
	pid2, e2, err := f.c.InitProducerID(context.Background(), "t", 60000, old)
	wantErr(t, "retry after rotation", err, nil)
	if pid2 != pid || e2 != 0 {
		t.Fatalf("retry after rotation: %d/%d", pid2, e2)
	}
	// A producer with an older id is fenced.
	_, _, err = f.c.InitProducerID(context.Background(), "t", 60000, &ProducerIDAndEpoch{ProducerID: 4, Epoch: 3})
	wantErr(t, "older id", err, kerr.ProducerFenced)
}

func TestTransactionVersion2BumpsEpochAtEveryEnd(t *testing.T) {
	f := newFixture(t, 2, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	wantErr(t, "implicit add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 2), nil)
	npid, ne, err := f.c.EndTxn(ctx, "t", pid, e, true, 2)
	wantErr(t, "commit", err, nil)
	if npid != pid || ne != e+1 {
		t.Fatalf("EndTxn v5 answer %d/%d, want %d/%d", npid, ne, pid, e+1)
	}
	f.c.Settle()
	if w := f.markers.last(t); !w.m.Commit || w.m.Epoch != e+1 {
		t.Fatalf("marker %+v, want commit at epoch %d", w.m, e+1)
	}
	// A retry of the same EndTxn (old epoch) succeeds with the new epoch.
	_, re, err := f.c.EndTxn(ctx, "t", pid, e, true, 2)
	wantErr(t, "retried commit", err, nil)
	if re != e+1 {
		t.Fatalf("retry answer epoch %d", re)
	}
	// The old epoch can no longer write.
	wantErr(t, "old epoch adds", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 2), kerr.ProducerFenced)
	// An abort with nothing ongoing bumps the epoch again.
	_, ae, err := f.c.EndTxn(ctx, "t", pid, ne, false, 2)
	wantErr(t, "empty abort", err, nil)
	if ae != ne+1 {
		t.Fatalf("empty abort epoch %d, want %d", ae, ne+1)
	}
}

func TestTransactionVersion1KeepsEpoch(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	wantErr(t, "add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 1), nil)
	_, ne, err := f.c.EndTxn(ctx, "t", pid, e, false, 1)
	wantErr(t, "abort", err, nil)
	if ne != e {
		t.Fatalf("TV1 abort changed the epoch to %d", ne)
	}
	f.c.Settle()
	_, _, err = f.c.EndTxn(ctx, "t", pid, e, false, 1)
	wantErr(t, "abort retried", err, nil)
	_, _, err = f.c.EndTxn(ctx, "t", pid, e, true, 1)
	wantErr(t, "commit after abort", err, kerr.InvalidTxnState)
	_, _, err = f.c.EndTxn(ctx, "t", pid, e, true, 1)
	wantErr(t, "commit with nothing ongoing", err, kerr.InvalidTxnState)
}

func TestEpochOverflowOnEndTxnMovesToNewProducerID(t *testing.T) {
	store := newMemStore()
	store.txns["t"] = Txn{ID: "t", ProducerID: 5, PrevProducerID: 5, NextProducerID: -1, Epoch: math.MaxInt16 - 1, LastEpoch: -1,
		TimeoutMs: 60000, State: Ongoing, Partitions: []Partition{tp0}, StartMs: 1_000_000, Version: 2}
	f := newFixture(t, 2, store)
	ctx := context.Background()
	pid, e, err := f.c.EndTxn(ctx, "t", 5, math.MaxInt16-1, true, 2)
	wantErr(t, "commit at the last epoch", err, nil)
	if pid == 5 || e != 0 {
		t.Fatalf("answer %d/%d, want a new id at epoch 0", pid, e)
	}
	f.c.Settle()
	if w := f.markers.last(t); w.m.ProducerID != 5 || w.m.Epoch != math.MaxInt16 {
		t.Fatalf("marker %+v, want the old id at the last epoch", w.m)
	}
	got := f.store.get("t")
	if got.ProducerID != pid || got.Epoch != 0 || got.PrevProducerID != 5 {
		t.Fatalf("after completion %+v", got)
	}
	rpid, _, err := f.c.EndTxn(ctx, "t", 5, math.MaxInt16-1, true, 2)
	wantErr(t, "retry across the rotation", err, nil)
	if rpid != pid {
		t.Fatalf("retry answered id %d", rpid)
	}
}

func TestTimedOutTransactionIsAbortedWithEpochBump(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	pid, e, err := f.c.InitProducerID(ctx, "t", 1000, nil)
	wantErr(t, "init", err, nil)
	wantErr(t, "add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 1), nil)
	f.clock.advance(999 * time.Millisecond)
	f.c.AbortTimedOut(ctx)
	f.c.Settle()
	if got := f.store.get("t"); got.State != Ongoing {
		t.Fatalf("aborted before its timeout: %v", got.State)
	}
	f.clock.advance(time.Millisecond)
	f.c.AbortTimedOut(ctx)
	f.c.Settle()
	got := f.store.get("t")
	if got.State != CompleteAbort || got.Epoch != e+1 {
		t.Fatalf("after the timeout: %+v", got)
	}
	_, _, err = f.c.EndTxn(ctx, "t", pid, e, true, 1)
	wantErr(t, "the timed-out producer commits", err, kerr.ProducerFenced)
}

// On transaction version 2 the fence of a timed-out transaction bumps the
// epoch once, as Kafka 4.4 does (the abort's own bump): the producer's late
// commit is a retry at the last epoch, refused INVALID_TXN_STATE, and its
// late abort succeeds.
func TestTimedOutTransactionVersion2BumpsOnce(t *testing.T) {
	f := newFixture(t, 2, nil)
	ctx := context.Background()
	pid, e, err := f.c.InitProducerID(ctx, "t", 1000, nil)
	wantErr(t, "init", err, nil)
	wantErr(t, "implicit add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 2), nil)
	f.clock.advance(time.Second)
	f.c.AbortTimedOut(ctx)
	f.c.Settle()
	got := f.store.get("t")
	if got.State != CompleteAbort || got.Epoch != e+1 {
		t.Fatalf("after the timeout: %+v, want CompleteAbort at epoch %d", got, e+1)
	}
	if w := f.markers.last(t); w.m.Commit || w.m.Epoch != e+1 {
		t.Fatalf("marker %+v, want abort at epoch %d", w.m, e+1)
	}
	_, _, err = f.c.EndTxn(ctx, "t", pid, e, true, 2)
	wantErr(t, "the timed-out producer commits", err, kerr.InvalidTxnState)
	_, _, err = f.c.EndTxn(ctx, "t", pid, e, false, 2)
	wantErr(t, "the timed-out producer aborts", err, nil)
}

// A version 1 client (Sarama, kafka-python) on a cluster finalized at
// version 2: the coordinator's fences bump the epoch once, as Kafka 4.4
// does, and the fenced producer's late commit is answered PRODUCER_FENCED
// (Kafka checks an EndTxn below v5 as version 1 does).
func TestVersion1ClientFencedOnceAtVersion2(t *testing.T) {
	f := newFixture(t, 2, nil)
	ctx := context.Background()
	pid, e, err := f.c.InitProducerID(ctx, "t", 1000, nil)
	wantErr(t, "init", err, nil)
	wantErr(t, "add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 1), nil)
	f.clock.advance(time.Second)
	f.c.AbortTimedOut(ctx)
	f.c.Settle()
	if got := f.store.get("t"); got.State != CompleteAbort || got.Epoch != e+1 {
		t.Fatalf("after the timeout: %+v, want CompleteAbort at epoch %d", got, e+1)
	}
	_, _, err = f.c.EndTxn(ctx, "t", pid, e, true, 1)
	wantErr(t, "the timed-out producer commits", err, kerr.ProducerFenced)

	// a second producer's init fences an ongoing transaction: one bump
	// for the fence, one for the retried init
	_, e, err = f.c.InitProducerID(ctx, "t", 60000, nil)
	wantErr(t, "init again", err, nil)
	wantErr(t, "add again", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 1), nil)
	_, _, err = f.c.InitProducerID(ctx, "t", 60000, nil)
	wantErr(t, "the fencing init", err, kerr.ConcurrentTransactions)
	f.c.Settle()
	_, ne, err := f.c.InitProducerID(ctx, "t", 60000, nil)
	wantErr(t, "the fencing init retried", err, nil)
	if ne != e+2 {
		t.Fatalf("epoch after the fence %d, want %d", ne, e+2)
	}
}

// The first produce of the next transaction (the implicit add of
// transaction version 2) waits for the previous transaction's markers
// instead of being answered CONCURRENT_TRANSACTIONS at once; after
// CompletionWait it is answered that.
func TestNextTransactionWaitsForCompletion(t *testing.T) {
	f := newFixture(t, 2, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	wantErr(t, "add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 2), nil)
	hold := f.holdMarkers()
	_, ne, err := f.c.EndTxn(ctx, "t", pid, e, true, 2)
	wantErr(t, "commit", err, nil)

	added := make(chan *kerr.Error, 1)
	go func() { added <- f.c.AddPartitions(ctx, "t", pid, ne, []Partition{tp0}, 2) }()
	select {
	case err := <-added:
		t.Fatalf("the next transaction's add answered %v while the markers were held", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(hold)
	select {
	case err := <-added:
		wantErr(t, "add after the markers", err, nil)
	case <-time.After(10 * time.Second):
		t.Fatal("the add did not go on once the markers were written")
	}
	if got := f.store.get("t"); got.State != Ongoing || got.Epoch != ne || !containsAll(got.Partitions, []Partition{tp0}) {
		t.Fatalf("next transaction %+v", got)
	}

	// markers that take longer than CompletionWait: as Kafka answers
	f.c.cfg.CompletionWait = 20 * time.Millisecond
	hold = f.holdMarkers()
	defer close(hold)
	_, ne2, err := f.c.EndTxn(ctx, "t", pid, ne, true, 2)
	wantErr(t, "second commit", err, nil)
	wantErr(t, "add while markers stall", f.c.AddPartitions(ctx, "t", pid, ne2, []Partition{tp0}, 2), kerr.ConcurrentTransactions)
	// a stale producer does not wait: fenced at once
	wantErr(t, "stale producer", f.c.AddPartitions(ctx, "t", pid, ne, []Partition{tp0}, 2), kerr.ProducerFenced)
}

// An EndTxn of the producer's next transaction that comes before any of
// its records (the Java client 4.4 does that now and then) while the
// previous transaction's markers are written waits for them, and is then
// answered as Kafka answers it once complete: INVALID_TXN_STATE for a
// commit, an empty abort for an abort — not PRODUCER_FENCED.
func TestEmptyEndTxnDuringMarkersWaitsForCompletion(t *testing.T) {
	f := newFixture(t, 2, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	for _, commit := range []bool{true, false} {
		wantErr(t, "add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 2), nil)
		hold := f.holdMarkers()
		_, ne, err := f.c.EndTxn(ctx, "t", pid, e, true, 2)
		wantErr(t, "commit", err, nil)
		type answer struct {
			epoch int16
			err   *kerr.Error
		}
		ended := make(chan answer, 1)
		go func() {
			_, ae, err := f.c.EndTxn(ctx, "t", pid, ne, commit, 2)
			ended <- answer{ae, err}
		}()
		select {
		case a := <-ended:
			t.Fatalf("commit=%v: the empty end answered %v while the markers were held", commit, a.err)
		case <-time.After(50 * time.Millisecond):
		}
		close(hold)
		var a answer
		select {
		case a = <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("commit=%v: the empty end did not go on once the markers were written", commit)
		}
		if commit {
			wantErr(t, "empty commit", a.err, kerr.InvalidTxnState)
			e = ne
			continue
		}
		wantErr(t, "empty abort", a.err, nil)
		if a.epoch != ne+1 {
			t.Fatalf("empty abort answered epoch %d, want %d", a.epoch, ne+1)
		}
	}
}

func TestExpiredTransactionalIDIsForgotten(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	f.init(t, "t")
	f.clock.advance(7*24*time.Hour - time.Millisecond)
	f.c.RemoveExpired(ctx)
	if _, ok := f.c.Describe("t"); !ok {
		t.Fatal("expired too early")
	}
	f.clock.advance(time.Millisecond)
	f.c.RemoveExpired(ctx)
	if _, ok := f.c.Describe("t"); ok {
		t.Fatal("not expired")
	}
	if _, ok := f.store.txns["t"]; ok {
		t.Fatal("still stored")
	}
}

func TestVerifyOnly(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	tp1 := Partition{TopicID: 7, Partition: 1}
	wantErr(t, "add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 1), nil)
	res, err := f.c.VerifyPartitions("t", pid, e, []Partition{tp0, tp1})
	wantErr(t, "verify", err, nil)
	if res[tp0] != nil || res[tp1] != kerr.TransactionAbortable {
		t.Fatalf("verify: %v", res)
	}
	_, err = f.c.VerifyPartitions("t", pid, e+1, []Partition{tp0})
	wantErr(t, "verify at another epoch", err, kerr.ProducerFenced)
}

func TestOffsetsAppearOnlyOnCommit(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	off := []Offset{{TopicID: 7, Partition: 0, Offset: 42, LeaderEpoch: -1}}
	wantErr(t, "offsets before AddOffsetsToTxn", f.c.CommitOffsets(ctx, "t", pid, e, "g", off, false, nil), kerr.TransactionAbortable)
	wantErr(t, "add offsets", f.c.AddOffsets(ctx, "t", pid, e, "g", 1), nil)
	wantErr(t, "offsets", f.c.CommitOffsets(ctx, "t", pid, e, "g", off, false, nil), nil)
	if !f.c.PendingOffset("g", 7, 0) || f.c.PendingOffset("g", 7, 1) {
		t.Fatal("pending offset not reported")
	}
	if len(f.store.committed) != 0 {
		t.Fatal("committed before the commit")
	}
	// What an OffsetFetch saw as pending before it read the committed
	// offsets stays pending for it, however the transaction goes on.
	before := f.c.PendingOffsets("g")
	_, _, err := f.c.EndTxn(ctx, "t", pid, e, true, 1)
	wantErr(t, "commit", err, nil)
	f.c.Settle()
	if !before(7, 0) || before(7, 1) || f.c.PendingOffsets("g")(7, 0) || f.c.PendingOffsets("h")(7, 0) {
		t.Fatal("pending offsets snapshot")
	}
	if o, ok := f.store.committed[offsetKey{"g", 7, 0}]; !ok || o.Offset != 42 {
		t.Fatalf("committed offsets %v", f.store.committed)
	}
	if f.c.PendingOffset("g", 7, 0) {
		t.Fatal("still pending after the commit")
	}
	// An aborted transaction's offsets never appear.
	off[0].Offset = 99
	wantErr(t, "implicit add (TV2)", f.c.CommitOffsets(ctx, "t", pid, e, "g", off, true, nil), nil)
	_, _, err = f.c.EndTxn(ctx, "t", pid, e, false, 1)
	wantErr(t, "abort", err, nil)
	f.c.Settle()
	if o := f.store.committed[offsetKey{"g", 7, 0}]; o.Offset != 42 {
		t.Fatalf("aborted offset committed: %v", o)
	}
}

func TestPreparedTransactionsCompleteAfterLoad(t *testing.T) {
	store := newMemStore()
	store.txns["t"] = Txn{ID: "t", ProducerID: 5, PrevProducerID: -1, NextProducerID: -1, Epoch: 3, LastEpoch: -1,
		TimeoutMs: 60000, State: PrepareCommit, Partitions: []Partition{tp0}, Groups: []string{"g"}, StartMs: 1, Version: 1}
	store.pending["t"] = []Offset{{Group: "g", TopicID: 7, Partition: 0, Offset: 11}}
	store.txns["o"] = Txn{ID: "o", ProducerID: 6, PrevProducerID: -1, NextProducerID: -1, Epoch: 0, LastEpoch: -1,
		TimeoutMs: 60000, State: Ongoing, Partitions: []Partition{tp0}, StartMs: 1_000_000, Version: 1}
	f := newFixture(t, 1, store)
	f.c.Settle()
	if got := f.store.get("t"); got.State != CompleteCommit {
		t.Fatalf("prepared commit after start: %v", got.State)
	}
	if w := f.markers.last(t); !w.m.Commit || w.m.ProducerID != 5 || w.m.Epoch != 3 {
		t.Fatalf("marker %+v", w.m)
	}
	if o := f.store.committed[offsetKey{"g", 7, 0}]; o.Offset != 11 {
		t.Fatalf("offset not committed: %v", f.store.committed)
	}
	if got := f.store.get("o"); got.State != Ongoing {
		t.Fatalf("ongoing transaction touched at start: %v", got.State)
	}
}

func TestFailedWriteChangesNothing(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	f.store.fail = true
	wantErr(t, "add with Postgres down", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 1), kerr.CoordinatorNotAvailable)
	f.store.fail = false
	if got, _ := f.c.Describe("t"); got.State != Empty {
		t.Fatalf("state %v after a failed write", got.State)
	}
}

// TestAwaitOffsetsWaitsForCompletion: AwaitOffsets returns once a
// committed transaction holding the group's offsets has written them, and
// at CompletionWait if its markers stall; a transaction not yet ended, or
// holding another group's offsets, is not waited for.
func TestAwaitOffsetsWaitsForCompletion(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	off := []Offset{{TopicID: 7, Partition: 0, Offset: 42, LeaderEpoch: -1}}
	wantErr(t, "add", f.c.AddPartitions(ctx, "t", pid, e, []Partition{tp0}, 1), nil)
	wantErr(t, "add offsets", f.c.AddOffsets(ctx, "t", pid, e, "g", 1), nil)
	wantErr(t, "offsets", f.c.CommitOffsets(ctx, "t", pid, e, "g", off, false, nil), nil)
	start := time.Now()
	f.c.AwaitOffsets(ctx, "g") // ongoing: no wait
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("waited %v for a transaction not yet ended", took)
	}
	hold := f.holdMarkers()
	_, _, err := f.c.EndTxn(ctx, "t", pid, e, true, 1)
	wantErr(t, "commit", err, nil)
	f.c.AwaitOffsets(ctx, "h") // another group's offsets: no wait
	awaited := make(chan struct{})
	go func() { f.c.AwaitOffsets(ctx, "g"); close(awaited) }()
	select {
	case <-awaited:
		t.Fatal("AwaitOffsets returned while the markers were held")
	case <-time.After(50 * time.Millisecond):
	}
	close(hold)
	select {
	case <-awaited:
	case <-time.After(10 * time.Second):
		t.Fatal("AwaitOffsets did not return once the markers were written")
	}
	if f.c.PendingOffsets("g")(7, 0) {
		t.Fatal("the offset is still pending after AwaitOffsets")
	}
	if o, ok := f.store.committed[offsetKey{"g", 7, 0}]; !ok || o.Offset != 42 {
		t.Fatalf("committed %+v, %v", o, ok)
	}
}

// The group is checked again with the offsets already pending: a member
// that left meanwhile is refused, and leaves nothing pending or stored;
// a check that passes saw them pending, so no OffsetFetch between the two
// checks read the offsets from before them.
func TestOffsetsPendingBeforeTheGroupRecheck(t *testing.T) {
	f := newFixture(t, 1, nil)
	ctx := context.Background()
	pid, e := f.init(t, "t")
	wantErr(t, "add offsets", f.c.AddOffsets(ctx, "t", pid, e, "g", 1), nil)
	off := []Offset{{TopicID: 7, Partition: 0, Offset: 42, LeaderEpoch: -1}}
	left := func() *kerr.Error {
		if !f.c.PendingOffset("g", 7, 0) {
			t.Error("offsets not pending during the recheck")
		}
		return kerr.UnknownMemberID
	}
	wantErr(t, "offsets of a member gone", f.c.CommitOffsets(ctx, "t", pid, e, "g", off, false, left), kerr.UnknownMemberID)
	if f.c.PendingOffset("g", 7, 0) || len(f.store.pending["t"]) != 0 {
		t.Fatalf("refused offsets left pending (%v) or stored (%v)", f.c.PendingOffset("g", 7, 0), f.store.pending)
	}
	still := func() *kerr.Error {
		if !f.c.PendingOffset("g", 7, 0) {
			t.Error("offsets not pending during the recheck")
		}
		return nil
	}
	wantErr(t, "offsets", f.c.CommitOffsets(ctx, "t", pid, e, "g", off, false, still), nil)
	wantErr(t, "offsets again", f.c.CommitOffsets(ctx, "t", pid, e, "g", off, false, left), kerr.UnknownMemberID)
	if !f.c.PendingOffset("g", 7, 0) {
		t.Fatal("a refused second commit released the first one's pending offset")
	}
}
