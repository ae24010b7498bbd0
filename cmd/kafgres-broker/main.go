// kafgres-broker serves the Kafka protocol for one Postgres instance. The
// kafgres supervisor background worker starts it with flags built from the
// kafgres.* settings; it can also run standalone for development and tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/broker"
	"github.com/kafgres/kafgres/decoder"
	"github.com/kafgres/kafgres/mappings"
	"github.com/kafgres/kafgres/producer"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kafgres-broker:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		cfg        broker.Config
		advPort    int
		partitions int
		liveFD     int
		groupDelay time.Duration
		renderTime time.Duration
		level      slog.Level
	)
	flag.StringVar(&cfg.ListenAddr, "listen", "127.0.0.1:9092", "host:port of the Kafka listener")
	flag.StringVar(&cfg.AdvertisedHost, "advertised-host", "", "host given to clients in Metadata (default: listen host)")
	flag.IntVar(&advPort, "advertised-port", 0, "port given to clients in Metadata (default: listen port)")
	flag.StringVar(&cfg.DataDir, "data-dir", "", "directory of the segment log")
	flag.StringVar(&cfg.DSN, "dsn", "", "connection string of the Postgres database holding the kafgres extension")
	flag.BoolVar(&cfg.AutoCreateTopics, "auto-create-topics", true, "create unknown topics on Metadata requests")
	flag.IntVar(&partitions, "default-partitions", 1, "partitions of auto-created topics")
	flag.BoolVar(&cfg.Fsync, "fsync", true, "fsync the log before acknowledging produces")
	flag.DurationVar(&groupDelay, "group-initial-rebalance-delay", 3*time.Second, "how long a new consumer group waits for more members before its first rebalance (Kafka's group.initial.rebalance.delay.ms); 0 for none")
	flag.DurationVar(&cfg.RetentionCheckInterval, "log-retention-check-interval", 5*time.Minute, "how often segments past their topic's retention are deleted (Kafka's log.retention.check.interval.ms)")
	flag.Func("socket-request-max-bytes", "largest request frame accepted, in bytes (Kafka's socket.request.max.bytes; default 104857600)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		cfg.MaxRequestBytes = int32(n)
		return err
	})
	flag.Int64Var(&cfg.QueuedMaxRequestBytes, "queued-max-request-bytes", broker.DefaultQueuedMaxRequestBytes, "request bytes all connections together may have read and not yet handled (Kafka's queued.max.request.bytes); -1 for no limit")
	flag.DurationVar(&cfg.ConnectionsMaxIdle, "connections-max-idle", 10*time.Minute, "close connections idle this long (Kafka's connections.max.idle.ms)")
	flag.DurationVar(&cfg.RequestReadTimeout, "request-read-timeout", 30*time.Second, "close a connection whose request frame does not arrive whole within this long of its size")
	flag.DurationVar(&renderTime, "mapping-render-timeout", 5*time.Second, "longest a CDC mapping may take to render a change before it is dead-lettered (kafgres.mapping_render_timeout); 0 for no limit")
	flag.StringVar(&cfg.Authorizer, "authorizer", broker.AuthorizerAuto, "enforce Kafka ACLs: auto (when a listener authenticates clients), on or off (kafgres.authorizer)")
	flag.StringVar(&cfg.SuperUsers, "super-users", "", "principals allowed everything, ';'-separated, e.g. User:admin (Kafka's super.users; Postgres superusers are super users too)")
	flag.BoolVar(&cfg.AllowEveryoneIfNoACLFound, "allow-everyone-if-no-acl-found", false, "allow everyone to use a resource no ACL applies to (Kafka's allow.everyone.if.no.acl.found)")
	flag.IntVar(&liveFD, "liveness-fd", -1, "exit when this inherited fd reaches EOF (set by the supervisor)")
	flag.TextVar(&level, "log-level", slog.LevelInfo, "debug, info, warn or error")
	flag.Parse()

	// A LevelVar, so that Kafka's IncrementalAlterConfigs on the root
	// broker logger can change the level at runtime.
	cfg.LogLevel = new(slog.LevelVar)
	cfg.LogLevel.Set(level)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	host, port, err := net.SplitHostPort(cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", cfg.ListenAddr, err)
	}
	if cfg.AdvertisedHost == "" {
		cfg.AdvertisedHost = advertisable(host)
	}
	if advPort == 0 {
		if advPort, err = strconv.Atoi(port); err != nil {
			return fmt.Errorf("--listen port %q: %w", port, err)
		}
	}
	cfg.AdvertisedPort = int32(advPort)
	cfg.DefaultPartition = int32(partitions)
	cfg.GroupInitialRebalanceDelay = groupDelay
	if groupDelay == 0 {
		cfg.GroupInitialRebalanceDelay = -1 // Config's zero means "Kafka's default"
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if addr := os.Getenv("KAFGRES_PPROF_ADDR"); addr != "" {
		servePprof(ctx, addr, log)
	}
	if liveFD >= 0 {
		ctx = watchLiveness(ctx, liveFD, log)
	}

	b, err := broker.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.WritePIDFile(); err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.ListenAddr, err)
	}
	log.Info("serving Kafka", "listen", cfg.ListenAddr, "advertised", net.JoinHostPort(cfg.AdvertisedHost, strconv.Itoa(advPort)), "data_dir", cfg.DataDir, "fsync", cfg.Fsync)

	// SQL produce and CDC: the slot's stream, appended exactly once.
	pctx, stopProducer := context.WithCancel(ctx)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		dec := decoder.New(decoder.Config{DSN: cfg.DSN, Logger: log.With("component", "decoder")})
		// CDC mappings render in Postgres through their own pools, with
		// search_path pinned: nothing the renderer sends depends on it
		pcfg, err := pgxpool.ParseConfig(cfg.DSN)
		if err != nil {
			log.Error("CDC renderer", "err", err)
			return
		}
		pcfg.ConnConfig.RuntimeParams["search_path"] = "pg_catalog, pg_temp"
		pool, err := pgxpool.NewWithConfig(pctx, pcfg)
		if err != nil {
			log.Error("CDC renderer", "err", err)
			return
		}
		defer pool.Close()
		renderer, err := mappings.NewRenderer(pool, mappings.Config{RenderTimeout: renderTime}, log.With("component", "mappings"))
		if err != nil {
			log.Error("CDC renderer", "err", err)
			return
		}
		defer renderer.Close()
		p := producer.New(dec, b, renderer, producer.PGDeadLetters{Pool: pool}, producer.PGEpochs{Pool: pool}, log.With("component", "producer"))
		if n, err := producer.ReadFailpoint(cfg.DataDir); err != nil {
			log.Error("failpoint", "err", err)
		} else if n > 0 {
			p.SetFailpoint(producer.Failpoint{Appends: n, Crash: func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }})
		}
		if err := p.Run(pctx); err != nil {
			log.Error("SQL produce stopped", "err", err)
		}
	}()
	err = b.Serve(ctx, ln)
	stopProducer()
	<-produced
	if err == nil && ctx.Err() != nil {
		log.Info("shutting down", "reason", context.Cause(ctx))
	}
	return err
}

// advertisable turns a wildcard listen host into one a client can dial.
func advertisable(host string) string {
	if host != "" && host != "0.0.0.0" && host != "::" {
		return host
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "localhost"
}

var errSupervisorGone = errors.New("supervisor gone (liveness pipe closed)")

// watchLiveness cancels the returned context when the supervisor's end of
// the liveness pipe closes: the supervisor died or Postgres is going away.
func watchLiveness(parent context.Context, fd int, log *slog.Logger) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	f := os.NewFile(uintptr(fd), "liveness")
	go func() {
		_, err := io.Copy(io.Discard, f)
		log.Info("liveness pipe closed", "err", err)
		cancel(errSupervisorGone)
	}()
	return ctx
}

// servePprof serves net/http/pprof on addr, for profiling the broker under
// a workload ($KAFGRES_PPROF_ADDR, a debugging aid: unset, nothing listens).
// It has no authentication, so it is meant for loopback addresses only.
func servePprof(ctx context.Context, addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		log.Warn("serving pprof (KAFGRES_PPROF_ADDR)", "addr", addr)
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof listener", "addr", addr, "err", err)
		}
	}()
}
