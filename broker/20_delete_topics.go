package broker

// DeleteTopics: v1-6
//
// Behavior:
//   - deletes the topic in Postgres (kafgres_drop_topic): its partitions,
//     configs and committed offsets go with it, and the broker closes and
//     removes its log before answering
//   - unknown names get UNKNOWN_TOPIC_OR_PARTITION, unknown ids
//     UNKNOWN_TOPIC_ID, a topic named twice INVALID_REQUEST "Duplicate
//     topic name." (answered after the others, as Kafka does)
//
//   - DELETE on the cluster, or DESCRIBE and DELETE on each topic (Kafka's
//     ControllerApis.deleteTopics): by name, not DESCRIBE is
//     TOPIC_AUTHORIZATION_FAILED whether or not it exists, then unknown,
//     then not DELETE; by id, an unknown id is UNKNOWN_TOPIC_ID, a known
//     one not DELETE-able TOPIC_AUTHORIZATION_FAILED, with its name only if
//     DESCRIBE-able
//
// Version notes:
//   - v1: throttle; v4: flexible; v5: error messages; v6: topics by name
//     or id, topic id in the answer

import (
	"context"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteTopics(ctx context.Context, b *Broker, cc *conn, req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	reqs := req.Topics
	if req.Version < 6 {
		reqs = nil
		for _, name := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = &name
			reqs = append(reqs, rt)
		}
	}
	unique, dups := splitDuplicates(reqs, func(rt kmsg.DeleteTopicsRequestTopic) string {
		if rt.Topic == nil {
			return "id:" + string(rt.TopicID[:])
		}
		return *rt.Topic
	})
	answer := func(rt kmsg.DeleteTopicsRequestTopic, t *topic, err error) {
		out := kmsg.NewDeleteTopicsResponseTopic()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		if t != nil {
			name := t.name
			out.Topic, out.TopicID = &name, t.uuid
		}
		out.ErrorCode, out.ErrorMessage = b.codeAndMessage("delete topic", err)
		resp.Topics = append(resp.Topics, out)
	}
	clusterDelete := b.allowedCluster(cc, kmsg.ACLOperationDelete)
	may := func(op kmsg.ACLOperation, name string) bool {
		return clusterDelete || b.allowed(cc, op, kmsg.ACLResourceTypeTopic, name)
	}
	for _, rt := range unique {
		if err := b.deleteTopicDenied(ctx, rt, may); err != nil {
			out := kmsg.NewDeleteTopicsResponseTopic()
			out.Topic, out.TopicID = err.name, err.id
			out.ErrorCode, out.ErrorMessage = b.codeAndMessage("delete topic", errTopicAuthorization)
			resp.Topics = append(resp.Topics, out)
			continue
		}
		t, err := b.deleteTopic(ctx, rt)
		answer(rt, t, err)
	}
	for _, rt := range dups {
		answer(rt, nil, errDuplicateTopic)
	}
	if req.Version < 5 {
		for i := range resp.Topics {
			resp.Topics[i].ErrorMessage = nil
		}
	}
	return resp, nil
}

func (b *Broker) deleteTopic(ctx context.Context, rt kmsg.DeleteTopicsRequestTopic) (*topic, error) {
	var t *topic
	if rt.Topic == nil {
		if t = b.catalog.lookupID(ctx, rt.TopicID); t == nil {
			return nil, apierr.New(kerr.UnknownTopicID, "This server does not host this topic ID.")
		}
	} else if t = b.catalog.lookup(ctx, *rt.Topic); t == nil {
		return nil, apierr.New(kerr.UnknownTopicOrPartition, "This server does not host this topic-partition.")
	}
	if err := b.catalog.dropTopic(ctx, t.name); err != nil {
		return t, err
	}
	b.log.Info("topic deleted", "topic", t.name)
	return t, nil
}

// errTopicAuthorization is Kafka's TopicAuthorizationException, whose
// message is the code's.
var errTopicAuthorization = apierr.New(kerr.TopicAuthorizationFailed, "Topic authorization failed.")

// deletionDenied is an unauthorized deletion: what the answer may show.
type deletionDenied struct {
	name *string
	id   [16]byte
}

// deleteTopicDenied applies Kafka's DeleteTopics authorization to one
// topic, nil when it may go on (and perhaps fail as unknown).
func (b *Broker) deleteTopicDenied(ctx context.Context, rt kmsg.DeleteTopicsRequestTopic, may func(kmsg.ACLOperation, string) bool) *deletionDenied {
	if rt.Topic == nil {
		t := b.catalog.lookupID(ctx, rt.TopicID)
		if t == nil || may(kmsg.ACLOperationDelete, t.name) {
			return nil // unknown ids are not sensitive
		}
		d := &deletionDenied{id: t.uuid}
		if may(kmsg.ACLOperationDescribe, t.name) {
			name := t.name
			d.name = &name
		}
		return d
	}
	name := *rt.Topic
	if !may(kmsg.ACLOperationDescribe, name) {
		return &deletionDenied{name: &name}
	}
	if b.catalog.lookup(ctx, name) == nil {
		return nil
	}
	if !may(kmsg.ACLOperationDelete, name) {
		return &deletionDenied{name: &name}
	}
	return nil
}
