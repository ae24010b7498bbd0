package broker

// Incremental fetch sessions (KIP-227), as Kafka's FetchSessionCache and
// FetchManager keep them:
//
//   - a full fetch with epoch 0 creates a session of its partitions if the
//     cache has a slot (or can evict one) and answers its id; epoch -1 asks
//     for none; either closes the session it names
//   - an incremental fetch (epoch > 0) names its session and the epoch the
//     session expects (each fetch moves it on by one, wrapping to 1);
//     FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH otherwise,
//     and FETCH_SESSION_TOPIC_ID_ERROR when it switches between topic
//     names and topic ids (v13). Its partitions add to or update the
//     session's, ForgottenTopics leave it; a session left empty closes and
//     the fetch is answered without one
//   - an incremental answer holds only the partitions with records, an
//     error, or a high watermark, last stable offset or log start offset
//     other than the one last sent; partitions that answered move to the
//     end of the session's order, so a response size limit serves the
//     others next time
//   - max.incremental.fetch.session.cache.slots sessions at most (Kafka's
//     1000); a new session may evict one unused for 2 minutes, else the
//     smallest one older than that (a follower's only for a follower)
//
// A session is not bound to a connection or principal, as in Kafka; every
// fetch still authorizes every partition it reads.

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// defaultFetchSessionSlots is Kafka's max.incremental.fetch.session.cache.slots.
	defaultFetchSessionSlots = 1000
	// fetchSessionEviction is Kafka's evictionMs: how long a session must
	// be unused (or exist) before a new one may take its slot.
	fetchSessionEviction = 2 * time.Minute
	// maxSessionPartitions bounds what one session holds (Kafka has no
	// bound): incremental fetches could otherwise add partitions for ever.
	// A session that would grow past it is closed (the client starts
	// again with a full fetch, which then gets no session).
	maxSessionPartitions = 100_000
	// maxCachedPartitions bounds them all together (about 250 bytes
	// each): past it new sessions are refused and growing ones closed, and
	// their clients fetch in full.
	maxCachedPartitions = 500_000
)

type fetchSessions struct {
	mu       sync.Mutex
	slots    int
	now      func() time.Time
	sessions map[int32]*fetchSession
	cached   int // partitions in all sessions

	// The bounds (maxSessionPartitions, maxCachedPartitions; tests lower them).
	maxPartitions, maxCached int
}

// remove closes sess; callers hold mu.
func (s *fetchSessions) remove(sess *fetchSession) {
	if s.sessions[sess.id] == sess {
		delete(s.sessions, sess.id)
		s.cached -= len(sess.parts)
	}
}

func newFetchSessions(slots int, now func() time.Time) *fetchSessions {
	return &fetchSessions{slots: slots, now: now, sessions: map[int32]*fetchSession{},
		maxPartitions: maxSessionPartitions, maxCached: maxCachedPartitions}
}

type fetchSession struct {
	id       int32
	epoch    int32 // the epoch the next incremental fetch must carry
	topicIDs bool  // its partitions are named by topic id (Fetch v13+)
	follower bool
	created  time.Time
	used     time.Time
	parts    []*sessionPartition // in answer order
	index    map[sessionKey]*sessionPartition
}

// sessionKey names a partition of a session: by topic id or by name.
type sessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

func (sess *fetchSession) key(topic string, id [16]byte, partition int32) sessionKey {
	if sess.topicIDs {
		return sessionKey{topicID: id, partition: partition}
	}
	return sessionKey{topic: topic, partition: partition}
}

func (sess *fetchSession) add(p *sessionPartition) {
	sess.parts = append(sess.parts, p)
	sess.index[sess.key(p.topic, p.topicID, p.req.Partition)] = p
}

// sessionPartition is one partition of a session: what its fetcher last
// asked and what it was last told.
type sessionPartition struct {
	topic     string
	topicID   [16]byte
	req       kmsg.FetchRequestTopicPartition
	hw, lso   int64
	start     int64
	forgotten bool
}

// sameTopic compares topics by id in a session of topic ids, else by name.
func sameTopic(topicIDs bool, aName string, aID [16]byte, bName string, bID [16]byte) bool {
	if topicIDs {
		return aID == bID
	}
	return aName == bName
}

// fetchContext is one fetch's view of its session: the request to serve,
// with every partition of the session, and what to do with the answer.
type fetchContext struct {
	req     *kmsg.FetchRequest
	session *fetchSession // nil: no incremental answer
	create  bool          // a full fetch that may create a session
	epoch   int32         // the session's epoch after this fetch
}

// nextFetchEpoch is the epoch after e (Kafka's FetchMetadata.nextEpoch).
func nextFetchEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// begin resolves req against the cache. A non-nil error is the whole
// answer's error code.
func (s *fetchSessions) begin(req *kmsg.FetchRequest, follower bool) (*fetchContext, error) {
	if req.Version < 7 {
		return &fetchContext{req: req}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.SessionEpoch == 0 || req.SessionEpoch == -1 {
		if sess := s.sessions[req.SessionID]; sess != nil {
			s.remove(sess)
		}
		return &fetchContext{req: req, create: req.SessionEpoch == 0 && s.slots > 0}, nil
	}
	sess := s.sessions[req.SessionID]
	switch {
	case sess == nil:
		return nil, kerr.FetchSessionIDNotFound
	case sess.epoch != req.SessionEpoch:
		return nil, kerr.InvalidFetchSessionEpoch
	case sess.topicIDs != (req.Version >= 13):
		return nil, kerr.FetchSessionTopicIDError
	}
	before := len(sess.parts)
	sess.update(req)
	s.cached += len(sess.parts) - before
	switch {
	case len(sess.parts) == 0:
		s.remove(sess)
		return &fetchContext{req: req}, nil
	case len(sess.parts) > s.maxPartitions, s.cached > s.maxCached && len(sess.parts) > before:
		s.remove(sess)
		return nil, kerr.FetchSessionIDNotFound
	}
	sess.used = s.now()
	sess.epoch = nextFetchEpoch(sess.epoch)
	return &fetchContext{req: sess.request(req), session: sess, epoch: sess.epoch}, nil
}

// update applies an incremental fetch's partitions and forgotten topics.
func (sess *fetchSession) update(req *kmsg.FetchRequest) {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if p := sess.index[sess.key(rt.Topic, rt.TopicID, rp.Partition)]; p != nil {
				p.req = rp
				continue
			}
			sess.add(&sessionPartition{topic: rt.Topic, topicID: rt.TopicID, req: rp, hw: -1, lso: -1, start: -1})
		}
	}
	forgot := false
	for _, ft := range req.ForgottenTopics {
		for _, partition := range ft.Partitions {
			k := sess.key(ft.Topic, ft.TopicID, partition)
			if p := sess.index[k]; p != nil {
				p.forgotten, forgot = true, true
				delete(sess.index, k)
			}
		}
	}
	if forgot {
		sess.parts = slices.DeleteFunc(sess.parts, func(p *sessionPartition) bool { return p.forgotten })
	}
}

// request is req with the session's partitions, in its order, a topic
// repeated where its partitions are not next to each other.
func (sess *fetchSession) request(req *kmsg.FetchRequest) *kmsg.FetchRequest {
	full := *req
	full.Topics = nil
	full.ForgottenTopics = nil
	for _, p := range sess.parts {
		n := len(full.Topics)
		if n == 0 || !sameTopic(sess.topicIDs, full.Topics[n-1].Topic, full.Topics[n-1].TopicID, p.topic, p.topicID) {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = p.topic, p.topicID
			full.Topics = append(full.Topics, rt)
			n++
		}
		full.Topics[n-1].Partitions = append(full.Topics[n-1].Partitions, p.req)
	}
	return &full
}

// finish turns the answer to fc.req into the answer to the fetch: a new
// session's id, or an incremental answer with only what changed.
func (s *fetchSessions) finish(fc *fetchContext, resp *kmsg.FetchResponse, follower bool) *kmsg.FetchResponse {
	switch {
	case fc.create:
		resp.SessionID = s.create(fc.req, resp, follower)
		return resp
	case fc.session == nil:
		return resp
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := fc.session
	if sess.epoch != fc.epoch || s.sessions[sess.id] != sess {
		// Another fetch of the session came in meanwhile (Kafka: "possible
		// duplicate request"), or the session was closed or evicted.
		out := fc.req.ResponseKind().(*kmsg.FetchResponse)
		out.ErrorCode, out.SessionID = kerr.InvalidFetchSessionEpoch.Code, sess.id
		return out
	}
	out := *resp
	out.Topics = nil
	out.SessionID = sess.id
	var answered, quiet []*sessionPartition
	i := 0
	for _, rt := range resp.Topics {
		for _, sp := range rt.Partitions {
			p := sess.parts[i]
			i++
			if !p.mustAnswer(&sp) {
				quiet = append(quiet, p)
				continue
			}
			answered = append(answered, p)
			n := len(out.Topics)
			if n == 0 || out.Topics[n-1].Topic != rt.Topic || out.Topics[n-1].TopicID != rt.TopicID {
				t := kmsg.NewFetchResponseTopic()
				t.Topic, t.TopicID = rt.Topic, rt.TopicID
				out.Topics = append(out.Topics, t)
				n++
			}
			out.Topics[n-1].Partitions = append(out.Topics[n-1].Partitions, sp)
		}
	}
	sess.parts = append(quiet, answered...)
	return &out
}

// mustAnswer says whether an incremental answer carries the partition and
// remembers what it is told (Kafka's CachedPartition.maybeUpdateResponseData).
func (p *sessionPartition) mustAnswer(sp *kmsg.FetchResponseTopicPartition) bool {
	must := len(sp.RecordBatches) > 0 || sp.HighWatermark != p.hw || sp.LogStartOffset != p.start || sp.LastStableOffset != p.lso
	p.hw, p.start, p.lso = sp.HighWatermark, sp.LogStartOffset, sp.LastStableOffset
	if sp.ErrorCode != 0 {
		// Answered again once the error is gone.
		p.hw = -1
		must = true
	}
	return must
}

// create makes a session of a full fetch's partitions and returns its id,
// or 0 if there is no slot for it.
func (s *fetchSessions) create(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, follower bool) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	size := 0
	for _, rt := range req.Topics {
		size += len(rt.Partitions)
	}
	if size > s.maxPartitions || s.cached+size > s.maxCached ||
		(len(s.sessions) >= s.slots && !s.evict(follower, size, now)) {
		return 0
	}
	sess := &fetchSession{epoch: 1, topicIDs: req.Version >= 13, follower: follower, created: now, used: now,
		index: make(map[sessionKey]*sessionPartition, size)}
	for {
		sess.id = rand.Int32N(math.MaxInt32-1) + 1
		if s.sessions[sess.id] == nil {
			break
		}
	}
	for ti, rt := range req.Topics {
		for pi, rp := range rt.Partitions {
			if sess.index[sess.key(rt.Topic, rt.TopicID, rp.Partition)] != nil {
				continue // named twice
			}
			p := &sessionPartition{topic: rt.Topic, topicID: rt.TopicID, req: rp}
			p.mustAnswer(&resp.Topics[ti].Partitions[pi])
			sess.add(p)
		}
	}
	s.sessions[sess.id] = sess
	s.cached += len(sess.parts)
	return sess.id
}

// evict frees a slot for a new session of size partitions (Kafka's
// tryEvict): the least recently used session if it has been unused for the
// eviction time; else the least valuable of those older than that (for a
// follower, of those and all consumers' sessions), valued by (follower,
// partitions, id), if it is worth no more than the new one.
func (s *fetchSessions) evict(follower bool, size int, now time.Time) bool {
	var lru, least *fetchSession
	for _, sess := range s.sessions {
		if lru == nil || sess.used.Before(lru.used) || (sess.used.Equal(lru.used) && sess.id < lru.id) {
			lru = sess
		}
		if now.Sub(sess.created) <= fetchSessionEviction && !(follower && !sess.follower) {
			continue
		}
		if least == nil || sessionValueLess(sess.follower, len(sess.parts), sess.id, least.follower, len(least.parts), least.id) {
			least = sess
		}
	}
	switch {
	case lru == nil:
		return false
	case now.Sub(lru.used) > fetchSessionEviction:
		s.remove(lru)
		return true
	case least == nil, sessionValueLess(follower, size, 0, least.follower, len(least.parts), least.id):
		return false
	}
	s.remove(least)
	return true
}

// sessionValueLess orders sessions by Kafka's EvictableKey.
func sessionValueLess(aFollower bool, aSize int, aID int32, bFollower bool, bSize int, bID int32) bool {
	switch {
	case aFollower != bFollower:
		return !aFollower
	case aSize != bSize:
		return aSize < bSize
	}
	return aID < bID
}
