package broker

// In-process tests of reading the log: Fetch's long poll and ListOffsets.

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// watching is how many fetches wait for p to grow.
func (p *partition) watching() int {
	p.watchMu.Lock()
	defer p.watchMu.Unlock()
	return len(p.watchers)
}

// TestInProcessFetchLongPollWokenByAppend: a fetch at the log end with a
// long MaxWait returns as soon as a record is appended, not at its
// deadline; with nothing to return it waits out MaxWait; past the log end
// it is OFFSET_OUT_OF_RANGE.
func TestInProcessFetchLongPollWokenByAppend(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "poll", 1, nil)

	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 10_000, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "poll", tb.metadata(c, "poll").Topics[0].TopicID // v13+ names topics by id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	tb.latest(req)

	// The fetch goes on its own connection: a connection's requests are
	// answered in order, so the produce could not pass it on one.
	poller := tb.dial(t)
	type fetched struct {
		resp kmsg.Response
		took time.Duration
		err  error
	}
	done := make(chan fetched, 1)
	start := time.Now()
	go func() {
		resp, err := poller.roundTrip(req)
		done <- fetched{resp, time.Since(start), err}
	}()
	part := tb.catalog.partition("poll", 0)
	eventually(t, 10*time.Second, "the fetch waiting for partition 0 to grow", func() bool { return part.watching() == 1 })
	tb.produce(t, c, "poll", 0, plainSpec([]rec{{value: []byte("wake")}}).build())
	f := <-done
	if f.err != nil {
		t.Fatal(f.err)
	}
	p := f.resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch returned error %d with %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if f.took > 5*time.Second {
		t.Fatalf("long poll returned after %v; want shortly after the append", f.took)
	}

	// MaxWait with nothing to return: the deadline is honoured.
	req.MaxWaitMillis = 300
	req.Topics[0].Partitions[0].FetchOffset = 1
	start = time.Now()
	c.do(req)
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("empty fetch returned after %v, before MaxWait", took)
	}

	// Past the log end: OFFSET_OUT_OF_RANGE.
	req.Topics[0].Partitions[0].FetchOffset = 99
	resp := c.do(req).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past end: code %d", code)
	}
}

// TestInProcessListOffsets: earliest, latest, the first offset at or after
// a timestamp (none after every record) and the max timestamp's offset,
// for records produced out of timestamp order.
func TestInProcessListOffsets(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "times", 1, nil)
	base := time.UnixMilli(1_700_000_000_000)
	stamps := []time.Duration{0, 10, 5, 30, 20} // ms after base; 30 is the max
	for _, d := range stamps {
		s := plainSpec([]rec{{value: []byte("x")}})
		s.firstTimestamp = base.Add(d * time.Millisecond).UnixMilli()
		s.maxTimestamp = s.firstTimestamp
		tb.produce(t, c, "times", 0, s.build())
	}
	check := func(name string, ts, want int64) {
		t.Helper()
		p := tb.listOffset(c, "times", ts)
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Offset != want {
			t.Fatalf("%s: offset %d, want %d", name, p.Offset, want)
		}
	}
	check("earliest", -2, 0)
	check("latest", -1, 5)
	check("first at or after +6ms", base.Add(6*time.Millisecond).UnixMilli(), 1)
	check("first at or after +25ms", base.Add(25*time.Millisecond).UnixMilli(), 3)
	// No record: offset -1, which admin clients (kadm) show as the end.
	check("after every record", base.Add(time.Hour).UnixMilli(), -1)

	p := tb.listOffset(c, "times", -3)
	if p.Offset != 3 || p.Timestamp != base.Add(30*time.Millisecond).UnixMilli() {
		t.Fatalf("max timestamp: offset %d ts %d", p.Offset, p.Timestamp)
	}
}
