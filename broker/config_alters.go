package broker

// What AlterConfigs and IncrementalAlterConfigs share: each resource is
// changed in one transaction that locks what it reads (the topic's row, or
// kafgres.broker_config), computes the new complete config set from the
// current one, validates it and replaces the stored set. validateOnly runs
// the same transaction and rolls it back.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/metadata"
)

// errServer stands for a failure of ours (Postgres unreachable, ...):
// UNKNOWN_SERVER_ERROR without a message, as Kafka answers.
var errServer = &apiError{code: kerr.UnknownServerError.Code}

type resourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// duplicateResources are the resources named more than once in a request;
// Kafka refuses each occurrence.
func duplicateResources(keys []resourceKey) map[resourceKey]bool {
	seen := map[resourceKey]int{}
	for _, k := range keys {
		seen[k]++
	}
	dups := map[resourceKey]bool{}
	for k, n := range seen {
		if n > 1 {
			dups[k] = true
		}
	}
	return dups
}

var (
	errDuplicateResource = invalidRequest("Each resource must appear at most once.")
	errDuplicateKeys     = invalidRequest("Error due to duplicate config keys")
)

func nullValue(name string) *apiError {
	return invalidRequest("Null value not supported for : %s", name)
}

func unknownResourceType(t kmsg.ConfigResourceType) *apiError {
	return invalidRequest("Unknown resource type %d", int8(t))
}

// alterTopic replaces the overrides of topic name with what next computes
// from the current ones.
func (b *Broker) alterTopic(ctx context.Context, name string, validateOnly bool,
	next func(bc *brokerConfigs, current map[string]string) (map[string]string, *apiError)) *apiError {
	if err := topicResourceError(name); err != nil {
		return err
	}
	missing := &apiError{code: kerr.UnknownTopicOrPartition.Code, msg: fmt.Sprintf("The topic '%s' does not exist.", name)}
	t := b.catalog.lookup(ctx, name)
	if t == nil {
		return missing
	}
	bc := b.brokerConfigs()
	err := b.meta.AlterTopicConfigs(ctx, t.id, !validateOnly, func(current map[string]string) (map[string]string, error) {
		proposed, cerr := next(bc, current)
		if cerr != nil {
			return nil, cerr
		}
		canonical, cerr := bc.checkTopicConfigs(proposed)
		if cerr != nil {
			return nil, cerr
		}
		return canonical, nil
	})
	if errors.Is(err, metadata.ErrUnknownTopic) {
		return missing
	}
	return b.alterError("topic", name, err)
}

// alterBroker replaces the dynamic configs of the BROKER resource name
// ("" for the cluster default) with what build computes.
func (b *Broker) alterBroker(ctx context.Context, name string, validateOnly bool,
	build func(bc *brokerConfigs, cluster bool) (*brokerAlter, *apiError)) *apiError {
	cluster, cerr := b.brokerEntity(name, false)
	if cerr != nil {
		return cerr
	}
	err := b.meta.AlterBrokerConfigs(ctx, b.cfg.NodeID, cluster, !validateOnly, func(node, clusterConfigs map[string]string) (map[string]string, error) {
		bc := newBrokerConfigs(b.cfg, node, clusterConfigs)
		a, cerr := build(bc, cluster)
		if cerr != nil {
			return nil, cerr
		}
		configs, cerr := bc.check(a)
		if cerr != nil {
			return nil, cerr
		}
		if _, stored := clusterConfigs[minISRKey]; cluster && !stored && !contains(a.set, minISRKey) {
			delete(configs, minISRKey) // still the implicit default: no row for it
		}
		return configs, nil
	})
	return b.alterError("broker", name, err)
}

// alterError turns what a resource's transaction returned into the
// resource's error: Kafka's for a refused change, UNKNOWN_SERVER_ERROR
// (logged) for anything else.
func (b *Broker) alterError(kind, name string, err error) *apiError {
	if err == nil {
		return nil
	}
	var cerr *apiError
	if errors.As(err, &cerr) {
		return cerr
	}
	b.log.Error("alter configs", kind, name, "err", err)
	return errServer
}

// errorMessage is a response's message: null when there is none.
func (e *apiError) errorMessage() *string {
	if e == nil || e.msg == "" {
		return nil
	}
	msg := e.msg
	return &msg
}

func (e *apiError) errorCode() int16 {
	if e == nil {
		return 0
	}
	return e.code
}
