package metadata

import (
	"context"
	"fmt"
)

// The classic groups' durable state (kafgres.consumer_group, extension
// 0.10.0): one row per group holding the bytes the group coordinator
// stores, Kafka's GroupMetadataValue. Group ids are bytea, as in
// kafgres.consumer_offset.
const (
	sqlLoadGroups = `SELECT group_id, metadata FROM kafgres.consumer_group`
	sqlSaveGroup  = `
INSERT INTO kafgres.consumer_group AS g (group_id, metadata, update_time)
VALUES ($1::bytea, $2::bytea, pg_catalog.now())
ON CONFLICT (group_id) DO UPDATE SET metadata = excluded.metadata, update_time = excluded.update_time`
	sqlDeleteGroup = `DELETE FROM kafgres.consumer_group WHERE group_id OPERATOR(pg_catalog.=) $1::bytea`
)

// LoadGroups returns every stored group's record, by group id.
func (s *Postgres) LoadGroups(ctx context.Context) (map[string][]byte, error) {
	rows, err := s.pool.Query(ctx, sqlLoadGroups)
	if err != nil {
		return nil, fmt.Errorf("load groups: %w", err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var id, value []byte
		if err := rows.Scan(&id, &value); err != nil {
			return nil, fmt.Errorf("scan group: %w", err)
		}
		out[string(id)] = value
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load groups: %w", err)
	}
	return out, nil
}

// SaveGroup stores group's record, replacing the previous one.
func (s *Postgres) SaveGroup(ctx context.Context, group string, value []byte) error {
	if _, err := s.pool.Exec(ctx, sqlSaveGroup, []byte(group), value); err != nil {
		return fmt.Errorf("save group %q: %w", group, err)
	}
	return nil
}

// DeleteGroup removes group's record, if any.
func (s *Postgres) DeleteGroup(ctx context.Context, group string) error {
	if _, err := s.pool.Exec(ctx, sqlDeleteGroup, []byte(group)); err != nil {
		return fmt.Errorf("delete group %q: %w", group, err)
	}
	return nil
}

// LoadGroups is Postgres.LoadGroups.
func (m *Memory) LoadGroups(context.Context) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]byte, len(m.groups))
	for g, v := range m.groups {
		out[g] = v
	}
	return out, nil
}

// SaveGroup is Postgres.SaveGroup.
func (m *Memory) SaveGroup(_ context.Context, group string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.groups == nil {
		m.groups = map[string][]byte{}
	}
	m.groups[group] = append([]byte(nil), value...)
	return nil
}

// DeleteGroup is Postgres.DeleteGroup.
func (m *Memory) DeleteGroup(_ context.Context, group string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.groups, group)
	return nil
}
