package main

// The compaction scenario (issue #15): the same keyed records go to a
// cleanup.policy=compact topic on both brokers, their log cleaners (which
// the runner has look for work every 500 ms) clean it, and what survives
// is read from offset 0. Segments roll by segment.ms, which both brokers
// measure from the segment's first batch, so sends 300 ms apart each
// start a segment and the surviving records do not depend on timing.

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/conformance/clients/protocol"
)

// compactionStep is the pause between two sends that must land in
// different segments: three times the topic's segment.ms.
const compactionStep = 300 * time.Millisecond

// keyed is one record of the scenario: value nil is a tombstone.
type keyed struct{ key, value string }

// compactedRecord is what a read of the compacted log shows of a record.
type compactedRecord struct {
	offset     int64
	key, value any
}

func compaction(ctx context.Context, r *runner) error {
	topic := r.Topic(0) + "-c"
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	sp := func(s string) *string { return &s }
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy":            sp("compact"),
		"segment.ms":                sp("100"),
		"min.cleanable.dirty.ratio": sp("0.01"),
		"delete.retention.ms":       sp("0"),
		"min.compaction.lag.ms":     sp("0"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}

	send := func(recs ...keyed) error {
		time.Sleep(compactionStep)
		var krs []*kgo.Record
		for _, k := range recs {
			kr := &kgo.Record{Topic: topic, Key: []byte(k.key)}
			if k.value != "" {
				kr.Value = []byte(k.value)
			}
			krs = append(krs, kr)
		}
		return produce(ctx, cl, krs...)
	}
	produced := 0
	for _, step := range [][]keyed{
		{{"k0", "a0"}, {"k1", "b0"}, {"k2", "c0"}},
		{{"k0", "a1"}, {"k1", "b1"}},
		{{"k0", "a2"}, {"k2", "c1"}},
		{{"k1", ""}},
	} {
		if err := send(step...); err != nil {
			return err
		}
		produced += len(step)
	}
	// A keyless record on a compacted topic: refused (INVALID_RECORD).
	// Its own client, so that the failed batch leaves the others alone.
	nk, err := r.client()
	if err != nil {
		return err
	}
	err = produce(ctx, nk, &kgo.Record{Topic: topic, Value: []byte("no key")})
	nk.Close()
	r.emit(map[string]any{"op": "produce_null_key", "error": errOrNil(err)})
	if err := send(keyed{"k2", "c2"}); err != nil {
		return err
	}
	produced++

	phase1, err := r.awaitCleaned(ctx, cl, topic, produced)
	if err != nil {
		return err
	}
	if err := r.emitCompacted(ctx, cl, topic, 1, phase1); err != nil {
		return err
	}

	// The second clean removes the tombstone: the first one gave it a
	// delete horizon of that clean's time plus delete.retention.ms (0).
	if err := send(keyed{"k0", "a3"}); err != nil {
		return err
	}
	if err := send(keyed{"k2", "c3"}); err != nil {
		return err
	}
	phase2, err := r.awaitCleaned(ctx, cl, topic, len(phase1)+2)
	if err != nil {
		return err
	}
	return r.emitCompacted(ctx, cl, topic, 2, phase2)
}

func errOrNil(err error) any {
	if err == nil {
		return nil
	}
	return errName(err)
}

// awaitCleaned reads the log from offset 0 until a clean shows (fewer
// than before records) and nothing changed for 2 s (four rounds of the
// cleaner), or 12 s passed; it returns the last read.
func (r *runner) awaitCleaned(ctx context.Context, cl *kgo.Client, topic string, before int) ([]compactedRecord, error) {
	deadline := time.Now().Add(12 * time.Second)
	var last []compactedRecord
	var since time.Time
	for {
		recs, err := r.readCompacted(ctx, cl, topic)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if since.IsZero() || !reflect.DeepEqual(recs, last) {
			last, since = recs, now
		} else if len(recs) < before && now.Sub(since) >= 2*time.Second {
			return recs, nil
		}
		if now.After(deadline) {
			return last, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// readCompacted reads every record from offset 0 to the high watermark.
func (r *runner) readCompacted(ctx context.Context, cl *kgo.Client, topic string) ([]compactedRecord, error) {
	end, err := listOffset(ctx, cl, topic, 0, -1)
	if err != nil {
		return nil, err
	}
	c, err := r.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	recs := []compactedRecord{}
	for len(recs) == 0 || recs[len(recs)-1].offset < end.Offset-1 {
		fetches := c.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s up to offset %d: %w", topic, end.Offset, ctx.Err())
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("fetching %s: %w", topic, errs[0].Err)
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			recs = append(recs, compactedRecord{rec.Offset, protocol.Printable(rec.Key), protocol.Printable(rec.Value)})
		})
	}
	return recs, nil
}

// emitCompacted prints a read of the compacted log and its earliest and
// latest offsets.
func (r *runner) emitCompacted(ctx context.Context, cl *kgo.Client, topic string, phase int, recs []compactedRecord) error {
	for _, rec := range recs {
		r.emit(map[string]any{"phase": phase, "offset": rec.offset, "key": rec.key, "value": rec.value})
	}
	for _, q := range []struct {
		name string
		ts   int64
	}{{"earliest", -2}, {"latest", -1}} {
		o, err := listOffset(ctx, cl, topic, 0, q.ts)
		if err != nil {
			return err
		}
		r.emit(map[string]any{"phase": phase, "query": q.name, "offset": o.Offset})
	}
	return nil
}
