package kconfig

// Broker configs (resource type BROKER, name "1" for this broker or "" for
// the cluster-wide default). DescribeConfigs lists every key Kafka 4.4 has
// (data/kafka-4.4.0.json) with the value kafgres really uses, from the
// highest source down:
//
//   - DYNAMIC_BROKER_CONFIG: kafgres.broker_config rows with node_id 1
//   - DYNAMIC_DEFAULT_BROKER_CONFIG: rows with node_id NULL; like Kafka 4.x
//     with eligible leader replicas, the cluster default always holds
//     min.insync.replicas (1 unless set)
//   - STATIC_BROKER_CONFIG: what kafgres is started with, in Kafka's terms:
//     node.id, listeners, log.dirs, num.partitions, ...
//   - DEFAULT_CONFIG: Kafka's default
//
// Alters accept the log keys that are synonyms of topic configs (the ones
// Kafka reconfigures dynamically for logs: log.retention.ms,
// log.segment.bytes, message.max.bytes, ...) and, as Kafka does, keys it
// does not know (plugins' custom configs); every other known key is
// refused as not dynamically updatable.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Configs is one consistent view of the broker configuration, from which
// topics' values derive too. Its maps are never written after New.
type Configs struct {
	node     map[string]string // DYNAMIC_BROKER_CONFIG
	cluster  map[string]string // DYNAMIC_DEFAULT_BROKER_CONFIG
	static   map[string]string // STATIC_BROKER_CONFIG
	defaults map[string]string // DEFAULT_CONFIG (keys with a non-null default)
	// minISRStored: the cluster default's min.insync.replicas is a stored
	// row, not the implicit one New adds.
	minISRStored bool
}

// eligibleLeaderReplicas: Kafka 4.x clusters run with ELR, which pins
// min.insync.replicas at the cluster level (see Configs.cluster).
const (
	minISRKey        = "min.insync.replicas"
	minISRClusterDef = "1"
)

// New is the view of these dynamic configs, of this broker (node) and of
// the cluster default (cluster), over the static ones: the broker's
// start-up configuration under Kafka's key names. The maps are kept, not
// copied: none may be written afterwards.
func New(static, node, cluster map[string]string) *Configs {
	_, stored := cluster[minISRKey]
	if !stored {
		c := make(map[string]string, len(cluster)+1)
		for k, v := range cluster {
			c[k] = v
		}
		c[minISRKey] = minISRClusterDef
		cluster = c
	}
	if node == nil {
		node = map[string]string{}
	}
	return &Configs{node: node, cluster: cluster, static: static, defaults: kafkaBrokerDefaults, minISRStored: stored}
}

// resolve is the broker's current value of name, from the highest source.
func (bc *Configs) resolve(name string) (string, bool) {
	for _, m := range []map[string]string{bc.node, bc.cluster, bc.static, bc.defaults} {
		if v, ok := m[name]; ok {
			return v, true
		}
	}
	return "", false
}

// brokerSynonymNames is DynamicBrokerConfig.brokerConfigSynonyms: the keys
// that set the same thing as name, highest precedence first.
func brokerSynonymNames(name string) []string {
	switch name {
	case "log.roll.ms", "log.roll.hours":
		return []string{"log.roll.ms", "log.roll.hours"}
	case "log.roll.jitter.ms", "log.roll.jitter.hours":
		return []string{"log.roll.jitter.ms", "log.roll.jitter.hours"}
	case "log.flush.interval.ms":
		return []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}
	case "log.retention.ms", "log.retention.minutes", "log.retention.hours":
		return []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}
	}
	return []string{name}
}

// synonyms is ConfigHelper.configSynonyms: every source's value of each
// of names, dynamic broker first, then dynamic default, static, default;
// entries before the first one for name itself are dropped (so
// retention.ms lists no log.retention.hours default while log.retention.ms
// is unset — Kafka's own quirk).
func (bc *Configs) synonyms(name string, names []string, sensitive bool) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	sources := []struct {
		m   map[string]string
		src kmsg.ConfigSource
	}{
		{bc.node, kmsg.ConfigSourceDynamicBrokerConfig},
		{bc.cluster, kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{bc.static, kmsg.ConfigSourceStaticBrokerConfig},
		{bc.defaults, kmsg.ConfigSourceDefaultConfig},
	}
	for _, s := range sources {
		for _, n := range names {
			if v, ok := s.m[n]; ok {
				var value *string
				if !sensitive {
					value = &v
				}
				out = append(out, configSynonym(n, value, s.src))
			}
		}
	}
	for len(out) > 0 && out[0].Name != name {
		out = out[1:]
	}
	return out
}

// alterableBrokerKeys are the broker keys kafgres lets AlterConfigs set:
// the broker synonyms of topic configs that Kafka reconfigures at runtime,
// the connection quotas (ConnectionLimits), and the log cleaner's I/O rate
// and backoff (CleanerSettings; read at every round of the cleaner).
var alterableBrokerKeys = func() map[string]bool {
	m := map[string]bool{"max.connections": true, "max.connections.per.ip": true,
		"log.cleaner.io.max.bytes.per.second": true, "log.cleaner.backoff.ms": true}
	for _, k := range topicKeys {
		if len(k.synonyms) > 0 {
			if e := kafkaBrokerKeys[k.synonyms[0].name]; e != nil && !e.ReadOnly {
				m[e.Name] = true
			}
		}
	}
	return m
}()

// brokerKeyType is name's type, UNKNOWN for a key Kafka does not have.
func brokerKeyType(name string) kmsg.ConfigType {
	if e := kafkaBrokerKeys[name]; e != nil {
		return e.configType()
	}
	return kmsg.ConfigTypeUnknown
}

// brokerValidator is the check Kafka applies to a dynamic value of an
// alterable broker key; most are their topic synonym's.
func brokerValidator(name string) validator {
	switch name {
	case "log.retention.ms":
		return requirement(func(n int64) bool { return n >= 1 || n < 0 }, "log.retention.ms must be unlimited (-1) or, greater than or equal to 1")
	case "log.roll.ms":
		return requirement(func(n int64) bool { return n >= 1 }, "log.roll.ms must be greater than or equal to 1")
	case "log.roll.jitter.ms":
		return requirement(func(n int64) bool { return n >= 0 }, "log.roll.jitter.ms must be greater than or equal to 0")
	case "log.cleanup.policy":
		return cleanupPolicies(true)
	case "max.connections", "max.connections.per.ip", "log.cleaner.backoff.ms":
		return atLeast(0)
	}
	for _, k := range topicKeys {
		if len(k.synonyms) > 0 && k.synonyms[0].name == name {
			if k.name == "flush.ms" {
				return nil // log.flush.interval.ms takes any long
			}
			return k.check
		}
	}
	return nil
}

// requirement is a KafkaConfig "require" check.
func requirement(ok func(int64) bool, msg string) validator {
	return func(_ string, v configValue) *apierr.Error {
		if !ok(v.num) {
			return apierr.InvalidRequest("requirement failed: %s", msg)
		}
		return nil
	}
}

// BrokerAlter is one BROKER resource's change, built by
// IncrementalBrokerAlter or LegacyBrokerAlter and checked by
// CheckBrokerAlter: the entity's new dynamic config set and the keys the
// request sets and deletes.
type BrokerAlter struct {
	cluster bool
	set     []string // keys given a value, in request order
	deleted []string // keys removed
	next    map[string]string
}

// CheckBrokerAlter validates a, in Kafka's order: keys that cannot be
// updated dynamically, values, eligible-leader-replica rules, checks across
// keys. It returns the entity's canonical set to store; the cluster
// default's implicit min.insync.replicas (see New) is stored only once set.
func (bc *Configs) CheckBrokerAlter(a *BrokerAlter) (map[string]string, *apierr.Error) {
	// A custom key is stored as given (below), so its name and value
	// must fit in kafgres.broker_config's text columns.
	for _, k := range a.set {
		if !StorableText(k) {
			return nil, apierr.InvalidRequest("%s", UnstorableText("Configuration name", k))
		}
		if !StorableText(a.next[k]) {
			return nil, apierr.InvalidRequest("%s", UnstorableText("Value of configuration "+k, a.next[k]))
		}
	}
	var static []string
	for _, k := range a.set {
		if kafkaBrokerKeys[k] != nil && !alterableBrokerKeys[k] {
			static = append(static, k)
		}
	}
	if len(static) > 0 {
		return nil, apierr.InvalidRequest("Cannot update these configs dynamically: [%s]", strings.Join(javaHashSetOrder(static), ", "))
	}
	out := make(map[string]string, len(a.next))
	for k, raw := range a.next {
		out[k] = raw
	}
	for _, k := range a.set {
		if kafkaBrokerKeys[k] == nil {
			continue // a custom config: stored as given
		}
		v, err := parseConfig(k, brokerKeyType(k), a.next[k])
		if err == nil {
			if check := brokerValidator(k); check != nil {
				err = check(k, v)
			}
		}
		if err != nil {
			if err.Code() == kerr.InvalidConfig.Code {
				err = apierr.InvalidRequest("%s", err.Message())
			}
			return nil, err
		}
		out[k] = v.str
	}
	changed := slices.Contains(a.set, minISRKey) || slices.Contains(a.deleted, minISRKey)
	if !a.cluster && changed {
		return nil, apierr.InvalidConfig("Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
	}
	if _, ok := out[minISRKey]; a.cluster && !ok {
		return nil, apierr.InvalidConfig("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
	}
	next := &Configs{node: bc.node, cluster: bc.cluster, static: bc.static, defaults: bc.defaults}
	if a.cluster {
		next.cluster = out
	} else {
		next.node = out
	}
	if err := next.checkRemoteRetention(); err != nil {
		return nil, err
	}
	if a.cluster && !bc.minISRStored && !slices.Contains(a.set, minISRKey) {
		delete(out, minISRKey) // still the implicit default: no row for it
	}
	return out, nil
}

// checkRemoteRetention is Kafka's check of the local (tiered storage)
// retention and copy lag against the log retention, which it applies to
// dynamic broker configs even without tiered storage.
func (bc *Configs) checkRemoteRetention() *apierr.Error {
	long := func(name string) int64 {
		v := bc.topicDefault(topicKeyByName[name])
		return v.num
	}
	wrap := func(key string, value int64, msg string) *apierr.Error {
		return apierr.InvalidRequest("Invalid value org.apache.kafka.common.config.ConfigException: Invalid value %d for configuration %s: %s for configuration Invalid dynamic configuration", value, key, msg)
	}
	retMs, localMs := long("retention.ms"), long("local.retention.ms")
	if retMs != -1 && localMs != -2 {
		if localMs == -1 {
			return wrap("log.local.retention.ms", localMs, fmt.Sprintf("Value must not be -1 as log.retention.ms value is set as %d.", retMs))
		}
		if localMs > retMs {
			return wrap("log.local.retention.ms", localMs, fmt.Sprintf("Value must not be more than log.retention.ms property value: %d", retMs))
		}
	}
	retBytes, localBytes := long("retention.bytes"), long("local.retention.bytes")
	if retBytes > -1 && localBytes != -2 {
		if localBytes == -1 {
			return wrap("log.local.retention.bytes", localBytes, fmt.Sprintf("Value must not be -1 as log.retention.bytes value is set as %d.", retBytes))
		}
		if localBytes > retBytes {
			return wrap("log.local.retention.bytes", localBytes, fmt.Sprintf("Value must not be more than log.retention.bytes property value: %d", retBytes))
		}
	}
	lag := func(key, localKey string, lagValue, local, retention int64) *apierr.Error {
		effective := local
		if local == -2 {
			effective = retention
		}
		if lagValue > 0 && effective >= 0 && lagValue > effective {
			return wrap(key, lagValue, fmt.Sprintf("Value must not exceed %s (effective value: %d)", localKey, effective))
		}
		return nil
	}
	if err := lag("log.remote.copy.lag.ms", "log.local.retention.ms", long("remote.copy.lag.ms"), localMs, retMs); err != nil {
		return err
	}
	return lag("log.remote.copy.lag.bytes", "log.local.retention.bytes", long("remote.copy.lag.bytes"), localBytes, retBytes)
}

// IncrementalBrokerAlter builds the alter for IncrementalAlterConfigs
// operations on the current dynamic configs of this broker, or of the
// cluster default.
func (bc *Configs) IncrementalBrokerAlter(cluster bool, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (*BrokerAlter, *apierr.Error) {
	current := bc.node
	if cluster {
		current = bc.cluster
	}
	a := &BrokerAlter{cluster: cluster, next: make(map[string]string, len(current))}
	for k, v := range current {
		a.next[k] = v
	}
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			a.next[op.Name] = *op.Value
			a.set = append(a.set, op.Name)
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(a.next, op.Name)
			a.deleted = append(a.deleted, op.Name)
		default: // APPEND, SUBTRACT
			if brokerKeyType(op.Name) != kmsg.ConfigTypeList {
				return nil, apierr.InvalidConfig("Config value %s is not allowed for config key: %s", strings.ToLower(op.Op.String()), op.Name)
			}
			base, ok := a.next[op.Name]
			if !ok {
				base, _ = bc.resolve(op.Name)
			}
			a.next[op.Name] = applyListOp(base, op.Op, *op.Value)
			a.set = append(a.set, op.Name)
		}
	}
	return a, nil
}

// LegacyBrokerAlter builds the alter for AlterConfigs, which replaces the
// whole dynamic config set of this broker, or of the cluster default.
func (bc *Configs) LegacyBrokerAlter(cluster bool, configs []kmsg.AlterConfigsRequestResourceConfig) *BrokerAlter {
	current := bc.node
	if cluster {
		current = bc.cluster
	}
	a := &BrokerAlter{cluster: cluster, next: map[string]string{}}
	for _, c := range configs {
		a.next[c.Name] = *c.Value
		a.set = append(a.set, c.Name)
	}
	for k := range current {
		if _, ok := a.next[k]; !ok {
			a.deleted = append(a.deleted, k)
		}
	}
	return a
}

// DescribeBroker is DescribeConfigs' answer for this broker (cluster
// false) or the cluster default entity (only the keys set there).
func (bc *Configs) DescribeBroker(cluster bool, keys []string, synonyms, documentation bool) []kmsg.DescribeConfigsResponseResourceConfig {
	want := keySet(keys)
	var names []string
	for _, e := range kafkaConfigs.Broker {
		if _, set := bc.cluster[e.Name]; !cluster || set {
			names = append(names, e.Name)
		}
	}
	names = append(names, bc.customKeys(cluster)...)
	if cluster {
		names = javaHashSetOrder(names) // Kafka lists the defaults from a HashMap
	}
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	for _, name := range names {
		if want != nil && !want[name] {
			continue
		}
		out = append(out, bc.describeBrokerKey(cluster, name, synonyms, documentation))
	}
	return out
}

// customKeys are the dynamic keys Kafka does not know, sorted: the
// cluster default's, plus this broker's for the broker entity.
func (bc *Configs) customKeys(cluster bool) []string {
	maps := []map[string]string{bc.cluster}
	if !cluster {
		maps = append(maps, bc.node)
	}
	var out []string
	for _, m := range maps {
		for k := range m {
			if kafkaBrokerKeys[k] == nil && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (bc *Configs) describeBrokerKey(cluster bool, name string, synonyms, documentation bool) kmsg.DescribeConfigsResponseResourceConfig {
	e := kafkaBrokerKeys[name]
	sensitive := e == nil || e.Sensitive // a custom key's type is unknown: Kafka hides it
	syns := bc.synonyms(name, brokerSynonymNames(name), sensitive)
	if cluster {
		kept := syns[:0]
		for _, s := range syns {
			if s.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig {
				kept = append(kept, s)
			}
		}
		syns = kept
	}
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = name
	var value string
	var ok bool
	if cluster {
		value, ok = bc.cluster[name]
	} else {
		value, ok = bc.resolve(name)
	}
	if ok && !sensitive {
		c.Value = &value
	}
	c.Source = kmsg.ConfigSourceDefaultConfig
	if len(syns) > 0 {
		c.Source = syns[0].Source
	}
	c.IsSensitive = sensitive
	c.ReadOnly = !alterableBrokerKeys[name]
	if e == nil {
		c.ReadOnly = true
	}
	if synonyms {
		c.ConfigSynonyms = syns
	}
	c.ConfigType = brokerKeyType(name)
	if documentation && e != nil {
		c.Documentation = e.Doc
	}
	return c
}

// DescribeGroup is DescribeConfigs' answer for a GROUP resource: kafgres
// stores no per-group configs, so every group has the broker's defaults.
func (bc *Configs) DescribeGroup(keys []string, synonyms, documentation bool) []kmsg.DescribeConfigsResponseResourceConfig {
	want := keySet(keys)
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	for i := range kafkaConfigs.Group {
		e := &kafkaConfigs.Group[i]
		if want != nil && !want[e.Name] {
			continue
		}
		var syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		for _, s := range e.Synonyms {
			if kafkaBrokerKeys[s] == nil {
				// a group-only key standing for itself: Kafka's group
				// coordinator default
				syns = append(syns, configSynonym(s, e.Default, kmsg.ConfigSourceDefaultConfig))
				continue
			}
			syns = append(syns, bc.synonyms(s, []string{s}, false)...)
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.Source = e.Name, e.Default, kmsg.ConfigSourceDefaultConfig
		if len(syns) > 0 {
			c.Value = syns[0].Value
		}
		if synonyms {
			c.ConfigSynonyms = syns
		}
		c.ConfigType = e.configType()
		if documentation {
			c.Documentation = e.Doc
		}
		out = append(out, c)
	}
	return out
}

// DescribeClientMetrics is DescribeConfigs' answer for a CLIENT_METRICS
// resource: kafgres has no client metrics subscriptions, so every name has
// the defaults.
func DescribeClientMetrics(keys []string, documentation bool) []kmsg.DescribeConfigsResponseResourceConfig {
	want := keySet(keys)
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	for i := range kafkaConfigs.ClientMetrics {
		e := &kafkaConfigs.ClientMetrics[i]
		if want != nil && !want[e.Name] {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.Source = e.Name, e.Default, kmsg.ConfigSourceDefaultConfig
		c.ConfigType = e.configType()
		if documentation {
			c.Documentation = e.Doc
		}
		out = append(out, c)
	}
	return out
}

// Broker loggers: kafgres has one logger, "root", whose level
// IncrementalAlterConfigs changes until the broker restarts (Kafka's log4j

// CleanerSettings are the log cleaner's broker configs as they stand
// (dynamic, static, Kafka's defaults).
type CleanerSettings struct {
	Enable              bool    // log.cleaner.enable
	IOMaxBytesPerSecond float64 // log.cleaner.io.max.bytes.per.second
	BackoffMs           int64   // log.cleaner.backoff.ms
	DedupeBufferSize    int64   // log.cleaner.dedupe.buffer.size
	IOBufferLoadFactor  float64 // log.cleaner.io.buffer.load.factor
}

// CleanerSettings returns the current log cleaner settings; a value that
// does not parse falls back to Kafka's default.
func (bc *Configs) CleanerSettings() CleanerSettings {
	num := func(name string, def float64) float64 {
		v, _ := bc.resolve(name)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return def
		}
		return f
	}
	enable, _ := bc.resolve("log.cleaner.enable")
	return CleanerSettings{
		Enable:              enable != "false",
		IOMaxBytesPerSecond: num("log.cleaner.io.max.bytes.per.second", math.MaxFloat64),
		BackoffMs:           int64(num("log.cleaner.backoff.ms", 15000)),
		DedupeBufferSize:    int64(num("log.cleaner.dedupe.buffer.size", 128<<20)),
		IOBufferLoadFactor:  num("log.cleaner.io.buffer.load.factor", 0.9),
	}
}

// ConnectionLimits are the current max.connections and
// max.connections.per.ip (dynamic broker configs, else Kafka's defaults);
// a value that is not a count means no limit.
func (bc *Configs) ConnectionLimits() (total, perIP int) {
	value := func(name string) int {
		v, _ := bc.resolve(name)
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return math.MaxInt32
		}
		return n
	}
	return value("max.connections"), value("max.connections.per.ip")
}
