package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// BenchmarkVersusKafka is issue #16's side-by-side benchmark: kafgres (its
// defaults, so every ack after an fsync) and the reference Apache Kafka 4.4
// (startReference: Kafka's jars, JVM settings and configs) on the same
// machine, and Kafka again on topics with flush.messages=1 ("kafka-flush")
// for the fsync-per-append comparison. Every workload runs on each broker
// in turn, the order reversing every round, so that a machine getting
// faster or slower weighs on both; the tables give medians over rounds,
// after a warm-up round that is not counted.
//
// Per run: MB/s and records/s of payload, produce p50/p99 latency (franz-go:
// each record from Produce to its ack; Java: ProducerPerformance's own
// percentiles, from send to callback), and the broker's CPU seconds per GB
// of payload, from its /proc/<pid>/stat around the run (kafgres: the
// kafgres-broker process, not Postgres; Kafka: its JVM), the client's CPU
// seconds per GB (this process and the tools it runs, JVM start included),
// and the rate the two together would allow on two busy cores ("CPU-bound
// MB/s"): on this machine client and broker share the cores, so a run
// near that rate is decided by CPU per byte. Each round also
// measures the disk's fdatasync'd sequential write bandwidth in the
// kafgres data directory's file system (Kafka's is the same temp file
// system) and the produce rows give their throughput as a fraction of it.
//
// $KAFGRES_VERSUS_ROUNDS (default 3) sets the rounds, $KAFGRES_VERSUS_SCALE
// (default 1) the size: each produce workload writes 256 MiB times the
// scale (paced ones half of that). $KAFGRES_VERSUS_ONLY, a regular
// expression on workload ids, runs only those. It ignores b.N (run it with
// -benchtime 1x).
func BenchmarkVersusKafka(b *testing.B) {
	needTools(b, "java", "mvn")
	rounds := harness.EnvInt(b, "KAFGRES_VERSUS_ROUNDS", 3)
	scale := envFloat(b, "KAFGRES_VERSUS_SCALE", 1)
	c := harness.Start(b)
	ref := startReference(b)
	cp := harness.KafkaClasspath(b)
	brokers := []target{
		{name: "kafgres", addr: c.Addr, pid: c.BrokerPID(b)},
		{name: "kafka", addr: ref.addr, pid: ref.pid},
		{name: "kafka-flush", addr: ref.addr, pid: ref.pid, flush: true},
	}
	env := &versusEnv{classpath: cp, bytes: int64(scale * (256 << 20)), payload: newPayload(), created: map[string][]string{}}
	if only := os.Getenv("KAFGRES_VERSUS_ONLY"); only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			b.Fatalf("KAFGRES_VERSUS_ONLY: %v", err)
		}
		env.only = re
	}
	if _, err := exec.LookPath("kcat"); err == nil {
		env.kcat = true
	} else {
		b.Log("kcat not found: its consume workload is left out")
	}

	results := map[string][]runResult{} // by resultKey
	var disk []float64
	// round 0 warms up, at a quarter of the size, and is not counted: the
	// first runs on a fresh JVM measure its JIT compiler
	for round := 0; round <= rounds; round++ {
		size := env.bytes
		if round == 0 {
			size /= 4
		} else {
			mbps, err := fdatasyncMBps(c.DataDir(), 256<<20)
			if err != nil {
				b.Fatal(err)
			}
			disk = append(disk, mbps)
			fmt.Printf("round %d  fdatasync'd sequential writes %.0f MB/s\n", round, mbps)
		}
		if err := env.round(brokers, round, size, results); err != nil {
			b.Fatalf("%v\n--- kafgres log ---\n%s", err, c.LogTail())
		}
	}
	fmt.Print(versusTables(results, brokers, median(disk), rounds, scale))
	for _, w := range versusWorkloads {
		k, f := results[resultKey(w, brokers[0])], results[resultKey(w, brokers[1])]
		switch {
		case len(k) == 0 || len(f) == 0:
		case w.mbps > 0: // the same throughput on both: latency is the measure
			b.ReportMetric(medianOf(k, runResult.p99ms)/medianOf(f, runResult.p99ms), w.id+"_p99_ratio")
			b.ReportMetric(pairedRatio(k, f, runResult.p99ms), w.id+"_p99_paired_ratio")
		default:
			b.ReportMetric(medianOf(k, runResult.mbps)/medianOf(f, runResult.mbps), w.id+"_ratio")
			b.ReportMetric(pairedRatio(k, f, runResult.mbps), w.id+"_paired_ratio")
		}
	}
}

// round runs every workload on every broker with bytes of payload a
// producer, the brokers' order reversed in odd rounds, adds the runs to
// results unless it is the warm-up round 0, and deletes the round's
// topics.
func (e *versusEnv) round(brokers []target, round int, bytes int64, results map[string][]runResult) error {
	order := brokers
	if round%2 == 1 {
		order = []target{brokers[2], brokers[1], brokers[0]}
	}
	for _, w := range versusWorkloads {
		if w.tool == "kcat" && !e.kcat || !e.selected(w) {
			continue
		}
		for _, t := range order {
			if t.flush && !w.flush {
				continue
			}
			r, err := e.run(w, t, round, bytes)
			if err != nil {
				return fmt.Errorf("round %d, %s on %s: %w", round, w.name, t.name, err)
			}
			if round > 0 {
				results[resultKey(w, t)] = append(results[resultKey(w, t)], r)
			}
			// printed, not logged: a benchmark's log keeps 10 lines
			fmt.Printf("round %d  %-12s %-40s %s\n", round, t.name, w.name, r)
		}
	}
	for _, t := range brokers {
		if err := deleteTopics(t.addr, e.created[t.name]); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		e.created[t.name] = nil
	}
	return nil
}

// target is a broker the workloads run on.
type target struct {
	name  string
	addr  string
	pid   int  // whose CPU time is counted
	flush bool // its topics have flush.messages=1
}

// workload is one row of the comparison. Producers are franz-go clients
// or Java's ProducerPerformance; consumers read back the round's first
// workload's topic from the start (its records are 1 KiB, uncompressed).
type workload struct {
	id, name   string
	tool       string // "franz-go", "java" or "kcat"
	consume    bool
	size       int // bytes a record
	producers  int
	partitions int
	codec      string
	flush      bool    // also on kafka-flush
	mbps       float64 // offered load in MB/s; 0 is flat out
}

// pacedBytes is the share of a round's size a paced workload writes: at
// the offered loads below a full 256 MiB would take longer than every
// other row together.
const pacedBytes = 0.5

// pacedWarmUp is how long a paced run goes before its latencies count:
// the first records wait for the client's metadata and connections (and
// Java's JIT), 150-200 ms at 20 MB/s, which is the client starting, not
// the broker. ProducerPerformance's --warmup-records does the same.
const pacedWarmUp = 2 * time.Second

var versusWorkloads = []workload{
	{id: "produce-1k", name: "produce franz-go 1 KiB", tool: "franz-go", size: 1 << 10, producers: 1, partitions: 3, codec: "none", flush: true},
	{id: "produce-1k-x4", name: "produce franz-go 1 KiB, 4 producers", tool: "franz-go", size: 1 << 10, producers: 4, partitions: 3, codec: "none", flush: true},
	{id: "produce-100b", name: "produce franz-go 100 B", tool: "franz-go", size: 100, producers: 1, partitions: 3, codec: "none"},
	{id: "produce-100k", name: "produce franz-go 100 KiB", tool: "franz-go", size: 100 << 10, producers: 1, partitions: 3, codec: "none"},
	{id: "produce-1k-lz4", name: "produce franz-go 1 KiB lz4", tool: "franz-go", size: 1 << 10, producers: 1, partitions: 3, codec: "lz4"},
	{id: "produce-1k-zstd", name: "produce franz-go 1 KiB zstd", tool: "franz-go", size: 1 << 10, producers: 1, partitions: 3, codec: "zstd"},
	{id: "produce-1k-p100", name: "produce franz-go 1 KiB, 100 partitions", tool: "franz-go", size: 1 << 10, producers: 1, partitions: 100, codec: "none"},
	{id: "produce-1k-java", name: "produce Java ProducerPerformance 1 KiB", tool: "java", size: 1 << 10, producers: 1, partitions: 3, codec: "none", flush: true},
	// The same offered load on every broker, below what each sustains, so
	// that latency is the broker's and not time in a full client buffer:
	// the issue's "produce p99 latency below Kafka's at the same offered
	// load".
	{id: "produce-1k-paced", name: "produce franz-go 1 KiB at 50 MB/s", tool: "franz-go", size: 1 << 10, producers: 1, partitions: 3, codec: "none", flush: true, mbps: 50},
	{id: "produce-1k-java-paced", name: "produce Java 1 KiB at 20 MB/s", tool: "java", size: 1 << 10, producers: 1, partitions: 3, codec: "none", flush: true, mbps: 20},
	{id: "consume-franz", name: "consume franz-go", tool: "franz-go", consume: true, size: 1 << 10},
	{id: "consume-java", name: "consume Java ConsumerPerformance", tool: "java", consume: true, size: 1 << 10},
	{id: "consume-kcat", name: "consume kcat", tool: "kcat", consume: true, size: 1 << 10},
}

func resultKey(w workload, t target) string { return w.id + "/" + t.name }

// runResult is one workload's run on one broker.
type runResult struct {
	records  int
	bytes    int64
	elapsed  time.Duration
	p50, p99 time.Duration // produce only
	cpu      float64       // broker CPU seconds during the run
	client   float64       // the client's CPU seconds (this process and the tools it ran)
	fetches  fetchTimes    // consume franz-go only
}

func (r runResult) mbps() float64             { return float64(r.bytes) / 1e6 / r.elapsed.Seconds() }
func (r runResult) rps() float64              { return float64(r.records) / r.elapsed.Seconds() }
func (r runResult) perGB(sec float64) float64 { return sec / (float64(r.bytes) / 1e9) }
func (r runResult) cpuPerGB() float64         { return r.perGB(r.cpu) }
func (r runResult) clientPerGB() float64      { return r.perGB(r.client) }

// cpuBound is the MB/s a run would reach if the two cores it shares with
// nothing else were busy all the time with its broker and its client:
// where the measured rate is close to it, the run is CPU-bound and a
// broker can only win by leaving more of the cores to the client.
func (r runResult) cpuBound() float64 {
	return 2 * 1e3 / (r.cpuPerGB() + r.clientPerGB())
}
func (r runResult) fetchMB() float64 { return float64(r.fetches.bytes) / 1e6 / float64(r.fetches.n) }
func (r runResult) fetchMs() float64 {
	return float64(r.fetches.e2e) / 1e6 / float64(r.fetches.n)
}
func (r runResult) fetchShare() float64 { return 100 * float64(r.fetches.e2e) / float64(r.elapsed) }

func (r runResult) p50ms() float64 { return float64(r.p50) / 1e6 }
func (r runResult) p99ms() float64 { return float64(r.p99) / 1e6 }

func (r runResult) String() string {
	s := fmt.Sprintf("%8.1f MB/s %9.0f rec/s %6.1f CPU s/GB %6.1f client s/GB", r.mbps(), r.rps(), r.cpuPerGB(), r.clientPerGB())
	if r.p99 > 0 {
		s += fmt.Sprintf("  p50 %.1f ms p99 %.1f ms", r.p50ms(), r.p99ms())
	}
	if r.fetches.n > 0 {
		s += fmt.Sprintf("  %d fetches of %.2f MB, round trip %.2f ms, %.0f %% of the run", r.fetches.n, r.fetchMB(), r.fetchMs(), r.fetchShare())
	}
	return s
}

// versusEnv is what the runs share.
type versusEnv struct {
	classpath string
	bytes     int64 // payload of each produce workload
	payload   []byte
	kcat      bool
	only      *regexp.Regexp      // $KAFGRES_VERSUS_ONLY; nil runs every workload
	created   map[string][]string // topics by broker name, deleted each round
}

// selected says whether w runs: all do unless $KAFGRES_VERSUS_ONLY names
// some, a regular expression on their ids; the consumers read the first
// workload's topic, so they run only along with it.
func (e *versusEnv) selected(w workload) bool {
	if e.only == nil {
		return true
	}
	if w.consume {
		return e.only.MatchString(versusWorkloads[0].id)
	}
	return e.only.MatchString(w.id)
}

// run creates the workload's topic (producers) and runs it on t with
// bytes of payload, timing the broker's CPU around it.
func (e *versusEnv) run(w workload, t target, round int, bytes int64) (runResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("r%d-%s-%s", round, w.id, t.name)
	if w.mbps > 0 {
		bytes = int64(float64(bytes) * pacedBytes)
	}
	n := int(bytes / int64(w.size))
	if w.consume {
		topic = fmt.Sprintf("r%d-%s-%s", round, versusWorkloads[0].id, t.name)
		n = int(bytes / int64(versusWorkloads[0].size))
	} else if err := e.createTopic(ctx, t, topic, w.partitions); err != nil {
		return runResult{}, err
	}
	// What the previous run left dirty in the page cache (Kafka acks
	// before writing back; 256 MiB stays dirty for up to 30 s at the
	// kernel's defaults) is written back now, not during this run: its
	// writeback would slow this run's writes and stall its fsyncs, which
	// charged Kafka's deferred writes to whichever broker ran next (a
	// paced Java run on kafgres measured p99 188 ms right after Kafka's
	// run, 6 ms on its own).
	syscall.Sync()
	cpu0, err := cpuSeconds(t.pid)
	if err != nil {
		return runResult{}, err
	}
	client0 := clientSeconds()
	var r runResult
	switch {
	case !w.consume && w.tool == "franz-go":
		r, err = produceFranz(ctx, t.addr, topic, w, n, e.payload)
	case !w.consume && w.tool == "java":
		r, err = produceJava(ctx, e.classpath, t.addr, topic, w, n)
	case w.tool == "franz-go":
		r, err = consumeFranz(ctx, t.addr, topic, n)
	case w.tool == "java":
		r, err = consumeJava(ctx, e.classpath, t.addr, topic, n)
	default:
		r, err = consumeKcat(ctx, t.addr, topic, n)
	}
	if err != nil {
		return runResult{}, err
	}
	r.bytes = int64(r.records) * int64(w.size)
	r.client = clientSeconds() - client0
	cpu1, err := cpuSeconds(t.pid)
	r.cpu = cpu1 - cpu0
	return r, err
}

// createTopic creates a topic with the Kafka protocol on either broker, so
// that both are set up the same way and kafka-flush's topics can carry
// their flush.messages.
func (e *versusEnv) createTopic(ctx context.Context, t target, topic string, partitions int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	configs := map[string]*string{}
	if t.flush {
		one := "1"
		configs["flush.messages"] = &one
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s on %s: %w", topic, t.name, err)
	}
	e.created[t.name] = append(e.created[t.name], topic)
	return waitReady(ctx, cl, topic, partitions)
}

// waitReady waits until every partition of a new topic answers
// ListOffsets: Kafka answers CreateTopics before its partitions can take
// records, and a producer that starts at once spends the first seconds
// retrying (100 partitions took 5 s, franz-go's metadata refresh).
func waitReady(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	for {
		offsets, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		if err == nil && offsets.Error() == nil && len(offsets[topic]) == partitions {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: partitions not ready: %w", topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deleteTopics drops a round's topics: a full-size run would otherwise
// keep tens of GB on the disk.
func deleteTopics(addr string, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("delete the round's topics on %s: %w", addr, err)
	}
	return nil
}

// newPayload is 4 MiB of random upper-case letters, ProducerPerformance's
// alphabet. Records are windows of it at different offsets, so that a
// codec sees distinct records (ProducerPerformance repeats one payload,
// which any codec shrinks to nothing).
func newPayload() []byte {
	rng := rand.New(rand.NewSource(16))
	p := make([]byte, 4<<20)
	for i := range p {
		p[i] = byte('A' + rng.Intn(26))
	}
	return p
}

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// produceFranz sends n records from w.producers franz-go clients at once,
// each with the Java client's defaults where franz-go's differ (5 ms
// linger, 32 MiB of buffered records), and times each record from Produce
// to its ack.
func produceFranz(ctx context.Context, addr, topic string, w workload, n int, payload []byte) (runResult, error) {
	per := n / w.producers
	lat := make([]time.Duration, per*w.producers)
	errs := make([]error, w.producers)
	var wg sync.WaitGroup
	start := time.Now()
	for p := 0; p < w.producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = produceOneClient(ctx, addr, topic, w, payload, lat[p*per:(p+1)*per])
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return runResult{}, err
		}
	}
	records := len(lat)
	lat = lat[w.warmUp(len(lat)):]
	slices.Sort(lat)
	return runResult{records: records, elapsed: elapsed, p50: percentile(lat, 0.50), p99: percentile(lat, 0.99)}, nil
}

// interval is the time between a producer's records at w's offered load;
// 0 is flat out.
func (w workload) interval() time.Duration {
	if w.mbps == 0 {
		return 0
	}
	return time.Duration(float64(time.Second) * float64(w.size) / (w.mbps * 1e6))
}

// warmUp is how many of a paced run's n records are left out of its
// latencies: pacedWarmUp's worth, at most half.
func (w workload) warmUp(n int) int {
	if w.mbps == 0 {
		return 0
	}
	return min(int(pacedWarmUp/w.interval()), n/2)
}

// pacer spaces a producer's records at a workload's offered load.
type pacer struct {
	start    time.Time
	interval time.Duration // between records; 0 is flat out
}

func newPacer(w workload) pacer { return pacer{start: time.Now(), interval: w.interval()} }

// wait returns when record i is due, and the time it was due: a record's
// latency counts from then, so that a client or broker that falls behind
// the schedule is charged for it (no coordinated omission). It sleeps only
// when a millisecond or more ahead, finer sleeps being mostly overshoot.
func (p pacer) wait(ctx context.Context, i int) time.Time {
	if p.interval == 0 {
		return time.Now()
	}
	due := p.start.Add(time.Duration(i) * p.interval)
	if ahead := time.Until(due); ahead >= time.Millisecond {
		select {
		case <-ctx.Done():
		case <-time.After(ahead):
		}
	}
	return due
}

// produceOneClient sends len(lat) records and fills lat with their
// latencies.
func produceOneClient(ctx context.Context, addr, topic string, w workload, payload []byte, lat []time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedBytes(32<<20), kgo.MaxBufferedRecords(1<<20),
		kgo.ProducerBatchCompression(codecs[w.codec]))
	if err != nil {
		return err
	}
	defer cl.Close()
	var wg sync.WaitGroup
	var once sync.Once
	var perr error
	windows := len(payload) / w.size // records do not overlap: a codec would find the overlap
	pace := newPacer(w)
	for i := range lat {
		off := (i % windows) * w.size
		start := pace.wait(ctx, i)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: payload[off : off+w.size]}, func(_ *kgo.Record, err error) {
			lat[i] = time.Since(start)
			if err != nil {
				once.Do(func() { perr = err })
			}
			wg.Done()
		})
	}
	wg.Wait()
	if perr != nil {
		return fmt.Errorf("produce to %s: %w", topic, perr)
	}
	return nil
}

var perfLine = regexp.MustCompile(`([0-9]+) (?:steady state )?records sent, ([0-9.]+) records/sec .* ([0-9]+) ms 50th, [0-9]+ ms 95th, ([0-9]+) ms 99th`)

// produceJava runs ProducerPerformance with the Java client's defaults
// (acks=all, idempotent, 5 ms linger, no compression), flat out or at
// w.mbps (its --throughput, in records a second).
func produceJava(ctx context.Context, cp, addr, topic string, w workload, n int) (runResult, error) {
	throughput := "-1"
	args := []string{"--topic", topic, "--num-records", strconv.Itoa(n), "--record-size", strconv.Itoa(w.size),
		"--producer-props", "bootstrap.servers=" + addr}
	if w.mbps > 0 {
		// The summary of the records after the warm-up is printed last.
		throughput = strconv.Itoa(int(w.mbps * 1e6 / float64(w.size)))
		args = append(args, "--warmup-records", strconv.Itoa(w.warmUp(n)))
	}
	args = append(args, "--throughput", throughput)
	out, err := java(ctx, cp, append([]string{"org.apache.kafka.tools.ProducerPerformance"}, args...)...).CombinedOutput()
	if err != nil {
		return runResult{}, fmt.Errorf("ProducerPerformance: %w\n%s", err, out)
	}
	m := perfLine.FindStringSubmatch(lastLine(string(out)))
	if m == nil {
		return runResult{}, fmt.Errorf("ProducerPerformance printed no summary:\n%s", out)
	}
	records, _ := strconv.Atoi(m[1])
	rate, _ := strconv.ParseFloat(m[2], 64)
	p50, _ := strconv.Atoi(m[3])
	p99, _ := strconv.Atoi(m[4])
	return runResult{records: records, elapsed: time.Duration(float64(records) / rate * float64(time.Second)),
		p50: time.Duration(p50) * time.Millisecond, p99: time.Duration(p99) * time.Millisecond}, nil
}

// consumeFranz reads n records from the start of topic with one client.
func consumeFranz(ctx context.Context, addr, topic string, n int) (runResult, error) {
	start := time.Now()
	var hook fetchHook
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithHooks(&hook))
	if err != nil {
		return runResult{}, err
	}
	defer cl.Close()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return runResult{}, fmt.Errorf("consume %s after %d of %d records: %w", topic, got, n, err)
		}
		got += fs.NumRecords()
	}
	return runResult{records: n, elapsed: time.Since(start), fetches: hook.times()}, nil
}

// fetchTimes adds up a consumer's Fetch round trips as franz-go sees them:
// from writing the request to having read the whole response, so the
// broker's handling and the transfer. The rest of a run is the client
// between fetches (decoding, polling): franz-go sends a broker's next
// fetch once the previous one's records are taken, so the two add up to
// the run, and their shares say whether a faster broker could make the
// run faster.
type fetchTimes struct {
	n     int
	bytes int64
	e2e   time.Duration
}

// fetchHook collects fetchTimes from the client's connection goroutines.
type fetchHook struct {
	mu sync.Mutex
	t  fetchTimes
}

func (f *fetchHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != 1 || e2e.Err() != nil { // 1: Fetch
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t.n++
	f.t.bytes += int64(e2e.BytesRead)
	f.t.e2e += e2e.DurationE2E()
}

func (f *fetchHook) times() fetchTimes {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

// consumeJava runs ConsumerPerformance (a consumer group, from the start)
// and takes its fetch rate, which leaves out the JVM's start and the
// group join.
func consumeJava(ctx context.Context, cp, addr, topic string, n int) (runResult, error) {
	cmd := java(ctx, cp, "org.apache.kafka.tools.ConsumerPerformance",
		"--bootstrap-server", addr, "--topic", topic, "--messages", strconv.Itoa(n))
	out, err := cmd.Output()
	if err != nil {
		return runResult{}, fmt.Errorf("ConsumerPerformance: %w\n%s", err, out)
	}
	stats, err := csvStats(string(out))
	if err != nil {
		return runResult{}, fmt.Errorf("ConsumerPerformance: %w", err)
	}
	records, rate := int(stats["data.consumed.in.nMsg"]), stats["fetch.nMsg.sec"]
	if records < n || rate <= 0 {
		return runResult{}, fmt.Errorf("ConsumerPerformance read %d of %d records:\n%s", records, n, out)
	}
	return runResult{records: records, elapsed: time.Duration(float64(records) / rate * float64(time.Second))}, nil
}

// csvStats reads ConsumerPerformance's summary: a header line of names and
// a line of values, both comma-separated.
func csvStats(out string) (map[string]float64, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 2; i >= 0; i-- {
		names, values := strings.Split(lines[i], ","), strings.Split(lines[i+1], ",")
		if !strings.Contains(lines[i], "fetch.nMsg.sec") || len(names) != len(values) {
			continue
		}
		stats := map[string]float64{}
		for j, name := range names {
			stats[strings.TrimSpace(name)], _ = strconv.ParseFloat(strings.TrimSpace(values[j]), 64)
		}
		return stats, nil
	}
	return nil, fmt.Errorf("no summary in:\n%s", out)
}

// consumeKcat times kcat reading topic from the start until it has all n
// records. It prints one byte a record rather than the empty
// format, so the run shows it read every record. It stops at the count
// (-c), as the franz-go and Java consumers do, not at the end of the
// partitions (-e): librdkafka learns of the end only from a fetch that
// finds no data, which every broker holds for fetch.wait.max.ms (500 ms),
// and that wait was two thirds of a 256 MiB run on both brokers
// (performance.md, "kcat: half a second at the end").
func consumeKcat(ctx context.Context, addr, topic string, n int) (runResult, error) {
	start := time.Now()
	out, err := exec.CommandContext(ctx, "kcat", "-b", addr, "-C", "-t", topic, "-o", "beginning", "-c", strconv.Itoa(n), "-q", "-f", ".").Output()
	elapsed := time.Since(start)
	if err != nil {
		return runResult{}, fmt.Errorf("kcat: %w", err)
	}
	if len(out) != n {
		return runResult{}, fmt.Errorf("kcat read %d of %d records", len(out), n)
	}
	return runResult{records: n, elapsed: elapsed}, nil
}

// cpuSeconds is the user and system CPU time of pid so far, all threads.
func cpuSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("broker CPU time: %w", err)
	}
	// the command name, in parentheses, may hold spaces: fields count
	// from the last ')', where field 3 (state) starts
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: %q", pid, raw)
	}
	// clock ticks: USER_HZ is 100 on every Linux ABI
	return (utime + stime) / 100, nil
}

// clientSeconds is the CPU time of this process (the franz-go clients run
// in it) and of the children it has waited for (Java's tools and kcat, run
// to their end), so that a run's difference is its client's: nothing else
// in this process works while a run goes, and neither broker is a child
// that ends.
func clientSeconds() float64 {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	sec := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return sec(self.Utime) + sec(self.Stime) + sec(children.Utime) + sec(children.Stime)
}

// fdatasyncMBps writes size bytes to a new file in dir, 1 MiB at a time
// with an fdatasync after each, as a log that syncs every append would,
// and returns the rate.
func fdatasyncMBps(dir string, size int) (float64, error) {
	f, err := os.CreateTemp(dir, "fdatasync-bench-")
	if err != nil {
		return 0, fmt.Errorf("disk bandwidth: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	start := time.Now()
	for written := 0; written < size; written += len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			return 0, fmt.Errorf("disk bandwidth: %w", err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, fmt.Errorf("disk bandwidth: %w", err)
		}
	}
	return float64(size) / 1e6 / time.Since(start).Seconds(), nil
}

// versusTables formats the medians per workload and broker, then the
// ratios kafgres/Kafka.
func versusTables(results map[string][]runResult, brokers []target, disk float64, rounds int, scale float64) string {
	var s strings.Builder
	fmt.Fprintf(&s, "\nkafgres vs Apache Kafka 4.4: medians of %d rounds, scale %g; fdatasync'd sequential writes %.0f MB/s\n\n", rounds, scale, disk)
	medianTable(&s, results, brokers, disk)
	fmt.Fprintf(&s, "\nratios kafgres / kafka (throughput > 1, latency and CPU < 1 favour kafgres): of the medians, and \"by round\" the median of each round's ratio\n\n")
	ratioTable(&s, results, brokers)
	fetchTable(&s, results, brokers)
	return s.String()
}

// fetchTable splits the franz-go consumer's runs into Fetch round trips
// (broker and transfer) and the client's time between them.
func fetchTable(out io.Writer, results map[string][]runResult, brokers []target) {
	var w workload
	for _, v := range versusWorkloads {
		if v.consume && v.tool == "franz-go" {
			w = v
		}
	}
	fmt.Fprintf(out, "\n%s: its Fetch round trips (write to whole response read) and the client between them, medians\n\n", w.name)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer tw.Flush()
	fmt.Fprintln(tw, "broker\tfetches\tMB a fetch\tround trip ms\tclient between ms\tround trips' share of the run %\t")
	for _, t := range brokers {
		rs := results[resultKey(w, t)]
		if len(rs) == 0 || rs[0].fetches.n == 0 {
			continue
		}
		between := func(r runResult) float64 {
			return (float64(r.elapsed-r.fetches.e2e) / 1e6) / float64(r.fetches.n)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.0f\t\n", t.name, medianOf(rs, func(r runResult) float64 { return float64(r.fetches.n) }),
			medianOf(rs, runResult.fetchMB), medianOf(rs, runResult.fetchMs), medianOf(rs, between), medianOf(rs, runResult.fetchShare))
	}
}

func medianTable(out io.Writer, results map[string][]runResult, brokers []target, disk float64) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer tw.Flush()
	fmt.Fprintln(tw, "workload\tbroker\tMB/s\trecords/s\tp50 ms\tp99 ms\tCPU s/GB\tclient s/GB\tCPU-bound MB/s\tof disk\t")
	for _, w := range versusWorkloads {
		for _, t := range brokers {
			rs := results[resultKey(w, t)]
			if len(rs) == 0 {
				continue
			}
			mbps := medianOf(rs, runResult.mbps)
			lat, ofDisk := "\t\t", "\t"
			if !w.consume {
				lat = fmt.Sprintf("%.1f\t%.1f\t", medianOf(rs, runResult.p50ms), medianOf(rs, runResult.p99ms))
				ofDisk = fmt.Sprintf("%.2f\t", mbps/disk)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.0f\t%s%.1f\t%.1f\t%.0f\t%s\n", w.name, t.name, mbps, medianOf(rs, runResult.rps), lat,
				medianOf(rs, runResult.cpuPerGB), medianOf(rs, runResult.clientPerGB), medianOf(rs, runResult.cpuBound), ofDisk)
		}
	}
}

// ratioTable compares kafgres with each other broker that ran a workload.
func ratioTable(out io.Writer, results map[string][]runResult, brokers []target) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	defer tw.Flush()
	fmt.Fprintln(tw, "workload\tvs\tMB/s\tby round\tp50\tp99\tby round\tCPU/GB\tCPU-bound\t")
	for _, w := range versusWorkloads {
		k := results[resultKey(w, brokers[0])]
		for _, t := range brokers[1:] {
			f := results[resultKey(w, t)]
			if len(k) == 0 || len(f) == 0 {
				continue
			}
			ratio := func(m func(runResult) float64) string {
				return fmt.Sprintf("%.2f", medianOf(k, m)/medianOf(f, m))
			}
			paired := func(m func(runResult) float64) string {
				return fmt.Sprintf("%.2f", pairedRatio(k, f, m))
			}
			lat := "-\t-\t-\t"
			if !w.consume {
				lat = ratio(runResult.p50ms) + "\t" + ratio(runResult.p99ms) + "\t" + paired(runResult.p99ms) + "\t"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s%s\t%s\t\n", w.name, t.name, ratio(runResult.mbps), paired(runResult.mbps), lat, ratio(runResult.cpuPerGB), paired(runResult.cpuBound))
		}
	}
}

// pairedRatio is the median over rounds of each round's ratio k/f. The two
// brokers of a round ran minutes apart, while this VM's speed can change
// twofold between rounds (docs/performance.md, "Full size on a slow
// day"): a ratio of medians can pair one broker's fast round with the
// other's slow one, a round's ratio cannot. k and f hold the same rounds
// in order (round appends to both or fails).
func pairedRatio(k, f []runResult, m func(runResult) float64) float64 {
	n := min(len(k), len(f))
	xs := make([]float64, n)
	for i := range n {
		xs[i] = m(k[i]) / m(f[i])
	}
	return median(xs)
}

func medianOf(rs []runResult, m func(runResult) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = m(r)
	}
	return median(xs)
}

// envFloat is $name as a positive number, or def.
func envFloat(b *testing.B, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		b.Fatalf("$%s = %q: want a positive number", name, v)
	}
	return f
}

// The ratio by round pairs each round's runs: a broker twice as fast in
// every round is 2× whatever the rounds' speeds, where the ratio of the
// medians is not.
func TestPairedRatio(t *testing.T) {
	run := func(mbps float64) runResult {
		return runResult{bytes: int64(mbps * 1e6), elapsed: time.Second}
	}
	k := []runResult{run(200), run(600), run(400)}
	f := []runResult{run(100), run(300), run(500)}
	if got := pairedRatio(k, f, runResult.mbps); got != 2 {
		t.Errorf("paired ratio %v, want 2 (rounds 2, 2, 0.8)", got)
	}
	if got := medianOf(k, runResult.mbps) / medianOf(f, runResult.mbps); got != 400.0/300 {
		t.Errorf("ratio of medians %v, want 400/300", got)
	}
	var s strings.Builder
	ratioTable(&s, map[string][]runResult{
		resultKey(versusWorkloads[0], target{name: "kafgres"}): k,
		resultKey(versusWorkloads[0], target{name: "kafka"}):   f,
	}, []target{{name: "kafgres"}, {name: "kafka"}})
	if !regexp.MustCompile(`kafka +1\.33 +2\.00 `).MatchString(s.String()) {
		t.Errorf("ratio table without both ratios side by side:\n%s", s.String())
	}
}
