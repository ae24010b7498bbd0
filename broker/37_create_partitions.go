package broker

// CreatePartitions: v0-3
//
// Behavior:
//   - grows a topic to Count partitions (kafgres_create_partitions); the
//     new partitions are open when the answer is sent
//   - INVALID_PARTITIONS when Count is not an increase, INVALID_REPLICA_-
//     ASSIGNMENT when assignments do not match the new partitions or name
//     another broker, UNKNOWN_TOPIC_OR_PARTITION for unknown topics,
//     INVALID_REQUEST "Duplicate topic name." for a topic named twice
//   - more than 10000 new partitions in one request: POLICY_VIOLATION
//   - validateOnly runs every check and changes nothing
//
//   - ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED with no
//     message, existence hidden
//
// Version notes:
//   - v1: throttle; v2: flexible; v3: same as v2

import (
	"context"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleCreatePartitions(ctx context.Context, b *Broker, cc *conn, req *kmsg.CreatePartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	unique, dups := splitDuplicates(req.Topics, func(rt kmsg.CreatePartitionsRequestTopic) string { return rt.Topic })
	answer := func(rt kmsg.CreatePartitionsRequestTopic, err error) {
		out := kmsg.NewCreatePartitionsResponseTopic()
		out.Topic = rt.Topic
		out.ErrorCode, out.ErrorMessage = b.codeAndMessage("create partitions", err)
		resp.Topics = append(resp.Topics, out)
	}
	for _, rt := range unique {
		if !b.allowed(cc, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeTopic, rt.Topic) {
			out := kmsg.NewCreatePartitionsResponseTopic()
			out.Topic, out.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, out)
			continue
		}
		answer(rt, b.createPartitions(ctx, rt, req.ValidateOnly))
	}
	for _, rt := range dups {
		answer(rt, errDuplicateTopic)
	}
	return resp, nil
}

func (b *Broker) createPartitions(ctx context.Context, rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	t := b.catalog.lookup(ctx, rt.Topic)
	if t == nil {
		return kerr.UnknownTopicOrPartition
	}
	current := int32(len(t.parts))
	switch {
	case rt.Count == current:
		return apierr.New(kerr.InvalidPartitions, "Topic already has %d partition(s).", current)
	case rt.Count < current:
		return apierr.New(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", rt.Topic, current, rt.Count)
	}
	if rt.Count-current > maxPartitionsPerRequest {
		return apierr.New(kerr.PolicyViolation, "Excessively large number of additional partitions per request.")
	}
	if rt.Assignment != nil {
		if len(rt.Assignment) != int(rt.Count-current) {
			return apierr.New(kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", rt.Count-current, len(rt.Assignment))
		}
		for _, a := range rt.Assignment {
			if err := b.checkAssignment(a.Replicas); err != nil {
				return err
			}
		}
	}
	if validateOnly {
		return nil
	}
	if err := b.catalog.createPartitions(ctx, rt.Topic, rt.Count); err != nil {
		return err
	}
	b.log.Info("partitions created", "topic", rt.Topic, "partitions", rt.Count)
	return nil
}
