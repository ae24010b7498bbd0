package broker

// OffsetFetch: v1-10
//
// Behavior:
//   - committed offsets come from kafgres.consumer_offset
//   - a partition without a commit (or of an unknown topic) gets offset -1,
//     leader epoch -1, empty metadata and no error, as Kafka answers; no
//     topics requested (null, v2+) returns every partition the group has
//     committed
//   - v8+: several groups in one request, each answered on its own
//   - offsets of a transaction whose EndTxn was answered are waited for
//     (up to 1 s) while its markers are written, so a fetch right after
//     the commit sees them, as on Kafka in practice
//   - require_stable (v7+): a partition with an offset committed in a
//     transaction not yet ended (TxnOffsetCommit) is answered
//     UNSTABLE_OFFSET_COMMIT with offset -1, as Kafka; without it, the
//     offset committed before that transaction
//   - v9+ for consumer (KIP-848) groups: a request naming a member must
//     carry its current epoch: UNKNOWN_MEMBER_ID / STALE_MEMBER_EPOCH as
//     the group error, as Kafka; admin requests (no member, epoch -1) pass
//
//   - DESCRIBE on each group: denied, GROUP_AUTHORIZATION_FAILED (v0-1 on
//     every requested partition); DESCRIBE on each topic: left out of
//     "all", TOPIC_AUTHORIZATION_FAILED (after the others) when listed
//
// Version notes:
//   - v2: top-level error code, null topics; v5: leader epoch; v6: flexible;
//     v7: require stable; v8: groups array; v9: member id/epoch (KIP-848,
//     checked for consumer groups only); v10: topic ids (UNKNOWN_TOPIC_ID)

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/metadata"
)

// fetchedTopic is one topic of an OffsetFetch answer, version-neutral.
type fetchedTopic struct {
	name  string
	id    [16]byte
	parts []kmsg.OffsetFetchResponseGroupTopicPartition
}

func handleOffsetFetch(ctx context.Context, b *Broker, cc *conn, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var req8 []kmsg.OffsetFetchRequestGroupTopic
		for _, rt := range req.Topics {
			req8 = append(req8, kmsg.OffsetFetchRequestGroupTopic{Topic: rt.Topic, Partitions: rt.Partitions})
		}
		if req.Topics == nil {
			req8 = nil
		}
		var (
			topics []fetchedTopic
			err    error
		)
		if b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, req.Group) {
			topics, err = b.fetchGroupOffsets(ctx, cc, req.Group, req8, false, req.RequireStable)
		} else if err = kerr.GroupAuthorizationFailed; req.Version < 2 {
			// v0-1 have no top-level error: every requested partition
			// carries it
			for _, rt := range req8 {
				ft := fetchedTopic{name: rt.Topic}
				for _, p := range rt.Partitions {
					ft.parts = append(ft.parts, offsetFetchError(p, err.(*kerr.Error)))
				}
				topics = append(topics, ft)
			}
		}
		resp.ErrorCode = errorCode(err)
		for _, ft := range topics {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = ft.name
			for _, p := range ft.parts {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				if err != nil && req.Version < 2 {
					sp.ErrorCode = resp.ErrorCode // v0-1 have no top-level error
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	for _, rg := range req.Groups {
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group = rg.Group
		if !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, rg.Group) {
			sg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		if req.Version >= 9 {
			memberID := ""
			if rg.MemberID != nil {
				memberID = *rg.MemberID
			}
			if err := b.groups.ConsumerFetchAllowed(rg.Group, memberID, rg.MemberEpoch); err != nil {
				sg.ErrorCode = err.Code
				resp.Groups = append(resp.Groups, sg)
				continue
			}
		}
		topics, err := b.fetchGroupOffsets(ctx, cc, rg.Group, rg.Topics, req.Version >= 10, req.RequireStable)
		sg.ErrorCode = errorCode(err)
		for _, ft := range topics {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic, st.TopicID, st.Partitions = ft.name, ft.id, ft.parts
			sg.Topics = append(sg.Topics, st)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return resp, nil
}

// fetchGroupOffsets answers one group: the requested partitions, or (nil
// topics) everything the group committed.
//
// Topics cc may not DESCRIBE are left out of "everything"; listed, their
// partitions get TOPIC_AUTHORIZATION_FAILED without a look at whether they
// exist, after the others, as Kafka answers.
func (b *Broker) fetchGroupOffsets(ctx context.Context, cc *conn, group string, topics []kmsg.OffsetFetchRequestGroupTopic, byID, requireStable bool) ([]fetchedTopic, error) {
	describable := func(name string) bool {
		return b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name)
	}
	b.txns.AwaitOffsets(ctx, group)
	pending := b.txns.PendingOffsets(group)
	committed, err := b.meta.FetchOffsets(ctx, group)
	if err != nil {
		b.log.Error("fetch offsets", "group", group, "err", err)
		return nil, kerr.CoordinatorNotAvailable
	}
	partition := func(t *topic, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		sp.Partition, sp.Offset, sp.LeaderEpoch = p, -1, -1
		empty := ""
		sp.Metadata = &empty
		if t == nil {
			return sp
		}
		if requireStable && pending(t.id, p) {
			sp.ErrorCode = kerr.UnstableOffsetCommit.Code
			return sp
		}
		if o, ok := committed[metadata.TopicPartition{TopicID: t.id, Partition: p}]; ok {
			sp.Offset, sp.LeaderEpoch = o.Offset, o.LeaderEpoch
			if o.Metadata != nil {
				sp.Metadata = o.Metadata
			}
		}
		return sp
	}

	var out []fetchedTopic
	if topics == nil {
		byInternal := map[int64]*topic{}
		for _, t := range b.catalog.topics() {
			byInternal[t.id] = t
		}
		grouped := map[int64][]int32{}
		for tp := range committed {
			if byInternal[tp.TopicID] != nil {
				grouped[tp.TopicID] = append(grouped[tp.TopicID], tp.Partition)
			}
		}
		for id, parts := range grouped {
			t := byInternal[id]
			if !describable(t.name) {
				continue
			}
			sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
			ft := fetchedTopic{name: t.name, id: t.uuid}
			for _, p := range parts {
				ft.parts = append(ft.parts, partition(t, p))
			}
			out = append(out, ft)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
		return out, nil
	}
	var denied []fetchedTopic
	for _, rt := range topics {
		ft := fetchedTopic{name: rt.Topic, id: rt.TopicID}
		var t *topic
		if byID {
			t = b.catalog.lookupID(ctx, rt.TopicID)
		} else {
			t = b.catalog.lookup(ctx, rt.Topic)
		}
		name := rt.Topic
		if t != nil {
			name = t.name
		}
		if !(t == nil && byID) && !describable(name) {
			for _, p := range rt.Partitions {
				ft.parts = append(ft.parts, offsetFetchError(p, kerr.TopicAuthorizationFailed))
			}
			denied = append(denied, ft)
			continue
		}
		for _, p := range rt.Partitions {
			sp := partition(t, p)
			if t == nil && byID {
				sp.ErrorCode = kerr.UnknownTopicID.Code
			}
			ft.parts = append(ft.parts, sp)
		}
		out = append(out, ft)
	}
	return append(out, denied...), nil
}

// offsetFetchError is a partition answered with err and no offset.
func offsetFetchError(p int32, err *kerr.Error) kmsg.OffsetFetchResponseGroupTopicPartition {
	sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	sp.Partition, sp.Offset, sp.LeaderEpoch, sp.ErrorCode = p, -1, -1, err.Code
	empty := ""
	sp.Metadata = &empty
	return sp
}
