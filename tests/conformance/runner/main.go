// Command runner is kafgres's conformance gate: it provisions a reference
// Apache Kafka 4.4.0 broker and a kafgres cluster, runs every client
// program with every scenario against both, normalizes what
// tests/conformance/PROTOCOL.md and the catalogue in docs/conformance.md
// allow, and fails on any other difference.
//
//	runner [flags] run                     the gate (`make conformance`)
//	runner [flags] reference start|stop    just the reference broker
//	runner [flags] kafgres start|stop      just a kafgres cluster
//	runner [flags] topics reference|kafgres NAME:PARTITIONS...
//
// start prints "bootstrap=HOST:PORT" (the reference also "pid=", kafgres
// "pgport=", "dir=") so scripts such as examples/parity-demo.sh and the
// benchmarks can use the brokers.
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	work := flag.String("work", "", "work directory for brokers and logs (default tests/conformance/.work)")
	cache := flag.String("cache", "", "build cache shared between runs (default tests/conformance/.work/cache)")
	clients := flag.String("clients", strings.Join(Matrix, ","), "comma-separated clients to run")
	scenarios := flag.String("scenarios", "", "comma-separated scenarios (default all)")
	parallel := flag.Int("parallel", 2, "clients run at the same time")
	keep := flag.Bool("keep", false, "leave both brokers running after run")
	serverJVM := flag.Bool("server-jvm", false, "reference start: Kafka's own JVM defaults (1 GiB heap, G1 options) instead of the gate's 512 MiB heap, for benchmarks")
	engines := flag.String("engines", "", "run: comma-separated storage engines, one kafgres cluster each, all compared with one reference run (default: $KAFGRES_STORAGE_ENGINE, else the default engine)")
	secure := flag.Bool("secure", false, "reference|kafgres start|stop: the secure pair's broker (SASL listeners, ACLs)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: runner [flags] run | reference start|stop | kafgres start|stop | topics reference|kafgres NAME:N...")
		flag.PrintDefaults()
	}
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	repo, err := findRepo()
	if err != nil {
		fatal(err)
	}
	if *work == "" {
		*work = filepath.Join(repo, "tests", "conformance", ".work")
	}
	if *cache == "" {
		*cache = filepath.Join(repo, "tests", "conformance", ".work", "cache")
	}
	d := dirs{repo: repo, cache: *cache, run: filepath.Join(*work, "run")}

	args := flag.Args()
	switch {
	case len(args) == 1 && args[0] == "run":
		code, err := runGate(ctx, d, splitList(*clients), splitList(*scenarios), splitList(*engines), *parallel, *keep)
		if err != nil {
			fatal(err)
		}
		os.Exit(code)
	case len(args) == 2 && args[0] == "reference" && args[1] == "start" && *secure:
		pki, err := WritePKI(d.pki())
		if err != nil {
			fatal(err)
		}
		r, err := StartSecureReference(ctx, d.repo, d.cache, d.secureReference(), pki)
		if err != nil {
			fatal(err)
		}
		fmt.Printf("bootstrap=%s\nsasl_ssl=%s\nca=%s\n", r.Addr(), r.SSLAddr(), pki.CAFile)
	case len(args) == 2 && args[0] == "reference" && args[1] == "start":
		start := StartReference
		if *serverJVM {
			start = StartServerReference
		}
		r, err := start(ctx, d.repo, d.cache, d.reference())
		if err != nil {
			fatal(err)
		}
		fmt.Printf("bootstrap=%s\npid=%d\n", r.Addr(), r.PID)
	case len(args) == 2 && args[0] == "reference" && args[1] == "stop":
		dir := d.reference()
		if *secure {
			dir = d.secureReference()
		}
		if r, err := loadState[Reference](dir); err == nil {
			r.Dir = dir
			if err := r.Stop(); err != nil {
				fatal(err)
			}
		}
	case len(args) == 2 && args[0] == "kafgres" && args[1] == "start" && *secure:
		pki, err := WritePKI(d.pki())
		if err != nil {
			fatal(err)
		}
		k, err := StartSecureKafgres(ctx, d.repo, d.secureKafgres(), pki)
		if err != nil {
			fatal(err)
		}
		fmt.Printf("bootstrap=%s\nsasl_ssl=%s\nca=%s\npgport=%d\ndir=%s\n", k.Addr(), k.SSLAddr(), pki.CAFile, k.PGPort, k.Dir)
	case len(args) == 2 && args[0] == "kafgres" && args[1] == "start":
		k, err := StartKafgres(ctx, d.repo, d.kafgres(), "")
		if err != nil {
			fatal(err)
		}
		fmt.Printf("bootstrap=%s\npgport=%d\ndir=%s\n", k.Addr(), k.PGPort, k.Dir)
	case len(args) == 2 && args[0] == "kafgres" && args[1] == "stop":
		dir := d.kafgres()
		if *secure {
			dir = d.secureKafgres()
		}
		if k, err := LoadKafgres(d.repo, dir); err == nil {
			if err := k.Stop(); err != nil {
				fatal(err)
			}
		}
	case len(args) >= 2 && args[0] == "topics":
		if err := createTopicsCmd(ctx, d, args[1], args[2:]); err != nil {
			fatal(err)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

type dirs struct{ repo, cache, run string }

func (d dirs) reference() string { return filepath.Join(d.run, "reference") }
func (d dirs) kafgres() string   { return filepath.Join(d.run, "kafgres") }
func (d dirs) logs() string      { return filepath.Join(d.run, "logs") }

// kafgresFor is the directory of the i-th kafgres of a run with several
// storage engines: the first is d.kafgres(), which `kafgres stop` stops.
func (d dirs) kafgresFor(i int, engine string) string {
	if i == 0 {
		return d.kafgres()
	}
	return filepath.Join(d.run, "kafgres-"+engine)
}

// the secure pair's (secure.go)
func (d dirs) pki() string             { return filepath.Join(d.run, "secure-pki") }
func (d dirs) secureReference() string { return filepath.Join(d.run, "secure-reference") }
func (d dirs) secureKafgres() string   { return filepath.Join(d.run, "secure-kafgres") }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "runner:", err)
	os.Exit(1)
}

// findRepo walks up from the working directory to the product module's
// go.mod, past tests/go.mod (the module the runner itself is in).
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			sc.Scan()
			f.Close()
			if strings.TrimSpace(sc.Text()) == "module github.com/kafgres/kafgres" {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the conformance runner inside the kafgres checkout")
		}
		dir = parent
	}
}

// runGate is `runner run`: both brokers up, the gate, the report. It
// returns the exit code: 1 on any failed cell.
func runGate(ctx context.Context, d dirs, clients, only, engines []string, parallel int, keep bool) (int, error) {
	begin := time.Now()
	all, err := LoadScenarios(filepath.Join(d.repo, "tests", "conformance", "scenarios.json"))
	if err != nil {
		return 0, err
	}
	scenarios := all
	if len(only) > 0 {
		scenarios = nil
		for _, s := range all {
			if matchAny(only, s.Name) {
				scenarios = append(scenarios, s)
			}
		}
		if len(scenarios) == 0 {
			return 0, fmt.Errorf("no scenario matches %v", only)
		}
	}
	cat, err := LoadCatalogue(filepath.Join(d.repo, "docs", "conformance.md"))
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(d.logs(), 0o755); err != nil {
		return 0, err
	}

	var plain, secure bool
	for _, s := range scenarios {
		secure = secure || s.Secure
		plain = plain || !s.Secure
	}
	// All brokers start at once: the JVM's ~10 s overlaps initdb. The
	// secure pair only when a secure scenario is selected, the plain one
	// only when a plain one is.
	var pki *PKI
	if secure {
		if pki, err = WritePKI(d.pki()); err != nil {
			return 0, fmt.Errorf("certificates for the secure pair: %w", err)
		}
	}
	type started struct {
		ref *Reference
		kaf *Kafgres
		err error
	}
	var waits []func() (started, string)
	launch := func(what string, start func() started) {
		c := make(chan started, 1)
		go func() { c <- start() }()
		waits = append(waits, func() (started, string) { return <-c, what })
	}
	if plain {
		launch("reference broker", func() started {
			r, err := StartReference(ctx, d.repo, d.cache, d.reference())
			return started{ref: r, err: err}
		})
		if len(engines) == 0 {
			engines = []string{""}
		}
		for i, e := range engines {
			launch("kafgres "+e, func() started {
				k, err := StartKafgres(ctx, d.repo, d.kafgresFor(i, e), e)
				return started{kaf: k, err: err}
			})
		}
	}
	if secure {
		launch("secure reference broker", func() started {
			r, err := StartSecureReference(ctx, d.repo, d.cache, d.secureReference(), pki)
			return started{ref: r, err: err}
		})
		launch("secure kafgres", func() started {
			k, err := StartSecureKafgres(ctx, d.repo, d.secureKafgres(), pki)
			return started{kaf: k, err: err}
		})
	}
	var refs []*Reference
	var kafs []*Kafgres
	var startErr error
	for _, w := range waits {
		st, what := w()
		if st.ref != nil {
			refs = append(refs, st.ref)
		}
		if st.kaf != nil {
			kafs = append(kafs, st.kaf)
		}
		if st.err != nil && startErr == nil {
			startErr = fmt.Errorf("%s: %w", what, st.err)
		}
	}
	if !keep {
		defer func() {
			for _, r := range refs {
				r.Stop()
			}
			for _, k := range kafs {
				k.Stop()
			}
		}()
	}
	if startErr != nil {
		return 0, startErr
	}

	g := &Gate{
		Repo: d.repo, Cache: d.cache, LogDir: d.logs(),
		Clients: clients, Scenarios: scenarios, Catalogue: cat, Parallel: parallel,
		Out: os.Stdout, Log: os.Stderr,
	}
	ref := Broker{Name: "reference"}
	var plainKafs []Broker
	for _, r := range refs {
		if r.Secure {
			g.SecureRef = secureReferenceBroker(r, pki)
			fmt.Fprintf(os.Stderr, "secure reference Kafka 4.4.0: SASL_PLAINTEXT %s, SASL_SSL %s\n", r.Addr(), r.SSLAddr())
			continue
		}
		addr := r.Addr()
		ref = Broker{Name: "reference", Addr: addr, CreateTopics: func(ctx context.Context, t []TopicSpec) error {
			return CreateReferenceTopics(ctx, d.repo, d.cache, addr, t)
		}}
		fmt.Fprintf(os.Stderr, "reference Kafka 4.4.0 on %s\n", addr)
	}
	for _, k := range kafs {
		if k.Secure {
			g.SecureKaf = &SecureBroker{
				Broker:  Broker{Name: "kafgres", Addr: k.Addr(), CreateTopics: k.CreateTopics},
				SSLAddr: k.SSLAddr(), CAFile: pki.CAFile, Admin: adminOpts(k.Addr()),
			}
			fmt.Fprintf(os.Stderr, "secure kafgres: SASL_PLAINTEXT %s, SASL_SSL %s\n", k.Addr(), k.SSLAddr())
			continue
		}
		kaf := Broker{Name: "kafgres", Addr: k.Addr(), CreateTopics: k.CreateTopics}
		if len(plainKafs) > 0 {
			kaf.Name, kaf.Label = "kafgres-"+k.Engine, " ["+k.Engine+"]"
		}
		plainKafs = append(plainKafs, kaf)
		fmt.Fprintf(os.Stderr, "kafgres (storage engine %s) on %s\n", cmp.Or(k.Engine, os.Getenv("KAFGRES_STORAGE_ENGINE"), "default"), k.Addr())
	}
	fmt.Fprintf(os.Stderr, "brokers started in %.1fs\n", time.Since(begin).Seconds())
	if len(plainKafs) == 0 {
		plainKafs = []Broker{{Name: "kafgres"}} // secure scenarios only
	}
	res, err := g.Run(ctx, ref, plainKafs...)
	if err != nil {
		return 0, err
	}
	g.Report(res)
	fmt.Fprintf(os.Stderr, "conformance gate took %.0fs; client output in %s\n", time.Since(begin).Seconds(), d.logs())
	if keep {
		fmt.Fprintf(os.Stderr, "brokers left running: `runner reference stop` and `runner kafgres stop` end them (the secure pair: `runner -secure ...`)\n")
	}
	return res.ExitCode(), nil
}

func createTopicsCmd(ctx context.Context, d dirs, broker string, specs []string) error {
	var topics []TopicSpec
	for _, s := range specs {
		name, n, ok := strings.Cut(s, ":")
		parts, err := strconv.Atoi(n)
		if !ok || err != nil || parts < 1 {
			return fmt.Errorf("topic %q: want NAME:PARTITIONS", s)
		}
		topics = append(topics, TopicSpec{Name: name, Partitions: parts})
	}
	switch broker {
	case "reference":
		r, err := loadState[Reference](d.reference())
		if err != nil {
			return fmt.Errorf("no reference broker running (runner reference start): %w", err)
		}
		if err := CreateReferenceTopics(ctx, d.repo, d.cache, r.Addr(), topics); err != nil {
			return err
		}
		return WaitTopics(ctx, r.Addr(), topics)
	case "kafgres":
		k, err := LoadKafgres(d.repo, d.kafgres())
		if err != nil {
			return err
		}
		if err := k.CreateTopics(ctx, topics); err != nil {
			return err
		}
		return WaitTopics(ctx, k.Addr(), topics)
	}
	return fmt.Errorf("topics: broker must be reference or kafgres, not %q", broker)
}
