package kconfig

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testStatic is a static configuration as a broker started on
// 127.0.0.1:9092 with data in /data gives it (the broker's tests check that
// translation); the tests look at these keys.
func testStatic() map[string]string {
	return map[string]string{
		"node.id":              "1",
		"broker.id":            "1",
		"listeners":            "PLAINTEXT://127.0.0.1:9092",
		"advertised.listeners": "PLAINTEXT://127.0.0.1:9092",
		"log.dirs":             "/data",
		"num.partitions":       "1",
	}
}

// The hand-written topic table must be Kafka 4.4's: same keys, types,
// defaults and first broker synonym as the reference describes.
func TestTopicKeysMatchKafka(t *testing.T) {
	if len(kafkaConfigs.Topic) != len(topicKeys) {
		t.Fatalf("Kafka has %d topic keys, the table %d", len(kafkaConfigs.Topic), len(topicKeys))
	}
	for _, e := range kafkaConfigs.Topic {
		k := topicKeyByName[e.Name]
		if k == nil {
			t.Errorf("%s missing from topicKeys", e.Name)
			continue
		}
		if k.typ != e.configType() {
			t.Errorf("%s: type %v, Kafka %v", e.Name, k.typ, e.Type)
		}
		if e.Default == nil || k.def != *e.Default {
			t.Errorf("%s: default %q, Kafka %v", e.Name, k.def, e.Default)
		}
		if len(e.Synonyms) > 0 && (len(k.synonyms) == 0 || k.synonyms[0].name != e.Synonyms[0]) {
			t.Errorf("%s: synonyms %v, Kafka lists %v", e.Name, k.synonyms, e.Synonyms)
		}
		if len(e.Synonyms) == 0 && len(k.synonyms) > 0 {
			// Kafka lists none only when the first synonym has no value.
			if _, ok := kafkaBrokerDefaults[k.synonyms[0].name]; ok {
				t.Errorf("%s: Kafka lists no synonym but %s has a default", e.Name, k.synonyms[0].name)
			}
		}
	}
	for _, k := range topicKeys {
		for _, s := range k.synonyms {
			if kafkaBrokerKeys[s.name] == nil {
				t.Errorf("%s: synonym %s is not a Kafka broker key", k.name, s.name)
			}
		}
	}
}

// TestConfigValidationMatchesKafka replays what Kafka 4.4 answered to
// IncrementalAlterConfigs SET of a sweep of values for every topic key and
// the dynamically alterable broker keys.
func TestConfigValidationMatchesKafka(t *testing.T) {
	f, err := os.Open("testdata/config-validation-4.4.0.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bc := New(testStatic(), nil, nil)
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 5 {
			t.Fatalf("bad line %q", line)
		}
		kind, key := fields[0], fields[1]
		value, err1 := strconv.Unquote(fields[2])
		wantMsg, err2 := strconv.Unquote(fields[4])
		wantCode, err3 := strconv.Atoi(fields[3])
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("bad line %q", line)
		}
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Value = key, &value
		ops := []kmsg.IncrementalAlterConfigsRequestResourceConfig{op}
		var cerr *apierr.Error
		switch kind {
		case "topic":
			next, err := bc.IncrementalTopicConfigs(nil, ops)
			if cerr = err; cerr == nil {
				_, cerr = bc.CheckTopicConfigs(next)
			}
		default:
			a, err := bc.IncrementalBrokerAlter(kind == "cluster", ops)
			if cerr = err; cerr == nil {
				_, cerr = bc.CheckBrokerAlter(a)
			}
		}
		n++
		if int(cerr.Code()) != wantCode || cerr.Code() != 0 && cerr.Message() != wantMsg {
			got := "<nil>"
			if cerr != nil {
				got = cerr.Message()
			}
			t.Errorf("%s %s=%q: got %d %q, Kafka %d %q", kind, key, value, cerr.Code(), got, wantCode, wantMsg)
		}
	}
	if n < 1000 {
		t.Fatalf("only %d cases", n)
	}
}

// TestDescribeTopicMatchesKafka describes a topic with overrides as Kafka
// 4.4 did (testdata/describe-topic-4.4.0.json): order, values, sources,
// types and synonyms.
func TestDescribeTopicMatchesKafka(t *testing.T) {
	b, err := os.ReadFile("testdata/describe-topic-4.4.0.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Set       map[string]string `json:"set"`
		Described []struct {
			Name     string   `json:"name"`
			Value    *string  `json:"value"`
			Source   string   `json:"source"`
			Type     string   `json:"type"`
			Synonyms []string `json:"synonyms"`
		} `json:"described"`
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	bc := New(testStatic(), nil, nil)
	overrides, cerr := bc.CheckTopicConfigs(golden.Set)
	if cerr != nil {
		t.Fatal(cerr)
	}
	got := bc.DescribeTopic(overrides, nil, true, false)
	if len(got) != len(golden.Described) {
		t.Fatalf("%d entries, Kafka %d", len(got), len(golden.Described))
	}
	for i, want := range golden.Described {
		g := got[i]
		if g.Name != want.Name || deref(g.Value) != deref(want.Value) || g.Source.String() != want.Source || g.ConfigType.String() != want.Type {
			t.Errorf("entry %d: got %s=%s %v %v, Kafka %s=%s %s %s", i, g.Name, deref(g.Value), g.Source, g.ConfigType, want.Name, deref(want.Value), want.Source, want.Type)
		}
		if gs := synonymStrings(g.ConfigSynonyms); strings.Join(gs, " ") != strings.Join(want.Synonyms, " ") {
			t.Errorf("%s synonyms: got %v, Kafka %v", g.Name, gs, want.Synonyms)
		}
		if g.ReadOnly || g.IsSensitive || g.Documentation != nil {
			t.Errorf("%s: read-only %v sensitive %v documentation %v", g.Name, g.ReadOnly, g.IsSensitive, g.Documentation)
		}
	}
	withDocs := bc.DescribeTopic(nil, []string{"retention.ms", "nope", "cleanup.policy"}, false, true)
	if len(withDocs) != 2 || withDocs[0].Name != "cleanup.policy" || withDocs[1].Name != "retention.ms" ||
		withDocs[1].Documentation == nil || !strings.HasPrefix(*withDocs[1].Documentation, "This configuration controls the maximum time") ||
		len(withDocs[0].ConfigSynonyms) != 0 {
		t.Errorf("filtered describe: %+v", withDocs)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func synonymStrings(l []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) []string {
	out := []string{}
	for _, s := range l {
		out = append(out, s.Name+"="+deref(s.Value)+"@"+s.Source.String())
	}
	return out
}

// Dynamic broker configs show in topics' values, sources and synonyms as
// the reference showed them (log.retention.ms set on broker 1,
// message.max.bytes on the cluster default).
func TestDescribeWithDynamicBrokerConfigs(t *testing.T) {
	bc := New(testStatic(),
		map[string]string{"log.retention.ms": "604800000", "log.segment.bytes": "1073741824"},
		map[string]string{"message.max.bytes": "1048588"})
	want := map[string]string{
		"min.insync.replicas": "1 DYNAMIC_DEFAULT_BROKER_CONFIG min.insync.replicas=1@DYNAMIC_DEFAULT_BROKER_CONFIG min.insync.replicas=1@DEFAULT_CONFIG",
		"segment.bytes":       "1073741824 DYNAMIC_BROKER_CONFIG log.segment.bytes=1073741824@DYNAMIC_BROKER_CONFIG log.segment.bytes=1073741824@DEFAULT_CONFIG",
		"retention.ms":        "604800000 DYNAMIC_BROKER_CONFIG log.retention.ms=604800000@DYNAMIC_BROKER_CONFIG log.retention.hours=168@DEFAULT_CONFIG",
		"max.message.bytes":   "1048588 DYNAMIC_DEFAULT_BROKER_CONFIG message.max.bytes=1048588@DYNAMIC_DEFAULT_BROKER_CONFIG message.max.bytes=1048588@DEFAULT_CONFIG",
	}
	check := func(entries []kmsg.DescribeConfigsResponseResourceConfig, want map[string]string) {
		t.Helper()
		if len(entries) != len(want) {
			t.Fatalf("%d entries, want %d", len(entries), len(want))
		}
		for _, e := range entries {
			got := deref(e.Value) + " " + e.Source.String() + " " + strings.Join(synonymStrings(e.ConfigSynonyms), " ")
			if got != want[e.Name] {
				t.Errorf("%s: %s, want %s", e.Name, got, want[e.Name])
			}
		}
	}
	check(bc.DescribeTopic(nil, []string{"retention.ms", "segment.bytes", "max.message.bytes", "min.insync.replicas"}, true, false), want)

	override := bc.DescribeTopic(map[string]string{"retention.ms": "604800000"}, []string{"retention.ms"}, true, false)
	check(override, map[string]string{"retention.ms": "604800000 DYNAMIC_TOPIC_CONFIG retention.ms=604800000@DYNAMIC_TOPIC_CONFIG log.retention.ms=604800000@DYNAMIC_BROKER_CONFIG log.retention.hours=168@DEFAULT_CONFIG"})

	check(bc.DescribeBroker(false, []string{"log.retention.ms", "log.segment.bytes", "message.max.bytes", "min.insync.replicas"}, true, false), map[string]string{
		"min.insync.replicas": want["min.insync.replicas"],
		"message.max.bytes":   "1048588 DYNAMIC_DEFAULT_BROKER_CONFIG message.max.bytes=1048588@DYNAMIC_DEFAULT_BROKER_CONFIG message.max.bytes=1048588@DEFAULT_CONFIG",
		"log.segment.bytes":   "1073741824 DYNAMIC_BROKER_CONFIG log.segment.bytes=1073741824@DYNAMIC_BROKER_CONFIG log.segment.bytes=1073741824@DEFAULT_CONFIG",
		"log.retention.ms":    "604800000 DYNAMIC_BROKER_CONFIG log.retention.ms=604800000@DYNAMIC_BROKER_CONFIG log.retention.hours=168@DEFAULT_CONFIG",
	})
	cluster := bc.DescribeBroker(true, nil, true, false)
	if len(cluster) != 2 || cluster[0].Name != "message.max.bytes" || cluster[1].Name != "min.insync.replicas" {
		t.Fatalf("cluster default entity: %+v", cluster)
	}
	check(cluster, map[string]string{
		"message.max.bytes":   "1048588 DYNAMIC_DEFAULT_BROKER_CONFIG message.max.bytes=1048588@DYNAMIC_DEFAULT_BROKER_CONFIG",
		"min.insync.replicas": "1 DYNAMIC_DEFAULT_BROKER_CONFIG min.insync.replicas=1@DYNAMIC_DEFAULT_BROKER_CONFIG",
	})
	// log.retention.ms unset: null, no synonyms (Kafka drops the hours
	// default that precedes no log.retention.ms entry)
	check(New(testStatic(), nil, nil).DescribeBroker(false, []string{"log.retention.ms", "log.retention.hours"}, true, false), map[string]string{
		"log.retention.hours": "168 DEFAULT_CONFIG log.retention.hours=168@DEFAULT_CONFIG",
		"log.retention.ms":    "<null> DEFAULT_CONFIG ",
	})
}

func TestDescribeBrokerStaticAndSensitive(t *testing.T) {
	static := testStatic()
	static["num.partitions"] = "3"
	static["message.max.bytes"] = "2097152"
	bc := New(static, map[string]string{"custom.key": "x"}, nil)
	all := bc.DescribeBroker(false, nil, true, true)
	if len(all) != len(kafkaConfigs.Broker)+1 {
		t.Fatalf("%d entries, want every Kafka key and the custom one", len(all))
	}
	byName := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, e := range all {
		byName[e.Name] = e
	}
	for name, want := range map[string]string{
		"num.partitions":       "3 STATIC_BROKER_CONFIG",
		"node.id":              "1 STATIC_BROKER_CONFIG",
		"broker.id":            "1 STATIC_BROKER_CONFIG",
		"listeners":            "PLAINTEXT://127.0.0.1:9092 STATIC_BROKER_CONFIG",
		"advertised.listeners": "PLAINTEXT://127.0.0.1:9092 STATIC_BROKER_CONFIG",
		"log.dirs":             "/data STATIC_BROKER_CONFIG",
		"message.max.bytes":    "2097152 STATIC_BROKER_CONFIG",
		"log.segment.bytes":    "1073741824 DEFAULT_CONFIG",
		"sasl.jaas.config":     "<null> DEFAULT_CONFIG",
		"custom.key":           "<null> DYNAMIC_BROKER_CONFIG",
	} {
		e := byName[name]
		if got := deref(e.Value) + " " + e.Source.String(); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if e := byName["sasl.jaas.config"]; !e.IsSensitive || e.ConfigType != kmsg.ConfigTypePassword || e.Documentation == nil {
		t.Errorf("sasl.jaas.config: %+v", e)
	}
	if e := byName["custom.key"]; !e.IsSensitive || !e.ReadOnly || e.ConfigType != kmsg.ConfigTypeUnknown || deref(e.ConfigSynonyms[0].Value) != "<null>" {
		t.Errorf("custom key: %+v", e)
	}
	if byName["log.retention.ms"].ReadOnly || !byName["num.partitions"].ReadOnly || !byName["listeners"].ReadOnly {
		t.Error("read-only must say what kafgres can alter")
	}
	// the topic inherits the static message.max.bytes
	mm := bc.DescribeTopic(nil, []string{"max.message.bytes"}, true, false)[0]
	if deref(mm.Value) != "2097152" || mm.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("max.message.bytes: %s %v", deref(mm.Value), mm.Source)
	}
}

// TestCleanerSettings: the log cleaner's broker configs, Kafka's defaults
// until set; the I/O rate and the backoff can be altered.
func TestCleanerSettings(t *testing.T) {
	bc := New(testStatic(), nil, nil)
	if got, want := bc.CleanerSettings(), (CleanerSettings{Enable: true, IOMaxBytesPerSecond: math.MaxFloat64,
		BackoffMs: 15000, DedupeBufferSize: 128 << 20, IOBufferLoadFactor: 0.9}); got != want {
		t.Fatalf("defaults: %+v, want %+v", got, want)
	}
	bc = New(testStatic(), map[string]string{"log.cleaner.io.max.bytes.per.second": "1048576", "log.cleaner.backoff.ms": "100"}, nil)
	if got := bc.CleanerSettings(); got.IOMaxBytesPerSecond != 1<<20 || got.BackoffMs != 100 {
		t.Fatalf("dynamic: %+v", got)
	}
	for _, k := range []string{"log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms"} {
		if !alterableBrokerKeys[k] {
			t.Errorf("%s cannot be altered", k)
		}
	}
}

func TestTopicSettings(t *testing.T) {
	if got, want := New(testStatic(), nil, nil).TopicSettings(nil), (TopicSettings{
		RetentionMs: 604800000, RetentionBytes: -1, SegmentBytes: 1 << 30, SegmentMs: 604800000,
		MaxMessageBytes: 1048588, CleanupPolicy: "delete",
		TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000,
		DeleteRetentionMs: 86400000, MaxCompactionLagMs: math.MaxInt64,
		MinCleanableDirtyRatio: 0.5, SegmentIndexBytes: 10 << 20,
	}); got != want {
		t.Fatalf("defaults: %+v, want %+v", got, want)
	}
	bc := New(testStatic(),
		map[string]string{"log.retention.ms": "-5", "log.segment.bytes": "2000000"},
		map[string]string{"log.message.timestamp.type": "LogAppendTime", "log.retention.bytes": "100", "log.roll.ms": "1000"})
	overrides := map[string]string{"cleanup.policy": "delete,compact", "max.message.bytes": "5000", "retention.bytes": "7"}
	if got, want := bc.TopicSettings(overrides), (TopicSettings{
		RetentionMs: -1, RetentionBytes: 7, SegmentBytes: 2000000, SegmentMs: 1000,
		MaxMessageBytes: 5000, LogAppendTime: true, CleanupPolicy: "compact,delete",
		TimestampBeforeMaxMs: math.MaxInt64, TimestampAfterMaxMs: 3600000,
		DeleteRetentionMs: 86400000, MaxCompactionLagMs: math.MaxInt64,
		MinCleanableDirtyRatio: 0.5, SegmentIndexBytes: 10 << 20,
	}); got != want {
		t.Fatalf("overrides and dynamic: %+v, want %+v", got, want)
	}
	for policy, want := range map[string]string{"": "", "compact": "compact", "delete": "delete", "compact,compact": "compact"} {
		if got := bc.TopicSettings(map[string]string{"cleanup.policy": policy}).CleanupPolicy; got != want {
			t.Errorf("cleanup.policy %q: %q, want %q", policy, got, want)
		}
	}
	// an override that no longer parses (hand-written SQL) is ignored
	if got := bc.TopicSettings(map[string]string{"segment.ms": "soon"}).SegmentMs; got != 1000 {
		t.Errorf("bad override: segment.ms %d", got)
	}
}

func TestCheckNewTopicConfigs(t *testing.T) {
	bc := New(testStatic(), nil, nil)
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		configs map[string]*string
		code    int16
		msg     string
	}{
		{map[string]*string{"retention.ms": s("1000"), "cleanup.policy": s("compact")}, 0, ""},
		{map[string]*string{"retention.ms": s("abc")}, 40, "Invalid value abc for configuration retention.ms: Not a number of type LONG"},
		{map[string]*string{"foo.bar": s("1")}, 40, "Unknown topic config name: foo.bar"},
		{map[string]*string{"retention.ms": nil}, 40, "Null value not supported for topic configs: retention.ms"},
		{map[string]*string{"min.insync.replicas": s("0")}, 40, "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"},
		{map[string]*string{"min.compaction.lag.ms": s("10"), "max.compaction.lag.ms": s("5")}, 40, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"},
		{map[string]*string{"retention.ms": s("x"), "segment.bytes": s("y")}, 40, "Invalid value y for configuration segment.bytes: Not a number of type INT"},
		{map[string]*string{"zzz": s("1"), "aaa": s("1")}, 40, "Unknown topic config name: aaa"},
	} {
		_, err := bc.CheckNewTopicConfigs(tc.configs)
		if err.Code() != tc.code || err.Message() != tc.msg {
			t.Errorf("%v: %v, want %d %q", tc.configs, err, tc.code, tc.msg)
		}
	}
	canon, _ := bc.CheckNewTopicConfigs(map[string]*string{"preallocate": s(" TRUE"), "leader.replication.throttled.replicas": s("0:1 , 1:2")})
	if canon["preallocate"] != "true" || canon["leader.replication.throttled.replicas"] != "0:1,1:2" {
		t.Errorf("canonical values: %v", canon)
	}
}

// IncrementalAlterConfigs list operations, as the reference answered them.
func TestIncrementalTopicOps(t *testing.T) {
	bc := New(testStatic(), nil, nil)
	op := func(name string, o kmsg.IncrementalAlterConfigOp, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, o, &v
		return c
	}
	const (
		set = kmsg.IncrementalAlterConfigOpSet
		del = kmsg.IncrementalAlterConfigOpDelete
		app = kmsg.IncrementalAlterConfigOpAppend
		sub = kmsg.IncrementalAlterConfigOpSubtract
	)
	steps := []struct {
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want map[string]string
	}{
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", set, "3600000"), op("cleanup.policy", app, "compact")},
			map[string]string{"retention.ms": "3600000", "cleanup.policy": "delete,compact"}},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", sub, "delete"), op("retention.ms", del, "")},
			map[string]string{"cleanup.policy": "compact"}},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", sub, "compact")}, map[string]string{"cleanup.policy": ""}},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", sub, "compact")}, map[string]string{"cleanup.policy": ""}},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", app, "delete"), op("leader.replication.throttled.replicas", app, "0:1")},
			map[string]string{"cleanup.policy": "delete", "leader.replication.throttled.replicas": "0:1"}},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", app, "delete"), op("leader.replication.throttled.replicas", app, "0:1,0:2")},
			map[string]string{"cleanup.policy": "delete", "leader.replication.throttled.replicas": "0:1,0:2"}},
		{[]kmsg.IncrementalAlterConfigsRequestResourceConfig{op("segment.ms", del, "")},
			map[string]string{"cleanup.policy": "delete", "leader.replication.throttled.replicas": "0:1,0:2"}},
	}
	current := map[string]string{}
	for i, s := range steps {
		next, cerr := bc.IncrementalTopicConfigs(current, s.ops)
		if cerr == nil {
			next, cerr = bc.CheckTopicConfigs(next)
		}
		if cerr != nil {
			t.Fatalf("step %d: %v", i, cerr)
		}
		if !mapsEqual(next, s.want) {
			t.Fatalf("step %d: %v, want %v", i, next, s.want)
		}
		current = next
	}
	for _, tc := range []struct {
		op  kmsg.IncrementalAlterConfigsRequestResourceConfig
		msg string
	}{
		{op("retention.ms", app, "5"), "Can't APPEND to key retention.ms because its type is not LIST."},
		{op("retention.ms", sub, "5"), "Can't SUBTRACT to key retention.ms because its type is not LIST."},
		{op("cleanup.policy", app, ""), "Configuration 'cleanup.policy' values must not be empty."},
		{op("cleanup.policy", app, "nope"), "Invalid value nope for configuration cleanup.policy: String must be one of: compact, delete"},
	} {
		next, cerr := bc.IncrementalTopicConfigs(nil, []kmsg.IncrementalAlterConfigsRequestResourceConfig{tc.op})
		if cerr == nil {
			_, cerr = bc.CheckTopicConfigs(next)
		}
		if cerr == nil || cerr.Code() != kerr.InvalidConfig.Code || cerr.Message() != tc.msg {
			t.Errorf("%s %v %q: %v, want %q", tc.op.Name, tc.op.Op, *tc.op.Value, cerr, tc.msg)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// legacyConfigs is an AlterConfigs resource's configs: names and values.
func legacyConfigs(kv ...string) []kmsg.AlterConfigsRequestResourceConfig {
	var configs []kmsg.AlterConfigsRequestResourceConfig
	for i := 0; i < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], &kv[i+1]
		configs = append(configs, c)
	}
	return configs
}

func TestBrokerAlterRules(t *testing.T) {
	bc := New(testStatic(), nil, nil)
	legacy := func(cluster bool, kv ...string) *apierr.Error {
		_, err := bc.CheckBrokerAlter(bc.LegacyBrokerAlter(cluster, legacyConfigs(kv...)))
		return err
	}
	for _, tc := range []struct {
		err  *apierr.Error
		code int16
		msg  string
	}{
		{legacy(false, "num.partitions", "3", "node.id", "1", "log.dirs", "/x"), 42, "Cannot update these configs dynamically: [node.id, num.partitions, log.dirs]"},
		{legacy(false, "log.retention.ms", "x", "num.partitions", "3"), 42, "Cannot update these configs dynamically: [num.partitions]"},
		{legacy(false, "log.retention.ms", "604800000", "foo.bar", "3"), 0, ""},
		{legacy(false, "min.insync.replicas", "1"), 40, "Broker-level min.insync.replicas cannot be altered while ELR is enabled."},
		{legacy(true, "log.segment.bytes", "1073741824"), 40, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."},
		{legacy(true, "log.segment.bytes", "1073741824", "min.insync.replicas", "2"), 0, ""},
		{legacy(false, "log.local.retention.ms", "-1"), 42, "Invalid value org.apache.kafka.common.config.ConfigException: Invalid value -1 for configuration log.local.retention.ms: Value must not be -1 as log.retention.ms value is set as 604800000. for configuration Invalid dynamic configuration"},
		{legacy(false, "log.cleaner.min.compaction.lag.ms", "10", "log.cleaner.max.compaction.lag.ms", "5"), 0, ""},
	} {
		if tc.err.Code() != tc.code || tc.code != 0 && tc.err.Message() != tc.msg {
			t.Errorf("got %v, want %d %q", tc.err, tc.code, tc.msg)
		}
	}
	v := "5"
	for _, tc := range []struct {
		op  kmsg.IncrementalAlterConfigOp
		key string
		msg string
	}{
		{kmsg.IncrementalAlterConfigOpAppend, "log.retention.ms", "Config value append is not allowed for config key: log.retention.ms"},
		{kmsg.IncrementalAlterConfigOpSubtract, "log.retention.ms", "Config value subtract is not allowed for config key: log.retention.ms"},
	} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = tc.key, tc.op, &v
		if _, err := bc.IncrementalBrokerAlter(false, []kmsg.IncrementalAlterConfigsRequestResourceConfig{c}); err == nil || err.Code() != 40 || err.Message() != tc.msg {
			t.Errorf("%v %s: %v", tc.op, tc.key, err)
		}
	}
	// the cluster default's min.insync.replicas cannot be deleted
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = "min.insync.replicas", kmsg.IncrementalAlterConfigOpDelete
	a, _ := bc.IncrementalBrokerAlter(true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{c})
	if _, err := bc.CheckBrokerAlter(a); err == nil || err.Message() != "Cluster-level min.insync.replicas cannot be removed while ELR is enabled." {
		t.Errorf("delete cluster min.insync.replicas: %v", err)
	}
}

// CheckBrokerAlter returns the rows to store: the cluster default's
// min.insync.replicas only once it is stored or set.
func TestCheckBrokerAlterRows(t *testing.T) {
	alter := func(bc *Configs, cluster bool, kv ...string) map[string]string {
		t.Helper()
		rows, err := bc.CheckBrokerAlter(bc.LegacyBrokerAlter(cluster, legacyConfigs(kv...)))
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	implicit := New(testStatic(), nil, nil)
	for _, tc := range []struct {
		bc      *Configs
		cluster bool
		kv      []string
		want    map[string]string
	}{
		// legacy alters replace the whole set, so min.insync.replicas must
		// be given on the cluster default
		{implicit, true, []string{"min.insync.replicas", "1", "log.retention.ms", "5"}, map[string]string{"min.insync.replicas": "1", "log.retention.ms": "5"}},
		{implicit, false, []string{"log.retention.ms", " 5"}, map[string]string{"log.retention.ms": "5"}},
		{New(testStatic(), nil, map[string]string{"min.insync.replicas": "2"}), true, []string{"min.insync.replicas", "2"}, map[string]string{"min.insync.replicas": "2"}},
	} {
		if got := alter(tc.bc, tc.cluster, tc.kv...); !mapsEqual(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.kv, got, tc.want)
		}
	}
	// an incremental alter of the cluster default keeps the implicit value
	// implicit
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	v := "5"
	op.Name, op.Value = "log.retention.ms", &v
	a, _ := implicit.IncrementalBrokerAlter(true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op})
	if rows, err := implicit.CheckBrokerAlter(a); err != nil || !mapsEqual(rows, map[string]string{"log.retention.ms": "5"}) {
		t.Errorf("incremental: %v %v", rows, err)
	}
	stored := New(testStatic(), nil, map[string]string{"min.insync.replicas": "1"})
	a, _ = stored.IncrementalBrokerAlter(true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op})
	if rows, err := stored.CheckBrokerAlter(a); err != nil || !mapsEqual(rows, map[string]string{"min.insync.replicas": "1", "log.retention.ms": "5"}) {
		t.Errorf("incremental, stored: %v %v", rows, err)
	}
}

func TestConnectionLimits(t *testing.T) {
	if total, perIP := New(testStatic(), nil, nil).ConnectionLimits(); total != math.MaxInt32 || perIP != math.MaxInt32 {
		t.Errorf("defaults: %d %d", total, perIP)
	}
	bc := New(testStatic(), map[string]string{"max.connections": "10"}, map[string]string{"max.connections": "20", "max.connections.per.ip": "3"})
	if total, perIP := bc.ConnectionLimits(); total != 10 || perIP != 3 {
		t.Errorf("dynamic: %d %d", total, perIP)
	}
}

func TestDuplicateResources(t *testing.T) {
	topic := func(name string) Resource { return Resource{kmsg.ConfigResourceTypeTopic, name} }
	got := DuplicateResources([]Resource{topic("a"), topic("b"), {kmsg.ConfigResourceTypeBroker, "a"}, topic("a")})
	if len(got) != 1 || !got[topic("a")] {
		t.Errorf("got %v", got)
	}
}

func TestParseConfigJavaRules(t *testing.T) {
	for _, tc := range []struct {
		typ  kmsg.ConfigType
		raw  string
		want string // canonical, or "!" for a parse error
	}{
		{kmsg.ConfigTypeLong, "+5", "5"},
		{kmsg.ConfigTypeLong, " 7 ", "7"},
		{kmsg.ConfigTypeLong, "-0", "0"},
		{kmsg.ConfigTypeLong, "1_000", "!"},
		{kmsg.ConfigTypeLong, "0x10", "!"},
		{kmsg.ConfigTypeLong, "9223372036854775808", "!"},
		{kmsg.ConfigTypeInt, "2147483648", "!"},
		{kmsg.ConfigTypeBoolean, " TRUE", "true"},
		{kmsg.ConfigTypeBoolean, "yes", "!"},
		{kmsg.ConfigTypeDouble, "1", "1.0"},
		{kmsg.ConfigTypeDouble, "1e-5", "1.0E-5"},
		{kmsg.ConfigTypeDouble, "0.5", "0.5"},
		{kmsg.ConfigTypeDouble, "1.5e7", "1.5E7"},
		{kmsg.ConfigTypeDouble, "NaN", "NaN"},
		{kmsg.ConfigTypeDouble, "-Infinity", "-Infinity"},
		{kmsg.ConfigTypeDouble, "inf", "!"},
		{kmsg.ConfigTypeDouble, "2d", "2.0"},
		{kmsg.ConfigTypeList, " a , b,c ", "a,b,c"},
		{kmsg.ConfigTypeList, "a,,b", "a,,b"},
		{kmsg.ConfigTypeList, "  ", ""},
		{kmsg.ConfigTypeString, " x ", "x"},
	} {
		v, err := parseConfig("k", tc.typ, tc.raw)
		got := v.str
		if err != nil {
			got = "!"
		}
		if got != tc.want {
			t.Errorf("%v %q: %q, want %q", tc.typ, tc.raw, got, tc.want)
		}
	}
	if s := javaDoubleString(math.Copysign(0, -1)); s != "-0.0" {
		t.Errorf("-0.0: %s", s)
	}
}

func TestJavaHashSetOrder(t *testing.T) {
	got := javaHashSetOrder([]string{"num.partitions", "node.id", "log.dirs"})
	if strings.Join(got, ",") != "node.id,num.partitions,log.dirs" {
		t.Errorf("got %v", got)
	}
	got = javaHashSetOrder([]string{"min.insync.replicas", "cfg.probe.custom2"})
	if strings.Join(got, ",") != "min.insync.replicas,cfg.probe.custom2" {
		t.Errorf("got %v", got)
	}
}

func TestBrokerLoggers(t *testing.T) {
	s := func(v string) *string { return &v }
	op := func(name string, o kmsg.IncrementalAlterConfigOp, v *string) []kmsg.IncrementalAlterConfigsRequestResourceConfig {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = name, o, v
		return []kmsg.IncrementalAlterConfigsRequestResourceConfig{c}
	}
	for _, tc := range []struct {
		ops  []kmsg.IncrementalAlterConfigsRequestResourceConfig
		code int16
		msg  string
	}{
		{op("root", kmsg.IncrementalAlterConfigOpSet, s("DEBUG")), 0, ""},
		{op("kafka", kmsg.IncrementalAlterConfigOpSet, s("LOUD")), 40, "Logger kafka does not exist!"},
		{op("root", kmsg.IncrementalAlterConfigOpSet, s("LOUD")), 40, "Cannot set the log level of root to LOUD as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"},
		{op("root", kmsg.IncrementalAlterConfigOpDelete, nil), 42, "Removing the log level of the root logger is not allowed"},
		{op("root", kmsg.IncrementalAlterConfigOpAppend, s("x")), 42, "APPEND operation is not allowed for the BROKER_LOGGER resource"},
	} {
		_, err := CheckLoggerOps(tc.ops)
		if err.Code() != tc.code || tc.code != 0 && err.Message() != tc.msg {
			t.Errorf("%+v: %v", tc.ops[0], err)
		}
	}
	if d := DescribeLoggers(slog.LevelWarn, nil); len(d) != 1 || deref(d[0].Value) != "WARN" || d[0].Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig {
		t.Errorf("WARN: %+v", d)
	}
	if d := DescribeLoggers(slog.LevelWarn, []string{"kafka"}); len(d) != 0 {
		t.Errorf("other logger: %+v", d)
	}
	for level, want := range map[slog.Level]string{slog.LevelDebug - 4: "TRACE", slog.LevelDebug: "DEBUG", slog.LevelInfo + 1: "INFO", slog.LevelError + 4: "FATAL"} {
		if got := LogLevelName(level); got != want {
			t.Errorf("%v: %s, want %s", level, got, want)
		}
	}
}

// CreateTopics v5+ lists the new topic's configs sorted by name, as the
// reference did for retention.ms=1000, cleanup.policy=compact.
func TestCreatedTopicConfigs(t *testing.T) {
	bc := New(testStatic(), nil, nil)
	s := func(v string) *string { return &v }
	canon, err := bc.CheckNewTopicConfigs(map[string]*string{"retention.ms": s("1000"), "cleanup.policy": s("compact")})
	if err != nil {
		t.Fatal(err)
	}
	got := bc.CreatedTopicConfigs(canon)
	if len(got) != 37 {
		t.Fatalf("%d configs", len(got))
	}
	want := map[int]string{0: "cleanup.policy=compact 1", 23: "min.insync.replicas=1 3", 31: "retention.ms=1000 1", 36: "unclean.leader.election.enable=false 5"}
	for i, w := range want {
		c := got[i]
		if g := c.Name + "=" + deref(c.Value) + " " + strconv.Itoa(int(c.Source)); g != w || c.ReadOnly || c.IsSensitive {
			t.Errorf("entry %d: %s, want %s", i, g, w)
		}
	}
}
