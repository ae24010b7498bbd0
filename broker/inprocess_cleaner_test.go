package broker

// In-process tests of the log cleaner (cleaner.go): a compacted topic with
// tiny segments, written by a real client with its default compression,
// is cleaned by a round of the cleaner and read back by that client: one
// record per key, the latest, at its original offset.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestInProcessCompaction(t *testing.T) {
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}, {"gzip", kgo.GzipCompression()}} {
		t.Run(codec.name, func(t *testing.T) {
			tb := startTestBroker(t, func(cfg *Config) { cfg.SegmentBytes = 1024; cfg.CleanerBackoff = time.Hour })
			c := tb.dial(t)
			tb.createTopic(t, c, "cmp", 1, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.ProducerBatchCompression(codec.codec))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()

			// 8 keys, 40 versions each, a few records per batch.
			type kv struct {
				offset int64
				value  string
			}
			latest := map[string]kv{}
			for v := range 40 {
				var recs []*kgo.Record
				for k := range 8 {
					recs = append(recs, &kgo.Record{Topic: "cmp", Key: fmt.Appendf(nil, "key-%d", k), Value: fmt.Appendf(nil, "value-%d-%d-%s", k, v, "padding to fill the segments faster")})
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					latest[string(r.Key)] = kv{r.Offset, string(r.Value)}
				}
			}
			p := tb.catalog.partition("cmp", 0)
			l := segmentLog(t, p)
			end := p.log.LogEndOffset()
			before := p.log.Size()
			if l.Segments() < 3 {
				t.Fatalf("%d segments, want several", l.Segments())
			}
			// The active segment holds the newest versions; what is below
			// it is cleaned.
			activeBase := l.ActiveBase()
			if n := tb.runCleaner(ctx, time.Now(), tb.brokerConfigs().CleanerSettings(), newThrottler()); n != 1 {
				t.Fatalf("cleaned %d partitions, want 1", n)
			}
			if p.log.Size() >= before || p.log.LogEndOffset() != end {
				t.Fatalf("after cleaning: %d bytes (from %d), log end %d (was %d)", p.log.Size(), before, p.log.LogEndOffset(), end)
			}

			// Below the active segment: at most one record per key, and it is
			// the latest below activeBase; the latest overall of every key is
			// there at its offset.
			consumer, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.ConsumeTopics("cmp"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer consumer.Close()
			got := map[string][]kv{}
			n := int64(0)
			for n < end {
				fs := consumer.PollFetches(ctx)
				if err := fs.Err(); err != nil {
					t.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					got[string(r.Key)] = append(got[string(r.Key)], kv{r.Offset, string(r.Value)})
					n = r.Offset + 1
				})
			}
			for key, want := range latest {
				rs := got[key]
				if len(rs) == 0 || rs[len(rs)-1] != want {
					t.Fatalf("%s: read %v, want last %v", key, rs, want)
				}
				below := 0
				for i, r := range rs {
					if i > 0 && r.offset <= rs[i-1].offset {
						t.Fatalf("%s: offsets out of order: %v", key, rs)
					}
					if r.offset < activeBase {
						below++
					}
				}
				if below > 1 {
					t.Fatalf("%s: %d records below the active segment (%d) after cleaning: %v", key, below, activeBase, rs)
				}
			}

			// A second round finds nothing dirty enough.
			if n := tb.runCleaner(ctx, time.Now(), tb.brokerConfigs().CleanerSettings(), newThrottler()); n != 0 {
				t.Fatalf("second round cleaned %d partitions", n)
			}

			// The idempotent producer goes on where it was: its sequence
			// state survived the clean.
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "cmp", Key: []byte("key-0"), Value: []byte("after")}).FirstErr(); err != nil {
				t.Fatalf("produce after cleaning: %v", err)
			}
		})
	}
}

// A partition whose clean fails is marked uncleanable, as Kafka marks it:
// the cleaner passes it by from then on, even once the cause is gone,
// instead of reading the same segments and failing again every round.
func TestInProcessCleanFailureMarksUncleanable(t *testing.T) {
	tb := startTestBroker(t, func(cfg *Config) { cfg.SegmentBytes = 1024; cfg.CleanerBackoff = time.Hour })
	c := tb.dial(t)
	tb.createTopic(t, c, "bad", 1, map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for v := range 20 {
		var recs []*kgo.Record
		for k := range 4 {
			recs = append(recs, &kgo.Record{Topic: "bad", Key: fmt.Appendf(nil, "key-%d", k), Value: fmt.Appendf(nil, "value-%d-%d with some padding", k, v)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p := tb.catalog.partition("bad", 0)
	if segmentLog(t, p).Segments() < 3 {
		t.Fatal("want several segments")
	}

	// The first batch's records (after its 61-byte header) become bytes no
	// record parses from.
	name := filepath.Join(p.dir, fmt.Sprintf("%020d.log", 0))
	good, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	for i := 61; i < 61+16; i++ {
		bad[i] = 0xff
	}
	if err := os.WriteFile(name, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	cs := tb.brokerConfigs().CleanerSettings()
	if n := tb.runCleaner(ctx, time.Now(), cs, newThrottler()); n != 0 {
		t.Fatalf("cleaned %d partitions from a corrupt segment", n)
	}
	if !p.uncleanable.Load() {
		t.Fatal("a failed clean left the partition cleanable")
	}

	// Repaired, it would clean; marked, it is not tried.
	if err := os.WriteFile(name, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := tb.runCleaner(ctx, time.Now(), cs, newThrottler()); n != 0 {
		t.Fatalf("an uncleanable partition was cleaned (%d)", n)
	}

	// Unmarked, as after a restart, the repaired partition cleans: the
	// mark held it back, not the file.
	p.uncleanable.Store(false)
	if n := tb.runCleaner(ctx, time.Now(), cs, newThrottler()); n != 1 {
		t.Fatalf("the repaired partition, no longer marked, cleaned %d partitions, want 1", n)
	}
}
