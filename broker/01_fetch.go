package broker

// Fetch: v4-18
//
// Behavior:
//   - serves whole stored batches up to the high watermark, which is the end
//     of the last fsync: a consumer never sees a record a crash could take
//   - the first batch is returned even if it exceeds the byte limits (as in
//     Kafka); otherwise partition and response max bytes are honoured
//   - long poll: waits up to MaxWaitMillis until MinBytes are available,
//     woken when the high watermark moves (which is when the last stable
//     offset moves too); returns at once when a partition has an error
//   - fetch sessions (v7+, KIP-227; fetch_sessions.go): a full fetch with
//     epoch 0 gets a session when there is a slot; incremental fetches
//     name only what changed and are answered only what changed
//   - LastStableOffset: the last stable offset (txn_state.go) in every
//     answer, whatever the isolation level
//   - read_committed (isolation 1): only batches below the last stable
//     offset, with the aborted transactions overlapping what is returned
//     (from the segments' .txnindex, as Kafka's collectAbortedTxns);
//     an empty list when there are none or nothing is returned
//   - current leader epoch checked: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
//
//   - READ on each topic (a follower: CLUSTER_ACTION on the cluster), else
//     TOPIC_AUTHORIZATION_FAILED on its partitions, existence hidden
//
// Version notes:
//   - v5: log start offset; v7: sessions; v9: current leader epoch;
//     v11: preferred read replica (-1); v12: flexible; v13: topic ids
//     (UNKNOWN_TOPIC_ID)

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

func handleFetch(ctx context.Context, b *Broker, cc *conn, req *kmsg.FetchRequest) (kmsg.Response, error) {
	follower := req.ReplicaID >= 0 || (req.Version >= 15 && req.ReplicaState.ID >= 0)
	fc, err := b.fetchSessions.begin(req, follower)
	if err != nil {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = errorCode(err)
		return resp, nil
	}
	var files *fetchFiles
	if cc.sendfile {
		files = &fetchFiles{nonce: b.fetchNonce}
	}
	resp, err := b.fetch(ctx, cc, fc.req, files)
	if err != nil {
		files.release()
		return nil, err
	}
	out := b.fetchSessions.finish(fc, resp, follower)
	if files != nil && len(files.recs) > 0 {
		return &fileFetchResponse{FetchResponse: out, files: files}, nil
	}
	return out, nil
}

// fetch answers a fetch of every partition of req (all of its session's
// for an incremental fetch), leaving the records of segment topics in their
// files when files is not nil.
func (b *Broker) fetch(ctx context.Context, cc *conn, req *kmsg.FetchRequest, files *fetchFiles) (*kmsg.FetchResponse, error) {
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	denied := b.fetchDenied(cc, req)

	// Register before the first read so an append between read and wait
	// still wakes us.
	wake := make(chan struct{}, 1)
	for i, rt := range req.Topics {
		t := b.fetchTopic(req, rt)
		if t == nil || denied[i] {
			continue
		}
		for _, rp := range rt.Partitions {
			if rp.Partition >= 0 && int(rp.Partition) < len(t.parts) {
				defer t.parts[rp.Partition].watch(wake)()
			}
		}
	}

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		resp, n, hasErr := b.readFetch(req, denied, files)
		if hasErr || n >= int(req.MinBytes) || !time.Now().Before(deadline) {
			return resp, nil
		}
		b.fetchBufs.release(resp) // read again below
		files.release()
		select {
		case <-wake:
		case <-timer.C:
			resp, _, _ = b.readFetch(req, denied, files)
			return resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fetchDenied says, per requested topic, whether cc may not read it: a
// consumer needs READ on each topic (asked by name; an unknown topic id is
// answered UNKNOWN_TOPIC_ID first), a follower (replica id >= 0)
// CLUSTER_ACTION on the cluster, else every partition is
// TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) fetchDenied(cc *conn, req *kmsg.FetchRequest) []bool {
	denied := make([]bool, len(req.Topics))
	replica := req.ReplicaID >= 0 || (req.Version >= 15 && req.ReplicaState.ID >= 0)
	follower := replica && b.allowedCluster(cc, kmsg.ACLOperationClusterAction)
	for i, rt := range req.Topics {
		name := rt.Topic
		if t := b.fetchTopic(req, rt); t != nil {
			name = t.name
		}
		switch {
		case replica:
			denied[i] = !follower
		default:
			denied[i] = !b.allowed(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name)
		}
	}
	return denied
}

func (b *Broker) fetchTopic(req *kmsg.FetchRequest, rt kmsg.FetchRequestTopic) *topic {
	if req.Version >= 13 {
		return b.catalog.topicByID(rt.TopicID)
	}
	return b.catalog.topicByName(rt.Topic)
}

// readFetch builds one response from what is durable now. It returns the
// number of record bytes and whether any partition carries an error.
func (b *Broker) readFetch(req *kmsg.FetchRequest, denied []bool, files *fetchFiles) (*kmsg.FetchResponse, int, bool) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	budget := math.MaxInt32
	if req.Version >= 3 && req.MaxBytes > 0 {
		budget = int(req.MaxBytes)
	}
	total, hasErr := 0, false
	for i, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		t := b.fetchTopic(req, rt)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			if req.IsolationLevel == 1 {
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			limit := min(int(rp.PartitionMaxBytes), budget-total)
			data, size, err := b.fetchPartition(req, t, denied[i], rp, &sp, limit, total == 0, files)
			if err != nil {
				sp.ErrorCode = errorCode(err)
				hasErr = true
			}
			if data == nil {
				data = []byte{} // null records is a parse error for librdkafka
			}
			sp.RecordBatches = data
			total += size
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total, hasErr
}

// fetchPartition reads one partition's records: their bytes, or, with
// files, a marker standing for them in their files; and their size.
func (b *Broker) fetchPartition(req *kmsg.FetchRequest, t *topic, denied bool, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition, limit int, first bool, files *fetchFiles) ([]byte, int, error) {
	switch {
	case t == nil && req.Version >= 13:
		return nil, 0, kerr.UnknownTopicID
	case denied:
		return nil, 0, kerr.TopicAuthorizationFailed
	case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
		return nil, 0, kerr.UnknownTopicOrPartition
	}
	p := t.parts[rp.Partition]
	if err := checkLeaderEpoch(p, rp.CurrentLeaderEpoch, req.Version >= 9); err != nil {
		return nil, 0, err
	}
	hw := p.highWatermark()
	lso := p.lastStableOffset()
	start := p.log.LogStartOffset()
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, lso, start
	if rp.FetchOffset < start || rp.FetchOffset > p.log.LogEndOffset() {
		return nil, 0, kerr.OffsetOutOfRange
	}
	end := hw
	if req.IsolationLevel == 1 {
		end = lso
	}
	if rp.FetchOffset >= end || (limit <= 0 && !first) {
		return nil, 0, nil
	}
	readErr := func(err error) error {
		switch {
		case errors.Is(err, segment.ErrOffsetOutOfRange):
			return kerr.OffsetOutOfRange
		case errors.Is(err, segment.ErrClosed):
			return kerr.UnknownTopicOrPartition
		}
		b.log.Error("read log", "topic", t.name, "partition", rp.Partition, "offset", rp.FetchOffset, "err", err)
		return kerr.KafkaStorageError
	}
	var (
		data []byte
		size int
		last int64
	)
	if ff, ok := p.log.(recordsFromFile); ok && files != nil {
		recs, ok, err := ff.ReadFile(rp.FetchOffset, max(limit, 1), end)
		switch {
		case err != nil:
			return nil, 0, readErr(err)
		case ok && (recs.Len() == 0 || (recs.Len() > limit && !first)):
			recs.Release() // nothing, or only the response's first batch may exceed the limits
			return nil, 0, nil
		case ok && recs.Len() < sendfileMinBytes:
			// a few records: one copy costs less than the sendfile and the
			// write of the frame around it
			data, err = recs.AppendTo(b.fetchBufs.get())
			size, last = len(data), recs.LastOffset()
			recs.Release()
			if err != nil {
				b.fetchBufs.put(data)
				return nil, 0, readErr(err)
			}
		case ok:
			data, size, last = files.add(recs), recs.Len(), recs.LastOffset()
		}
	}
	if data == nil {
		var err error
		if ra, ok := p.log.(appendReader); ok {
			data, err = ra.ReadAppend(b.fetchBufs.get(), rp.FetchOffset, max(limit, 1), end)
		} else {
			data, err = p.log.Read(rp.FetchOffset, max(limit, 1), end)
		}
		if err != nil {
			return nil, 0, readErr(err)
		}
		if len(data) > limit && !first {
			b.fetchBufs.put(data)
			return nil, 0, nil // only the response's first batch may exceed the limits
		}
		size = len(data)
		if size > 0 {
			last = lastOffset(data)
		}
	}
	if req.IsolationLevel == 1 && size > 0 {
		aborted, err := p.log.AbortedTxns(rp.FetchOffset, last+1)
		switch {
		case errors.Is(err, segment.ErrClosed):
			return nil, 0, kerr.UnknownTopicOrPartition
		case err != nil:
			b.log.Error("read transaction index", "topic", t.name, "partition", rp.Partition, "offset", rp.FetchOffset, "err", err)
			return nil, 0, kerr.KafkaStorageError
		}
		for _, a := range aborted {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			sp.AbortedTransactions = append(sp.AbortedTransactions, at)
		}
	}
	return data, size, nil
}

// lastOffset is the last offset of the whole batches in data, which Read
// returned.
func lastOffset(data []byte) int64 {
	last := int64(-1)
	for len(data) >= segment.HeaderSize {
		h, err := segment.ParseBatchHeader(data)
		if err != nil || int(h.Length) > len(data) {
			break
		}
		last = h.LastOffset()
		data = data[h.Length:]
	}
	return last
}

// checkLeaderEpoch applies KIP-320's fencing: a client that knows a newer
// epoch than ours is ahead of our metadata, one with an older epoch is stale.
func checkLeaderEpoch(p *partition, current int32, applies bool) error {
	switch {
	case !applies || current < 0:
		return nil
	case current < p.epoch:
		return kerr.FencedLeaderEpoch
	case current > p.epoch:
		return kerr.UnknownLeaderEpoch
	}
	return nil
}
