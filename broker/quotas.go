package broker

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/twmb/franz-go/pkg/kerr"
)

// quotaEntity maps entity types ("user", "client-id", "ip") to a name, nil
// being that type's default entity. It is stored as the jsonb key of
// kafgres.client_quota.
type quotaEntity map[string]*string

// quotaKeys are the quota keys Kafka accepts, by the entity kind they apply
// to (QuotaConfig.userAndClientQuotaConfigs / ipConfigs).
var (
	userClientQuotaKeys = []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
	ipQuotaKeys         = []string{"connection_creation_rate"}
)

// checkQuotaEntity gives Kafka's INVALID_REQUEST messages for entities and
// returns the keys the entity may carry.
func checkQuotaEntity(e quotaEntity) ([]string, error) {
	for typ := range e {
		if typ != "user" && typ != "client-id" && typ != "ip" {
			return nil, apierr.New(kerr.InvalidRequest, "Unhandled client quota entity type: %s", typ)
		}
	}
	// Names are kept in kafgres.client_quota's jsonb, which holds
	// UTF-8 text without NUL.
	for _, typ := range e.types() {
		if n := e[typ]; n != nil && !kconfig.StorableText(*n) {
			return nil, apierr.New(kerr.InvalidRequest, "%s", kconfig.UnstorableText("Client quota entity name", *n))
		}
	}
	if _, ip := e["ip"]; ip {
		if len(e) > 1 {
			return nil, apierr.New(kerr.InvalidRequest, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
		}
		return ipQuotaKeys, nil
	}
	if len(e) == 0 {
		return nil, apierr.New(kerr.InvalidRequest, "Invalid empty client quota entity")
	}
	return userClientQuotaKeys, nil
}

// String is Kafka's ClientQuotaEntity.toString, used in its messages.
func (e quotaEntity) String() string {
	var parts []string
	for _, typ := range e.types() {
		name := "null"
		if e[typ] != nil {
			name = *e[typ]
		}
		parts = append(parts, typ+"="+name)
	}
	return "ClientQuotaEntity(entries={" + strings.Join(parts, ", ") + "})"
}

func (e quotaEntity) types() []string {
	var out []string
	for typ := range e {
		out = append(out, typ)
	}
	sort.Strings(out)
	return out
}

func (e quotaEntity) key() string {
	b, _ := json.Marshal(map[string]*string(e))
	return string(b)
}

type quotaRow struct {
	entity quotaEntity
	values map[string]float64
}

// loadQuotas reads every stored quota, grouped by entity and sorted by it.
func (b *Broker) loadQuotas(ctx context.Context) ([]quotaRow, error) {
	stored, err := b.meta.LoadQuotas(ctx)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*quotaRow{}
	for _, q := range stored {
		e := quotaEntity(q.Entity)
		r := byKey[e.key()]
		if r == nil {
			r = &quotaRow{entity: e, values: map[string]float64{}}
			byKey[e.key()] = r
		}
		r.values[q.Key] = q.Value
	}
	out := make([]quotaRow, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, *byKey[k])
	}
	return out, nil
}
