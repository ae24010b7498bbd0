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

type topicSettings struct {
	retentionMs, retentionBytes, segmentBytes, segmentMs int64
	maxMessageBytes                                      int32
	logAppendTime                                        bool
	cleanupPolicy                                        string
}

func (b *Broker) topicSettings(t *topic) topicSettings {
	return topicSettings{retentionMs: 7 * 24 * 3600 * 1000, retentionBytes: -1, segmentBytes: b.cfg.SegmentBytes, segmentMs: 7 * 24 * 3600 * 1000, maxMessageBytes: b.cfg.MaxMessageBytes, cleanupPolicy: "delete"}
}
