package broker

// Metadata: v0-13
//
// Behavior:
//   - one broker (node 1) at the advertised endpoint of the listener the
//     client connected through (Kafka answers with the same listener
//     name's endpoints), controller and leader of every partition, ISR {1}
//   - no topics requested (null, or empty at v0) lists every topic
//   - an unknown topic is created when kafgres.auto_create_topics is on and
//     the request allows it (always below v4), with the default partition
//     count; otherwise UNKNOWN_TOPIC_OR_PARTITION
//   - an invalid name gets INVALID_TOPIC_EXCEPTION
//   - internal topics (internal_topics.go) have IsInternal set, also when
//     named but missing (UNKNOWN_TOPIC_OR_PARTITION) or when their
//     creation is denied; auto-creation makes __consumer_offsets and
//     __transaction_state as their coordinators would (50 partitions,
//     compacted), not with the default partition count
//   - authorized operations (v8+ topics, v8-v10 cluster, when asked): those
//     the authorizer allows (every operation that applies without one) —
//     for topics in error too; the cluster's is 0 without DESCRIBE on it
//   - DESCRIBE on each topic: the all-topics list leaves the others out;
//     named ones get TOPIC_AUTHORIZATION_FAILED whether or not they exist,
//     by id with the id and no name; auto-creation needs CREATE on the
//     cluster or the topic, else TOPIC_AUTHORIZATION_FAILED. Denied
//     topics come last: creation denied, then description denied
//
// Version notes:
//   - v1: controller, internal flag, null = all topics; v2: cluster id;
//     v4: allow auto-create; v5: offline replicas; v7: leader epoch;
//     v8: authorized operations; v9: flexible; v10: topic ids;
//     v12: topics by id (UNKNOWN_TOPIC_ID when unknown); a non-zero id
//     wins over the name, as in Kafka: the Java Admin sends Name "" (the
//     field's default), not null, beside the id

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/topicname"
	"github.com/kafgres/kafgres/security/acl"
)

func handleMetadata(ctx context.Context, b *Broker, cc *conn, req *kmsg.MetadataRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	host, port := b.endpoint(cc)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.cfg.NodeID, Host: host, Port: port}}
	resp.ClusterID = &b.clusterID
	resp.ControllerID = b.cfg.NodeID
	withOps := req.Version >= 8 && req.IncludeTopicAuthorizedOperations
	described := func(name string) kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		if withOps {
			mt.AuthorizedOperations = b.authorizedOps(cc, kmsg.ACLResourceTypeTopic, name)
		}
		return mt
	}

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		ts := b.catalog.topics()
		sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
		for _, t := range ts {
			// Topics the principal may not DESCRIBE are left out silently.
			if !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.name) {
				continue
			}
			resp.Topics = append(resp.Topics, b.topicMetadata(t, described(t.name)))
		}
		return withClusterOperations(b, cc, req, resp), nil
	}

	// The described topics (existing, unknown or created) and unknown ids
	// in request order (Kafka puts unknown ids first: kept as before, to
	// be checked by the conformance gate), then those whose creation was
	// denied, then those whose description was denied, as Kafka does.
	var createDenied, describeDenied []kmsg.MetadataResponseTopic
	allowCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	var mayCreateAll *bool
	mayCreate := func(name string) bool {
		if mayCreateAll == nil {
			v := b.allowedCluster(cc, kmsg.ACLOperationCreate)
			mayCreateAll = &v
		}
		return *mayCreateAll || b.allowed(cc, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, name)
	}
	for _, rt := range req.Topics {
		var t *topic
		switch {
		case rt.Topic == nil || rt.TopicID != [16]byte{}: // by id (v12+)
			if t = b.catalog.lookupID(ctx, rt.TopicID); t == nil {
				mt := described("")
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.name) {
				// ids are not sensitive: the id is echoed, the name is not
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = t.uuid
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				describeDenied = append(describeDenied, mt)
				continue
			}
		default:
			name := *rt.Topic
			if !b.allowed(cc, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
				describeDenied = append(describeDenied, topicError(name, kerr.TopicAuthorizationFailed))
				continue
			}
			if !topicname.Valid(name) {
				resp.Topics = append(resp.Topics, topicErrorOps(name, kerr.InvalidTopicException, described(name)))
				continue
			}
			if t = b.catalog.lookup(ctx, name); t == nil && allowCreate {
				if !mayCreate(name) {
					mt := topicError(name, kerr.TopicAuthorizationFailed)
					mt.IsInternal = topicname.Internal(name)
					createDenied = append(createDenied, mt)
					continue
				}
				created, err := b.autoCreateTopic(ctx, name)
				if err != nil {
					b.log.Error("auto-create topic", "topic", name, "err", err)
				}
				t = created
			}
			if t == nil {
				mt := topicErrorOps(name, kerr.UnknownTopicOrPartition, described(name))
				mt.IsInternal = topicname.Internal(name) // by name, as Kafka answers
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		resp.Topics = append(resp.Topics, b.topicMetadata(t, described(t.name)))
	}
	resp.Topics = append(append(resp.Topics, createDenied...), describeDenied...)
	return withClusterOperations(b, cc, req, resp), nil
}

// withClusterOperations sets the cluster's authorized operations (v8-10,
// when asked): 0 when DESCRIBE on the cluster is denied, as Kafka does.
func withClusterOperations(b *Broker, cc *conn, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) *kmsg.MetadataResponse {
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if b.allowedCluster(cc, kmsg.ACLOperationDescribe) {
			resp.AuthorizedOperations = b.authorizedOps(cc, kmsg.ACLResourceTypeCluster, acl.ClusterName)
		}
	}
	return resp
}

func topicErrorOps(name string, err *kerr.Error, mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
	mt.Topic = &name
	mt.ErrorCode = err.Code
	return mt
}

// allTopicOperations is the bit set of every ACL operation that applies to
// a topic (READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
// DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11): what Kafka reports when no
// authorizer restricts anything.
const allTopicOperations int32 = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11

// allClusterOperations: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
// DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
const allClusterOperations int32 = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12

func topicError(name string, err *kerr.Error) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = &name
	mt.ErrorCode = err.Code
	return mt
}

func (b *Broker) topicMetadata(t *topic, mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
	name := t.name
	mt.Topic = &name
	mt.TopicID = t.uuid
	mt.IsInternal = topicname.Internal(name)
	for _, p := range t.parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.index
		mp.Leader = b.cfg.NodeID
		mp.LeaderEpoch = p.epoch
		mp.Replicas = []int32{b.cfg.NodeID}
		mp.ISR = []int32{b.cfg.NodeID}
		mp.OfflineReplicas = []int32{}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
