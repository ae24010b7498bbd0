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
// Version notes:
//   - v1: throttle; v4: flexible; v5: error messages; v6: topics by name
//     or id, topic id in the answer

import (
	"context"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDeleteTopics(ctx context.Context, b *Broker, _ *conn, req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
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
	for _, rt := range unique {
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
