package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

const configTool = "org.apache.kafka.tools.ConfigCommand" // kafka-configs.sh

func sp(s string) *string { return &s }

// describedConfig is one topic or broker key as kadm describes it:
// "value SOURCE synonym@SOURCE ...".
func describedConfig(t *testing.T, adm *kadm.Client, broker bool, name, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rcs kadm.ResourceConfigs
	var err error
	switch {
	case !broker:
		rcs, err = adm.DescribeTopicConfigs(ctx, name)
	case name == "":
		rcs, err = adm.DescribeBrokerConfigs(ctx)
	default:
		rcs, err = adm.DescribeBrokerConfigs(ctx, 1)
	}
	if err != nil {
		t.Fatalf("describe %s: %v", name, err)
	}
	if len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("describe %s: %+v", name, rcs)
	}
	for _, c := range rcs[0].Configs {
		if c.Key != key {
			continue
		}
		s := deref(c.Value) + " " + c.Source.String()
		for _, syn := range c.Synonyms {
			s += " " + syn.Key + "=" + deref(syn.Value) + "@" + syn.Source.String()
		}
		return s
	}
	return "<absent>"
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// TestTopicAndBrokerConfigs: DescribeConfigs, IncrementalAlterConfigs and
// AlterConfigs through kadm, raw requests and kafka-configs.sh, with
// Kafka's values, sources, synonyms and errors; dynamic broker configs
// reaching topics; everything stored in kafgres.topic_config and
// kafgres.broker_config and surviving a broker restart.
func TestTopicAndBrokerConfigs(t *testing.T) {
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	c.CreateTopic(t, "cfgt", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	// one is what an alter answered for its one resource.
	one := func(resps kadm.AlterConfigsResponses, err error) kadm.AlterConfigsResponse {
		t.Helper()
		if err != nil || len(resps) != 1 {
			t.Fatalf("alter: %v %+v", err, resps)
		}
		return resps[0]
	}
	expect := func(broker bool, name, key, want string) {
		t.Helper()
		if got := describedConfig(t, adm, broker, name, key); got != want {
			t.Fatalf("%s %s: %q, want %q", name, key, got, want)
		}
	}

	// Defaults, as Kafka 4.4 reports them for a topic without overrides.
	expect(false, "cfgt", "retention.ms", "604800000 DEFAULT_CONFIG")
	expect(false, "cfgt", "segment.bytes", "1073741824 DEFAULT_CONFIG log.segment.bytes=1073741824@DEFAULT_CONFIG")
	expect(false, "cfgt", "min.insync.replicas", "1 DYNAMIC_DEFAULT_BROKER_CONFIG min.insync.replicas=1@DYNAMIC_DEFAULT_BROKER_CONFIG min.insync.replicas=1@DEFAULT_CONFIG")
	expect(true, "1", "num.partitions", "1 STATIC_BROKER_CONFIG num.partitions=1@STATIC_BROKER_CONFIG num.partitions=1@DEFAULT_CONFIG")
	expect(true, "1", "node.id", "1 STATIC_BROKER_CONFIG node.id=1@STATIC_BROKER_CONFIG")

	// Incremental alters: SET and APPEND, canonical values.
	r := one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: sp("+3600000")},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: sp("compact")},
		{Op: kadm.SetConfig, Name: "preallocate", Value: sp("TRUE")},
	}, "cfgt"))
	if r.Err != nil {
		t.Fatalf("alter: %v %s", r.Err, r.ErrMessage)
	}
	expect(false, "cfgt", "retention.ms", "3600000 DYNAMIC_TOPIC_CONFIG retention.ms=3600000@DYNAMIC_TOPIC_CONFIG")
	expect(false, "cfgt", "cleanup.policy", "delete,compact DYNAMIC_TOPIC_CONFIG cleanup.policy=delete,compact@DYNAMIC_TOPIC_CONFIG log.cleanup.policy=delete@DEFAULT_CONFIG")
	expect(false, "cfgt", "preallocate", "true DYNAMIC_TOPIC_CONFIG preallocate=true@DYNAMIC_TOPIC_CONFIG log.preallocate=false@DEFAULT_CONFIG")
	var rows int
	if err := c.Conn(t).QueryRow(ctx, `SELECT count(*) FROM kafgres.topic_config JOIN kafgres.topic USING (topic_id)
		WHERE topic.name = 'cfgt' AND (topic_config.name, value) IN (('retention.ms', '3600000'), ('cleanup.policy', 'delete,compact'), ('preallocate', 'true'))`).Scan(&rows); err != nil || rows != 3 {
		t.Fatalf("kafgres.topic_config: %d rows, %v", rows, err)
	}

	// Invalid keys and values: Kafka's codes and messages; nothing changes.
	for _, tc := range []struct {
		op   kadm.AlterConfig
		code *kerr.Error
		msg  string
	}{
		{kadm.AlterConfig{Name: "retention.ms", Value: sp("abc")}, kerr.InvalidConfig, "Invalid value abc for configuration retention.ms: Not a number of type LONG"},
		{kadm.AlterConfig{Name: "foo.bar", Value: sp("1")}, kerr.InvalidConfig, "Unknown topic config name: foo.bar"},
		{kadm.AlterConfig{Name: "min.insync.replicas", Value: sp("0")}, kerr.InvalidConfig, "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"},
		{kadm.AlterConfig{Name: "cleanup.policy", Value: sp("nope")}, kerr.InvalidConfig, "Invalid value nope for configuration cleanup.policy: String must be one of: compact, delete"},
		{kadm.AlterConfig{Name: "message.timestamp.type", Value: sp("x")}, kerr.InvalidConfig, "Invalid value x for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"},
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: sp("5")}, kerr.InvalidConfig, "Can't APPEND to key retention.ms because its type is not LIST."},
		{kadm.AlterConfig{Name: "retention.ms", Value: nil}, kerr.InvalidRequest, "Null value not supported for : retention.ms"},
	} {
		r := one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{tc.op}, "cfgt"))
		if !errors.Is(r.Err, tc.code) || r.ErrMessage != tc.msg {
			t.Errorf("%s=%s: %v %q, want %v %q", tc.op.Name, deref(tc.op.Value), r.Err, r.ErrMessage, tc.code, tc.msg)
		}
	}
	r = one(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: sp("1")}}, "cfg-nosuch"))
	if !errors.Is(r.Err, kerr.UnknownTopicOrPartition) || r.ErrMessage != "The topic 'cfg-nosuch' does not exist." {
		t.Errorf("unknown topic: %v %q", r.Err, r.ErrMessage)
	}
	r = one(adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: sp("1")}}, "cfgt"))
	if r.Err != nil {
		t.Fatalf("validate only: %v", r.Err)
	}
	expect(false, "cfgt", "retention.ms", "3600000 DYNAMIC_TOPIC_CONFIG retention.ms=3600000@DYNAMIC_TOPIC_CONFIG")
	rcs, err := adm.DescribeTopicConfigs(ctx, "cfg-nosuch")
	if err != nil || len(rcs) != 1 || !errors.Is(rcs[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("describe unknown topic: %+v %v", rcs, err)
	}

	// kafka-configs.sh
	cp := harness.KafkaClasspath(t)
	tool := func(wantErr bool, args ...string) string {
		t.Helper()
		out, err := harness.KafkaTool(t, cp, configTool, append([]string{"--bootstrap-server", c.Addr}, args...)...)
		if (err != nil || strings.Contains(out, "Error while executing")) != wantErr {
			t.Fatalf("kafka-configs %v: %v\n%s", args, err, out)
		}
		return out
	}
	out := tool(false, "--describe", "--entity-type", "topics", "--entity-name", "cfgt")
	for _, line := range []string{
		"Dynamic configs for topic cfgt are:",
		"  cleanup.policy=delete,compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete,compact, DEFAULT_CONFIG:log.cleanup.policy=delete}",
		"  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Fatalf("--describe lacks %q:\n%s", line, out)
		}
	}
	tool(false, "--alter", "--entity-type", "topics", "--entity-name", "cfgt",
		"--add-config", "max.message.bytes=2000000,cleanup.policy=[compact,delete]", "--delete-config", "retention.ms,preallocate")
	out = tool(false, "--describe", "--all", "--entity-type", "topics", "--entity-name", "cfgt")
	for _, line := range []string{
		"All configs for topic cfgt are:",
		"  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}",
		"  max.message.bytes=2000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588}",
		"  retention.ms=604800000 sensitive=false synonyms={}",
		"  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1, DEFAULT_CONFIG:min.insync.replicas=1}",
		"  errors.deadletterqueue.group.enable=false sensitive=false synonyms={}",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Fatalf("--describe --all lacks %q:\n%s", line, out)
		}
	}
	if n := strings.Count(out, " sensitive=false "); n != 37 {
		t.Fatalf("--describe --all lists %d configs, Kafka 4.4 has 37:\n%s", n, out)
	}
	out = tool(true, "--alter", "--entity-type", "topics", "--entity-name", "cfgt", "--add-config", "segment.bytes=100")
	if !strings.Contains(out, "InvalidConfigurationException: Invalid value 100 for configuration segment.bytes: Value must be at least 1048576") {
		t.Fatalf("bad segment.bytes:\n%s", out)
	}

	// Dynamic broker configs: per broker and cluster-wide, seen by topics.
	tool(false, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "log.retention.ms=7200000")
	tool(false, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.segment.bytes=2097152")
	out = tool(false, "--describe", "--entity-type", "brokers", "--entity-name", "1")
	if !strings.Contains(out, "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}\n") {
		t.Fatalf("broker 1:\n%s", out)
	}
	out = tool(false, "--describe", "--entity-type", "brokers", "--entity-default")
	if !strings.Contains(out, "  log.segment.bytes=2097152 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=2097152}\n") ||
		!strings.Contains(out, "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}\n") {
		t.Fatalf("cluster default:\n%s", out)
	}
	expect(false, "cfgt", "retention.ms", "7200000 DYNAMIC_BROKER_CONFIG log.retention.ms=7200000@DYNAMIC_BROKER_CONFIG log.retention.hours=168@DEFAULT_CONFIG")
	expect(false, "cfgt", "segment.bytes", "2097152 DYNAMIC_DEFAULT_BROKER_CONFIG log.segment.bytes=2097152@DYNAMIC_DEFAULT_BROKER_CONFIG log.segment.bytes=1073741824@DEFAULT_CONFIG")
	out = tool(true, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config", "num.partitions=3")
	if !strings.Contains(out, "InvalidRequestException: Cannot update these configs dynamically: [num.partitions]") {
		t.Fatalf("read-only broker config:\n%s", out)
	}
	r = one(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: sp("1")}}, 1))
	if !errors.Is(r.Err, kerr.InvalidConfig) || r.ErrMessage != "Broker-level min.insync.replicas cannot be altered while ELR is enabled." {
		t.Fatalf("broker-level min.insync.replicas: %v %q", r.Err, r.ErrMessage)
	}
	r = one(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "min.insync.replicas"}}))
	if !errors.Is(r.Err, kerr.InvalidConfig) || r.ErrMessage != "Cluster-level min.insync.replicas cannot be removed while ELR is enabled." {
		t.Fatalf("cluster-level min.insync.replicas: %v %q", r.Err, r.ErrMessage)
	}
	// exactly these two rows: the implicit cluster min.insync.replicas
	// is not stored
	var all int
	if err := c.Conn(t).QueryRow(ctx, `SELECT count(*) FILTER (WHERE
		   (node_id, name, value) IS NOT DISTINCT FROM (1, 'log.retention.ms', '7200000')
		OR (node_id, name, value) IS NOT DISTINCT FROM (NULL, 'log.segment.bytes', '2097152')), count(*)
		FROM kafgres.broker_config`).Scan(&rows, &all); err != nil || rows != 2 || all != 2 {
		t.Fatalf("kafgres.broker_config: %d matching rows of %d, %v", rows, all, err)
	}

	// Legacy AlterConfigs replaces a topic's whole override set.
	legacy := kmsg.NewPtrAlterConfigsRequest()
	lr := kmsg.NewAlterConfigsRequestResource()
	lr.ResourceType, lr.ResourceName = kmsg.ConfigResourceTypeTopic, "cfgt"
	lc := kmsg.NewAlterConfigsRequestResourceConfig()
	lc.Name, lc.Value = "segment.ms", sp("100000")
	lr.Configs = append(lr.Configs, lc)
	legacy.Resources = append(legacy.Resources, lr)
	lresp, err := legacy.RequestWith(ctx, cl)
	if err != nil || lresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, lresp)
	}
	expect(false, "cfgt", "segment.ms", "100000 DYNAMIC_TOPIC_CONFIG segment.ms=100000@DYNAMIC_TOPIC_CONFIG")
	expect(false, "cfgt", "max.message.bytes", "1048588 DEFAULT_CONFIG message.max.bytes=1048588@DEFAULT_CONFIG")

	// A change made in SQL reaches the broker through NOTIFY.
	c.Exec(t, `UPDATE kafgres.topic_config SET value = '200000' WHERE name = 'segment.ms'`)
	harness.Eventually(t, 10*time.Second, func() error {
		const want = "200000 DYNAMIC_TOPIC_CONFIG segment.ms=200000@DYNAMIC_TOPIC_CONFIG"
		if got := describedConfig(t, adm, false, "cfgt", "segment.ms"); got != want {
			return fmt.Errorf("SQL change to kafgres.topic_config not seen: segment.ms is %q, want %q", got, want)
		}
		return nil
	})

	// Everything survives a broker restart.
	old := c.KillBroker(t)
	c.WaitBroker(t, old, 20*time.Second)
	expect(false, "cfgt", "segment.ms", "200000 DYNAMIC_TOPIC_CONFIG segment.ms=200000@DYNAMIC_TOPIC_CONFIG")
	expect(false, "cfgt", "retention.ms", "7200000 DYNAMIC_BROKER_CONFIG log.retention.ms=7200000@DYNAMIC_BROKER_CONFIG log.retention.hours=168@DEFAULT_CONFIG")
	expect(true, "", "log.segment.bytes", "2097152 DYNAMIC_DEFAULT_BROKER_CONFIG log.segment.bytes=2097152@DYNAMIC_DEFAULT_BROKER_CONFIG")

	tool(false, "--alter", "--entity-type", "brokers", "--entity-name", "1", "--delete-config", "log.retention.ms")
	expect(false, "cfgt", "retention.ms", "604800000 DEFAULT_CONFIG")
	expect(true, "1", "log.retention.ms", "<null> DEFAULT_CONFIG")
}
