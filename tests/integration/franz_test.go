package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

type produced struct {
	key, value []byte
	headers    []kgo.RecordHeader
}

type tpo struct {
	partition int32
	offset    int64
}

// produceAll sends n records with the given options (default kgo settings
// otherwise: idempotent, acks=all) and returns what each acknowledged
// (partition, offset) must hold.
func produceAll(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) map[tpo]produced {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	var (
		mu    sync.Mutex
		acked = make(map[tpo]produced, n)
		errs  []error
		wg    sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		value := make([]byte, 10+rng.IntN(400))
		for j := range value {
			value[j] = byte('a' + rng.IntN(4)) // compressible, so codecs matter
		}
		p := produced{key: []byte(fmt.Sprintf("key-%d", i%1000)), value: value}
		if i%10 == 0 {
			p.headers = []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}
		}
		if i%97 == 0 {
			p.key = nil // null keys too
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: p.key, Value: p.value, Headers: p.headers}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			acked[tpo{r.Partition, r.Offset}] = p
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d produce errors, first: %v", len(errs), errs[0])
	}
	if len(acked) != n {
		t.Fatalf("%d distinct acknowledged offsets for %d records", len(acked), n)
	}
	return acked
}

// consumeAll reads topic from the start until want records arrived and
// checks each is byte-identical to what was acknowledged at its offset.
func consumeAll(t *testing.T, addr, topic string, want map[tpo]produced) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seen := make(map[tpo]bool, len(want))
	for len(seen) < len(want) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(seen), len(want), err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			k := tpo{r.Partition, r.Offset}
			w, ok := want[k]
			switch {
			case !ok:
				t.Fatalf("unexpected record at %d/%d", r.Partition, r.Offset)
			case seen[k]:
				t.Fatalf("record at %d/%d read twice", r.Partition, r.Offset)
			case !bytes.Equal(w.key, r.Key) || (w.key == nil) != (r.Key == nil):
				t.Fatalf("key at %d/%d: got %q want %q", r.Partition, r.Offset, r.Key, w.key)
			case !bytes.Equal(w.value, r.Value):
				t.Fatalf("value at %d/%d differs", r.Partition, r.Offset)
			case len(w.headers) != len(r.Headers):
				t.Fatalf("headers at %d/%d: got %d want %d", r.Partition, r.Offset, len(r.Headers), len(w.headers))
			}
			for i := range w.headers {
				if w.headers[i].Key != r.Headers[i].Key || !bytes.Equal(w.headers[i].Value, r.Headers[i].Value) {
					t.Fatalf("header %d at %d/%d differs", i, r.Partition, r.Offset)
				}
			}
			seen[k] = true
		})
	}
}

// TestFranzGoCodecs: 100k records across 3 partitions per codec, with the
// default (idempotent) producer, read back byte for byte.
func TestFranzGoCodecs(t *testing.T) {
	c := harness.Start(t)
	codecs := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			c.CreateTopic(t, topic, 3)
			acked := produceAll(t, c.Addr, topic, 100_000, kgo.ProducerBatchCompression(codec))
			parts := map[int32]int{}
			for k := range acked {
				parts[k.partition]++
			}
			if len(parts) != 3 {
				t.Fatalf("records landed on %d partitions, want 3", len(parts))
			}
			consumeAll(t, c.Addr, topic, acked)
		})
	}
}
