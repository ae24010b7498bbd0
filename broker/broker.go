// Package broker is the Kafka protocol server of kafgres: one file per API
// key (NN_name.go), the topic catalog kept in Postgres, partitions backed by
// the segment log, the group committer and the log-end mirror.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the version of the kafgres extension (sql/) whose
// tables this broker reads and writes.
const SchemaVersion = "0.3.0"

// Broker is one running kafgres broker.
type Broker struct {
	cfg  Config
	log  *slog.Logger
	apis apiTable

	pool      *pgxpool.Pool
	clusterID string

	catalog   *catalog
	offsets   *offsetStore
	groups    *groups
	committer *committer
	mirror    *mirror
	features  featureLevels
	conns     connLimits

	// fatal is closed with fatalErr set when the broker must stop (a failed
	// fsync): continuing could acknowledge data the kernel dropped.
	fatalOnce sync.Once
	fatal     chan struct{}
	fatalErr  error
}

// New connects to Postgres (waiting for it and for CREATE EXTENSION kafgres),
// recovers every partition's log and returns a broker ready to Serve.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Broker, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	b := &Broker{cfg: cfg, log: log, apis: servedAPIs(), fatal: make(chan struct{})}
	b.groups = newGroups(groupConfig{
		initialRebalanceDelay: max(cfg.GroupInitialRebalanceDelay, 0),
		minSessionTimeout:     cfg.GroupMinSessionTimeout,
		maxSessionTimeout:     cfg.GroupMaxSessionTimeout,
		maxSize:               cfg.GroupMaxSize,
	}, log.With("component", "groups"))

	pool, err := connect(ctx, cfg.DSN, log)
	if err != nil {
		return nil, err
	}
	b.pool = pool
	if b.clusterID, err = loadClusterID(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	b.offsets = &offsetStore{pool: pool}
	b.mirror = newMirror(pool, cfg.MirrorInterval, log)
	b.committer = newCommitter(b.stop, b.mirror.mark)
	b.catalog = newCatalog(b)
	b.groups.topics = func() []topicMeta {
		var out []topicMeta
		for _, t := range b.catalog.topics() {
			out = append(out, topicMeta{name: t.name, id: t.uuid, partitions: int32(len(t.parts))})
		}
		return out
	}
	if err := b.catalog.start(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := b.features.load(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	// Groups live in memory, but a group with committed offsets exists for
	// Kafka tools across restarts (Empty until its members rejoin).
	groups, err := b.offsets.groups(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	for _, g := range groups {
		b.groups.ensure(g)
	}
	return b, nil
}

// Serve accepts Kafka connections on ln until ctx ends or the broker hits a
// fatal error, which it returns.
func (b *Broker) Serve(ctx context.Context, ln net.Listener) error {
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
	run(b.retain)
	run(func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-b.fatal:
		}
		cancel()
		ln.Close()
	})

	var conns sync.WaitGroup
	for {
		nc, err := ln.Accept()
		if err != nil {
			break
		}
		ip := remoteIP(nc)
		maxTotal, maxPerIP := b.brokerConfigs().connectionLimits()
		if !b.conns.admit(ip, maxTotal, maxPerIP) {
			b.log.Info("connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max_connections", maxTotal, "max_connections_per_ip", maxPerIP)
			nc.Close()
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			defer b.conns.release(ip)
			b.serveConn(ctx, nc)
		}()
	}
	cancel()
	conns.Wait()
	wg.Wait()
	return b.fatalErr
}

// Close flushes and closes every log and the Postgres pool.
func (b *Broker) Close() error {
	err := b.catalog.close()
	b.mirror.flush(context.Background())
	b.pool.Close()
	return err
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
func (b *Broker) WritePIDFile() error {
	p := filepath.Join(b.cfg.DataDir, "broker.pid")
	return os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o640)
}

// connect opens the metadata pool, retrying until Postgres answers and the
// kafgres extension exists: under the supervisor the broker starts before
// anyone has had a chance to run CREATE EXTENSION.
func connect(ctx context.Context, dsn string, log *slog.Logger) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "kafgres"
	}
	pcfg.MaxConns = 8
	logged := false
	for {
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err == nil {
			var version string
			err = pool.QueryRow(ctx, `SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = 'kafgres'), '')`).Scan(&version)
			if err == nil && version == SchemaVersion {
				return pool, nil
			}
			pool.Close()
			switch {
			case err != nil:
			case version == "":
				err = errors.New("extension kafgres is not installed; run CREATE EXTENSION kafgres")
			default:
				err = fmt.Errorf("extension kafgres is at version %s, this broker needs %s; run ALTER EXTENSION kafgres UPDATE", version, SchemaVersion)
			}
		}
		if !logged {
			log.Warn("waiting for Postgres", "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to Postgres: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
