package broker

// DescribeConfigs: v1-4
//
// Behavior:
//   - TOPIC: every topic config key Kafka 4.4 has, in Kafka's order, with
//     the topic's override or the value it inherits from the broker, its
//     source and (when asked) synonyms: the override, then the broker keys
//     it falls back to (see package kconfig). Unknown topic:
//     UNKNOWN_TOPIC_OR_PARTITION; invalid name: INVALID_TOPIC_EXCEPTION
//   - BROKER "1": every broker key Kafka 4.4 has, with kafgres's values
//     (package kconfig); "": only the cluster-wide dynamic defaults; any
//     other name: INVALID_REQUEST with Kafka's message
//   - BROKER_LOGGER "1": kafgres's one logger, "root", with its level
//   - GROUP: Kafka's group config keys with the broker defaults (kafgres
//     has no per-group configs); CLIENT_METRICS: the subscription defaults
//     (kafgres has no subscriptions)
//   - requested config names filter the list (unknown ones are skipped),
//     which keeps Kafka's order
//   - sensitive values are null; read-only is true for broker keys kafgres
//     cannot alter
//
//   - DESCRIBE_CONFIGS on the topic, group, or cluster (broker, loggers,
//     client metrics), else {TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED,
//     the code's message, no configs}, answered after the others
//
// Version notes:
//   - v1: synonyms, source; v2: throttle; v3: documentation, config type;
//     v4: flexible

import (
	"context"
	"strconv"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/kafgres/kafgres/broker/topicname"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeConfigs(ctx context.Context, b *Broker, cc *conn, req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	docs := req.Version >= 3 && req.IncludeDocumentation
	var denied []kmsg.DescribeConfigsResponseResource
	for _, r := range req.Resources {
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = r.ResourceType, r.ResourceName
		if code := b.configsDenied(cc, r.ResourceType, r.ResourceName, kmsg.ACLOperationDescribeConfigs); code != nil {
			msg := apierr.DefaultMessage(code)
			res.ErrorCode, res.ErrorMessage, res.Configs = code.Code, &msg, []kmsg.DescribeConfigsResponseResourceConfig{}
			denied = append(denied, res)
			continue
		}
		configs, err := b.describeResource(ctx, r, req.IncludeSynonyms, docs)
		// Kafka sends an empty message, not null, when there is none.
		msg := ""
		if err != nil {
			res.ErrorCode = err.Code()
			msg = err.Message()
			configs = []kmsg.DescribeConfigsResponseResourceConfig{}
		}
		res.ErrorMessage = &msg
		res.Configs = configs
		resp.Resources = append(resp.Resources, res)
	}
	resp.Resources = append(resp.Resources, denied...)
	return resp, nil
}

// configsDenied is Kafka's check of a config resource: op (DESCRIBE_CONFIGS
// or ALTER_CONFIGS) on the topic or group, or on the cluster for the
// broker, its loggers and client metrics; nil when allowed (or of a type
// the handler refuses anyway).
func (b *Broker) configsDenied(cc *conn, rt kmsg.ConfigResourceType, name string, op kmsg.ACLOperation) *kerr.Error {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !b.allowed(cc, op, kmsg.ACLResourceTypeTopic, name) {
			return kerr.TopicAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !b.allowed(cc, op, kmsg.ACLResourceTypeGroup, name) {
			return kerr.GroupAuthorizationFailed
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !b.allowedCluster(cc, op) {
			return kerr.ClusterAuthorizationFailed
		}
	}
	return nil
}

// errDescribeResourceType is Kafka's answer for a resource type it has no
// configs for: INVALID_REQUEST with the error's default message.
var errDescribeResourceType = apierr.New(kerr.InvalidRequest, "%s", kerr.InvalidRequest.Description)

func (b *Broker) describeResource(ctx context.Context, r kmsg.DescribeConfigsRequestResource, synonyms, docs bool) ([]kmsg.DescribeConfigsResponseResourceConfig, *apierr.Error) {
	name := r.ResourceName
	switch r.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if p := topicname.Problem(name); p != "" {
			return nil, apierr.New(kerr.InvalidTopicException, "Topic name is invalid: %s", p)
		}
		t := b.catalog.lookup(ctx, name)
		if t == nil {
			return nil, apierr.WithoutMessage(kerr.UnknownTopicOrPartition)
		}
		return b.brokerConfigs().DescribeTopic(t.configs, r.ConfigNames, synonyms, docs), nil
	case kmsg.ConfigResourceTypeBroker:
		cluster, err := b.brokerEntity(name, true)
		if err != nil {
			return nil, err
		}
		return b.brokerConfigs().DescribeBroker(cluster, r.ConfigNames, synonyms, docs), nil
	case kmsg.ConfigResourceTypeBrokerLogger:
		if name == "" {
			return nil, apierr.InvalidRequest("Broker id must not be empty")
		}
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			return nil, apierr.InvalidRequest("Broker id must be an integer, but it is: %s", name)
		}
		if int32(id) != b.cfg.NodeID {
			return nil, apierr.InvalidRequest("Unexpected broker id, expected %d but received %s", b.cfg.NodeID, name)
		}
		return b.describeBrokerLoggers(r.ConfigNames), nil
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return nil, apierr.InvalidRequest("Group name must not be empty")
		}
		return b.brokerConfigs().DescribeGroup(r.ConfigNames, synonyms, docs), nil
	case kmsg.ConfigResourceTypeClientMetrics:
		if name == "" {
			return nil, apierr.InvalidRequest("Client metrics subscription name must not be empty")
		}
		return kconfig.DescribeClientMetrics(r.ConfigNames, docs), nil
	}
	return nil, errDescribeResourceType
}
