package broker

// AlterConfigs: v0-2
//
// Behavior:
//   - legacy alter: the request's configs replace the resource's whole
//     override set (a topic's kafgres.topic_config rows, or the broker's or
//     cluster default's kafgres.broker_config rows); each resource in one
//     transaction; validateOnly checks and rolls back
//   - TOPIC: Kafka's validation and messages (package kconfig); unknown
//     topic: UNKNOWN_TOPIC_OR_PARTITION "The topic 'x' does not exist."
//   - BROKER "1" or "": package kconfig's rules (only log keys that are
//     topic-config synonyms, and unknown custom keys, can be set); a name
//     or value with a NUL byte or invalid UTF-8, which Postgres text
//     cannot store: INVALID_REQUEST
//   - a resource named twice, repeated keys or a null value: INVALID_REQUEST
//     (Kafka 4.4 fails to answer a request naming a resource twice; kafgres
//     answers as IncrementalAlterConfigs does)
//   - BROKER_LOGGER (as in Kafka), GROUP and CLIENT_METRICS (kafgres keeps
//     no such configs): INVALID_REQUEST "Unknown resource type N"
//   - the catalog is reloaded before answering, so the change is visible
//     to the client's next request on any connection
//
//   - ALTER_CONFIGS on the topic, group or cluster (broker), after the
//     request's own checks: {TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED,
//     the code's message}, in request order; a BROKER resource's name and
//     change are validated first (Kafka's broker-side preprocess), so an
//     invalid change is refused as such even when the ALTER_CONFIGS would
//     be denied
//
// Version notes:
//   - v1: throttle; v2: flexible

import (
	"context"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleAlterConfigs(ctx context.Context, b *Broker, cc *conn, req *kmsg.AlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	keys := make([]kconfig.Resource, len(req.Resources))
	for i, r := range req.Resources {
		keys[i] = kconfig.Resource{Type: r.ResourceType, Name: r.ResourceName}
	}
	errs := b.alterEach(ctx, keys, req.ValidateOnly, func(i int) *apierr.Error {
		return b.alterConfigsResource(ctx, cc, req.Resources[i], req.ValidateOnly)
	})
	for i, r := range req.Resources {
		res := kmsg.NewAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = r.ResourceType, r.ResourceName
		res.ErrorCode, res.ErrorMessage = errs[i].Code(), errs[i].NullableMessage()
		resp.Resources = append(resp.Resources, res)
	}
	return resp, nil
}

// alterEach runs alter for every resource named once (one named twice gets
// kconfig.ErrDuplicateResource, as Kafka answers) and reloads the catalog
// when something changed, so the answer is sent only once the change is
// served.
func (b *Broker) alterEach(ctx context.Context, keys []kconfig.Resource, validateOnly bool, alter func(i int) *apierr.Error) []*apierr.Error {
	dups := kconfig.DuplicateResources(keys)
	errs := make([]*apierr.Error, len(keys))
	altered := false
	for i, k := range keys {
		errs[i] = kconfig.ErrDuplicateResource
		if !dups[k] {
			errs[i] = alter(i)
			altered = altered || errs[i] == nil && !validateOnly
		}
	}
	if altered {
		if err := b.catalog.reload(ctx); err != nil {
			b.log.Warn("reload after alter configs", "err", err)
		}
	}
	return errs
}

func (b *Broker) alterConfigsResource(ctx context.Context, cc *conn, r kmsg.AlterConfigsRequestResource, validateOnly bool) *apierr.Error {
	configs := make(map[string]string, len(r.Configs))
	for _, c := range r.Configs {
		if _, dup := configs[c.Name]; dup {
			return kconfig.ErrDuplicateKeys
		}
		if c.Value == nil {
			return kconfig.NullValue(c.Name)
		}
		configs[c.Name] = *c.Value
	}
	var denied *apierr.Error
	if r.ResourceType != kmsg.ConfigResourceTypeBrokerLogger {
		denied = b.alterConfigsDenied(cc, r.ResourceType, r.ResourceName, true)
	}
	switch r.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if denied != nil {
			return denied
		}
		return b.alterTopic(ctx, r.ResourceName, validateOnly, func(*kconfig.Configs, map[string]string) (map[string]string, *apierr.Error) {
			return configs, nil
		})
	case kmsg.ConfigResourceTypeBroker:
		alter := func(validateOnly bool) *apierr.Error {
			return b.alterBroker(ctx, r.ResourceName, validateOnly, func(bc *kconfig.Configs, cluster bool) (*kconfig.BrokerAlter, *apierr.Error) {
				return bc.LegacyBrokerAlter(cluster, r.Configs), nil
			})
		}
		if denied != nil {
			// Kafka's broker validates the name and the change
			// (ConfigAdminManager.preprocess) before the controller
			// authorizes: a refused change is told even to a
			// principal that may not make it.
			if err := alter(true); err != nil {
				return err
			}
			return denied
		}
		return alter(validateOnly)
	}
	if denied != nil {
		return denied
	}
	return kconfig.UnknownResourceType(r.ResourceType)
}

// alterConfigsDenied is ALTER_CONFIGS on a config resource (configsDenied)
// as an answer: the code's message (Kafka's authorizeAlterResource), or
// none for the broker's loggers (withMessage false).
func (b *Broker) alterConfigsDenied(cc *conn, rt kmsg.ConfigResourceType, name string, withMessage bool) *apierr.Error {
	e := b.configsDenied(cc, rt, name, kmsg.ACLOperationAlterConfigs)
	switch {
	case e == nil:
		return nil
	case withMessage:
		return apierr.New(e, "%s", apierr.DefaultMessage(e))
	}
	return apierr.WithoutMessage(e)
}
