package txn

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Config is the coordinator's part of the broker configuration.
type Config struct {
	// MaxTimeout is transaction.max.timeout.ms: a producer asking for a
	// longer transaction.timeout.ms gets INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms: an id idle (no
	// transaction in progress) for this long is forgotten.
	IDExpiration time.Duration
	// Version is the finalized transaction.version feature level: the
	// transaction version of what the coordinator starts on its own (the
	// abort of a timed-out or fenced transaction).
	Version func() int16
	// Retry is the pause between attempts to complete a transaction whose
	// markers or completion could not be written (default 100 ms).
	Retry time.Duration
	// CompletionWait is how long the first addition to a producer's next
	// transaction waits for the previous one's markers before it is
	// answered CONCURRENT_TRANSACTIONS (default 1 s; negative: no wait).
	CompletionWait time.Duration
}

// Coordinator is the transaction coordinator of one broker.
type Coordinator struct {
	cfg     Config
	store   Store
	markers Markers
	ids     ProducerIDs
	clock   Clock
	log     *slog.Logger

	mu   sync.Mutex
	txns map[string]*entry
	// pending counts, by group and partition, the transactions holding a
	// pending offset for it.
	pending map[offsetKey]int

	// completions run in the background once Run started; before that
	// (recovery happens in Run) prepared transactions wait.
	bgMu     sync.Mutex
	bgCtx    context.Context
	bg       sync.WaitGroup
	queued   []*entry // prepared before Run
	stopping bool
}

// entry is one transactional id; mu orders its transitions, and is held
// while a transition is written, so the stored and the in-memory state
// never disagree about what was answered.
type entry struct {
	mu         sync.Mutex
	t          Txn
	offsets    map[offsetKey]Offset
	completing bool          // a goroutine is writing markers and the completion
	completed  chan struct{} // closed when the completion of this end is written
}

type offsetKey struct {
	group     string
	topicID   int64
	partition int32
}

// New returns a coordinator; clock nil is the wall clock.
func New(cfg Config, store Store, markers Markers, ids ProducerIDs, clock Clock, log *slog.Logger) *Coordinator {
	if clock == nil {
		clock = wallClock{}
	}
	if cfg.Version == nil {
		cfg.Version = func() int16 { return 2 }
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 100 * time.Millisecond
	}
	if cfg.CompletionWait == 0 {
		cfg.CompletionWait = time.Second
	}
	return &Coordinator{cfg: cfg, store: store, markers: markers, ids: ids, clock: clock, log: log, txns: map[string]*entry{}, pending: map[offsetKey]int{}}
}

// Load reads the stored transactions and pending offsets. Prepared
// transactions are completed once Run starts (markers need the logs to
// be served); ongoing ones are left to their timeout, as Kafka does.
func (c *Coordinator) Load(ctx context.Context) error {
	txns, err := c.store.LoadTransactions(ctx)
	if err != nil {
		return err
	}
	offs, err := c.store.LoadTxnOffsets(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range txns {
		e := &entry{t: t, offsets: map[offsetKey]Offset{}}
		c.txns[t.ID] = e
		if t.State.preparing() {
			e.completing, e.completed = true, make(chan struct{})
			c.queued = append(c.queued, e)
		}
	}
	for _, o := range offs {
		if e := c.txns[o.TransactionalID]; e != nil {
			k := offsetKey{o.Group, o.TopicID, o.Partition}
			if _, ok := e.offsets[k]; !ok {
				c.pending[k]++
			}
			e.offsets[k] = o.Offset
		}
	}
	return nil
}

// Run completes the transactions Load found prepared, then aborts timed
// out transactions every abortInterval and forgets expired ids every
// expireInterval, until ctx ends; it returns once the completions it
// started have stopped.
func (c *Coordinator) Run(ctx context.Context, abortInterval, expireInterval time.Duration) {
	c.Start(ctx)

	abort := time.NewTicker(abortInterval)
	expire := time.NewTicker(expireInterval)
	defer abort.Stop()
	defer expire.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-abort.C:
			c.AbortTimedOut(ctx)
		case <-expire.C:
			c.RemoveExpired(ctx)
		}
	}
	c.bgMu.Lock()
	c.stopping = true
	c.bgMu.Unlock()
	c.bg.Wait()
}

// Start lets completions run (until ctx ends) and starts those of the
// transactions Load found prepared. Run calls it; tests that drive the
// timeouts themselves call it alone.
func (c *Coordinator) Start(ctx context.Context) {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	c.bgCtx = ctx
	queued := c.queued
	c.queued = nil
	for _, e := range queued {
		c.startCompletion(e)
	}
}

// Settle waits for the completions in progress: tests use it to see the
// state after the markers.
func (c *Coordinator) Settle() { c.bg.Wait() }

// locked is id's entry with its mu held, or nil: there is none, or
// RemoveExpired marked it Dead between the lookup and the lock (it takes
// an entry out of txns before marking it, and the state is e.mu's to read,
// not c.mu's).
func (c *Coordinator) locked(id string) *entry {
	c.mu.Lock()
	e := c.txns[id]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	if e.t.State == Dead {
		e.mu.Unlock()
		return nil
	}
	return e
}

func (c *Coordinator) nowMs() int64 { return c.clock.Now().UnixMilli() }

// save writes next for e (held) and adopts it; a failed write changes
// nothing and is COORDINATOR_NOT_AVAILABLE, which clients retry.
func (c *Coordinator) save(ctx context.Context, e *entry, next Txn) *kerr.Error {
	if err := c.store.SaveTransaction(ctx, next); err != nil {
		c.log.Error("write transaction state", "transactional_id", next.ID, "state", next.State, "err", err)
		return kerr.CoordinatorNotAvailable
	}
	e.t = next
	return nil
}

// ProducerIDAndEpoch is what a producer that already has an id sends with
// InitProducerId (v3+) to bump its epoch rather than be fenced.
type ProducerIDAndEpoch struct {
	ProducerID int64
	Epoch      int16
}

// InitProducerID is InitProducerId with a transactional id: a new epoch
// (or a new producer id once epochs are exhausted), fencing every older
// producer of id. An ongoing transaction is aborted first, and the
// producer told CONCURRENT_TRANSACTIONS to retry once it is.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, expected *ProducerIDAndEpoch) (int64, int16, *kerr.Error) {
	if id == "" {
		return -1, -1, kerr.InvalidRequest
	}
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout
	}
	c.mu.Lock()
	e := c.txns[id]
	if e == nil {
		c.mu.Unlock()
		pid, err := c.ids.NextProducerID(ctx)
		if err != nil {
			c.log.Error("allocate producer id", "err", err)
			return -1, -1, kerr.CoordinatorNotAvailable
		}
		c.mu.Lock()
		if e = c.txns[id]; e == nil {
			// Not stored until the Empty transition below is.
			e = &entry{t: Txn{ID: id, ProducerID: pid, PrevProducerID: -1, NextProducerID: -1, Epoch: -1, LastEpoch: -1,
				TimeoutMs: timeoutMs, State: Empty, StartMs: -1, UpdateMs: c.nowMs()}, offsets: map[offsetKey]Offset{}}
			c.txns[id] = e
		}
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.t
	if t.State == Dead {
		// Expired since it was looked up: the retry makes a new one.
		return -1, -1, kerr.ConcurrentTransactions
	}
	if expected != nil {
		// Kafka's isValidProducerId: a new id, the current id, or a retry
		// after a rotation the producer did not hear of.
		valid := t.Epoch == -1 || expected.ProducerID == t.ProducerID ||
			(expected.ProducerID == t.PrevProducerID && epochExhausted(expected.Epoch))
		if !valid {
			return -1, -1, kerr.ProducerFenced
		}
	}
	switch {
	case e.completing || t.State.preparing():
		return -1, -1, kerr.ConcurrentTransactions
	case t.State == Ongoing:
		// Fence: abort at a bumped epoch the producer never sees; its
		// retry bumps again (or rotates the id).
		if err := c.prepareEnd(ctx, e, false, c.cfg.Version(), true); err != nil {
			return -1, -1, err
		}
		return -1, -1, kerr.ConcurrentTransactions
	}
	next := t.clone()
	next.State, next.Partitions, next.Groups, next.StartMs, next.UpdateMs = Empty, nil, nil, -1, c.nowMs()
	next.TimeoutMs, next.NextProducerID, next.Version = timeoutMs, -1, 0
	switch {
	case epochExhausted(t.Epoch) && (expected == nil || expected.Epoch == t.Epoch):
		pid, err := c.ids.NextProducerID(ctx)
		if err != nil {
			c.log.Error("allocate producer id", "err", err)
			return -1, -1, kerr.CoordinatorNotAvailable
		}
		next.PrevProducerID, next.ProducerID, next.Epoch, next.LastEpoch = t.ProducerID, pid, 0, -1
		if expected != nil {
			next.LastEpoch = t.Epoch
		}
	case expected == nil:
		next.PrevProducerID, next.Epoch, next.LastEpoch = t.ProducerID, t.Epoch+1, -1
	case t.Epoch == -1 || expected.Epoch == t.Epoch:
		next.PrevProducerID, next.Epoch, next.LastEpoch = t.ProducerID, t.Epoch+1, t.Epoch
	case expected.Epoch == t.LastEpoch:
		// A retry of a bump that succeeded: answer it again.
		return t.ProducerID, t.Epoch, nil
	default:
		return -1, -1, kerr.ProducerFenced
	}
	if next.Epoch == math.MaxInt16 { // not reachable: exhaustion rotates first
		return -1, -1, kerr.ProducerFenced
	}
	if err := c.save(ctx, e, next); err != nil {
		return -1, -1, err
	}
	return next.ProducerID, next.Epoch, nil
}

// awaitCompletion waits, with e held (released while it waits), up to
// CompletionWait for the markers and completion of e's previous
// transaction when producerID/epoch is the producer that transaction
// ended with: its first addition to the next transaction then goes on
// rather than being answered CONCURRENT_TRANSACTIONS, which the Java
// client retries after retry.backoff.ms (100 ms) on a produce. Kafka
// answers at once; only the latency differs.
func (c *Coordinator) awaitCompletion(ctx context.Context, e *entry, producerID int64, epoch int16) {
	if !e.completing || c.cfg.CompletionWait < 0 {
		return
	}
	next := e.t.ProducerID == producerID && e.t.Epoch == epoch
	if e.t.NextProducerID >= 0 {
		next = e.t.NextProducerID == producerID && epoch == 0
	}
	if !next {
		return
	}
	timer := time.NewTimer(c.cfg.CompletionWait)
	defer timer.Stop()
	for e.completing {
		done := e.completed
		e.mu.Unlock()
		select {
		case <-done:
		case <-timer.C:
		case <-ctx.Done():
		}
		e.mu.Lock()
		if ctx.Err() != nil || done == e.completed && e.completing {
			return // timed out (or a new end began): answered as before
		}
	}
}

// checkProducer is the common check of a producer's request against its
// transaction.
func checkProducer(e *entry, producerID int64, epoch int16) *kerr.Error {
	switch {
	case e == nil || e.t.ProducerID != producerID:
		return kerr.InvalidProducerIDMapping
	case e.t.Epoch != epoch:
		return kerr.ProducerFenced
	case e.completing || e.t.State.preparing():
		return kerr.ConcurrentTransactions
	}
	return nil
}

// begin is the state of e once parts and group join its transaction
// (starting it if none is ongoing) on transaction version v.
func (c *Coordinator) begin(t Txn, parts []Partition, group string, v int16) Txn {
	next := t.clone()
	now := c.nowMs()
	if t.State != Ongoing {
		next.StartMs, next.Version = now, v
	}
	next.State, next.UpdateMs = Ongoing, now
	next.Partitions = addPartitions(next.Partitions, parts)
	if group != "" {
		next.Groups = addGroup(next.Groups, group)
	}
	return next
}

// AddPartitions is AddPartitionsToTxn (v, transaction version: 1 from a
// client's AddPartitionsToTxn, 2 from a produce adding its partition
// implicitly, KIP-890 part 2): the partitions join the transaction, which
// is written before the answer.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, producerID int64, epoch int16, parts []Partition, v int16) *kerr.Error {
	return c.join(ctx, id, producerID, epoch, parts, "", v)
}

// VerifyPartitions is AddPartitionsToTxn's verify-only mode (KIP-890
// part 1): whether each partition is in the ongoing transaction,
// TRANSACTION_ABORTABLE for those that are not. A non-nil error applies to
// all of them.
func (c *Coordinator) VerifyPartitions(id string, producerID int64, epoch int16, parts []Partition) (map[Partition]*kerr.Error, *kerr.Error) {
	if id == "" {
		return nil, kerr.InvalidRequest
	}
	e := c.locked(id)
	if e == nil {
		return nil, kerr.InvalidProducerIDMapping
	}
	defer e.mu.Unlock()
	switch {
	case e.t.ProducerID != producerID:
		return nil, kerr.InvalidProducerIDMapping
	case e.t.Epoch != epoch:
		return nil, kerr.ProducerFenced
	case e.t.State.preparing():
		return nil, kerr.ConcurrentTransactions
	}
	out := map[Partition]*kerr.Error{}
	for _, p := range parts {
		if e.t.State != Ongoing || !containsAll(e.t.Partitions, []Partition{p}) {
			out[p] = kerr.TransactionAbortable
		} else {
			out[p] = nil
		}
	}
	return out, nil
}

// AddOffsets is AddOffsetsToTxn: group's offsets will be committed by the
// transaction (Kafka adds the group's __consumer_offsets partition).
func (c *Coordinator) AddOffsets(ctx context.Context, id string, producerID int64, epoch int16, group string, v int16) *kerr.Error {
	return c.join(ctx, id, producerID, epoch, nil, group, v)
}

// join makes parts and group ("": none) part of id's transaction, starting
// one if none is ongoing, and stores that unless they already are.
func (c *Coordinator) join(ctx context.Context, id string, producerID int64, epoch int16, parts []Partition, group string, v int16) *kerr.Error {
	if id == "" {
		return kerr.InvalidRequest
	}
	e := c.locked(id)
	if e == nil {
		return kerr.InvalidProducerIDMapping
	}
	defer e.mu.Unlock()
	c.awaitCompletion(ctx, e, producerID, epoch)
	if err := checkProducer(e, producerID, epoch); err != nil {
		return err
	}
	if e.t.State == Ongoing && containsAll(e.t.Partitions, parts) && (group == "" || slices.Contains(e.t.Groups, group)) {
		return nil
	}
	return c.save(ctx, e, c.begin(e.t, parts, group, v))
}

// CommitOffsets is TxnOffsetCommit's part of the coordinator: offs become
// pending offsets of the transaction, visible as committed once it
// commits. implicit (TxnOffsetCommit v5+ on transaction version 2) adds
// the group to the transaction as AddOffsetsToTxn would; otherwise the
// group must have been added (KIP-890 part 1 verification):
// TRANSACTION_ABORTABLE if not. A fenced producer gets PRODUCER_FENCED.
// recheck (nil: none) runs once the offsets are pending, before they are
// written; its error leaves them out and is the answer.
func (c *Coordinator) CommitOffsets(ctx context.Context, id string, producerID int64, epoch int16, group string, offs []Offset, implicit bool, recheck func() *kerr.Error) *kerr.Error {
	if id == "" {
		return kerr.InvalidRequest
	}
	e := c.locked(id)
	if e == nil {
		return kerr.InvalidProducerIDMapping
	}
	defer e.mu.Unlock()
	if implicit {
		c.awaitCompletion(ctx, e, producerID, epoch)
	}
	if err := checkProducer(e, producerID, epoch); err != nil {
		return err
	}
	if !(e.t.State == Ongoing && slices.Contains(e.t.Groups, group)) {
		if !implicit {
			return kerr.TransactionAbortable
		}
		if err := c.save(ctx, e, c.begin(e.t, nil, group, 2)); err != nil {
			return err
		}
	}
	if len(offs) == 0 {
		return nil
	}
	for i := range offs {
		offs[i].Group = group
	}
	// Pending first: an OffsetFetch from now on answers these partitions
	// unstable (require_stable), so a check that passes after this point
	// cannot be overtaken by a rebalance that hands them to another
	// member, who would read the offsets from before them.
	var fresh []offsetKey
	c.mu.Lock()
	for _, o := range offs {
		k := offsetKey{group, o.TopicID, o.Partition}
		if _, ok := e.offsets[k]; !ok && !slices.Contains(fresh, k) {
			c.pending[k]++
			fresh = append(fresh, k)
		}
	}
	c.mu.Unlock()
	release := func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, k := range fresh {
			if c.pending[k]--; c.pending[k] <= 0 {
				delete(c.pending, k)
			}
		}
	}
	if recheck != nil {
		if err := recheck(); err != nil {
			release()
			return err
		}
	}
	if err := c.store.SaveTxnOffsets(ctx, id, producerID, offs); err != nil {
		release()
		c.log.Error("write transactional offsets", "transactional_id", id, "group", group, "err", err)
		return kerr.CoordinatorNotAvailable
	}
	c.mu.Lock()
	for _, o := range offs {
		e.offsets[offsetKey{group, o.TopicID, o.Partition}] = o
	}
	c.mu.Unlock()
	return nil
}

// EndTxn is EndTxn: commit or abort the ongoing transaction. clientVersion
// is 2 for EndTxn v5+, which bumps the epoch (KIP-890 part 2) and answers
// the producer id and epoch to use next; the answer follows the write of
// PrepareCommit/PrepareAbort, and the markers and the completion follow it.
func (c *Coordinator) EndTxn(ctx context.Context, id string, producerID int64, epoch int16, commit bool, clientVersion int16) (int64, int16, *kerr.Error) {
	if id == "" {
		return -1, -1, kerr.InvalidRequest
	}
	e := c.locked(id)
	if e == nil {
		return -1, -1, kerr.InvalidProducerIDMapping
	}
	defer e.mu.Unlock()
	if clientVersion >= 2 {
		// An EndTxn at the epoch the previous end handed out, while that
		// transaction's markers are still being written: the Java client
		// 4.4 now and then ends a transaction before sending any of its
		// records. Answered as once the previous one is complete
		// (INVALID_TXN_STATE for a commit, an empty abort), which is what
		// Kafka, whose markers take no fsync, answers nearly always;
		// during the markers Kafka's checks say PRODUCER_FENCED, which
		// tells the application another producer took over.
		c.awaitCompletion(ctx, e, producerID, epoch)
	}
	t := e.t
	// The request's version picks the checks, not the transaction's
	// (Kafka's handleEndTransaction: endTransaction or
	// endTransactionWithTV1): a version 1 client late after a fence at
	// the finalized version 2 is fenced, not a retry.
	tv2 := clientVersion >= 2
	retryOnOverflow := tv2 && t.PrevProducerID == producerID && epoch == math.MaxInt16-1 && t.Epoch == 0
	retryOnBump := tv2 && t.Epoch == epoch+1
	retry := retryOnBump || retryOnOverflow
	valid := epoch == t.Epoch
	if tv2 {
		switch t.State {
		case PrepareCommit, PrepareAbort:
			valid = retryOnBump
		case CompleteCommit, CompleteAbort:
			valid = retry || epoch == t.Epoch
		}
	}
	switch {
	case t.ProducerID != producerID && !retryOnOverflow:
		return -1, -1, kerr.InvalidProducerIDMapping
	case !valid:
		return -1, -1, kerr.ProducerFenced
	}
	invalid := func() (int64, int16, *kerr.Error) { return -1, -1, kerr.InvalidTxnState }
	switch t.State {
	case Ongoing:
		if e.completing {
			return -1, -1, kerr.ConcurrentTransactions
		}
		if err := c.prepareEnd(ctx, e, commit, clientVersion, false); err != nil {
			return -1, -1, err
		}
		return c.answerAfterEnd(e.t)
	case PrepareCommit, PrepareAbort:
		if commit != (t.State == PrepareCommit) {
			return invalid()
		}
		return -1, -1, kerr.ConcurrentTransactions
	case CompleteCommit, CompleteAbort:
		same := commit == (t.State == CompleteCommit)
		switch {
		case retry && same, !tv2 && same:
			return t.ProducerID, t.Epoch, nil
		case !commit && clientVersion >= 2 && !retry:
			// KIP-890 part 2: an abort with nothing ongoing is allowed
			// and bumps the epoch, since a produce may have failed after
			// adding its partition.
			if err := c.prepareEnd(ctx, e, false, clientVersion, false); err != nil {
				return -1, -1, err
			}
			return c.answerAfterEnd(e.t)
		}
		return invalid()
	case Empty:
		if !commit && clientVersion >= 2 {
			if err := c.prepareEnd(ctx, e, false, clientVersion, false); err != nil {
				return -1, -1, err
			}
			return c.answerAfterEnd(e.t)
		}
		return invalid()
	}
	return invalid()
}

// answerAfterEnd is the producer id and epoch EndTxn answers: those the
// transaction will have once complete (a new id once epochs ran out).
func (c *Coordinator) answerAfterEnd(t Txn) (int64, int16, *kerr.Error) {
	if t.Version >= 2 && t.NextProducerID >= 0 {
		return t.NextProducerID, 0, nil
	}
	return t.ProducerID, t.Epoch, nil
}

// prepareEnd writes PrepareCommit/PrepareAbort for e (held) and starts the
// markers. fence: the abort InitProducerId or the timeout makes, at an
// epoch bumped first (Kafka's PrepareEpochFence, never stored on its own).
func (c *Coordinator) prepareEnd(ctx context.Context, e *entry, commit bool, v int16, fence bool) *kerr.Error {
	next := e.t.clone()
	next.State, next.UpdateMs, next.NextProducerID = PrepareAbort, c.nowMs(), -1
	if commit {
		next.State = PrepareCommit
	}
	// A fence (PrepareEpochFence) bumps the epoch once. On transaction
	// version 2 the abort's own bump below is that bump (Kafka 4.4: the
	// timed-out producer's epoch becomes LastEpoch, so its late EndTxn is
	// a retry of the bumped abort, answered INVALID_TXN_STATE for a
	// commit); before it the fence bumps and the abort keeps the epoch.
	// A fence is the coordinator's, so v is the finalized level even for
	// a transaction a version 1 client began: still one bump.
	if fence && v < 2 {
		next.Epoch++
		next.LastEpoch = -1
	}
	if v >= 2 {
		if !fence && epochExhausted(e.t.Epoch) {
			pid, err := c.ids.NextProducerID(ctx)
			if err != nil {
				c.log.Error("allocate producer id", "err", err)
				return kerr.CoordinatorNotAvailable
			}
			next.NextProducerID = pid
		}
		if next.Epoch < math.MaxInt16 {
			next.LastEpoch = next.Epoch
			next.Epoch++
		}
	}
	next.Version = v
	if e.t.State != Ongoing {
		next.StartMs = next.UpdateMs // an empty abort (TV2)
	}
	if err := c.save(ctx, e, next); err != nil {
		return err
	}
	e.completing, e.completed = true, make(chan struct{})
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bgCtx == nil {
		c.queued = append(c.queued, e)
		return nil
	}
	c.startCompletion(e)
	return nil
}

// startCompletion runs complete for e in the background (bgMu held).
func (c *Coordinator) startCompletion(e *entry) {
	if c.stopping {
		return // the next start recovers it
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		ctx := c.bgCtx
		for {
			err := c.complete(ctx, e)
			if err == nil || ctx.Err() != nil {
				return
			}
			c.log.Warn("complete transaction; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.cfg.Retry):
			}
		}
	}()
}

// complete writes the markers of e's prepared transaction and then its
// completion (with its offsets, in one database transaction).
func (c *Coordinator) complete(ctx context.Context, e *entry) error {
	e.mu.Lock()
	t := e.t.clone()
	e.mu.Unlock()
	commit := t.State == PrepareCommit
	if len(t.Partitions) > 0 {
		m := Marker{ProducerID: t.ProducerID, Epoch: t.Epoch, Commit: commit}
		if err := c.markers.WriteMarkers(ctx, m, t.Partitions); err != nil {
			return err
		}
	}
	next := t.clone()
	next.State, next.Partitions, next.Groups, next.UpdateMs = CompleteAbort, nil, nil, c.nowMs()
	if commit {
		next.State = CompleteCommit
	}
	next.LastEpoch = t.Epoch
	if t.Version >= 2 && t.NextProducerID >= 0 {
		next.PrevProducerID, next.ProducerID, next.Epoch = t.ProducerID, t.NextProducerID, 0
	}
	next.NextProducerID = -1
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := c.store.CompleteTransaction(ctx, next); err != nil {
		return err
	}
	e.t, e.completing = next, false
	close(e.completed)
	c.mu.Lock()
	for k := range e.offsets {
		if c.pending[k]--; c.pending[k] <= 0 {
			delete(c.pending, k)
		}
	}
	c.mu.Unlock()
	clear(e.offsets)
	return nil
}

// AbortTimedOut aborts, at a bumped epoch, every transaction ongoing for
// longer than its timeout (Kafka's abortTimedOutTransactions).
func (c *Coordinator) AbortTimedOut(ctx context.Context) {
	now := c.nowMs()
	for _, e := range c.entries() {
		e.mu.Lock()
		t := e.t
		if t.State == Ongoing && !e.completing && t.StartMs+int64(t.TimeoutMs) <= now {
			c.log.Info("aborting timed-out transaction", "transactional_id", t.ID, "producer_id", t.ProducerID, "epoch", t.Epoch)
			if err := c.prepareEnd(ctx, e, false, c.cfg.Version(), true); err != nil {
				c.log.Warn("abort timed-out transaction", "transactional_id", t.ID, "err", err)
			}
		}
		e.mu.Unlock()
	}
}

// RemoveExpired forgets the ids with no transaction in progress that
// were last used longer than IDExpiration ago.
func (c *Coordinator) RemoveExpired(ctx context.Context) {
	now := c.nowMs()
	for _, e := range c.entries() {
		e.mu.Lock()
		t := e.t
		idle := t.State == Empty || t.State == CompleteCommit || t.State == CompleteAbort
		if idle && !e.completing && t.UpdateMs+c.cfg.IDExpiration.Milliseconds() <= now {
			if err := c.store.DeleteTransaction(ctx, t.ID); err != nil {
				c.log.Warn("remove expired transactional id", "transactional_id", t.ID, "err", err)
			} else {
				c.mu.Lock()
				delete(c.txns, t.ID)
				c.mu.Unlock()
				e.t.State = Dead
			}
		}
		e.mu.Unlock()
	}
}

func (c *Coordinator) entries() []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*entry, 0, len(c.txns))
	for _, e := range c.txns {
		out = append(out, e)
	}
	return out
}

// Describe returns id's state (DescribeTransactions).
func (c *Coordinator) Describe(id string) (Txn, bool) {
	e := c.locked(id)
	if e == nil {
		return Txn{}, false
	}
	defer e.mu.Unlock()
	if e.t.Epoch == -1 && e.t.State == Empty {
		return Txn{}, false // created by an InitProducerId whose write failed
	}
	return e.t.clone(), true
}

// List returns every transactional id's state, sorted by id
// (ListTransactions).
func (c *Coordinator) List() []Txn {
	var out []Txn
	for _, e := range c.entries() {
		e.mu.Lock()
		if e.t.State != Dead && e.t.Epoch != -1 {
			out = append(out, e.t.clone())
		}
		e.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Txn) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// PendingOffset reports whether a transaction in progress holds an
// offset of group for the partition: OffsetFetch with require_stable
// answers UNSTABLE_OFFSET_COMMIT for it.
func (c *Coordinator) PendingOffset(group string, topicID int64, partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[offsetKey{group, topicID, partition}] > 0
}

// PendingOffsets is PendingOffset for every partition as of the call: an
// OffsetFetch takes it before it reads the committed offsets, so that a
// transaction completing between the two (its offsets moved after the
// read, no longer pending at the check) is answered as unstable, not with
// the offsets from before it.
// AwaitOffsets waits, up to CompletionWait in all, for the transactions
// that hold offsets of group and whose end was already answered (their
// markers and offsets are being written): an OffsetFetch right after a
// producer's EndTxn then sees the offsets that transaction committed, as
// it does on Kafka, whose markers land before a client's next request in
// practice. Transactions not yet ended are not waited for: their offsets
// stay pending (UNSTABLE_OFFSET_COMMIT with require_stable), as Kafka's.
func (c *Coordinator) AwaitOffsets(ctx context.Context, group string) {
	if c.cfg.CompletionWait < 0 {
		return
	}
	var timer *time.Timer
	for _, e := range c.entries() {
		e.mu.Lock()
		holds := false
		for k := range e.offsets {
			if k.group == group {
				holds = true
				break
			}
		}
		done := e.completed
		completing := e.completing && holds
		e.mu.Unlock()
		if !completing {
			continue
		}
		if timer == nil {
			timer = time.NewTimer(c.cfg.CompletionWait)
			defer timer.Stop()
		}
		select {
		case <-done:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (c *Coordinator) PendingOffsets(group string) func(topicID int64, partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := map[offsetKey]bool{}
	for k, n := range c.pending {
		if k.group == group && n > 0 {
			held[k] = true
		}
	}
	return func(topicID int64, partition int32) bool { return held[offsetKey{group, topicID, partition}] }
}
