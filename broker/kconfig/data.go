package kconfig

// The key lists, defaults and documentation of Kafka 4.4's configs:
// data/kafka-4.4.0.json, captured from a Kafka 4.4 broker by
// tests/reference/configcapture and embedded, so the model needs no files
// at run time.

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// configData is data/kafka-4.4.0.json: every config key Kafka 4.4
// describes, in the order DescribeConfigs lists them.
type configData struct {
	Topic         []configEntry `json:"topic"`
	Broker        []configEntry `json:"broker"`
	Group         []configEntry `json:"group"`
	ClientMetrics []configEntry `json:"clientMetrics"`
}

type configEntry struct {
	Name      string   `json:"name"`
	Type      string   `json:"type"`
	Default   *string  `json:"default"`
	ReadOnly  bool     `json:"readOnly"`
	Sensitive bool     `json:"sensitive"`
	Synonyms  []string `json:"synonyms"`
	Doc       *string  `json:"doc"`
}

func (e *configEntry) configType() kmsg.ConfigType {
	t, err := kmsg.ParseConfigType(e.Type)
	if err != nil {
		return kmsg.ConfigTypeUnknown
	}
	return t
}

//go:embed data/kafka-4.4.0.json
var configDataJSON []byte

// kafkaConfigs is read once and never written.
var kafkaConfigs = mustLoadConfigData()

func mustLoadConfigData() *configData {
	var d configData
	if err := json.Unmarshal(configDataJSON, &d); err != nil {
		panic(fmt.Sprintf("data/kafka-4.4.0.json: %v", err))
	}
	return &d
}

// kafkaBrokerDefaults and kafkaBrokerKeys index the broker keys.
var (
	kafkaBrokerDefaults = func() map[string]string {
		m := map[string]string{}
		for _, e := range kafkaConfigs.Broker {
			if e.Default != nil {
				m[e.Name] = *e.Default
			}
		}
		return m
	}()
	kafkaBrokerKeys = func() map[string]*configEntry {
		m := map[string]*configEntry{}
		for i := range kafkaConfigs.Broker {
			m[kafkaConfigs.Broker[i].Name] = &kafkaConfigs.Broker[i]
		}
		return m
	}()
)

// BrokerDefault is Kafka 4.4's default for the broker key name; ok is
// false for a key without one (or one Kafka does not have).
func BrokerDefault(name string) (value string, ok bool) {
	value, ok = kafkaBrokerDefaults[name]
	return value, ok
}
