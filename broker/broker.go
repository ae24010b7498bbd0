// Package broker is the Kafka protocol server of kafgres: one file per API
// key (NN_name.go), the topic catalog kept in Postgres, partitions backed by
// the segment log, the group committer and the log-end mirror.
package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/broker/coordinator"
	"github.com/kafgres/kafgres/broker/coordinator/txn"
	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/broker/retry"
	"github.com/kafgres/kafgres/broker/storage"
	"github.com/kafgres/kafgres/broker/storage/table"
	"github.com/kafgres/kafgres/security/acl"
	"github.com/kafgres/kafgres/security/principal"
	"github.com/kafgres/kafgres/security/tlsconf"
)

// SchemaVersion is the version of the kafgres extension (sql/) whose
// tables this broker reads and writes.
const SchemaVersion = "0.12.0"

// Broker is one running kafgres broker.
type Broker struct {
	cfg  Config
	log  *slog.Logger
	apis apiTable

	meta      metadataStore
	clusterID string
	data      *storage.Dir // the data directory, where the partitions' logs live

	catalog   *catalog
	groups    *coordinator.Groups
	txns      *txn.Coordinator // transactions (txn_coordinator.go)
	committer *committer
	mirror    *mirror
	features  featureLevels
	conns     connLimits
	authz     *authz

	// tablePool is the connections of the table engine's logs, made by
	// the first table topic's open (logPool).
	tablePoolMu sync.Mutex
	tablePool   *pgxpool.Pool

	// testPrincipal, set by in-process tests, names the principal of a
	// connection by its remote address, standing in for authentication.
	testPrincipal func(remote string) (acl.Principal, bool)
	// testSkipTxnCheck, set by in-process tests of the log side of
	// transactions, lets transactional batches in without asking the
	// transaction coordinator when it returns true.
	testSkipTxnCheck func() bool

	// Bounds on what clients can make the broker hold (conn.go,
	// compress.go): request bytes read and not yet handled, frame buffers,
	// decompression.
	frameBudget  *budget
	frames       frameBuffers
	reclaim      reclaimer
	decoders     *decoders
	acceptErrors atomic.Uint64 // transient Accept failures (EMFILE, ...)

	// Listeners and authentication (listeners.go, auth.go).
	listeners []*boundListener
	tls       *tlsconf.Server // nil without TLS listeners
	mapper    *principal.Mapper
	sessions  *sessions

	fetchSessions *fetchSessions // incremental fetch sessions (fetch_sessions.go)
	fetchBufs     fetchBuffers   // fetch_buffers.go
	// fetchNonce begins the markers of records sent from files
	// (fetch_sendfile.go): random, so that no client can put one in a
	// response.
	fetchNonce []byte

	// sourcePID is the producer id of the SQL source's Kafka transactions
	// (sourced.go), -1 until one is needed; sourceMu guards it.
	sourceMu  sync.Mutex
	sourcePID int64
	// sourceGuardPoll overrides sourceGuardPoll (tests).
	sourceGuardPoll time.Duration

	// fatal is closed with fatalErr set when the broker must stop (a failed
	// fsync): continuing could acknowledge data the kernel dropped.
	fatalOnce sync.Once
	fatal     chan struct{}
	fatalErr  error
}

// New connects to Postgres (waiting for it and for CREATE EXTENSION kafgres),
// recovers every partition's log and returns a broker ready to Serve.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Broker, error) {
	if err := cfg.validateDefaulted(); err != nil {
		return nil, err
	}
	meta, err := metadata.Connect(ctx, cfg.DSN, SchemaVersion, log)
	if err != nil {
		return nil, err
	}
	b, err := open(ctx, cfg, meta, log)
	if err != nil {
		meta.Close()
		return nil, err
	}
	return b, nil
}

// validateDefaulted checks cfg as open will see it, before anything is
// connected or created.
func (c Config) validateDefaulted() error {
	c.setDefaults()
	if err := c.validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// open builds a broker on meta: recovers every partition's log and loads
// what Postgres holds. The caller closes meta when open fails.
func open(ctx context.Context, cfg Config, meta metadataStore, log *slog.Logger) (*Broker, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	data, err := storage.Open(cfg.DataDir, cfg.Fsync)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, log: log, apis: servedAPIs(), data: data, fatal: make(chan struct{}), sourcePID: -1}
	if id, ok, err := data.SourceProducer(); err != nil {
		return nil, err
	} else if ok {
		b.sourcePID = id
	}
	b.frameBudget = newBudget(cfg.QueuedMaxRequestBytes)
	b.fetchSessions = newFetchSessions(max(cfg.FetchSessionCacheSlots, 0), time.Now)
	b.fetchNonce = make([]byte, markerNonceLen)
	if _, err := rand.Read(b.fetchNonce); err != nil {
		return nil, fmt.Errorf("fetch marker nonce: %w", err)
	}
	// Large frame buffers kept for reuse: up to the request budget.
	b.frames.bigMax = cfg.QueuedMaxRequestBytes
	if b.frames.bigMax <= 0 {
		b.frames.bigMax = DefaultQueuedMaxRequestBytes
	}
	b.frames.bigReleased = b.reclaim.bigFreed
	b.reclaim.delay, b.reclaim.drop = time.Second, b.frames.dropBig
	b.decoders = newDecoders(cfg.maxDecompressedBytes())
	if err := b.bindListeners(); err != nil {
		return nil, err
	}
	b.groups = coordinator.New(coordinator.Config{
		InitialRebalanceDelay: max(cfg.GroupInitialRebalanceDelay, 0),
		MinSessionTimeout:     cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		MaxSize:               cfg.GroupMaxSize,
		Topics:                b.groupTopics,
		Store:                 meta,
	}, log.With("component", "groups"))

	b.meta = meta
	b.authz = newAuthz(cfg, log)
	if b.authz.enabled {
		// Loaded before the first request: Kafka refuses requests until
		// its authorizer has loaded (AuthorizerNotReadyException).
		if err := b.authz.load(ctx, meta); err != nil {
			return nil, err
		}
	}
	if b.clusterID, err = meta.ClusterID(ctx); err != nil {
		return nil, err
	}
	b.mirror = newMirror(meta, cfg.MirrorInterval, log)
	b.committer = newCommitter(b.stop, b.mirror.mark)
	b.catalog = newCatalog(b)
	if err := b.catalog.start(ctx); err != nil {
		return nil, err
	}
	if err := b.features.load(ctx, meta); err != nil {
		return nil, err
	}
	if err := b.startTxnCoordinator(ctx); err != nil {
		return nil, err
	}
	// The groups as last stored, then, Empty, those known only from their
	// committed offsets (committed with a plain OffsetCommit by no member).
	stored, err := meta.LoadGroups(ctx)
	if err != nil {
		return nil, err
	}
	for name, value := range stored {
		if err := b.groups.Restore(name, value); err != nil {
			// Not a record we wrote; its members rejoin as new ones.
			log.Warn("ignoring stored group", "group", name, "err", err)
		}
	}
	groups, err := meta.OffsetGroups(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		b.groups.Ensure(g)
	}
	return b, nil
}

// groupTopics lists the catalog's topics for the group coordinator's
// assignors.
func (b *Broker) groupTopics() []coordinator.Topic {
	var out []coordinator.Topic
	for _, t := range b.catalog.topics() {
		out = append(out, coordinator.Topic{Name: t.name, ID: t.uuid, Partitions: int32(len(t.parts))})
	}
	return out
}

// Serve accepts Kafka connections until ctx ends (nil), the broker hits a
// fatal error, or accepting fails for good on any listener; it returns the
// error. lns are bound to the configured listeners, in order (a single one
// for the default PLAINTEXT listener).
func (b *Broker) Serve(ctx context.Context, lns ...net.Listener) error {
	if len(lns) != len(b.listeners) {
		return fmt.Errorf("serve: %d sockets for %d listeners", len(lns), len(b.listeners))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	run(b.committer.run)
	run(b.mirror.run)
	run(b.catalog.listen)
	run(func(ctx context.Context) { b.authz.follow(ctx, b.meta) })
	run(b.retain)
	run(b.cleanLogs)
	if b.cfg.SegmentArchiveCommand != "" {
		run(b.archive)
	} else {
		// No row may outlive archiving being turned off.
		run(func(ctx context.Context) { _ = b.meta.ClearArchiveStatus(ctx) })
	}
	run(func(ctx context.Context) { every(ctx, b.cfg.ProducerIDExpirationCheckInterval, b.expireProducers) })
	run(b.sessions.watchRoles)
	run(func(ctx context.Context) {
		b.txns.Run(ctx, b.cfg.TransactionAbortInterval, b.cfg.TransactionRemoveExpiredInterval)
	})
	run(func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-b.fatal:
		}
		cancel()
		for _, ln := range lns {
			ln.Close()
		}
	})

	var conns sync.WaitGroup
	errs := make(chan error, len(lns))
	for i, ln := range lns {
		go func() {
			err := b.accept(ctx, ln, b.listeners[i], &conns)
			cancel() // one listener failing for good stops the broker
			errs <- err
		}()
	}
	var err error
	for range lns {
		err = errors.Join(err, <-errs)
	}
	cancel()
	conns.Wait()
	wg.Wait()
	b.reclaim.stop()
	if b.fatalErr != nil {
		return b.fatalErr
	}
	return err
}

// every calls f with the time each period until ctx ends: the broker's
// periodic chores (retention, role checks, the ACL refresh).
func every(ctx context.Context, period time.Duration, f func(now time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}

// accept runs the accept loop of one listener: every connection it admits
// is served as a connection of that listener.
func (b *Broker) accept(ctx context.Context, ln net.Listener, l *boundListener, conns *sync.WaitGroup) error {
	log := b.log
	if len(b.listeners) > 1 {
		log = log.With("listener", l.Name)
	}
	return acceptLoop(ctx, ln, acceptRetry(), log, &b.acceptErrors, func(nc net.Conn) {
		ip := remoteIP(nc)
		maxTotal, maxPerIP := b.brokerConfigs().ConnectionLimits()
		if !b.conns.admit(ip, maxTotal, maxPerIP) {
			b.log.Info("connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max_connections", maxTotal, "max_connections_per_ip", maxPerIP)
			nc.Close()
			return
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer b.conns.release(ip)
			b.serveConn(ctx, nc, l)
		}()
	})
}

// acceptRetry is how accepting is retried after a transient failure:
// after 5 ms doubling up to 1 s, as net/http's server does, and a cause
// logged at most once per 10 s. A success between two failures says little
// (under a descriptor shortage every freed descriptor lets one connection
// in), so it does not make the next failure news.
func acceptRetry() retry.Policy {
	return retry.Policy{Min: 5 * time.Millisecond, Max: time.Second, Repeat: 10 * time.Second}
}

// acceptLoop hands every accepted connection to serve until ctx ends (nil)
// or accepting fails for good (the error). Running out of file descriptors
// or kernel memory is transient: the clients already connected keep being
// served, the failure is logged and counted, and accepting resumes after a
// backoff (p) once descriptors are free again.
func acceptLoop(ctx context.Context, ln net.Listener, p retry.Policy, log *slog.Logger, failures *atomic.Uint64, serve func(net.Conn)) error {
	// recovering: a failure was logged and no connection accepted since.
	recovering := false
	err := retry.Run(ctx, p, func(ctx context.Context) (bool, error) {
		accepted := false
		for {
			nc, err := ln.Accept()
			if err != nil {
				if ctx.Err() == nil && !transientAcceptError(err) {
					return accepted, retry.Permanent(err)
				}
				return accepted, err
			}
			if recovering {
				log.Info("accepting connections again", "failures", failures.Load())
				recovering = false
			}
			accepted = true
			serve(nc)
		}
	}, func(f retry.Failure) {
		n := failures.Add(1)
		if f.Log {
			log.Error("accept failed; retrying", "err", f.Err, "retry_in", f.Delay, "failures", n, "since_last_log", f.Held+1)
			recovering = true
		}
	})
	if ctx.Err() != nil {
		return nil
	}
	log.Error("accepting connections failed", "err", err)
	return fmt.Errorf("accept: %w", err)
}

// transientAcceptError reports an Accept failure that goes away by itself:
// descriptors or memory exhausted, or a connection that died in the
// backlog. Anything else (the listener closed under us) is permanent.
func transientAcceptError(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN, syscall.EPROTO, syscall.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Close flushes and closes every log and the metadata store.
func (b *Broker) Close() error {
	start := time.Now()
	n, err := b.catalog.close()
	b.log.Info("partition logs closed", "partitions", n, "took", time.Since(start).Round(time.Millisecond))
	b.mirror.flush(context.Background())
	b.meta.Close()
	b.tablePoolMu.Lock()
	if b.tablePool != nil {
		b.tablePool.Close()
	}
	b.tablePoolMu.Unlock()
	return err
}

// logPool returns the pool of the table engine's logs, making it (in the
// database of cfg.DSN) on first use: a broker without table topics opens
// no connection for them.
func (b *Broker) logPool(ctx context.Context) (*pgxpool.Pool, error) {
	b.tablePoolMu.Lock()
	defer b.tablePoolMu.Unlock()
	if b.tablePool != nil {
		return b.tablePool, nil
	}
	pcfg, err := pgxpool.ParseConfig(b.cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("table engine pool: %w", err)
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = "kafgres log"
	pcfg.AfterConnect = table.SetupConn
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("table engine pool: %w", err)
	}
	b.tablePool = pool
	return pool, nil
}

// stop makes the broker exit with err; the first error wins.
func (b *Broker) stop(err error) {
	b.fatalOnce.Do(func() {
		b.log.Error("stopping broker", "err", err)
		b.fatalErr = err
		close(b.fatal)
	})
}

// WritePIDFile records the broker's pid in the data directory, so operators
// and tests can find the process serving a given log.
func (b *Broker) WritePIDFile() error { return b.data.WritePIDFile() }
