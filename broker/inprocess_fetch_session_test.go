package broker

// In-process tests of incremental fetch sessions (KIP-227, fetch_sessions.go).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetch is a fetch of session id at epoch, of the given partitions
// of topic (from offset 0), forgetting forget.
func sessionFetch(version int16, id, epoch int32, topic string, topicID [16]byte, partitions, forget []int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.SessionID, req.SessionEpoch = id, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, 1<<20
	if len(partitions) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		for _, p := range partitions {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = topic, topicID, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// answered lists the partitions a fetch answered, with their record bytes.
func answered(t *testing.T, resp *kmsg.FetchResponse) map[int32]int {
	t.Helper()
	out := map[int32]int{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
			out[p.Partition] = len(p.RecordBatches)
		}
	}
	return out
}

func partitionsOf(m map[int32]int) []int32 {
	var out []int32
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestInProcessFetchSession: a full fetch at epoch 0 opens a session; an
// incremental fetch answers only the partitions that changed; forgotten
// partitions leave it; wrong epochs and ids, and switching to topic ids,
// are refused as Kafka refuses them; epoch -1 closes it.
func TestInProcessFetchSession(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "sess", 3, nil)
	id := tb.metadata(c, "sess").Topics[0].TopicID
	tb.produce(t, c, "sess", 1, plainSpec([]rec{{value: []byte("one")}}).build())

	const v = 13
	full := c.do(sessionFetch(v, 0, 0, "sess", id, []int32{0, 1, 2}, nil)).(*kmsg.FetchResponse)
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("full fetch at epoch 0: error %d, session %d; want a session", full.ErrorCode, full.SessionID)
	}
	if got := partitionsOf(answered(t, full)); len(got) != 3 {
		t.Fatalf("full fetch answered partitions %v, want all three", got)
	}
	sid := full.SessionID

	// Partition 1's records were read: the fetch moves it on, and with
	// nothing new anywhere the answer is empty.
	next := sessionFetch(v, sid, 1, "sess", id, []int32{1}, nil)
	next.Topics[0].Partitions[0].FetchOffset = 1
	inc := c.do(next).(*kmsg.FetchResponse)
	if inc.ErrorCode != 0 || inc.SessionID != sid || len(inc.Topics) != 0 {
		t.Fatalf("incremental fetch with nothing new: error %d, session %d, %+v; want none", inc.ErrorCode, inc.SessionID, inc.Topics)
	}

	// A record on partition 2: only it is answered, from the offset the
	// session holds for it.
	tb.produce(t, c, "sess", 2, plainSpec([]rec{{value: []byte("two")}}).build())
	inc = c.do(sessionFetch(v, sid, 2, "sess", id, nil, nil)).(*kmsg.FetchResponse)
	if got := answered(t, inc); len(got) != 1 || got[2] == 0 {
		t.Fatalf("incremental fetch after a produce to 2 answered %v, want partition 2 with records", got)
	}

	// The same epoch again (a duplicate), an epoch ahead, an unknown
	// session, and a switch from topic ids to names.
	for _, tc := range []struct {
		version      int16
		id, epoch    int32
		want         *kerr.Error
		wantNoneLeft bool
	}{
		{v, sid, 2, kerr.InvalidFetchSessionEpoch, false},
		{v, sid, 9, kerr.InvalidFetchSessionEpoch, false},
		{v, sid + 1, 3, kerr.FetchSessionIDNotFound, false},
		{12, sid, 3, kerr.FetchSessionTopicIDError, false},
	} {
		resp := c.do(sessionFetch(tc.version, tc.id, tc.epoch, "sess", id, nil, nil)).(*kmsg.FetchResponse)
		if resp.ErrorCode != tc.want.Code || len(resp.Topics) != 0 {
			t.Fatalf("v%d session %d epoch %d: error %d with %d topics, want %s", tc.version, tc.id, tc.epoch, resp.ErrorCode, len(resp.Topics), tc.want)
		}
	}

	// Forgetting partition 2 keeps a later record there out.
	upd := sessionFetch(v, sid, 3, "sess", id, nil, []int32{2})
	if got := answered(t, c.do(upd).(*kmsg.FetchResponse)); len(got) != 0 {
		t.Fatalf("incremental fetch forgetting 2 answered %v, want nothing", got)
	}
	tb.produce(t, c, "sess", 2, plainSpec([]rec{{value: []byte("three")}}).build())
	tb.produce(t, c, "sess", 0, plainSpec([]rec{{value: []byte("zero")}}).build())
	if got := answered(t, c.do(sessionFetch(v, sid, 4, "sess", id, nil, nil)).(*kmsg.FetchResponse)); len(got) != 1 || got[0] == 0 {
		t.Fatalf("after forgetting 2, produces to 0 and 2 answered %v, want only 0", got)
	}

	// Epoch -1 closes the session and answers in full without one.
	final := c.do(sessionFetch(v, sid, -1, "sess", id, []int32{0}, nil)).(*kmsg.FetchResponse)
	if final.ErrorCode != 0 || final.SessionID != 0 || len(answered(t, final)) != 1 {
		t.Fatalf("fetch at epoch -1: error %d, session %d, %d partitions", final.ErrorCode, final.SessionID, len(answered(t, final)))
	}
	if resp := c.do(sessionFetch(v, sid, 5, "sess", id, nil, nil)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("fetch of a closed session: error %d, want FETCH_SESSION_ID_NOT_FOUND", resp.ErrorCode)
	}
}

// TestInProcessFetchSessionErrorsAnsweredAgain: a partition with an error
// is in every incremental answer while the error lasts.
func TestInProcessFetchSessionErrorsAnsweredAgain(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "errs", 1, nil)
	id := tb.metadata(c, "errs").Topics[0].TopicID
	req := sessionFetch(13, 0, 0, "errs", id, []int32{0}, nil)
	req.Topics[0].Partitions[0].FetchOffset = 5 // past the end
	full := c.do(req).(*kmsg.FetchResponse)
	for epoch := int32(1); epoch <= 2; epoch++ {
		resp := c.do(sessionFetch(13, full.SessionID, epoch, "errs", id, nil, nil)).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("epoch %d: %+v, want partition 0 with OFFSET_OUT_OF_RANGE", epoch, resp.Topics)
		}
	}
}

// TestFetchSessionEviction: with every slot taken, a new session evicts
// one unused for two minutes, else the smallest one older than that if
// the new one is bigger; otherwise the fetch gets no session.
func TestFetchSessionEviction(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := newFetchSessions(2, func() time.Time { return now })
	open := func(partitions int32) int32 {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(13)
		req.SessionEpoch = 0
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchRequestTopic()
		rtr := kmsg.NewFetchResponseTopic()
		for p := range partitions {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = p
			rtr.Partitions = append(rtr.Partitions, sp)
		}
		req.Topics, resp.Topics = []kmsg.FetchRequestTopic{rt}, []kmsg.FetchResponseTopic{rtr}
		fc, err := s.begin(req, false)
		if err != nil {
			t.Fatal(err)
		}
		return s.finish(fc, resp, false).SessionID
	}
	small, big := open(1), open(3)
	if small == 0 || big == 0 {
		t.Fatalf("sessions %d, %d: want two", small, big)
	}
	if id := open(5); id != 0 {
		t.Fatalf("third session while both are new: %d, want none", id)
	}
	now = now.Add(fetchSessionEviction + time.Second)
	s.sessions[big].used = now // in use: only old, not stale
	s.sessions[small].used = now
	if id := open(1); id != 0 {
		t.Fatalf("a session no bigger than the smallest old one got a slot (%d); Kafka's ids make the old one worth more", id)
	}
	if id := open(2); id == 0 || s.sessions[small] != nil {
		t.Fatalf("a session bigger than the smallest old one: got %d, smallest still there: %v; want it evicted", id, s.sessions[small] != nil)
	}
	now = now.Add(3 * fetchSessionEviction)
	s.sessions[big].used = now
	if id := open(1); id == 0 {
		t.Fatal("no session although one was unused for longer than the eviction time")
	}
	if s.sessions[big] == nil {
		t.Fatal("the stale session should have gone, not the one in use")
	}
}

// TestInProcessFetchSessionFranzGo: franz-go's consumer, which uses fetch
// sessions, reads every record of three partitions produced in rounds
// while it polls, through one session that it moved on by incremental
// fetches.
func TestInProcessFetchSessionFranzGo(t *testing.T) {
	tb := startTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tb.dial(t)
	tb.createTopic(t, c, "fs", 3, nil)
	producer, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.DefaultProduceTopic("fs"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	consumer, err := kgo.NewClient(kgo.SeedBrokers(tb.addr), kgo.ConsumeTopics("fs"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()

	seen := map[string]bool{}
	for round := range 5 {
		for i := range 30 {
			if err := producer.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("r%d-%d", round, i))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		for len(seen) < 30*(round+1) {
			fs := consumer.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if seen[string(r.Value)] {
					t.Fatalf("%s read twice", r.Value)
				}
				seen[string(r.Value)] = true
			})
		}
	}
	s := tb.fetchSessions
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) != 1 {
		t.Fatalf("%d fetch sessions, want the consumer's one", len(s.sessions))
	}
	for _, sess := range s.sessions {
		if len(sess.parts) != 3 || sess.epoch < 5 {
			t.Fatalf("session of %d partitions at epoch %d; want 3 partitions moved on by incremental fetches", len(sess.parts), sess.epoch)
		}
	}
}

// TestFetchSessionBounds: a session may not grow past its partition bound,
// nor all sessions together past theirs; the fetch that would is refused
// (a new session is not created, a growing one is closed with
// FETCH_SESSION_ID_NOT_FOUND) and the cache's count stays exact.
func TestFetchSessionBounds(t *testing.T) {
	s := newFetchSessions(10, time.Now)
	s.maxPartitions, s.maxCached = 4, 6
	fetch := func(id, epoch int32, partitions ...int32) (*fetchContext, error) {
		req := sessionFetch(13, id, epoch, "b", [16]byte{1}, partitions, nil)
		return s.begin(req, false)
	}
	open := func(partitions ...int32) int32 {
		fc, err := fetch(0, 0, partitions...)
		if err != nil {
			t.Fatal(err)
		}
		resp := fc.req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		for _, p := range partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = p
			rt.Partitions = append(rt.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, rt)
		return s.finish(fc, resp, false).SessionID
	}
	if id := open(0, 1, 2, 3, 4); id != 0 {
		t.Fatalf("a session of 5 partitions with a bound of 4: %d", id)
	}
	a := open(0, 1, 2)
	b := open(0, 1)
	if a == 0 || b == 0 || s.cached != 5 {
		t.Fatalf("sessions %d and %d, %d partitions cached; want two and 5", a, b, s.cached)
	}
	if id := open(0, 1); id != 0 {
		t.Fatalf("a session past the cache's bound of 6: %d", id)
	}
	if _, err := fetch(a, 1, 3, 4); !errors.Is(err, kerr.FetchSessionIDNotFound) {
		t.Fatalf("growing a session past the cache's bound: %v, want FETCH_SESSION_ID_NOT_FOUND", err)
	}
	if s.cached != 2 || s.sessions[a] != nil {
		t.Fatalf("after closing the grown session: %d cached, session still there: %v", s.cached, s.sessions[a] != nil)
	}
	if _, err := fetch(b, 1, 2); err != nil || s.cached != 3 {
		t.Fatalf("growing within the bounds: %v, %d cached", err, s.cached)
	}
}
