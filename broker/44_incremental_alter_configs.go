package broker

// IncrementalAlterConfigs: v0-1
//
// Behavior:
//   - SET and DELETE any key; APPEND and SUBTRACT list keys (cleanup.policy,
//     the throttled replica lists, log.cleanup.policy), starting from the
//     current value, Kafka's default when unset; DELETE of a key that is not
//     set succeeds
//   - the resulting complete set is validated as AlterConfigs validates
//     (package kconfig) and replaces the stored one in one transaction per
//     resource; validateOnly rolls it back
//   - BROKER_LOGGER "1": the "root" logger's level (TRACE, DEBUG, INFO,
//     WARN, ERROR, FATAL) until the broker restarts, as Kafka keeps log4j
//     levels; other loggers do not exist
//   - GROUP and CLIENT_METRICS: INVALID_REQUEST "Unknown resource type N"
//     (kafgres keeps no such configs)
//   - a resource named twice: INVALID_REQUEST for each; repeated keys or a
//     null value to set: INVALID_REQUEST; an unknown operation: Kafka's
//     answers (UNKNOWN_SERVER_ERROR for a topic, INVALID_REQUEST otherwise)
//   - the catalog is reloaded before answering
//
//   - ALTER_CONFIGS on the topic, group or cluster (broker, loggers, client
//     metrics), after the request's own checks: {TOPIC_/GROUP_/
//     CLUSTER_AUTHORIZATION_FAILED, the code's message; none for loggers}
//
// Version notes:
//   - v1: flexible

import (
	"context"
	"strconv"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleIncrementalAlterConfigs(ctx context.Context, b *Broker, cc *conn, req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	keys := make([]kconfig.Resource, len(req.Resources))
	for i, r := range req.Resources {
		keys[i] = kconfig.Resource{Type: r.ResourceType, Name: r.ResourceName}
	}
	errs := b.alterEach(ctx, keys, req.ValidateOnly, func(i int) *apierr.Error {
		return b.incrementalAlterResource(ctx, cc, req.Resources[i], req.ValidateOnly)
	})
	for i, r := range req.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = r.ResourceType, r.ResourceName
		res.ErrorCode, res.ErrorMessage = errs[i].Code(), errs[i].NullableMessage()
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}

func (b *Broker) incrementalAlterResource(ctx context.Context, cc *conn, r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) *apierr.Error {
	seen := make(map[string]bool, len(r.Configs))
	for _, c := range r.Configs {
		if seen[c.Name] {
			return kconfig.ErrDuplicateKeys
		}
		seen[c.Name] = true
		if c.Op < kmsg.IncrementalAlterConfigOpSet || c.Op > kmsg.IncrementalAlterConfigOpSubtract {
			if r.ResourceType == kmsg.ConfigResourceTypeTopic {
				return apierr.WithoutMessage(kerr.UnknownServerError)
			}
			return apierr.InvalidRequest("Unknown operations type %d", int8(c.Op))
		}
		if c.Value == nil && c.Op != kmsg.IncrementalAlterConfigOpDelete {
			return kconfig.NullValue(c.Name)
		}
	}
	if err := b.alterConfigsDenied(cc, r.ResourceType, r.ResourceName, r.ResourceType != kmsg.ConfigResourceTypeBrokerLogger); err != nil {
		return err
	}
	switch r.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		return b.alterTopic(ctx, r.ResourceName, validateOnly, func(bc *kconfig.Configs, current map[string]string) (map[string]string, *apierr.Error) {
			return bc.IncrementalTopicConfigs(current, r.Configs)
		})
	case kmsg.ConfigResourceTypeBroker:
		return b.alterBroker(ctx, r.ResourceName, validateOnly, func(bc *kconfig.Configs, cluster bool) (*kconfig.BrokerAlter, *apierr.Error) {
			return bc.IncrementalBrokerAlter(cluster, r.Configs)
		})
	case kmsg.ConfigResourceTypeBrokerLogger:
		return b.alterLoggers(r, validateOnly)
	}
	return kconfig.UnknownResourceType(r.ResourceType)
}

func (b *Broker) alterLoggers(r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) *apierr.Error {
	id, perr := strconv.ParseInt(r.ResourceName, 10, 32)
	if perr != nil {
		return apierr.InvalidRequest("Node id must be an integer, but it is: %s", r.ResourceName)
	}
	if int32(id) != b.cfg.NodeID {
		return apierr.InvalidRequest("Unexpected node id. Expected %d, but received %s", b.cfg.NodeID, r.ResourceName)
	}
	level, err := kconfig.CheckLoggerOps(r.Configs)
	if err != nil {
		return err
	}
	if level != nil && !validateOnly {
		b.logLevel().Set(*level)
		b.log.Info("log level changed", "level", kconfig.LogLevelName(*level))
	}
	return nil
}
