package broker

// CreateTopics: v2-7
//
// Behavior:
//   - each topic is created in one Postgres transaction with its config
//     overrides (kafgres_create_topic + kafgres.topic_config), so a topic
//     never exists without the configs it was created with
//   - checks and messages follow Kafka's controller, in its order: name
//     (INVALID_TOPIC_EXCEPTION, also for a name differing from an existing
//     one only in '.' versus '_'), TOPIC_ALREADY_EXISTS, partitions
//     (INVALID_PARTITIONS; -1 is kafgres.default_partitions), replication
//     factor (only 1 or -1 can be met by one broker), manual assignments
//     (only this broker), configs (INVALID_CONFIG)
//   - a name given twice gets INVALID_REQUEST "Duplicate topic name.",
//     answered after the other topics as Kafka does
//   - more than 10000 partitions in one request fails every topic with
//     POLICY_VIOLATION, like Kafka's per-operation record limit
//   - validateOnly runs every check and reports what would be created
//
//   - CREATE on the cluster or on each topic: denied is
//     {TOPIC_AUTHORIZATION_FAILED, "Authorization failed."}, answered after
//     the others and the duplicates, existence hidden; a created topic
//     whose configs cc may not DESCRIBE_CONFIGS has config error
//     TOPIC_AUTHORIZATION_FAILED, no configs, counts -1
//
// Version notes:
//   - v2: throttle, error messages; v4: -1 partitions / replication
//     factor mean the broker default; v5: flexible, the created topic's
//     partitions, replication factor and configs; v7: topic id

import (
	"context"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleCreateTopics(ctx context.Context, b *Broker, cc *conn, req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	total := 0
	for _, rt := range req.Topics {
		total += b.requestedPartitions(rt)
	}
	unique, dups := splitDuplicates(req.Topics, func(rt kmsg.CreateTopicsRequestTopic) string { return rt.Topic })
	// CREATE on the cluster, or on each topic; the unauthorized ones are
	// answered last and never looked up, so their existence stays hidden.
	var denied []kmsg.CreateTopicsResponseTopic
	clusterCreate := b.allowedCluster(cc, kmsg.ACLOperationCreate)
	authorized := unique[:0:0]
	for _, rt := range unique {
		if clusterCreate || b.allowed(cc, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, rt.Topic) {
			authorized = append(authorized, rt)
			continue
		}
		out := kmsg.NewCreateTopicsResponseTopic()
		out.Topic, out.ErrorCode = rt.Topic, kerr.TopicAuthorizationFailed.Code
		msg := "Authorization failed."
		out.ErrorMessage = &msg
		denied = append(denied, out)
	}
	for _, rt := range authorized {
		if total > maxPartitionsPerRequest {
			resp.Topics = append(resp.Topics, createTopicError(rt.Topic, apierr.New(kerr.PolicyViolation, "Excessively large number of partitions per request."), b))
			continue
		}
		out := b.createTopic(ctx, req, rt)
		if out.ErrorCode == 0 && req.Version >= 5 &&
			!b.allowed(cc, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic, rt.Topic) {
			// created, but its configs are not cc's to see
			out.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			out.Configs, out.NumPartitions, out.ReplicationFactor = []kmsg.CreateTopicsResponseTopicConfig{}, -1, -1
		}
		resp.Topics = append(resp.Topics, out)
	}
	for _, rt := range dups {
		resp.Topics = append(resp.Topics, createTopicError(rt.Topic, errDuplicateTopic, b))
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp, nil
}

// requestedPartitions is what rt would create, for the per-request limit.
func (b *Broker) requestedPartitions(rt kmsg.CreateTopicsRequestTopic) int {
	switch {
	case len(rt.ReplicaAssignment) > 0:
		return len(rt.ReplicaAssignment)
	case rt.NumPartitions == -1:
		return int(b.cfg.DefaultPartition)
	case rt.NumPartitions > 0:
		return int(rt.NumPartitions)
	}
	return 0
}

func createTopicError(name string, err error, b *Broker) kmsg.CreateTopicsResponseTopic {
	rt := kmsg.NewCreateTopicsResponseTopic()
	rt.Topic = name
	rt.ErrorCode, rt.ErrorMessage = b.codeAndMessage("create topic", err)
	return rt
}

func (b *Broker) createTopic(ctx context.Context, req *kmsg.CreateTopicsRequest, rt kmsg.CreateTopicsRequestTopic) kmsg.CreateTopicsResponseTopic {
	partitions, configs, err := b.checkNewTopic(ctx, rt)
	if err != nil {
		return createTopicError(rt.Topic, err, b)
	}
	var t *topic
	if !req.ValidateOnly {
		if t, err = b.catalog.createTopic(ctx, rt.Topic, partitions, configs); err != nil {
			return createTopicError(rt.Topic, err, b)
		}
		b.log.Info("topic created", "topic", rt.Topic, "partitions", partitions)
	}
	out := kmsg.NewCreateTopicsResponseTopic()
	out.Topic = rt.Topic
	if req.Version >= 5 {
		out.NumPartitions, out.ReplicationFactor = partitions, 1
		out.Configs = append([]kmsg.CreateTopicsResponseTopicConfig{}, b.brokerConfigs().CreatedTopicConfigs(configs)...) // nullable: null only on error
	}
	if req.Version >= 7 && t != nil {
		out.TopicID = t.uuid
	}
	return out
}

// checkNewTopic runs Kafka's checks and returns the partition count and
// config overrides to create the topic with.
func (b *Broker) checkNewTopic(ctx context.Context, rt kmsg.CreateTopicsRequestTopic) (int32, map[string]string, error) {
	if err := checkTopicName(rt.Topic); err != nil {
		return 0, nil, err
	}
	if other := b.catalog.collidingTopic(rt.Topic); other != "" {
		return 0, nil, apierr.New(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", rt.Topic, other)
	}
	if b.catalog.lookup(ctx, rt.Topic) != nil {
		return 0, nil, apierr.New(kerr.TopicAlreadyExists, "Topic '%s' already exists.", rt.Topic)
	}
	partitions, err := b.newTopicPartitions(rt)
	if err != nil {
		return 0, nil, err
	}
	raw := make(map[string]*string, len(rt.Configs))
	for _, c := range rt.Configs {
		raw[c.Name] = c.Value
	}
	configs, cerr := b.brokerConfigs().CheckNewTopicConfigs(raw)
	if cerr != nil {
		return 0, nil, cerr
	}
	return partitions, configs, nil
}

func (b *Broker) newTopicPartitions(rt kmsg.CreateTopicsRequestTopic) (int32, error) {
	if len(rt.ReplicaAssignment) == 0 {
		if rt.NumPartitions == -1 {
			return b.cfg.DefaultPartition, checkReplicationFactor(rt.ReplicationFactor)
		}
		if rt.NumPartitions <= 0 {
			return 0, apierr.New(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
		}
		return rt.NumPartitions, checkReplicationFactor(rt.ReplicationFactor)
	}
	if rt.NumPartitions != -1 {
		return 0, apierr.New(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
	}
	if rt.ReplicationFactor != -1 {
		return 0, apierr.New(kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
	}
	seen := make([]bool, len(rt.ReplicaAssignment))
	for _, a := range rt.ReplicaAssignment {
		if a.Partition < 0 || int(a.Partition) >= len(seen) || seen[a.Partition] {
			return 0, apierr.New(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
		}
		seen[a.Partition] = true
		if err := b.checkAssignment(a.Replicas); err != nil {
			return 0, err
		}
	}
	return int32(len(rt.ReplicaAssignment)), nil
}
