package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/tests/harness"
)

func cachedPages(t *testing.T, path string, from, to int64) int {
	t.Helper()
	n, err := segment.CachedPages(path, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLogPageCacheTail: with kafgres.log_cached_tail = 4MB the broker
// leaves only the newest 4 MB of a partition's acknowledged log in
// the page cache, and a consumer reading from the start gets every record
// back while the pages it passed are dropped behind it
// (docs/architecture.md, "The log's page cache").
func TestLogPageCacheTail(t *testing.T) {
	const topic, mib = "cached-tail", 1 << 20
	c := harness.Start(t, "kafgres.log_cached_tail = '4MB'")
	if ok, err := segment.DropsCache(c.Dir); err != nil || !ok {
		t.Skipf("%s does not drop cached pages (%v)", c.Dir, err)
	}
	c.CreateTopic(t, topic, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const records = 16 * 1024 // 16 MiB of 1 KiB values
	value := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%07d,", i)), 128) }
	for i := 0; i < records; i += 1024 {
		var rs []*kgo.Record
		for j := i; j < i+1024; j++ {
			rs = append(rs, &kgo.Record{Value: value(j)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	path := filepath.Join(c.DataDir(), topic+"-0", fmt.Sprintf("%020d.log", 0))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The file holds zeros written ahead past the records (at most 64
	// KiB); the last drop ends 4 MiB before the records' end, and the
	// folio across that end may wait for the next.
	cold := fi.Size() - 64<<10 - 4*mib - 2*mib
	if n := cachedPages(t, path, 0, cold); n != 0 {
		t.Fatalf("%d pages of the first %d bytes still cached after they were synced", n, cold)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {0: kgo.NewOffset().AtStart()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for next := 0; next < records; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", next, records, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(next) || !bytes.Equal(r.Value, value(next)) {
				t.Fatalf("record at %d, want %d with its value", r.Offset, next)
			}
			next++
		})
	}
	if n := cachedPages(t, path, 2*mib, 4*mib); n != 0 {
		t.Fatalf("%d pages of [2 MiB, 4 MiB) cached after the consumer passed them", n)
	}
}
