package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestCompactionFranzGo (issue #15): many versions of a few keys go to a
// cleanup.policy=compact topic with 1 MiB segments; the broker's log
// cleaner compacts the sealed segments in the background, and a consumer
// reading from the start then finds, for every key, its latest value at
// the offset it was acknowledged with, and far fewer records than were
// written.
func TestCompactionFranzGo(t *testing.T) {
	c := harness.Start(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sp := func(s string) *string { return &s }
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: sp("200")}}); err != nil {
		t.Logf("set log.cleaner.backoff.ms: %v (the default 15 s applies)", err)
	}
	const topic = "compacted"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy":            sp("compact"),
		"segment.bytes":             sp("1048576"),
		"min.cleanable.dirty.ratio": sp("0.1"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}

	// 10 keys, 400 versions of 1 KiB each: 4 MiB, four sealed segments.
	const keys, versions = 10, 400
	rng := rand.New(rand.NewPCG(15, 15))
	acked := map[int64][]byte{} // offset -> value
	latest := map[string]int64{}
	for v := range versions {
		var recs []*kgo.Record
		for k := range keys {
			// Random bytes: the segments must fill although the batches
			// are compressed.
			val := make([]byte, 1024)
			for i := range val {
				val[i] = byte(rng.IntN(256))
			}
			copy(val, fmt.Sprintf("key-%d version %d ", k, v))
			recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", k), Value: val})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			acked[r.Offset] = r.Value
			latest[string(r.Key)] = r.Offset
		}
	}
	end := int64(keys * versions)

	read := func() (map[string]int64, int, error) { return readCompacted(ctx, c.Addr, topic, end, acked) }

	harness.Eventually(t, 90*time.Second, func() error {
		last, n, err := read()
		if err != nil {
			return err
		}
		for k, off := range latest {
			if got, ok := last[k]; !ok || got != off {
				return fmt.Errorf("%s: last read at %d (found: %v), want %d", k, got, ok, off)
			}
		}
		// What is left uncleaned is the active segment (under 1 MiB:
		// about 1000 records) plus one record per key below it.
		if n > 1100+keys {
			return fmt.Errorf("%d of %d records still there; broker log:\n%s", n, end, c.LogTail())
		}
		return nil
	})
}

// TestCompactionKillDuringClean (issue #15: "a crash mid-clean loses
// nothing"): a compacted topic gets about six 1 MiB segments of keyed
// records while the cleaner's I/O is held to 1 MiB/s, so that one clean
// takes seconds. The broker is killed with SIGKILL twice while the cleaner
// is writing a cleaned segment: once during the first group (a
// `.cleaned` file based at 0 — only the old segments are whole), once
// during a later group (the groups before it already swapped in, the rest
// not). Each time the supervisor restarts it; the restarted log must
// discard the incomplete cleaned files, keep every offset (the next
// produce gets exactly the old log end) and open without repairs. With
// the rate lifted the cleaner then finishes, and a consumer from offset 0
// finds every record it reads to be the one acknowledged at that offset,
// offsets strictly increasing, every key's latest acknowledged value at
// its acknowledged offset, and most of the old versions gone.
func TestCompactionKillDuringClean(t *testing.T) {
	c := harness.Start(t, "kafgres.log_cleaner_backoff = 200")
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RetryTimeout(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := newClient()
	defer func() { cl.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sp := func(s string) *string { return &s }
	setCleanerRate(t, ctx, cl, "1048576")
	const topic = "compacted-crash"
	createTopicWith(t, ctx, cl, topic, map[string]*string{
		"cleanup.policy":            sp("compact"),
		"segment.bytes":             sp("1048576"),
		"min.cleanable.dirty.ratio": sp("0.01"),
	})
	dir := filepath.Join(c.DataDir(), topic+"-0")

	acked := map[int64][]byte{} // offset -> value
	latest := map[string]int64{}
	end := int64(0)
	rng := rand.New(rand.NewPCG(15, 9))
	produce := func(recs []*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			acked[r.Offset] = r.Value
			latest[string(r.Key)] = r.Offset
			if r.Offset < end {
				t.Fatalf("record acknowledged at %d, below the log end %d it was produced after", r.Offset, end)
			}
			end = r.Offset + 1
		}
	}
	record := func(k, v int) *kgo.Record {
		// Random bytes: 1 KiB a record, so the segments fill.
		val := make([]byte, 1024)
		for i := range val {
			val[i] = byte(rng.IntN(256))
		}
		copy(val, fmt.Sprintf("key-%d version %d ", k, v))
		return &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%d", k), Value: val}
	}
	// 50 keys, 120 versions: about 6 MiB, five sealed segments.
	const keys, versions = 50, 120
	for v := range versions {
		recs := make([]*kgo.Record, 0, keys)
		for k := range keys {
			recs = append(recs, record(k, v))
		}
		produce(recs)
	}

	// cleanedBase is the base offset of the cleaned segment being written
	// (a *.log.cleaned or *.swap file), or -1.
	cleanedBase := func() int64 {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			name := e.Name()
			if strings.HasSuffix(name, ".log.cleaned") || strings.HasSuffix(name, ".log.swap") {
				if base, err := strconv.ParseInt(name[:strings.IndexByte(name, '.')], 10, 64); err == nil {
					return base
				}
			}
		}
		return -1
	}
	// Kill while the first group is being written, then while a later one
	// is (the first has been swapped in by then).
	for i, wantLater := range []bool{false, true} {
		var base int64
		err := harness.Poll(60*time.Second, func() error {
			if base = cleanedBase(); base < 0 || (wantLater && base == 0) {
				return fmt.Errorf("no cleaned segment being written (later group: %v)", wantLater)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("kill %d: %v\n%s", i+1, err, c.LogTail())
		}
		old := c.KillBroker(t)
		t.Logf("kill %d: broker %d killed while writing the cleaned segment based at %d", i+1, old, base)
		c.WaitBroker(t, old, 30*time.Second)
		cl.Close()
		cl = newClient()
		// Offsets never go backwards: the next record gets the old log end.
		before := end
		produce([]*kgo.Record{record(0, versions+i)})
		if latest["key-0"] != before {
			t.Fatalf("after restart %d the next record got offset %d, want the log end %d", i+1, latest["key-0"], before)
		}
	}
	setCleanerRate(t, ctx, cl, "1073741824")
	read := func() (map[string]int64, int, error) { return readCompacted(ctx, c.Addr, topic, end, acked) }
	harness.Eventually(t, 90*time.Second, func() error {
		last, n, err := read()
		if err != nil {
			return err
		}
		for k, off := range latest {
			if last[k] != off {
				return fmt.Errorf("%s: last read at %d, acknowledged last at %d", k, last[k], off)
			}
		}
		// Left: the active segment (under 1 MiB: about 1000 records,
		// with the two produced after the restarts) and one record per
		// key below it.
		if n > 1000+2+keys {
			return fmt.Errorf("%d of %d records still there", n, end)
		}
		if b := cleanedBase(); b >= 0 {
			return fmt.Errorf("a cleaned segment based at %d is still being written", b)
		}
		return nil
	})
	lo, err := kadm.NewClient(cl).ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	hi, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := lo.Lookup(topic, 0); s.Offset != 0 {
		t.Errorf("log start offset %d after cleaning, want 0", s.Offset)
	}
	if e, _ := hi.Lookup(topic, 0); e.Offset != end {
		t.Errorf("log end offset %d, want %d", e.Offset, end)
	}
	// Each restart found the cleaned segment it was killed writing and
	// discarded it (or, killed between renames, completed its swap), and
	// found every segment whole: recovery repaired nothing (a clean only
	// ever replaces sealed segments, and the acknowledged records were
	// durable before the kills).
	logText, err := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	finished := 0
	for _, line := range strings.Split(string(logText), "\n") {
		if strings.Contains(line, dir) && (strings.Contains(line, "discarding incomplete cleaned segment") ||
			strings.Contains(line, "completing swap of cleaned segment")) {
			finished++
		}
		if strings.Contains(line, dir) && (strings.Contains(line, "sealed segment does not end where the next begins") ||
			strings.Contains(line, "truncating torn or corrupt segment tail") ||
			strings.Contains(line, "removing index without segment")) {
			t.Errorf("recovery repaired the log: %s", line)
		}
	}
	if finished < 2 {
		t.Errorf("the restarts discarded or completed %d cleaned segments, want one each (2)", finished)
	}
}

// readCompacted consumes topic's partition from the start up to end and
// checks each record against the value acknowledged at its offset, and
// that offsets only go up; it returns the offset each key was last read
// at and how many records were read.
func readCompacted(ctx context.Context, addr, topic string, end int64, acked map[int64][]byte) (map[string]int64, int, error) {
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, 0, err
	}
	defer consumer.Close()
	last := map[string]int64{}
	n, next := 0, int64(0)
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	for next < end {
		fs := consumer.PollFetches(rctx)
		if err := fs.Err(); err != nil {
			return nil, 0, err
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			switch want, ok := acked[r.Offset]; {
			case r.Offset < next:
				bad = fmt.Errorf("offset %d read after %d", r.Offset, next-1)
			case !ok || !bytes.Equal(want, r.Value):
				bad = fmt.Errorf("record at %d is not the one acknowledged there", r.Offset)
			}
			last[string(r.Key)] = r.Offset
			n++
			next = r.Offset + 1
		})
		if bad != nil {
			return nil, 0, bad
		}
	}
	return last, n, nil
}

// createTopicWith creates topic, one partition, with configs, and fails
// the test if Kafka's answer is an error.
func createTopicWith(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, configs map[string]*string) {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// setCleanerRate sets log.cleaner.io.max.bytes.per.second, which the
// cleaner takes at its next pass.
func setCleanerRate(t *testing.T, ctx context.Context, cl *kgo.Client, rate string) {
	t.Helper()
	rs, err := kadm.NewClient(cl).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.io.max.bytes.per.second", Value: &rate}})
	if err == nil && len(rs) > 0 {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatalf("set log.cleaner.io.max.bytes.per.second=%s: %v", rate, err)
	}
}
