package metadata

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

const (
	sqlInsertTopicConfigs = `
INSERT INTO kafgres.topic_config (topic_id, name, value)
SELECT $1, n, v FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS c(n, v)`
	sqlDeleteTopicConfigs = `DELETE FROM kafgres.topic_config WHERE topic_id OPERATOR(pg_catalog.=) $1`
	sqlLockTopic          = `SELECT true FROM kafgres.topic WHERE topic_id OPERATOR(pg_catalog.=) $1 FOR UPDATE`
	sqlReadTopicConfigs   = `SELECT name, value FROM kafgres.topic_config WHERE topic_id OPERATOR(pg_catalog.=) $1 AND value IS NOT NULL`

	sqlLockBrokerConfigs  = `LOCK TABLE kafgres.broker_config IN SHARE ROW EXCLUSIVE MODE`
	sqlDeleteBrokerConfig = `DELETE FROM kafgres.broker_config WHERE node_id OPERATOR(pg_catalog.=) $1::int OR (node_id IS NULL AND $1::int IS NULL)`
	sqlInsertBrokerConfig = `
INSERT INTO kafgres.broker_config (node_id, name, value)
SELECT $1, n, v FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS c(n, v)`
	sqlLoadBrokerConfigs = `SELECT node_id, name, value FROM kafgres.broker_config`
)

// AlterTopicConfigs replaces the overrides of topic topicID with what next
// computes from the current ones, under a lock on the topic's row, so
// concurrent alters of one topic apply one after the other. The change
// commits only when commit is true (validateOnly runs the same path and
// rolls back). ErrUnknownTopic: the topic no longer exists. An error next
// returns is returned as it is.
func (s *Postgres) AlterTopicConfigs(ctx context.Context, topicID int64, commit bool,
	next func(current map[string]string) (map[string]string, error)) error {
	return s.inTx(ctx, commit, func(tx pgx.Tx) error {
		current, ok, err := lockTopicConfigs(ctx, tx, topicID)
		if err != nil {
			return err
		}
		if !ok {
			return ErrUnknownTopic
		}
		configs, err := next(current)
		if err != nil {
			return err
		}
		return replaceTopicConfigs(ctx, tx, topicID, configs)
	})
}

// AlterBrokerConfigs replaces the dynamic configs of broker nodeID (or of
// the cluster default when cluster is true) with what next computes from
// both stored sets, under a lock that orders concurrent alters. commit and
// errors are as for AlterTopicConfigs.
func (s *Postgres) AlterBrokerConfigs(ctx context.Context, nodeID int32, cluster, commit bool,
	next func(node, cluster map[string]string) (map[string]string, error)) error {
	return s.inTx(ctx, commit, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockBrokerConfigs); err != nil {
			return fmt.Errorf("lock broker configs: %w", err)
		}
		node, clusterConfigs, err := readBrokerConfigs(ctx, tx, nodeID)
		if err != nil {
			return err
		}
		configs, err := next(node, clusterConfigs)
		if err != nil {
			return err
		}
		var id *int32
		if !cluster {
			id = &nodeID
		}
		return replaceBrokerConfigs(ctx, tx, id, configs)
	})
}

// queryer is what a pool and a transaction both offer.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readBrokerConfigs reads kafgres.broker_config: the rows of broker nodeID
// and those of the cluster default (node_id NULL).
func readBrokerConfigs(ctx context.Context, q queryer, nodeID int32) (node, cluster map[string]string, err error) {
	rows, err := q.Query(ctx, sqlLoadBrokerConfigs)
	if err != nil {
		return nil, nil, fmt.Errorf("read broker configs: %w", err)
	}
	defer rows.Close()
	node, cluster = map[string]string{}, map[string]string{}
	for rows.Next() {
		var (
			id          *int32
			name, value string
		)
		if err := rows.Scan(&id, &name, &value); err != nil {
			return nil, nil, fmt.Errorf("scan broker config: %w", err)
		}
		switch {
		case id == nil:
			cluster[name] = value
		case *id == nodeID:
			node[name] = value
		}
	}
	return node, cluster, rows.Err()
}

// configColumns splits configs into the name and value arrays the insert
// statements unnest.
func configColumns(configs map[string]string) (names, values []string) {
	for n, v := range configs {
		names = append(names, n)
		values = append(values, v)
	}
	return names, values
}

// replaceBrokerConfigs makes configs the entity's dynamic config set
// (nodeID nil: the cluster default).
func replaceBrokerConfigs(ctx context.Context, tx pgx.Tx, nodeID *int32, configs map[string]string) error {
	if _, err := tx.Exec(ctx, sqlDeleteBrokerConfig, nodeID); err != nil {
		return fmt.Errorf("clear broker configs: %w", err)
	}
	if len(configs) == 0 {
		return nil
	}
	names, values := configColumns(configs)
	if _, err := tx.Exec(ctx, sqlInsertBrokerConfig, nodeID, names, values); err != nil {
		return fmt.Errorf("store broker configs: %w", err)
	}
	return nil
}

// insertTopicConfigs stores a new topic's overrides inside tx, as given:
// the caller has made them canonical.
func insertTopicConfigs(ctx context.Context, tx pgx.Tx, topicID int64, configs map[string]string) error {
	if len(configs) == 0 {
		return nil
	}
	names, values := configColumns(configs)
	if _, err := tx.Exec(ctx, sqlInsertTopicConfigs, topicID, names, values); err != nil {
		return fmt.Errorf("store configs of topic %d: %w", topicID, err)
	}
	return nil
}

// replaceTopicConfigs makes configs the topic's complete override set.
func replaceTopicConfigs(ctx context.Context, tx pgx.Tx, topicID int64, configs map[string]string) error {
	if _, err := tx.Exec(ctx, sqlDeleteTopicConfigs, topicID); err != nil {
		return fmt.Errorf("clear configs of topic %d: %w", topicID, err)
	}
	return insertTopicConfigs(ctx, tx, topicID, configs)
}

// lockTopicConfigs locks the topic's row for the rest of tx and reads its
// current overrides. ok is false when the topic no longer exists.
func lockTopicConfigs(ctx context.Context, tx pgx.Tx, topicID int64) (configs map[string]string, ok bool, err error) {
	if err := tx.QueryRow(ctx, sqlLockTopic, topicID).Scan(&ok); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock topic %d: %w", topicID, err)
	}
	rows, err := tx.Query(ctx, sqlReadTopicConfigs, topicID)
	if err != nil {
		return nil, false, fmt.Errorf("read configs of topic %d: %w", topicID, err)
	}
	defer rows.Close()
	configs = map[string]string{}
	for rows.Next() {
		var n, v string
		if err := rows.Scan(&n, &v); err != nil {
			return nil, false, fmt.Errorf("scan config row: %w", err)
		}
		configs[n] = v
	}
	return configs, true, rows.Err()
}
