package broker

// TEMPORARY: stands in for the config work merged from wt-configs.

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) validateTopicConfigs(configs map[string]*string) error { return nil }

func insertTopicConfigs(ctx context.Context, tx pgx.Tx, topicID int64, configs map[string]string) error {
	return nil
}

func (b *Broker) newTopicConfigs(overrides map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	return nil
}
