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
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/broker"
	"github.com/kafgres/kafgres/decoder"
	"github.com/kafgres/kafgres/mappings"
	"github.com/kafgres/kafgres/producer"
	"github.com/kafgres/kafgres/security/tlsconf"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "restore" {
		if err := restore(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "kafgres-broker restore:", err)
			os.Exit(1)
		}
		return
	}
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
		listeners  string
		advertised string
		protoMap   string
		clientAuth string
		minTLS     string
		mechanisms string
	)
	flag.StringVar(&cfg.ListenAddr, "listen", "127.0.0.1:9092", "host:port of the Kafka listener")
	flag.StringVar(&cfg.AdvertisedHost, "advertised-host", "", "host given to clients in Metadata (default: listen host)")
	flag.IntVar(&advPort, "advertised-port", 0, "port given to clients in Metadata (default: listen port)")
	flag.StringVar(&cfg.DataDir, "data-dir", "", "directory of the segment log")
	flag.StringVar(&cfg.DSN, "dsn", "", "connection string of the Postgres database holding the kafgres extension")
	flag.BoolVar(&cfg.AutoCreateTopics, "auto-create-topics", true, "create unknown topics on Metadata requests")
	flag.IntVar(&partitions, "default-partitions", 1, "partitions of auto-created topics")
	flag.BoolVar(&cfg.Fsync, "fsync", true, "fsync the log before acknowledging produces")
	flag.Int64Var(&cfg.LogCachedTail, "log-cached-tail", -1, "bytes of each partition's newest durable log left in the page cache; older pages are dropped once fsynced and fetches behind them read ahead (kafgres.log_cached_tail); -1: the kernel decides, as for Kafka")
	flag.Func("fetch-sendfile", "send fetched segment records to plaintext connections with sendfile(2) (default true); false: through memory", func(v string) error {
		on, err := strconv.ParseBool(v)
		cfg.FetchCopy = !on
		return err
	})
	flag.DurationVar(&groupDelay, "group-initial-rebalance-delay", 3*time.Second, "how long a new consumer group waits for more members before its first rebalance (Kafka's group.initial.rebalance.delay.ms); 0 for none")
	flag.DurationVar(&cfg.ProducerIDExpiration, "producer-id-expiration", 24*time.Hour, "how long a partition remembers an idle idempotent producer without an open transaction (Kafka's producer.id.expiration.ms)")
	flag.DurationVar(&cfg.ProducerIDExpirationCheckInterval, "producer-id-expiration-check-interval", 10*time.Minute, "how often idle producers are forgotten (Kafka's producer.id.expiration.check.interval.ms)")
	flag.DurationVar(&cfg.TransactionMaxTimeout, "transaction-max-timeout", 15*time.Minute, "longest transaction.timeout.ms a transactional producer may ask for (Kafka's transaction.max.timeout.ms)")
	flag.DurationVar(&cfg.TransactionalIDExpiration, "transactional-id-expiration", 7*24*time.Hour, "how long a transactional id without a transaction in progress is kept (Kafka's transactional.id.expiration.ms)")
	flag.DurationVar(&cfg.TransactionAbortInterval, "transaction-abort-timed-out-interval", 10*time.Second, "how often transactions past their timeout are aborted (Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms)")
	flag.DurationVar(&cfg.TransactionRemoveExpiredInterval, "transaction-remove-expired-interval", time.Hour, "how often expired transactional ids are forgotten (Kafka's transaction.remove.expired.transaction.cleanup.interval.ms)")
	flag.StringVar(&cfg.SegmentArchiveCommand, "segment-archive-command", "", "shell command archiving each sealed segment file, as Postgres's archive_command: %p path, %f <topic>-<partition>-<file name>, %% a percent sign; empty: no archiving")
	flag.DurationVar(&cfg.CleanerBackoff, "log-cleaner-backoff", 15*time.Second, "how often the log cleaner looks for compacted partitions to clean (Kafka's log.cleaner.backoff.ms, static; a dynamic value overrides it)")
	flag.Func("max-incremental-fetch-session-cache-slots", "how many incremental fetch sessions are kept (Kafka's max.incremental.fetch.session.cache.slots; default 1000); 0: none", func(v string) error {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return err
		case n < 0:
			return fmt.Errorf("%d is negative", n)
		case n == 0:
			n = -1 // broker.Config's zero is Kafka's default
		}
		cfg.FetchSessionCacheSlots = n
		return nil
	})
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
	flag.StringVar(&listeners, "listeners", "", "Kafka's listeners: NAME://host:port,... with NAME a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or a name in --listener-security-protocol-map; replaces --listen and --advertised-*")
	flag.StringVar(&advertised, "advertised-listeners", "", "Kafka's advertised.listeners: NAME://host:port per listener name (default: the listener's own address, a wildcard host replaced by this machine's name)")
	flag.StringVar(&protoMap, "listener-security-protocol-map", "", "Kafka's listener.security.protocol.map: NAME:PROTOCOL,... for listener names that are not protocols")
	flag.BoolVar(&cfg.AllowPlaintextRemote, "allow-plaintext-remote", false, "allow a PLAINTEXT listener on a non-loopback address (kafgres.allow_plaintext_remote)")
	flag.StringVar(&cfg.TLS.CertFile, "ssl-cert-file", "", "PEM certificate (chain) of SSL and SASL_SSL listeners")
	flag.StringVar(&cfg.TLS.KeyFile, "ssl-key-file", "", "PEM private key of SSL and SASL_SSL listeners")
	flag.StringVar(&cfg.TLS.CAFile, "ssl-ca-file", "", "PEM CAs that client certificates must chain to")
	flag.StringVar(&clientAuth, "ssl-client-auth", "none", "Kafka's ssl.client.auth on SSL listeners: none, requested or required")
	flag.StringVar(&minTLS, "ssl-min-protocol-version", "TLSv1.2", "lowest TLS version accepted: TLSv1.2 or TLSv1.3")
	flag.StringVar(&cfg.PrincipalMappingRules, "ssl-principal-mapping-rules", "DEFAULT", "Kafka's ssl.principal.mapping.rules: client certificate subject to user name")
	flag.StringVar(&mechanisms, "sasl-enabled-mechanisms", "SCRAM-SHA-256,PLAIN", "Kafka's sasl.enabled.mechanisms (PLAIN is offered on SASL_SSL only)")
	flag.StringVar(&cfg.ClientRole, "client-role", "", "Postgres role SASL users must be members of (kafgres.client_role)")
	flag.DurationVar(&cfg.ConnectionsMaxReauth, "connections-max-reauth", 0, "Kafka's connections.max.reauth.ms: longest SASL session before the client must re-authenticate; 0 for none")
	flag.IntVar(&liveFD, "liveness-fd", -1, "exit when this inherited fd reaches EOF (set by the supervisor)")
	flag.TextVar(&level, "log-level", slog.LevelInfo, "debug, info, warn or error")
	flag.Parse()

	// A LevelVar, so that Kafka's IncrementalAlterConfigs on the root
	// broker logger can change the level at runtime.
	cfg.LogLevel = new(slog.LevelVar)
	cfg.LogLevel.Set(level)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	if err := listenerConfig(&cfg, listeners, advertised, protoMap, advPort); err != nil {
		return err
	}
	var err error
	if cfg.TLS.ClientAuth, err = tlsconf.ParseClientAuth(clientAuth); err != nil {
		return fmt.Errorf("--ssl-client-auth: %w", err)
	}
	if cfg.TLS.MinVersion, err = tlsconf.ParseMinVersion(minTLS); err != nil {
		return fmt.Errorf("--ssl-min-protocol-version: %w", err)
	}
	for _, m := range strings.Split(mechanisms, ",") {
		if m = strings.TrimSpace(m); m != "" {
			cfg.SASLMechanisms = append(cfg.SASLMechanisms, m)
		}
	}
	cfg.DefaultPartition = int32(partitions)
	cfg.GroupInitialRebalanceDelay = groupDelay
	if groupDelay == 0 {
		cfg.GroupInitialRebalanceDelay = -1 // Config's zero means "Kafka's default"
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Caught from the start: SIGHUP's default action would end the broker
	// while it waits for Postgres.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
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
	var lns []net.Listener
	for _, l := range b.Listeners() {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", l.Addr)
		if err != nil {
			for _, o := range lns {
				o.Close()
			}
			return fmt.Errorf("listen on %s: %w", l, err)
		}
		lns = append(lns, ln)
		log.Info("serving Kafka", "listener", l.String(), "advertised", l.Advertised(), "data_dir", cfg.DataDir, "fsync", cfg.Fsync)
	}
	reloadOnHangup(ctx, hup, b, log)

	// SQL produce and CDC: the slot's stream, appended exactly once.
	pctx, stopProducer := context.WithCancel(ctx)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
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
		appends, unreadableXid, err := producer.ReadFailpoint(cfg.DataDir)
		if err != nil {
			log.Error("failpoint", "err", err)
		}
		status := producer.PGStatus{Pool: pool}
		dec := decoder.New(decoder.Config{DSN: cfg.DSN, Skip: status.Skip, UnreadableXid: unreadableXid,
			Logger: log.With("component", "decoder")})
		// The slot first: while the source guard holds the producer back
		// (a log ahead of the WAL), the slot keeps what commits meanwhile.
		if err := dec.PrepareSlot(pctx); err != nil {
			if pctx.Err() == nil {
				log.Error("SQL produce not started", "err", err)
			}
			return
		}
		if err := b.GuardSource(pctx); err != nil {
			if pctx.Err() == nil {
				log.Error("SQL produce not started", "err", err)
			}
			return
		}
		renderer, err := mappings.NewRenderer(pool, mappings.Config{RenderTimeout: renderTime}, log.With("component", "mappings"))
		if err != nil {
			log.Error("CDC renderer", "err", err)
			return
		}
		defer renderer.Close()
		p := producer.New(dec, b, renderer, producer.PGDeadLetters{Pool: pool}, producer.PGEpochs{Pool: pool}, status, log.With("component", "producer"))
		if appends > 0 {
			p.SetFailpoint(producer.Failpoint{Appends: appends, Crash: func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }})
		}
		if err := p.Run(pctx); err != nil {
			log.Error("SQL produce stopped", "err", err)
		}
	}()
	err = b.Serve(ctx, lns...)
	stopProducer()
	<-produced
	if err == nil && ctx.Err() != nil {
		log.Info("shutting down", "reason", context.Cause(ctx))
	}
	return err
}

// listenerConfig fills cfg's listeners from --listeners and friends, or,
// without them, one PLAINTEXT listener from --listen and --advertised-*.
func listenerConfig(cfg *broker.Config, listeners, advertised, protoMap string, advPort int) error {
	if listeners != "" {
		ls, err := broker.ParseListeners(listeners, advertised, protoMap)
		if err != nil {
			return err
		}
		cfg.Listeners = ls
		return nil
	}
	host, port, err := net.SplitHostPort(cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", cfg.ListenAddr, err)
	}
	if cfg.AdvertisedHost == "" {
		cfg.AdvertisedHost = broker.Advertisable(host)
	}
	if advPort == 0 {
		if advPort, err = strconv.Atoi(port); err != nil {
			return fmt.Errorf("--listen port %q: %w", port, err)
		}
	}
	cfg.AdvertisedPort = int32(advPort)
	return nil
}

// reloadOnHangup reads the TLS files again on SIGHUP: the supervisor
// forwards Postgres's reload to the broker, so renewed certificates are
// picked up without dropping connections.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, b *broker.Broker, log *slog.Logger) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := b.ReloadTLS(); err != nil {
					log.Error("reloading TLS files; keeping the previous ones", "err", err)
				} else {
					log.Info("reloaded TLS files")
				}
			}
		}
	}()
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
