package broker

// Internal topics.
//
// Kafka keeps group and transaction state in two topics of its own,
// __consumer_offsets and __transaction_state, which its Metadata lists
// with IsInternal set; clients leave them out of regex subscriptions
// (exclude.internal.topics) and kafka-topics.sh --exclude-internal hides
// them. kafgres keeps that state in Postgres tables instead, but shows
// the same two topics, so that tools see the cluster a Kafka broker of the
// same history would show.
//
// What Kafka 4.4 does (checked against the reference broker), and so do we:
//   - a topic is internal by its name alone (Topic.isInternal): the two
//     above and __share_group_state. Metadata flags a named topic internal
//     even when it does not exist (UNKNOWN_TOPIC_OR_PARTITION,
//     IsInternal true), as does DescribeTopicPartitions
//   - the topics do not exist on a fresh cluster. The broker creates
//     __consumer_offsets on the first FindCoordinator for a group, and
//     __transaction_state on the first FindCoordinator for a transactional
//     id (so before the first InitProducerId with one); Metadata with
//     auto-creation creates them too. They are created as Kafka's
//     coordinators create them: 50 partitions (offsets.topic.num.partitions,
//     transaction.state.log.num.partitions), replication factor 1, and the
//     config overrides listed in internalTopicSpecs
//   - once created they are ordinary topics for every admin API: described,
//     listed, their configs altered, partitions added, even deleted (the
//     next FindCoordinator creates them again), and a user may create them
//     herself with any partition count (CreateTopics succeeds, the topic is
//     internal). ListOffsets and Fetch answer from their logs
//   - Produce to them is INVALID_TOPIC_EXCEPTION ("Cannot append to
//     internal topic", no message on the wire) unless the client id is
//     __admin_client; DeleteRecords is INVALID_TOPIC_EXCEPTION
//
// Here they are real kafgres topics (rows in kafgres.topic, logs in the
// data directory), so their ids, partition counts and configs are durable
// in Postgres and every admin API behaves as for any topic. Their logs stay
// empty: offsets and transaction state live in Postgres tables, not in
// records, so where Kafka's logs hold records ours answer offset 0.
// Retention leaves them alone (cleanup.policy=compact), and the mirror
// only copies partitions whose log changed.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/topicname"
)

// The internal topics' names (Kafka's Topic.GROUP_METADATA_TOPIC_NAME,
// TRANSACTION_STATE_TOPIC_NAME and SHARE_GROUP_STATE_TOPIC_NAME).
const (
	consumerOffsetsTopic  = "__consumer_offsets"
	transactionStateTopic = "__transaction_state"
	shareGroupStateTopic  = "__share_group_state"
)

// adminClientID is the client id whose produce requests Kafka lets append
// to internal topics (AdminUtils.ADMIN_CLIENT_ID).
const adminClientID = "__admin_client"

// internalTopicSpec is how the broker creates an internal topic.
type internalTopicSpec struct {
	partitions int32
	configs    map[string]string
}

// internalTopicSpecs are the internal topics kafgres creates, as the
// reference Kafka 4.4 creates them with its default settings (and
// transaction.state.log.min.isr=1, which a one-broker Kafka needs and
// kafgres reports): the configs are the overrides its DescribeConfigs
// shows as DYNAMIC_TOPIC_CONFIG. __share_group_state is not here: kafgres
// serves no share groups, so nothing creates it but a user.
var internalTopicSpecs = map[string]internalTopicSpec{
	consumerOffsetsTopic: {partitions: 50, configs: map[string]string{
		"cleanup.policy":   "compact",
		"compression.type": "producer",
		"segment.bytes":    "104857600",
	}},
	transactionStateTopic: {partitions: 50, configs: map[string]string{
		"cleanup.policy":                 "compact",
		"compression.type":               "uncompressed",
		"min.insync.replicas":            "1",
		"segment.bytes":                  "104857600",
		"unclean.leader.election.enable": "false",
	}},
}

// groupsUsed is called when a client looks for a group coordinator: it
// creates __consumer_offsets if it does not exist, as Kafka's broker does
// on that occasion. A failure is logged, not answered: nothing kafgres
// does with groups needs the topic.
func (b *Broker) groupsUsed(ctx context.Context) {
	if _, err := b.ensureInternalTopic(ctx, consumerOffsetsTopic); err != nil {
		b.log.Warn("create internal topic", "topic", consumerOffsetsTopic, "err", err)
	}
}

// transactionsUsed creates __transaction_state if it does not exist. It
// is called when a client looks for a transaction coordinator (where Kafka
// creates the topic), and is for the transaction coordinator to call when
// a transactional id is initialised; once the topic exists it costs one
// map lookup. Whether transactions were ever used is the topic's existence
// in kafgres.topic, so it needs no state of its own.
func (b *Broker) transactionsUsed(ctx context.Context) {
	if _, err := b.ensureInternalTopic(ctx, transactionStateTopic); err != nil {
		b.log.Warn("create internal topic", "topic", transactionStateTopic, "err", err)
	}
}

// ensureInternalTopic returns the internal topic name, creating it with its
// spec if it does not exist. A topic someone else created meanwhile (a
// user, or another request) is taken as it is, as Kafka does.
func (b *Broker) ensureInternalTopic(ctx context.Context, name string) (*topic, error) {
	if t := b.catalog.topicByName(name); t != nil {
		return t, nil
	}
	spec, ok := internalTopicSpecs[name]
	if !ok {
		return nil, errors.New("no spec for internal topic " + name)
	}
	t, err := b.catalog.createTopic(ctx, name, spec.partitions, spec.configs)
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Code() == kerr.TopicAlreadyExists.Code {
		if t := b.catalog.lookupFresh(ctx, name); t != nil {
			return t, nil
		}
		return nil, apierr.New(kerr.UnknownTopicOrPartition, "topic %q was created and dropped again", name)
	}
	if err != nil {
		return nil, err
	}
	b.log.Info("internal topic created", "topic", name, "partitions", spec.partitions)
	return t, nil
}

// autoCreateTopic creates a topic a Metadata request names (with
// auto-creation allowed): an internal one as its coordinator would, any
// other with the default partition count.
func (b *Broker) autoCreateTopic(ctx context.Context, name string) (*topic, error) {
	if _, ok := internalTopicSpecs[name]; ok {
		return b.ensureInternalTopic(ctx, name)
	}
	return b.catalog.create(ctx, name, b.cfg.DefaultPartition)
}

// internalAppendRefused reports whether a produce request's partition rp
// of t is to be answered INVALID_TOPIC_EXCEPTION: Kafka's ReplicaManager
// refuses appends to internal topics but from the admin client id, after
// the checks producePartition makes first (acks, version, authorization,
// existence) and before the batch is looked at.
func internalAppendRefused(req *kmsg.ProduceRequest, t *topic, writable bool, rp kmsg.ProduceRequestTopicPartition, clientID string) bool {
	validAcks := req.Acks == 0 || req.Acks == 1 || req.Acks == -1
	return validAcks && req.Version >= 3 && writable && t.partition(rp.Partition) != nil &&
		topicname.Internal(t.name) && clientID != adminClientID
}
