package broker

// Where topic and broker configs live in Postgres: a topic's overrides in
// kafgres.topic_config, keyed by topic id, and the dynamic broker configs
// in kafgres.broker_config (node_id NULL for the cluster default), both as
// the canonical strings package kconfig checked. Every statement that reads
// or writes them is here, so the storage of configs is one file.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	sqlInsertTopicConfigs = `
INSERT INTO kafgres.topic_config (topic_id, name, value)
SELECT $1, n, v FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS c(n, v)`
	sqlDeleteTopicConfigs = `DELETE FROM kafgres.topic_config WHERE topic_id OPERATOR(pg_catalog.=) $1`
	sqlLockTopic          = `SELECT true FROM kafgres.topic WHERE topic_id OPERATOR(pg_catalog.=) $1 FOR UPDATE`
	sqlReadTopicConfigs   = `SELECT name, value FROM kafgres.topic_config WHERE topic_id OPERATOR(pg_catalog.=) $1 AND value IS NOT NULL`
	sqlLoadTopicConfigs   = `SELECT topic_id, name, value FROM kafgres.topic_config WHERE value IS NOT NULL`

	sqlLockBrokerConfigs  = `LOCK TABLE kafgres.broker_config IN SHARE ROW EXCLUSIVE MODE`
	sqlDeleteBrokerConfig = `DELETE FROM kafgres.broker_config WHERE node_id OPERATOR(pg_catalog.=) $1::int OR (node_id IS NULL AND $1::int IS NULL)`
	sqlInsertBrokerConfig = `
INSERT INTO kafgres.broker_config (node_id, name, value)
SELECT $1, n, v FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[])) AS c(n, v)`
	sqlLoadBrokerConfigs = `SELECT node_id, name, value FROM kafgres.broker_config`
)

// queryer is what a pool and a transaction both offer.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// withTx runs f in a transaction that commits only when commit is true
// and f succeeded: a validateOnly alter goes through the same locks and
// reads as a real one, then rolls back.
func (b *Broker) withTx(ctx context.Context, commit bool, f func(pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	if err := f(tx); err != nil {
		return err
	}
	if !commit {
		return nil
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
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

// insertTopicConfigs stores a new topic's overrides inside tx. The values
// should be the canonical ones kconfig's CheckNewTopicConfigs returned;
// they are stored as given.
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

// lockTopicConfigs locks the topic's row for the rest of tx (concurrent
// alters of one topic apply one after the other) and reads its current
// overrides. ok is false when the topic no longer exists.
func lockTopicConfigs(ctx context.Context, tx pgx.Tx, topicID int64) (configs map[string]string, ok bool, err error) {
	if err := tx.QueryRow(ctx, sqlLockTopic, topicID).Scan(&ok); err != nil {
		if err == pgx.ErrNoRows {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lock topic %d: %w", topicID, err)
	}
	rows, err := tx.Query(ctx, sqlReadTopicConfigs, topicID)
	if err != nil {
		return nil, false, fmt.Errorf("read configs of topic %d: %w", topicID, err)
	}
	configs, err = collectConfigRows(rows)
	return configs, true, err
}

func collectConfigRows(rows pgx.Rows) (map[string]string, error) {
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, v string
		if err := rows.Scan(&n, &v); err != nil {
			return nil, fmt.Errorf("scan config row: %w", err)
		}
		out[n] = v
	}
	return out, rows.Err()
}

// readTopicConfigs reads every topic's overrides, by topic id.
func readTopicConfigs(ctx context.Context, q queryer) (map[int64]map[string]string, error) {
	rows, err := q.Query(ctx, sqlLoadTopicConfigs)
	if err != nil {
		return nil, fmt.Errorf("load topic configs: %w", err)
	}
	defer rows.Close()
	out := map[int64]map[string]string{}
	for rows.Next() {
		var (
			id          int64
			name, value string
		)
		if err := rows.Scan(&id, &name, &value); err != nil {
			return nil, fmt.Errorf("scan topic config: %w", err)
		}
		if out[id] == nil {
			out[id] = map[string]string{}
		}
		out[id][name] = value
	}
	return out, rows.Err()
}

// lockBrokerConfigs locks kafgres.broker_config for the rest of tx:
// concurrent broker alters apply one after the other.
func lockBrokerConfigs(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, sqlLockBrokerConfigs); err != nil {
		return fmt.Errorf("lock broker configs: %w", err)
	}
	return nil
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
