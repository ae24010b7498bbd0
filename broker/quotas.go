package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
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

const (
	sqlLoadQuotas  = `SELECT entity, key, value FROM kafgres.client_quota`
	sqlSetQuota    = `INSERT INTO kafgres.client_quota (entity, key, value) VALUES ($1::jsonb, $2, $3) ON CONFLICT (entity, key) DO UPDATE SET value = excluded.value`
	sqlDeleteQuota = `DELETE FROM kafgres.client_quota WHERE entity OPERATOR(pg_catalog.=) $1::jsonb AND key OPERATOR(pg_catalog.=) $2`
)

// loadQuotas reads every stored quota, grouped by entity and sorted by it.
func (b *Broker) loadQuotas(ctx context.Context) ([]quotaRow, error) {
	rows, err := b.pool.Query(ctx, sqlLoadQuotas)
	if err != nil {
		return nil, fmt.Errorf("load quotas: %w", err)
	}
	defer rows.Close()
	byKey := map[string]*quotaRow{}
	for rows.Next() {
		var (
			e     quotaEntity
			key   string
			value float64
		)
		if err := rows.Scan(&e, &key, &value); err != nil {
			return nil, fmt.Errorf("scan quota: %w", err)
		}
		r := byKey[e.key()]
		if r == nil {
			r = &quotaRow{entity: e, values: map[string]float64{}}
			byKey[e.key()] = r
		}
		r.values[key] = value
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load quotas: %w", err)
	}
	out := make([]quotaRow, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, *byKey[k])
	}
	return out, nil
}

// quotaOp is one change: set key to value, or remove it.
type quotaOp struct {
	key    string
	value  float64
	remove bool
}

// alterQuotas applies ops to one entity in one transaction.
func (b *Broker) alterQuotas(ctx context.Context, e quotaEntity, ops []quotaOp) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		for _, op := range ops {
			var err error
			if op.remove {
				_, err = tx.Exec(ctx, sqlDeleteQuota, e.key(), op.key)
			} else {
				_, err = tx.Exec(ctx, sqlSetQuota, e.key(), op.key, op.value)
			}
			if err != nil {
				return fmt.Errorf("store quota %s for %s: %w", op.key, e, err)
			}
		}
		return nil
	})
}
