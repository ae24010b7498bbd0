package broker

// IncrementalAlterConfigs: v0-1
//
// Behavior:
//   - SET and DELETE any key; APPEND and SUBTRACT list keys (cleanup.policy,
//     the throttled replica lists, log.cleanup.policy), starting from the
//     current value, Kafka's default when unset; DELETE of a key that is not
//     set succeeds
//   - the resulting complete set is validated as AlterConfigs validates
//     (topic_configs.go, broker_configs.go) and replaces the stored one in
//     one transaction per resource; validateOnly rolls it back
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
// Version notes:
//   - v1: flexible

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleIncrementalAlterConfigs(ctx context.Context, b *Broker, _ *conn, req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	keys := make([]resourceKey, len(req.Resources))
	for i, r := range req.Resources {
		keys[i] = resourceKey{r.ResourceType, r.ResourceName}
	}
	errs := b.alterEach(ctx, keys, req.ValidateOnly, func(i int) *apiError {
		return b.incrementalAlterResource(ctx, req.Resources[i], req.ValidateOnly)
	})
	for i, r := range req.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = r.ResourceType, r.ResourceName
		res.ErrorCode, res.ErrorMessage = errs[i].errorCode(), errs[i].errorMessage()
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}

func (b *Broker) incrementalAlterResource(ctx context.Context, r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) *apiError {
	seen := make(map[string]bool, len(r.Configs))
	for _, c := range r.Configs {
		if seen[c.Name] {
			return errDuplicateKeys
		}
		seen[c.Name] = true
		if c.Op < kmsg.IncrementalAlterConfigOpSet || c.Op > kmsg.IncrementalAlterConfigOpSubtract {
			if r.ResourceType == kmsg.ConfigResourceTypeTopic {
				return &apiError{code: kerr.UnknownServerError.Code}
			}
			return invalidRequest("Unknown operations type %d", int8(c.Op))
		}
		if c.Value == nil && c.Op != kmsg.IncrementalAlterConfigOpDelete {
			return nullValue(c.Name)
		}
	}
	switch r.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		return b.alterTopic(ctx, r.ResourceName, validateOnly, func(bc *brokerConfigs, current map[string]string) (map[string]string, *apiError) {
			return bc.incrementalTopicConfigs(current, r.Configs)
		})
	case kmsg.ConfigResourceTypeBroker:
		return b.alterBroker(ctx, r.ResourceName, validateOnly, func(bc *brokerConfigs, cluster bool) (*brokerAlter, *apiError) {
			return bc.incremental(cluster, r.Configs)
		})
	case kmsg.ConfigResourceTypeBrokerLogger:
		return b.alterLoggers(r, validateOnly)
	}
	return unknownResourceType(r.ResourceType)
}

func (b *Broker) alterLoggers(r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) *apiError {
	id, perr := strconv.ParseInt(r.ResourceName, 10, 32)
	if perr != nil {
		return invalidRequest("Node id must be an integer, but it is: %s", r.ResourceName)
	}
	if int32(id) != b.cfg.NodeID {
		return invalidRequest("Unexpected node id. Expected %d, but received %s", b.cfg.NodeID, r.ResourceName)
	}
	level, err := checkLoggerOps(r.Configs)
	if err != nil {
		return err
	}
	if level != nil && !validateOnly {
		b.logLevel().Set(slog.Level(*level))
		b.log.Info("log level changed", "level", kafkaLogLevel(*level))
	}
	return nil
}
