package kconfig

// Topic configs: every key Kafka 4.4 knows for a topic, its type, default,
// validator and the broker keys it falls back to (Kafka's LogConfig and
// ServerTopicConfigSynonyms). A topic's overrides are canonical strings by
// key (the broker keeps them in kafgres.topic_config).
//
// Only some keys change what kafgres does (see TopicSettings and
// docs/configuration.md); every other key is validated, stored and
// described exactly as Kafka does, so tools that set them keep working.

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicKey is one topic config key.
type topicKey struct {
	name  string
	typ   kmsg.ConfigType
	def   string    // Kafka's default, canonical
	check validator // nil: any value of the type
	// synonyms are the broker keys whose value the topic takes when it has
	// no override, in Kafka's precedence; the first is the one Kafka
	// lists in DescribeConfigs synonyms.
	synonyms []brokerSynonym
}

// brokerSynonym is a broker key standing for a topic key; unit converts
// its value to the topic key's (log.retention.hours to milliseconds).
type brokerSynonym struct {
	name string
	unit int64
}

func syn(names ...string) []brokerSynonym {
	out := make([]brokerSynonym, len(names))
	for i, n := range names {
		out[i] = brokerSynonym{name: n, unit: 1}
	}
	return out
}

const (
	msPerMinute = 60 * 1000
	msPerHour   = 60 * msPerMinute
)

var maxLongString = strconv.FormatInt(math.MaxInt64, 10)

// topicKeys is Kafka's LogConfig in definition order, which is also the
// order Kafka validates values in (the first bad one is reported).
var topicKeys = []topicKey{
	{name: "segment.bytes", typ: kmsg.ConfigTypeInt, def: "1073741824", check: atLeast(1 << 20), synonyms: syn("log.segment.bytes")},
	{name: "segment.ms", typ: kmsg.ConfigTypeLong, def: "604800000", check: atLeast(1),
		synonyms: []brokerSynonym{{"log.roll.ms", 1}, {"log.roll.hours", msPerHour}}},
	{name: "segment.jitter.ms", typ: kmsg.ConfigTypeLong, def: "0", check: atLeast(0),
		synonyms: []brokerSynonym{{"log.roll.jitter.ms", 1}, {"log.roll.jitter.hours", msPerHour}}},
	{name: "segment.index.bytes", typ: kmsg.ConfigTypeInt, def: "10485760", check: atLeast(4), synonyms: syn("log.index.size.max.bytes")},
	{name: "flush.messages", typ: kmsg.ConfigTypeLong, def: maxLongString, check: atLeast(1), synonyms: syn("log.flush.interval.messages")},
	{name: "flush.ms", typ: kmsg.ConfigTypeLong, def: maxLongString, check: atLeast(0),
		synonyms: syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms")},
	{name: "retention.bytes", typ: kmsg.ConfigTypeLong, def: "-1", synonyms: syn("log.retention.bytes")},
	{name: "retention.ms", typ: kmsg.ConfigTypeLong, def: "604800000", check: atLeast(-1),
		synonyms: []brokerSynonym{{"log.retention.ms", 1}, {"log.retention.minutes", msPerMinute}, {"log.retention.hours", msPerHour}}},
	{name: "max.message.bytes", typ: kmsg.ConfigTypeInt, def: "1048588", check: atLeast(0), synonyms: syn("message.max.bytes")},
	{name: "index.interval.bytes", typ: kmsg.ConfigTypeInt, def: "4096", check: atLeast(0), synonyms: syn("log.index.interval.bytes")},
	{name: "delete.retention.ms", typ: kmsg.ConfigTypeLong, def: "86400000", check: atLeast(0), synonyms: syn("log.cleaner.delete.retention.ms")},
	{name: "min.compaction.lag.ms", typ: kmsg.ConfigTypeLong, def: "0", check: atLeast(0), synonyms: syn("log.cleaner.min.compaction.lag.ms")},
	{name: "max.compaction.lag.ms", typ: kmsg.ConfigTypeLong, def: maxLongString, check: atLeast(1), synonyms: syn("log.cleaner.max.compaction.lag.ms")},
	{name: "file.delete.delay.ms", typ: kmsg.ConfigTypeLong, def: "60000", check: atLeast(0), synonyms: syn("log.segment.delete.delay.ms")},
	{name: "min.cleanable.dirty.ratio", typ: kmsg.ConfigTypeDouble, def: "0.5", check: ratio, synonyms: syn("log.cleaner.min.cleanable.ratio")},
	{name: "cleanup.policy", typ: kmsg.ConfigTypeList, def: "delete", check: cleanupPolicies(false), synonyms: syn("log.cleanup.policy")},
	{name: "unclean.leader.election.enable", typ: kmsg.ConfigTypeBoolean, def: "false", synonyms: syn("unclean.leader.election.enable")},
	{name: "min.insync.replicas", typ: kmsg.ConfigTypeInt, def: "1", check: atLeast(1), synonyms: syn("min.insync.replicas")},
	{name: "compression.type", typ: kmsg.ConfigTypeString, def: "producer", check: oneOf(compressionTypes...), synonyms: syn("compression.type")},
	{name: "compression.gzip.level", typ: kmsg.ConfigTypeInt, def: "-1", check: gzipLevel, synonyms: syn("compression.gzip.level")},
	{name: "compression.lz4.level", typ: kmsg.ConfigTypeInt, def: "9", check: between(1, 17), synonyms: syn("compression.lz4.level")},
	{name: "compression.zstd.level", typ: kmsg.ConfigTypeInt, def: "3", check: between(-131072, 22), synonyms: syn("compression.zstd.level")},
	{name: "preallocate", typ: kmsg.ConfigTypeBoolean, def: "false", synonyms: syn("log.preallocate")},
	{name: "message.timestamp.type", typ: kmsg.ConfigTypeString, def: "CreateTime", check: oneOf("CreateTime", "LogAppendTime"), synonyms: syn("log.message.timestamp.type")},
	{name: "message.timestamp.before.max.ms", typ: kmsg.ConfigTypeLong, def: maxLongString, check: atLeast(0), synonyms: syn("log.message.timestamp.before.max.ms")},
	{name: "message.timestamp.after.max.ms", typ: kmsg.ConfigTypeLong, def: "3600000", check: atLeast(0), synonyms: syn("log.message.timestamp.after.max.ms")},
	{name: "leader.replication.throttled.replicas", typ: kmsg.ConfigTypeList, def: "", check: throttledReplicas},
	{name: "follower.replication.throttled.replicas", typ: kmsg.ConfigTypeList, def: "", check: throttledReplicas},
	{name: "remote.storage.enable", typ: kmsg.ConfigTypeBoolean, def: "false"},
	{name: "local.retention.ms", typ: kmsg.ConfigTypeLong, def: "-2", check: atLeast(-2), synonyms: syn("log.local.retention.ms")},
	{name: "local.retention.bytes", typ: kmsg.ConfigTypeLong, def: "-2", check: atLeast(-2), synonyms: syn("log.local.retention.bytes")},
	{name: "remote.log.copy.disable", typ: kmsg.ConfigTypeBoolean, def: "false"},
	{name: "remote.copy.lag.ms", typ: kmsg.ConfigTypeLong, def: "0", check: atLeast(-1), synonyms: syn("log.remote.copy.lag.ms")},
	{name: "remote.copy.lag.bytes", typ: kmsg.ConfigTypeLong, def: "-1", check: atLeast(-1), synonyms: syn("log.remote.copy.lag.bytes")},
	{name: "remote.log.delete.on.disable", typ: kmsg.ConfigTypeBoolean, def: "false"},
	{name: "max.decompressed.message.bytes", typ: kmsg.ConfigTypeInt, def: "2147483639", check: between(1, 2147483639), synonyms: syn("max.decompressed.message.bytes")},
	{name: "errors.deadletterqueue.group.enable", typ: kmsg.ConfigTypeBoolean, def: "false"},
}

var topicKeyByName = func() map[string]*topicKey {
	m := make(map[string]*topicKey, len(topicKeys))
	for i := range topicKeys {
		m[topicKeys[i].name] = &topicKeys[i]
	}
	return m
}()

// TopicSettings are the effective values of the topic configs kafgres
// honours (override → dynamic broker → dynamic cluster default → static
// broker → Kafka's default).
type TopicSettings struct {
	RetentionMs, RetentionBytes, SegmentBytes, SegmentMs int64
	MaxMessageBytes                                      int32
	LogAppendTime                                        bool
	// TimestampBeforeMaxMs / TimestampAfterMaxMs bound how far a CreateTime
	// record's timestamp may lie behind / ahead of the broker's clock.
	TimestampBeforeMaxMs, TimestampAfterMaxMs int64
	// CleanupPolicy is "delete", "compact", "compact,delete", or "" for
	// an empty policy list: keep everything (Kafka 4.x's meaning).
	CleanupPolicy string
	// Compaction: delete.retention.ms, min/max.compaction.lag.ms,
	// min.cleanable.dirty.ratio, segment.index.bytes.
	DeleteRetentionMs, MinCompactionLagMs, MaxCompactionLagMs int64
	MinCleanableDirtyRatio                                    float64
	SegmentIndexBytes                                         int64
}

// Compacted says whether the policy includes compact: the cleaner keeps
// the latest record of each key, and produce refuses records without one.
func (s TopicSettings) Compacted() bool { return strings.Contains(s.CleanupPolicy, "compact") }

// TopicSettings are the effective values for a topic with these overrides.
func (bc *Configs) TopicSettings(overrides map[string]string) TopicSettings {
	v := func(name string) configValue { val, _ := bc.topicValue(topicKeyByName[name], overrides); return val }
	s := TopicSettings{
		RetentionMs:     v("retention.ms").num,
		RetentionBytes:  v("retention.bytes").num,
		SegmentBytes:    v("segment.bytes").num,
		SegmentMs:       v("segment.ms").num,
		MaxMessageBytes: int32(v("max.message.bytes").num),
		LogAppendTime:   v("message.timestamp.type").str == "LogAppendTime",

		TimestampBeforeMaxMs: v("message.timestamp.before.max.ms").num,
		TimestampAfterMaxMs:  v("message.timestamp.after.max.ms").num,

		DeleteRetentionMs:      v("delete.retention.ms").num,
		MinCompactionLagMs:     v("min.compaction.lag.ms").num,
		MaxCompactionLagMs:     v("max.compaction.lag.ms").num,
		MinCleanableDirtyRatio: v("min.cleanable.dirty.ratio").f,
		SegmentIndexBytes:      v("segment.index.bytes").num,
	}
	var compact, del bool
	for _, p := range v("cleanup.policy").list {
		compact = compact || p == "compact"
		del = del || p == "delete"
	}
	switch {
	case compact && del:
		s.CleanupPolicy = "compact,delete"
	case compact:
		s.CleanupPolicy = "compact"
	case del:
		s.CleanupPolicy = "delete"
	}
	return s
}

// topicValue is k's effective value for a topic with these overrides, and
// whether it comes from the overrides. A stored override that no longer
// parses (written by hand in SQL) is ignored.
func (bc *Configs) topicValue(k *topicKey, overrides map[string]string) (configValue, bool) {
	if raw, ok := overrides[k.name]; ok {
		if v, err := parseConfig(k.name, k.typ, raw); err == nil && (k.check == nil || k.check(k.name, v) == nil) {
			return v, true
		}
	}
	return bc.topicDefault(k), false
}

// topicDefault is the value a topic without an override gets: from the
// broker synonyms as KafkaConfig derives it, else Kafka's topic default.
func (bc *Configs) topicDefault(k *topicKey) configValue {
	for _, s := range k.synonyms {
		raw, ok := bc.resolve(s.name)
		if !ok {
			continue
		}
		if s.unit == 1 {
			if v, err := parseConfig(k.name, k.typ, raw); err == nil {
				return bc.normalizeRetention(k, v)
			}
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			continue
		}
		v, _ := parseConfig(k.name, k.typ, strconv.FormatInt(n*s.unit, 10))
		return bc.normalizeRetention(k, v)
	}
	v, _ := parseConfig(k.name, k.typ, k.def)
	return v
}

// normalizeRetention: KafkaConfig turns any negative log retention time
// into -1 (unlimited).
func (bc *Configs) normalizeRetention(k *topicKey, v configValue) configValue {
	if k.name == "retention.ms" && v.num < 0 {
		v, _ = parseConfig(k.name, k.typ, "-1")
	}
	return v
}

// CheckTopicConfigs validates a topic's complete new override set the way
// Kafka's controller does (LogConfig.validate): names first, then each
// value in definition order, then the checks across keys. It returns the
// canonical values to store.
func (bc *Configs) CheckTopicConfigs(overrides map[string]string) (map[string]string, *apierr.Error) {
	names := make([]string, 0, len(overrides))
	for n := range overrides {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if topicKeyByName[n] == nil {
			return nil, apierr.InvalidConfig("Unknown topic config name: %s", n)
		}
	}
	out := make(map[string]string, len(overrides))
	parsed := make(map[string]configValue, len(overrides))
	for i := range topicKeys {
		k := &topicKeys[i]
		raw, ok := overrides[k.name]
		if !ok {
			continue
		}
		v, err := parseConfig(k.name, k.typ, raw)
		if err == nil && k.check != nil {
			err = k.check(k.name, v)
		}
		if err != nil {
			return nil, err
		}
		out[k.name], parsed[k.name] = v.str, v
	}
	value := func(name string) configValue {
		if v, ok := parsed[name]; ok {
			return v
		}
		return bc.topicDefault(topicKeyByName[name])
	}
	if minLag, maxLag := value("min.compaction.lag.ms").num, value("max.compaction.lag.ms").num; minLag > maxLag {
		return nil, apierr.InvalidConfig("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", minLag, maxLag)
	}
	if value("remote.storage.enable").b {
		return nil, apierr.InvalidConfig("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
	}
	return out, nil
}

// CheckNewTopicConfigs checks the configs of a topic being created
// (CreateTopics), where a null value is refused, and returns the canonical
// values to store.
func (bc *Configs) CheckNewTopicConfigs(configs map[string]*string) (map[string]string, *apierr.Error) {
	names := make([]string, 0, len(configs))
	raw := make(map[string]string, len(configs))
	for n, v := range configs {
		names = append(names, n)
		if v != nil {
			raw[n] = *v
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if configs[n] == nil {
			return nil, apierr.InvalidConfig("Null value not supported for topic configs: %s", n)
		}
	}
	return bc.CheckTopicConfigs(raw)
}

// DescribeTopic is DescribeConfigs' answer for a topic with these
// overrides: every topic key (or those in keys, when not empty) in Kafka's
// order. The topic need not exist yet: CreateTopics with validateOnly
// describes the topic it would create.
func (bc *Configs) DescribeTopic(overrides map[string]string, keys []string, synonyms, documentation bool) []kmsg.DescribeConfigsResponseResourceConfig {
	want := keySet(keys)
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	for i := range kafkaConfigs.Topic {
		e := &kafkaConfigs.Topic[i]
		k := topicKeyByName[e.Name]
		if k == nil || want != nil && !want[e.Name] {
			continue
		}
		v, overridden := bc.topicValue(k, overrides)
		var syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		if overridden {
			syns = append(syns, configSynonym(k.name, &v.str, kmsg.ConfigSourceDynamicTopicConfig))
		}
		if len(k.synonyms) > 0 {
			primary := k.synonyms[0].name
			syns = append(syns, bc.synonyms(primary, brokerSynonymNames(primary), false)...)
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value = k.name, &v.str
		c.Source = kmsg.ConfigSourceDefaultConfig
		if len(syns) > 0 {
			c.Source = syns[0].Source
		}
		if synonyms {
			c.ConfigSynonyms = syns
		}
		c.ConfigType = k.typ
		if documentation {
			c.Documentation = e.Doc
		}
		out = append(out, c)
	}
	return out
}

// CreatedTopicConfigs is the config list CreateTopics v5+ returns for a
// topic created (or, with validateOnly, that would be created) with these
// canonical overrides (CheckNewTopicConfigs): the same entries as
// DescribeConfigs, sorted by name as Kafka sends them.
func (bc *Configs) CreatedTopicConfigs(overrides map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	described := bc.DescribeTopic(overrides, nil, false, false)
	sort.Slice(described, func(i, j int) bool { return described[i].Name < described[j].Name })
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(described))
	for _, d := range described {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.ReadOnly, c.Source, c.IsSensitive = d.Name, d.Value, d.ReadOnly, int8(d.Source), d.IsSensitive
		out = append(out, c)
	}
	return out
}

func keySet(keys []string) map[string]bool {
	if len(keys) == 0 {
		return nil
	}
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func configSynonym(name string, value *string, src kmsg.ConfigSource) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, value, src
	return s
}

// IncrementalTopicConfigs applies IncrementalAlterConfigs operations to a
// topic's current overrides; CheckTopicConfigs checks the result.
func (bc *Configs) IncrementalTopicConfigs(current map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, *apierr.Error) {
	next := make(map[string]string, len(current))
	for k, v := range current {
		next[k] = v
	}
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			next[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			k := topicKeyByName[op.Name]
			if k == nil || k.typ != kmsg.ConfigTypeList {
				return nil, apierr.InvalidConfig("Can't %s to key %s because its type is not LIST.", op.Op, op.Name)
			}
			base, ok := next[op.Name]
			if v, err := parseConfig(k.name, k.typ, base); !ok || err != nil {
				v, _ = bc.topicValue(k, nil)
				base = v.str
			}
			next[op.Name] = applyListOp(base, op.Op, *op.Value)
		}
	}
	return next, nil
}

// applyListOp appends the comma-separated items of value to the list base
// (skipping those already in it) or removes them from it.
func applyListOp(base string, op kmsg.IncrementalAlterConfigOp, value string) string {
	var items []string
	if javaTrim(base) != "" {
		items = listSeparator.Split(javaTrim(base), -1)
	}
	for _, it := range strings.Split(value, ",") {
		if op == kmsg.IncrementalAlterConfigOpAppend {
			if !slices.Contains(items, it) {
				items = append(items, it)
			}
			continue
		}
		kept := items[:0]
		for _, x := range items {
			if x != it {
				kept = append(kept, x)
			}
		}
		items = kept
	}
	return strings.Join(items, ",")
}
