package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
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

	// read consumes the whole partition from the start.
	read := func() (map[string][]int64, int, error) {
		consumer, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			return nil, 0, err
		}
		defer consumer.Close()
		got := map[string][]int64{}
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
				if want, ok := acked[r.Offset]; !ok || !bytes.Equal(want, r.Value) {
					bad = fmt.Errorf("record at %d is not the one acknowledged there", r.Offset)
				}
				got[string(r.Key)] = append(got[string(r.Key)], r.Offset)
				n++
				next = r.Offset + 1
			})
			if bad != nil {
				return nil, 0, bad
			}
		}
		return got, n, nil
	}

	harness.Eventually(t, 90*time.Second, func() error {
		got, n, err := read()
		if err != nil {
			return err
		}
		for k, off := range latest {
			if o := got[k]; len(o) == 0 || o[len(o)-1] != off {
				return fmt.Errorf("%s: offsets %v, want last %d", k, o, off)
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
