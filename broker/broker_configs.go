package broker

// How the broker feeds Kafka's configuration model (package kconfig): its
// start-up Config in Kafka's key names, the dynamic configs the catalog
// loaded from Postgres, and the logger level it runs with.

import (
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerConfigs is the current view: the catalog's dynamic configs, the
// broker's start-up configuration and Kafka's defaults.
func (b *Broker) brokerConfigs() *kconfig.Configs {
	if bc := b.catalog.brokerConfigs(); bc != nil {
		return bc
	}
	return newBrokerConfigs(b.cfg, nil, nil)
}

// newBrokerConfigs is the view of these dynamic configs of this broker
// (node) and of the cluster default (cluster) for a broker started with cfg.
func newBrokerConfigs(cfg Config, node, cluster map[string]string) *kconfig.Configs {
	return kconfig.New(staticBrokerConfigs(cfg), node, cluster)
}

// staticBrokerConfigs is kafgres's start-up configuration as the
// server.properties of an equivalent single-node Kafka would hold it.
func staticBrokerConfigs(cfg Config) map[string]string {
	if len(cfg.Listeners) == 0 {
		cfg.setDefaults()
	}
	id := strconv.Itoa(int(cfg.NodeID))
	delay := max(cfg.GroupInitialRebalanceDelay, 0)
	m := map[string]string{
		"node.id":                                  id,
		"broker.id":                                id,
		"process.roles":                            "broker,controller",
		"listeners":                                listenersConfig(cfg.Listeners, Listener.String),
		"advertised.listeners":                     listenersConfig(cfg.Listeners, Listener.Advertised),
		"log.dirs":                                 cfg.DataDir,
		"num.partitions":                           strconv.Itoa(int(cfg.DefaultPartition)),
		"auto.create.topics.enable":                strconv.FormatBool(cfg.AutoCreateTopics),
		"group.initial.rebalance.delay.ms":         strconv.FormatInt(delay.Milliseconds(), 10),
		"offsets.topic.replication.factor":         "1",
		"transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr":            "1",
	}
	// Settings that Kafka's server.properties would name only when set are
	// static only when they differ from Kafka's default.
	differs := map[string]string{
		"message.max.bytes":                                           strconv.Itoa(int(cfg.MaxMessageBytes)),
		"log.segment.bytes":                                           strconv.FormatInt(cfg.SegmentBytes, 10),
		"socket.request.max.bytes":                                    strconv.Itoa(int(cfg.MaxRequestBytes)),
		"queued.max.request.bytes":                                    strconv.FormatInt(cfg.QueuedMaxRequestBytes, 10),
		"connections.max.idle.ms":                                     strconv.FormatInt(cfg.ConnectionsMaxIdle.Milliseconds(), 10),
		"group.min.session.timeout.ms":                                strconv.FormatInt(cfg.GroupMinSessionTimeout.Milliseconds(), 10),
		"group.max.session.timeout.ms":                                strconv.FormatInt(cfg.GroupMaxSessionTimeout.Milliseconds(), 10),
		"group.max.size":                                              strconv.Itoa(min(cfg.GroupMaxSize, math.MaxInt32)),
		"transaction.max.timeout.ms":                                  strconv.FormatInt(cfg.TransactionMaxTimeout.Milliseconds(), 10),
		"transactional.id.expiration.ms":                              strconv.FormatInt(cfg.TransactionalIDExpiration.Milliseconds(), 10),
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": strconv.FormatInt(cfg.TransactionAbortInterval.Milliseconds(), 10),
		"transaction.remove.expired.transaction.cleanup.interval.ms":  strconv.FormatInt(cfg.TransactionRemoveExpiredInterval.Milliseconds(), 10),
		"producer.id.expiration.ms":                                   strconv.FormatInt(cfg.ProducerIDExpiration.Milliseconds(), 10),
		"log.cleaner.backoff.ms":                                      strconv.FormatInt(cfg.CleanerBackoff.Milliseconds(), 10),
	}
	for k, v := range securityConfigs(cfg) {
		differs[k] = v
	}
	for k, v := range differs {
		if def, _ := kconfig.BrokerDefault(k); v != "0" && v != def {
			m[k] = v
		}
	}
	// Zero fetch-session slots is a setting (no incremental sessions), not
	// an unset field: Config's zero was replaced by Kafka's default above.
	slots := strconv.Itoa(max(cfg.FetchSessionCacheSlots, 0))
	if def, _ := kconfig.BrokerDefault("max.incremental.fetch.session.cache.slots"); slots != def {
		m["max.incremental.fetch.session.cache.slots"] = slots
	}
	return m
}

// topicSettings is what t is configured to do right now. Take t from the
// catalog (topicByName), not from a partition: a partition keeps the topic
// value it was opened with, while the catalog's is replaced on every
// reload with the latest configs. The catalog computes the settings when it
// loads a topic, so this is cheap enough for every request.
func (b *Broker) topicSettings(t *topic) kconfig.TopicSettings {
	if t.settings != nil {
		return *t.settings
	}
	return b.brokerConfigs().TopicSettings(t.configs)
}

// brokerEntity parses a BROKER resource name: "" is the cluster default,
// else it must be this broker's id. describe selects DescribeConfigs'
// wording of the errors over the alters'.
func (b *Broker) brokerEntity(name string, describe bool) (cluster bool, err *apierr.Error) {
	if name == "" {
		return true, nil
	}
	id, perr := strconv.ParseInt(name, 10, 32)
	switch {
	case perr != nil && describe:
		return false, apierr.InvalidRequest("Broker id must be an integer, but it is: %s", name)
	case perr != nil:
		return false, apierr.InvalidRequest("Node id must be an integer, but it is: %s", name)
	case int32(id) != b.cfg.NodeID && describe:
		return false, apierr.InvalidRequest("Unexpected broker id, expected %d or empty string, but received %s", b.cfg.NodeID, name)
	case int32(id) != b.cfg.NodeID:
		return false, apierr.InvalidRequest("Unexpected broker id, expected %d, but received %s", b.cfg.NodeID, name)
	}
	return false, nil
}

func (b *Broker) describeBrokerLoggers(keys []string) []kmsg.DescribeConfigsResponseResourceConfig {
	return kconfig.DescribeLoggers(b.logLevel().Level(), keys)
}

// logLevel is the level variable BROKER_LOGGER alters change.
func (b *Broker) logLevel() *slog.LevelVar {
	if b.cfg.LogLevel == nil {
		return new(slog.LevelVar)
	}
	return b.cfg.LogLevel
}

// securityConfigs are the listener security settings in Kafka's keys,
// for the listeners that use them.
func securityConfigs(cfg Config) map[string]string {
	m := map[string]string{}
	var protoMap []string
	for _, l := range cfg.Listeners {
		if l.Protocol.SASL() {
			m["sasl.enabled.mechanisms"] = strings.Join(cfg.SASLMechanisms, ",")
			m["connections.max.reauth.ms"] = strconv.FormatInt(cfg.ConnectionsMaxReauth.Milliseconds(), 10)
		}
		if l.Protocol == SSL {
			m["ssl.client.auth"] = cfg.TLS.ClientAuth.String()
			m["ssl.principal.mapping.rules"] = cfg.PrincipalMappingRules
		}
		if l.Name != string(l.Protocol) {
			protoMap = append(protoMap, l.Name+":"+string(l.Protocol))
		}
	}
	if len(protoMap) > 0 {
		m["listener.security.protocol.map"] = strings.Join(protoMap, ",")
	}
	return m
}

// listenersConfig spells listeners as Kafka's listeners and
// advertised.listeners settings do.
func listenersConfig(ls []Listener, spell func(Listener) string) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = spell(l)
	}
	return strings.Join(parts, ",")
}
