package broker

// What AlterConfigs and IncrementalAlterConfigs share: each resource is
// changed in one transaction that locks what it reads (the topic's row, or
// kafgres.broker_config), computes the new complete config set from the
// current one, validates it (kconfig) and replaces the stored set
// (metadata's AlterTopicConfigs / AlterBrokerConfigs). validateOnly runs
// the same transaction and rolls it back.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/broker/topicname"
)

// errServer stands for a failure of ours (Postgres unreachable, ...):
// UNKNOWN_SERVER_ERROR without a message, as Kafka answers.
var errServer = apierr.WithoutMessage(kerr.UnknownServerError)

// alterTopic replaces the overrides of topic name with what next computes
// from the current ones.
func (b *Broker) alterTopic(ctx context.Context, name string, validateOnly bool,
	next func(bc *kconfig.Configs, current map[string]string) (map[string]string, *apierr.Error)) *apierr.Error {
	if err := topicResourceError(name); err != nil {
		return err
	}
	missing := apierr.New(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", name)
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
		canonical, cerr := bc.CheckTopicConfigs(proposed)
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

// topicResourceError is the error for a topic config resource whose name is
// not a usable topic (alters), or nil.
func topicResourceError(name string) *apierr.Error {
	if name == "" {
		return apierr.InvalidRequest("Default topic resources are not allowed.")
	}
	if p := topicname.Problem(name); p != "" {
		return apierr.New(kerr.InvalidTopicException, "Topic name is invalid: %s", p)
	}
	return nil
}

// alterBroker replaces the dynamic configs of the BROKER resource name
// ("" for the cluster default) with what build computes.
func (b *Broker) alterBroker(ctx context.Context, name string, validateOnly bool,
	build func(bc *kconfig.Configs, cluster bool) (*kconfig.BrokerAlter, *apierr.Error)) *apierr.Error {
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
		configs, cerr := bc.CheckBrokerAlter(a)
		if cerr != nil {
			return nil, cerr
		}
		return configs, nil
	})
	return b.alterError("broker", name, err)
}

// alterError turns what a resource's transaction returned into the
// resource's error: Kafka's for a refused change, UNKNOWN_SERVER_ERROR
// (logged) for anything else.
func (b *Broker) alterError(kind, name string, err error) *apierr.Error {
	if err == nil {
		return nil
	}
	var cerr *apierr.Error
	if errors.As(err, &cerr) {
		return cerr
	}
	b.log.Error("alter configs", kind, name, "err", err)
	return errServer
}
