package broker

import (
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testConfig() Config {
	cfg := Config{ListenAddr: "127.0.0.1:9092", AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, DataDir: "/data", AutoCreateTopics: true}
	cfg.setDefaults()
	return cfg
}

// The start-up configuration in Kafka's names; settings kafgres shares
// with Kafka's defaults are left to DEFAULT_CONFIG.
func TestStaticBrokerConfigs(t *testing.T) {
	want := map[string]string{
		"advertised.listeners":                     "PLAINTEXT://127.0.0.1:9092",
		"auto.create.topics.enable":                "true",
		"broker.id":                                "1",
		"group.initial.rebalance.delay.ms":         "3000",
		"listeners":                                "PLAINTEXT://127.0.0.1:9092",
		"log.dirs":                                 "/data",
		"node.id":                                  "1",
		"num.partitions":                           "1",
		"offsets.topic.replication.factor":         "1",
		"process.roles":                            "broker,controller",
		"queued.max.request.bytes":                 "268435456",
		"transaction.state.log.min.isr":            "1",
		"transaction.state.log.replication.factor": "1",
	}
	if got := staticBrokerConfigs(testConfig()); !maps.Equal(got, want) {
		t.Errorf("defaults: %v, want %v", got, want)
	}
	cfg := testConfig()
	cfg.DefaultPartition = 3
	cfg.MaxMessageBytes = 2 << 20
	cfg.GroupInitialRebalanceDelay = -1
	cfg.TransactionAbortInterval = 500 * time.Millisecond
	want["num.partitions"] = "3"
	want["message.max.bytes"] = "2097152"
	want["group.initial.rebalance.delay.ms"] = "0"
	want["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "500"
	if got := staticBrokerConfigs(cfg); !maps.Equal(got, want) {
		t.Errorf("changed: %v, want %v", got, want)
	}
	// no incremental fetch sessions at all is a setting that differs from
	// Kafka's 1000, though it is zero
	noSessions := cfg
	noSessions.FetchSessionCacheSlots = -1
	if got := staticBrokerConfigs(noSessions)["max.incremental.fetch.session.cache.slots"]; got != "0" {
		t.Errorf("fetch session slots off: %q, want \"0\"", got)
	}
	// the static values reach DescribeConfigs and the topics' defaults
	bc := newBrokerConfigs(cfg, nil, nil)
	if d := bc.DescribeBroker(false, []string{"num.partitions"}, false, false); len(d) != 1 || *d[0].Value != "3" || d[0].Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("num.partitions: %+v", d)
	}
	if s := bc.TopicSettings(nil); s.MaxMessageBytes != 2<<20 {
		t.Errorf("max.message.bytes: %d", s.MaxMessageBytes)
	}
}

func TestTopicSettings(t *testing.T) {
	b := &Broker{cfg: testConfig(), catalog: newCatalog(nil)}
	tp := &topic{name: "t", configs: map[string]string{"retention.ms": "1000"}}
	if got := b.topicSettings(tp).RetentionMs; got != 1000 {
		t.Errorf("before the first load: retention.ms %d", got)
	}
	b.catalog.brokers = newBrokerConfigs(b.cfg, nil, map[string]string{"log.roll.ms": "1000"})
	if got := b.topicSettings(tp).SegmentMs; got != 1000 {
		t.Errorf("loaded broker configs ignored: segment.ms %d", got)
	}
	// the catalog computes settings when it loads a topic
	tp.settings = &kconfig.TopicSettings{RetentionMs: 42}
	if got := b.topicSettings(tp).RetentionMs; got != 42 {
		t.Errorf("precomputed settings ignored: %d", got)
	}
}

func TestBrokerEntity(t *testing.T) {
	b := &Broker{cfg: testConfig()}
	for _, tc := range []struct {
		name     string
		describe bool
		cluster  bool
		msg      string
	}{
		{"", true, true, ""},
		{"1", false, false, ""},
		{"01", true, false, ""},
		{"2", true, false, "Unexpected broker id, expected 1 or empty string, but received 2"},
		{"2", false, false, "Unexpected broker id, expected 1, but received 2"},
		{"abc", true, false, "Broker id must be an integer, but it is: abc"},
		{"abc", false, false, "Node id must be an integer, but it is: abc"},
	} {
		cluster, err := b.brokerEntity(tc.name, tc.describe)
		if cluster != tc.cluster || err.Message() != tc.msg {
			t.Errorf("%q describe=%v: %v %q", tc.name, tc.describe, cluster, err.Message())
		}
	}
}

func TestBrokerLoggers(t *testing.T) {
	s := func(v string) *string { return &v }
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = kconfig.RootLogger, kmsg.IncrementalAlterConfigOpSet, s("WARN")
	b := &Broker{cfg: testConfig(), log: slog.New(slog.DiscardHandler)}
	b.cfg.LogLevel = new(slog.LevelVar)
	req := kmsg.NewIncrementalAlterConfigsRequestResource()
	req.ResourceType, req.ResourceName, req.Configs = kmsg.ConfigResourceTypeBrokerLogger, "1", []kmsg.IncrementalAlterConfigsRequestResourceConfig{c}
	if err := b.alterLoggers(req, true); err != nil || b.cfg.LogLevel.Level() != slog.LevelInfo {
		t.Fatalf("validateOnly: %v, level %v", err, b.cfg.LogLevel.Level())
	}
	if err := b.alterLoggers(req, false); err != nil {
		t.Fatal(err)
	}
	if d := b.describeBrokerLoggers(nil); len(d) != 1 || *d[0].Value != "WARN" || d[0].Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
		t.Errorf("after WARN: %+v", d)
	}
	req.ResourceName = "2"
	if err := b.alterLoggers(req, false); err == nil || err.Message() != "Unexpected node id. Expected 1, but received 2" {
		t.Errorf("wrong node: %v", err)
	}
	req.ResourceName = ""
	if err := b.alterLoggers(req, false); err == nil || err.Message() != "Node id must be an integer, but it is: " {
		t.Errorf("empty node: %v", err)
	}
}
