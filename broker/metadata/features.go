package metadata

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

const (
	sqlLoadFeatures  = `SELECT name, level FROM kafgres.feature`
	sqlUpsertFeature = `INSERT INTO kafgres.feature (name, level) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET level = excluded.level`
)

// LoadFeatures returns the stored finalized feature levels by name.
func (s *Postgres) LoadFeatures(ctx context.Context) (map[string]int16, error) {
	rows, err := s.pool.Query(ctx, sqlLoadFeatures)
	if err != nil {
		return nil, fmt.Errorf("load features: %w", err)
	}
	defer rows.Close()
	out := map[string]int16{}
	for rows.Next() {
		var name string
		var level int16
		if err := rows.Scan(&name, &level); err != nil {
			return nil, fmt.Errorf("scan feature: %w", err)
		}
		out[name] = level
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load features: %w", err)
	}
	return out, nil
}

// StoreFeatures stores levels in one transaction.
func (s *Postgres) StoreFeatures(ctx context.Context, levels map[string]int16) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for name, level := range levels {
			if _, err := tx.Exec(ctx, sqlUpsertFeature, name, level); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store features: %w", err)
	}
	return nil
}
