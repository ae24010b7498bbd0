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
// start prints "bootstrap=HOST:PORT" (kafgres also "pgport=", "dir=") so
// scripts such as examples/parity-demo.sh can use the brokers.
package main

import (
	"bufio"
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
		code, err := runGate(ctx, d, splitList(*clients), splitList(*scenarios), *parallel, *keep)
		if err != nil {
			fatal(err)
		}
		os.Exit(code)
	case len(args) == 2 && args[0] == "reference" && args[1] == "start":
		r, err := StartReference(ctx, d.repo, d.cache, d.reference())
		if err != nil {
			fatal(err)
		}
		fmt.Printf("bootstrap=%s\n", r.Addr())
	case len(args) == 2 && args[0] == "reference" && args[1] == "stop":
		if r, err := loadState[Reference](d.reference()); err == nil {
			r.Dir = d.reference()
			if err := r.Stop(); err != nil {
				fatal(err)
			}
		}
	case len(args) == 2 && args[0] == "kafgres" && args[1] == "start":
		k, err := StartKafgres(ctx, d.repo, d.kafgres())
		if err != nil {
			fatal(err)
		}
		fmt.Printf("bootstrap=%s\npgport=%d\ndir=%s\n", k.Addr(), k.PGPort, k.Dir)
	case len(args) == 2 && args[0] == "kafgres" && args[1] == "stop":
		if k, err := LoadKafgres(d.repo, d.kafgres()); err == nil {
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
func runGate(ctx context.Context, d dirs, clients, only []string, parallel int, keep bool) (int, error) {
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

	// Both brokers start at once: the JVM's ~10 s overlaps initdb.
	type started struct {
		ref *Reference
		kaf *Kafgres
		err error
	}
	refc, kafc := make(chan started, 1), make(chan started, 1)
	go func() {
		r, err := StartReference(ctx, d.repo, d.cache, d.reference())
		refc <- started{ref: r, err: err}
	}()
	go func() { k, err := StartKafgres(ctx, d.repo, d.kafgres()); kafc <- started{kaf: k, err: err} }()
	rs, ks := <-refc, <-kafc
	if !keep {
		defer func() {
			if rs.ref != nil {
				rs.ref.Stop()
			}
			if ks.kaf != nil {
				ks.kaf.Stop()
			}
		}()
	}
	if rs.err != nil {
		return 0, fmt.Errorf("reference broker: %w", rs.err)
	}
	if ks.err != nil {
		return 0, fmt.Errorf("kafgres: %w", ks.err)
	}
	fmt.Fprintf(os.Stderr, "reference Kafka 4.4.0 on %s, kafgres on %s (started in %.1fs)\n",
		rs.ref.Addr(), ks.kaf.Addr(), time.Since(begin).Seconds())

	g := &Gate{
		Repo: d.repo, Cache: d.cache, LogDir: d.logs(),
		Clients: clients, Scenarios: scenarios, Catalogue: cat, Parallel: parallel,
		Out: os.Stdout, Log: os.Stderr,
	}
	ref := Broker{Name: "reference", Addr: rs.ref.Addr(), CreateTopics: func(ctx context.Context, t []TopicSpec) error {
		return CreateReferenceTopics(ctx, d.repo, d.cache, rs.ref.Addr(), t)
	}}
	kaf := Broker{Name: "kafgres", Addr: ks.kaf.Addr(), CreateTopics: ks.kaf.CreateTopics}
	res, err := g.Run(ctx, ref, kaf)
	if err != nil {
		return 0, err
	}
	g.Report(res)
	fmt.Fprintf(os.Stderr, "conformance gate took %.0fs; client output in %s\n", time.Since(begin).Seconds(), d.logs())
	if keep {
		fmt.Fprintf(os.Stderr, "brokers left running: `runner reference stop` and `runner kafgres stop` end them\n")
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
