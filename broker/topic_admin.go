package broker

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/broker/topicname"
)

// codeAndMessage splits err into what a response carries. Anything that
// is not an *apierr.Error is a server-side failure; its text stays in our
// log, not on the wire.
func (b *Broker) codeAndMessage(op string, err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	var ae *apierr.Error
	if errors.As(err, &ae) {
		msg := ae.Message()
		return ae.Code(), &msg
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code, nil
	}
	b.log.Error(op, "err", err)
	return kerr.UnknownServerError.Code, nil
}

// errDuplicateTopic answers a topic named more than once in one request.
var errDuplicateTopic = apierr.New(kerr.InvalidRequest, "Duplicate topic name.")

// maxPartitionsPerRequest is Kafka's cap on the partitions one CreateTopics
// or CreatePartitions request may create (QuorumController's
// MAX_RECORDS_PER_USER_OP).
const maxPartitionsPerRequest = 10000

// checkTopicName gives Kafka's INVALID_TOPIC_EXCEPTION for a name Kafka's
// Topic.validate refuses.
func checkTopicName(name string) error {
	if p := topicname.Problem(name); p != "" {
		return apierr.New(kerr.InvalidTopicException, "Topic name is invalid: %s", p)
	}
	return nil
}

// collisionKey folds the characters Kafka's metric names cannot tell apart:
// "a.b" and "a_b" may not both exist.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// collidingTopic returns an existing topic whose name differs from name
// only in '.' versus '_', or "".
func (c *catalog) collidingTopic(name string) string {
	key := collisionKey(name)
	for _, t := range c.topics() {
		if t.name != name && collisionKey(t.name) == key {
			return t.name
		}
	}
	return ""
}

// checkAssignment validates a manual replica assignment: on a one-broker
// cluster every replica list must be exactly this broker.
func (b *Broker) checkAssignment(replicas []int32) error {
	if len(replicas) == 0 {
		return apierr.New(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	seen := map[int32]bool{}
	for _, r := range replicas {
		if seen[r] {
			return apierr.New(kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", r)
		}
		seen[r] = true
	}
	for _, r := range replicas {
		if r != b.cfg.NodeID {
			return apierr.New(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", r)
		}
	}
	return nil
}

// checkReplicationFactor gives Kafka's answers for a replication factor on
// a one-broker cluster; -1 is the default (1).
func checkReplicationFactor(rf int16) error {
	switch {
	case rf == -1 || rf == 1:
		return nil
	case rf <= 0:
		return apierr.New(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	default:
		return apierr.New(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only 1 broker(s) are registered or some brokers have all their log directories cordoned.", rf, rf)
	}
}

// createTopic creates a topic with its config overrides in one transaction
// and reloads, so the topic is served when the caller answers.
func (c *catalog) createTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (*topic, error) {
	if err := c.b.meta.CreateTopic(ctx, name, partitions, configs); err != nil {
		if errors.Is(err, metadata.ErrTopicExists) {
			return nil, apierr.New(kerr.TopicAlreadyExists, "Topic '%s' already exists.", name)
		}
		return nil, err
	}
	if err := c.reload(ctx); err != nil {
		return nil, err
	}
	return c.topicByName(name), nil
}

// dropTopic deletes a topic in Postgres; the reload closes its partitions
// and removes its log.
func (c *catalog) dropTopic(ctx context.Context, name string) error {
	if err := c.b.meta.DropTopic(ctx, name); err != nil {
		if errors.Is(err, metadata.ErrUnknownTopic) {
			return kerr.UnknownTopicOrPartition
		}
		return err
	}
	return c.reload(ctx)
}

// createPartitions grows a topic to count partitions.
func (c *catalog) createPartitions(ctx context.Context, name string, count int32) error {
	if err := c.b.meta.CreatePartitions(ctx, name, count); err != nil {
		switch {
		case errors.Is(err, metadata.ErrUnknownTopic):
			return kerr.UnknownTopicOrPartition
		case errors.Is(err, metadata.ErrPartitionsChanged):
			return apierr.New(kerr.InvalidPartitions, "Topic %s partition count changed concurrently.", name)
		}
		return err
	}
	return c.reload(ctx)
}

// partition returns partition i of t, or nil when t is nil (an unknown
// topic) or has no partition i.
func (t *topic) partition(i int32) *partition {
	if t == nil || i < 0 || int(i) >= len(t.parts) {
		return nil
	}
	return t.parts[i]
}

// splitDuplicates separates the items whose name appears once from those
// named more than once (the first of each such name). Kafka answers the
// latter with one INVALID_REQUEST each, after all the others.
func splitDuplicates[T any](items []T, name func(T) string) (unique, dups []T) {
	counts := make(map[string]int, len(items))
	for _, it := range items {
		counts[name(it)]++
	}
	for _, it := range items {
		switch n := counts[name(it)]; {
		case n == 1:
			unique = append(unique, it)
		case n > 1:
			dups = append(dups, it)
			counts[name(it)] = 0
		}
	}
	return unique, dups
}
