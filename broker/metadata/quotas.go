package metadata

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// QuotaEntity maps entity types ("user", "client-id", "ip") to a name, nil
// being that type's default entity; it is the jsonb key of
// kafgres.client_quota.
type QuotaEntity = map[string]*string

// Quota is one row of kafgres.client_quota.
type Quota struct {
	Entity QuotaEntity
	Key    string
	Value  float64
}

// QuotaOp is one change: set Key to Value, or remove it.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

const (
	sqlLoadQuotas  = `SELECT entity, key, value FROM kafgres.client_quota`
	sqlSetQuota    = `INSERT INTO kafgres.client_quota (entity, key, value) VALUES ($1::jsonb, $2, $3) ON CONFLICT (entity, key) DO UPDATE SET value = excluded.value`
	sqlDeleteQuota = `DELETE FROM kafgres.client_quota WHERE entity OPERATOR(pg_catalog.=) $1::jsonb AND key OPERATOR(pg_catalog.=) $2`
)

// LoadQuotas reads every stored quota.
func (s *Postgres) LoadQuotas(ctx context.Context) ([]Quota, error) {
	rows, err := s.pool.Query(ctx, sqlLoadQuotas)
	if err != nil {
		return nil, fmt.Errorf("load quotas: %w", err)
	}
	defer rows.Close()
	var out []Quota
	for rows.Next() {
		var q Quota
		if err := rows.Scan(&q.Entity, &q.Key, &q.Value); err != nil {
			return nil, fmt.Errorf("scan quota: %w", err)
		}
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load quotas: %w", err)
	}
	return out, nil
}

// AlterQuotas applies ops to one entity in one transaction.
func (s *Postgres) AlterQuotas(ctx context.Context, e QuotaEntity, ops []QuotaOp) error {
	key, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode quota entity: %w", err)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, op := range ops {
			var err error
			if op.Remove {
				_, err = tx.Exec(ctx, sqlDeleteQuota, string(key), op.Key)
			} else {
				_, err = tx.Exec(ctx, sqlSetQuota, string(key), op.Key, op.Value)
			}
			if err != nil {
				return fmt.Errorf("store quota %s for %s: %w", op.Key, key, err)
			}
		}
		return nil
	})
}
