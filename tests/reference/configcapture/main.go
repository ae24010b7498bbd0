// configcapture records how Apache Kafka 4.4 describes and validates topic
// and broker configs, for kafgres's config model (package broker/kconfig) and
// their tests. It talks to a running reference broker (the conformance
// gate's, tests/conformance/runner/reference.go) and writes
//
//   - broker/kconfig/data/kafka-4.4.0.json: every topic, broker, group and
//     client-metrics config key in the order DescribeConfigs lists them, with
//     type, Kafka default, read-only and sensitive flags and documentation
//   - broker/kconfig/testdata/describe-topic-4.4.0.json: a topic with
//     overrides set through IncrementalAlterConfigs, as DescribeConfigs v4
//     (with synonyms) describes it
//   - broker/kconfig/testdata/config-validation-4.4.0.tsv: the error code
//     and message Kafka answers to IncrementalAlterConfigs SET
//     (validateOnly) of a list of values for each topic key and each
//     dynamically alterable log broker key
//
// Only validateOnly alters touch broker configs, so the reference is left as
// it was (it is shared); the one topic created is deleted again.
//
//	cd tests && go run ./reference/configcapture -bootstrap 127.0.0.1:PORT -topic cfgcapture
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "configcapture:", err)
		os.Exit(1)
	}
}

// Entry is one config key as the reference describes it.
type Entry struct {
	Name      string   `json:"name"`
	Type      string   `json:"type"`
	Default   *string  `json:"default"`
	ReadOnly  bool     `json:"readOnly,omitempty"`
	Sensitive bool     `json:"sensitive,omitempty"`
	Synonyms  []string `json:"synonyms,omitempty"` // topic and group keys: the broker keys the reference lists as synonyms
	Doc       *string  `json:"doc"`
}

// Data is broker/kconfig/data/kafka-4.4.0.json.
type Data struct {
	Topic         []Entry `json:"topic"`
	Broker        []Entry `json:"broker"`
	Group         []Entry `json:"group"`
	ClientMetrics []Entry `json:"clientMetrics"`
}

func run() error {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "reference broker")
	topic := flag.String("topic", "cfgcapture", "topic to create (and delete) on the reference")
	out := flag.String("out", ".", "repository root to write into")
	flag.Parse()
	cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := createTopic(ctx, cl, *topic); err != nil {
		return err
	}
	defer deleteTopic(cl, *topic)

	var d Data
	if d.Topic, err = describe(ctx, cl, kmsg.ConfigResourceTypeTopic, *topic); err != nil {
		return err
	}
	if d.Broker, err = describe(ctx, cl, kmsg.ConfigResourceTypeBroker, "1"); err != nil {
		return err
	}
	if d.Group, err = describe(ctx, cl, kmsg.ConfigResourceTypeGroupConfig, *topic+"-group"); err != nil {
		return err
	}
	if d.ClientMetrics, err = describe(ctx, cl, kmsg.ConfigResourceTypeClientMetrics, *topic+"-metrics"); err != nil {
		return err
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "broker", "kconfig", "data", "kafka-4.4.0.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := describeOverrides(ctx, cl, *topic, filepath.Join(*out, "broker", "kconfig", "testdata", "describe-topic-4.4.0.json")); err != nil {
		return err
	}
	return sweep(ctx, cl, &d, *topic, filepath.Join(*out, "broker", "kconfig", "testdata", "config-validation-4.4.0.tsv"))
}

// Overrides is the first operand of describe-topic-4.4.0.json: what was
// set (raw, as a client sends it), then how Kafka describes the topic.
type Overrides struct {
	Set       map[string]string `json:"set"`
	Described []Described       `json:"described"`
}

// Described is one DescribeConfigs entry.
type Described struct {
	Name     string   `json:"name"`
	Value    *string  `json:"value"`
	Source   string   `json:"source"`
	Type     string   `json:"type"`
	Synonyms []string `json:"synonyms"` // name=value@SOURCE
}

// overridesToSet exercise each kind of canonicalization.
var overridesToSet = map[string]string{
	"retention.ms":                          "3600000",
	"retention.bytes":                       "+5",
	"cleanup.policy":                        "compact, delete",
	"max.message.bytes":                     " 2000000 ",
	"preallocate":                           "TRUE",
	"min.cleanable.dirty.ratio":             "1",
	"leader.replication.throttled.replicas": "0:1, 1:2",
	"compression.type":                      "lz4",
	"message.timestamp.type":                "LogAppendTime",
	"segment.bytes":                         "2000000",
}

func describeOverrides(ctx context.Context, cl *kgo.Client, topic, path string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	for k, v := range overridesToSet {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("set overrides: %w", err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		return fmt.Errorf("set overrides: %w", err)
	}
	time.Sleep(time.Second) // the broker applies the controller's records asynchronously
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dreq.IncludeSynonyms = true
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	dreq.Resources = append(dreq.Resources, dr)
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("describe overrides: %w", err)
	}
	o := Overrides{Set: overridesToSet}
	for _, c := range dresp.Resources[0].Configs {
		e := Described{Name: c.Name, Value: c.Value, Source: c.Source.String(), Type: c.ConfigType.String(), Synonyms: []string{}}
		for _, s := range c.ConfigSynonyms {
			v := "<null>"
			if s.Value != nil {
				v = *s.Value
			}
			e.Synonyms = append(e.Synonyms, s.Name+"="+v+"@"+s.Source.String())
		}
		o.Described = append(o.Described, e)
	}
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	// Clear them again (AlterConfigs replaces the whole set) so that the
	// sweep validates each value alone.
	areq := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	areq.Resources = append(areq.Resources, ar)
	if _, err := areq.RequestWith(ctx, cl); err != nil {
		return fmt.Errorf("clear overrides: %w", err)
	}
	time.Sleep(time.Second)
	return nil
}

func createTopic(ctx context.Context, cl *kgo.Client, name string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, 1, 1
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic: %w", err)
	}
	time.Sleep(time.Second) // let the broker learn of it
	return nil
}

func deleteTopic(cl *kgo.Client, name string) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	t := kmsg.NewDeleteTopicsRequestTopic()
	t.Topic = &name
	req.Topics = append(req.Topics, t)
	req.TopicNames = []string{name}
	req.TimeoutMillis = 30000
	if _, err := req.RequestWith(context.Background(), cl); err != nil {
		fmt.Fprintln(os.Stderr, "delete topic:", err)
	}
}

func describe(ctx context.Context, cl *kgo.Client, typ kmsg.ConfigResourceType, name string) ([]Entry, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("describe %s %q: %w", typ, name, err)
	}
	res := resp.Resources[0]
	if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
		return nil, fmt.Errorf("describe %s %q: %w", typ, name, err)
	}
	var out []Entry
	for _, c := range res.Configs {
		e := Entry{Name: c.Name, Type: c.ConfigType.String(), ReadOnly: c.ReadOnly, Sensitive: c.IsSensitive, Doc: c.Documentation}
		switch {
		case c.Source == kmsg.ConfigSourceDefaultConfig && typ != kmsg.ConfigResourceTypeTopic && typ != kmsg.ConfigResourceTypeGroupConfig:
			e.Default = c.Value
		case typ == kmsg.ConfigResourceTypeTopic || typ == kmsg.ConfigResourceTypeGroupConfig:
			e.Default = c.Value // nothing on the reference overrides a topic or group default but min.insync.replicas, whose value is the default
		}
		for _, s := range c.ConfigSynonyms {
			if typ != kmsg.ConfigResourceTypeBroker && s.Source != kmsg.ConfigSourceDynamicTopicConfig {
				e.Synonyms = appendNew(e.Synonyms, s.Name)
			}
			if typ == kmsg.ConfigResourceTypeBroker && s.Source == kmsg.ConfigSourceDefaultConfig && s.Name == c.Name {
				e.Default = s.Value
			}
		}
		out = append(out, e)
	}
	return out, nil
}

func appendNew(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
	}
	return append(l, s)
}

// sweepValues are tried for every key: each type's parse errors, range
// edges, list and enum spellings.
var sweepValues = []string{
	"x", "", " ", "-3", "-2", "-1", "0", "1", "4", "5", "+5", " 7 ", "-0", "1.5", "1e3", "0.0", "1.0000001",
	"23", "0x10", "1_000", "2147483647", "2147483648", "9223372036854775807", "9223372036854775808",
	"1048575", "1048576", "NaN", "Infinity", "1e-5",
	"true", "TRUE", " false ", "yes",
	"*", "0:1", "0:1, 1:2", "0:1,,1:2", "0:x", " * ",
	"compact", "delete", "delete,compact", "compact,compact", "compact, delete", "compact,", "Compact",
	"CreateTime", "LogAppendTime", "logappendtime",
	"zstd", "ZSTD", "producer", "uncompressed", "none",
}

// brokerSweepKeys are the log broker keys Kafka alters dynamically, plus a
// read-only one and an unknown one.
func brokerSweepKeys(d *Data) []string {
	var keys []string
	for _, e := range d.Broker {
		if e.ReadOnly {
			continue
		}
		switch {
		case strings.HasPrefix(e.Name, "log.") && !strings.HasPrefix(e.Name, "log.cleaner.") ||
			strings.HasPrefix(e.Name, "log.cleaner.") && strings.Contains(e.Name, "compaction") ||
			e.Name == "log.cleaner.delete.retention.ms" || e.Name == "log.cleaner.min.cleanable.ratio" ||
			e.Name == "message.max.bytes" || e.Name == "min.insync.replicas" ||
			strings.HasPrefix(e.Name, "compression.") || e.Name == "unclean.leader.election.enable" ||
			e.Name == "max.decompressed.message.bytes":
			keys = append(keys, e.Name)
		}
	}
	return append(keys, "num.partitions", "log.retention.hours", "cfgcapture.custom")
}

func sweep(ctx context.Context, cl *kgo.Client, d *Data, topic, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	fmt.Fprintln(w, "# resource\tkey\tvalue\terror code\terror message (IncrementalAlterConfigs SET, validateOnly, Kafka 4.4.0)")
	type target struct {
		typ    kmsg.ConfigResourceType
		entity string
		label  string
		keys   []string
	}
	var topicKeys []string
	for _, e := range d.Topic {
		topicKeys = append(topicKeys, e.Name)
	}
	bkeys := brokerSweepKeys(d)
	targets := []target{
		{kmsg.ConfigResourceTypeTopic, topic, "topic", topicKeys},
		{kmsg.ConfigResourceTypeBroker, "1", "broker", bkeys},
		{kmsg.ConfigResourceTypeBroker, "", "cluster", bkeys},
	}
	for _, t := range targets {
		for _, k := range t.keys {
			for _, v := range sweepValues {
				code, msg, err := validate(ctx, cl, t.typ, t.entity, k, v)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", t.label, k, strconv.Quote(v), code, strconv.Quote(msg))
			}
		}
	}
	return nil
}

func validate(ctx context.Context, cl *kgo.Client, typ kmsg.ConfigResourceType, entity, key, value string) (int16, string, error) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = true
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, entity
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOpSet, &value
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		return 0, "", fmt.Errorf("validate %s=%q: %w", key, value, err)
	}
	res := resp.Resources[0]
	msg := ""
	if res.ErrorMessage != nil {
		msg = *res.ErrorMessage
	}
	return res.ErrorCode, msg, nil
}
