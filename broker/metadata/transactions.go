package metadata

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/broker/coordinator/txn"
)

// The transaction coordinator's state (package txn): kafgres.transaction
// and kafgres.transaction_offset (sql/kafgres--0.5.0--0.6.0.sql). Ids are
// bytea as group ids are: Kafka strings may hold anything.
const (
	sqlLoadTransactions = `
SELECT transactional_id, producer_id, previous_producer_id, next_producer_id, producer_epoch,
       last_producer_epoch, timeout_ms, state, topic_ids, partitions, group_ids,
       start_time, update_time, transaction_version
FROM kafgres.transaction`
	sqlSaveTransaction = `
INSERT INTO kafgres.transaction AS t (transactional_id, producer_id, previous_producer_id, next_producer_id,
    producer_epoch, last_producer_epoch, timeout_ms, state, topic_ids, partitions, group_ids,
    start_time, update_time, transaction_version)
VALUES ($1::bytea, $2, $3, $4, $5, $6, $7, $8, $9::bigint[], $10::int[], $11::bytea[], $12, $13, $14)
ON CONFLICT (transactional_id) DO UPDATE
SET producer_id = excluded.producer_id, previous_producer_id = excluded.previous_producer_id,
    next_producer_id = excluded.next_producer_id, producer_epoch = excluded.producer_epoch,
    last_producer_epoch = excluded.last_producer_epoch, timeout_ms = excluded.timeout_ms,
    state = excluded.state, topic_ids = excluded.topic_ids, partitions = excluded.partitions,
    group_ids = excluded.group_ids, start_time = excluded.start_time,
    update_time = excluded.update_time, transaction_version = excluded.transaction_version`
	sqlLoadTxnOffsets = `
SELECT transactional_id, producer_id, group_id, topic_id, partition, committed_offset, leader_epoch, metadata
FROM kafgres.transaction_offset`
	sqlSaveTxnOffsets = `
INSERT INTO kafgres.transaction_offset AS o (transactional_id, producer_id, group_id, topic_id, partition,
    committed_offset, leader_epoch, metadata, commit_time)
SELECT $1::bytea, $2::bigint, u.grp, u.topic_id, u.part, u.off, u.epoch, u.meta, pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($3::bytea[]), pg_catalog.unnest($4::bigint[]), pg_catalog.unnest($5::int[]),
               pg_catalog.unnest($6::bigint[]), pg_catalog.unnest($7::int[]), pg_catalog.unnest($8::bytea[]))
     AS u(grp, topic_id, part, off, epoch, meta)
WHERE EXISTS (SELECT 1 FROM kafgres.topic AS t WHERE t.topic_id OPERATOR(pg_catalog.=) u.topic_id)
ON CONFLICT (transactional_id, group_id, topic_id, partition) DO UPDATE
SET producer_id = excluded.producer_id, committed_offset = excluded.committed_offset,
    leader_epoch = excluded.leader_epoch, metadata = excluded.metadata, commit_time = excluded.commit_time`
	// The commit's offsets become the groups' committed offsets, as the
	// COMMIT marker makes them in Kafka's group coordinator.
	sqlCommitTxnOffsets = `
INSERT INTO kafgres.consumer_offset AS c (group_id, topic_id, partition, committed_offset, leader_epoch, metadata, commit_time)
SELECT o.group_id, o.topic_id, o.partition, o.committed_offset, o.leader_epoch, o.metadata, o.commit_time
FROM kafgres.transaction_offset AS o
WHERE o.transactional_id OPERATOR(pg_catalog.=) $1::bytea
ON CONFLICT (group_id, topic_id, partition) DO UPDATE
SET committed_offset = excluded.committed_offset, leader_epoch = excluded.leader_epoch,
    metadata = excluded.metadata, commit_time = excluded.commit_time`
	sqlDropTxnOffsets    = `DELETE FROM kafgres.transaction_offset WHERE transactional_id OPERATOR(pg_catalog.=) $1::bytea`
	sqlDeleteTransaction = `DELETE FROM kafgres.transaction WHERE transactional_id OPERATOR(pg_catalog.=) $1::bytea`
)

func msTime(ms int64) *time.Time {
	if ms < 0 {
		return nil
	}
	t := time.UnixMilli(ms)
	return &t
}

// LoadTransactions reads every transactional id's state.
func (s *Postgres) LoadTransactions(ctx context.Context) ([]txn.Txn, error) {
	rows, err := s.pool.Query(ctx, sqlLoadTransactions)
	if err != nil {
		return nil, fmt.Errorf("load transactions: %w", err)
	}
	defer rows.Close()
	var out []txn.Txn
	for rows.Next() {
		var (
			t             txn.Txn
			id            []byte
			state         string
			topics        []int64
			parts         []int32
			groups        [][]byte
			start, update *time.Time
		)
		if err := rows.Scan(&id, &t.ProducerID, &t.PrevProducerID, &t.NextProducerID, &t.Epoch, &t.LastEpoch,
			&t.TimeoutMs, &state, &topics, &parts, &groups, &start, &update, &t.Version); err != nil {
			return nil, fmt.Errorf("scan transaction: %w", err)
		}
		t.ID = string(id)
		st, ok := txn.ParseState(state)
		if !ok {
			return nil, fmt.Errorf("transaction %q: unknown state %q", t.ID, state)
		}
		t.State = st
		for i := range topics {
			t.Partitions = append(t.Partitions, txn.Partition{TopicID: topics[i], Partition: parts[i]})
		}
		for _, g := range groups {
			t.Groups = append(t.Groups, string(g))
		}
		t.StartMs = -1
		if start != nil {
			t.StartMs = start.UnixMilli()
		}
		if update != nil {
			t.UpdateMs = update.UnixMilli()
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load transactions: %w", err)
	}
	return out, nil
}

// transactionArgs are sqlSaveTransaction's arguments for t.
func transactionArgs(t txn.Txn) []any {
	topics := make([]int64, len(t.Partitions))
	parts := make([]int32, len(t.Partitions))
	for i, p := range t.Partitions {
		topics[i], parts[i] = p.TopicID, p.Partition
	}
	groups := make([][]byte, len(t.Groups))
	for i, g := range t.Groups {
		groups[i] = []byte(g)
	}
	return []any{[]byte(t.ID), t.ProducerID, t.PrevProducerID, t.NextProducerID, t.Epoch, t.LastEpoch,
		t.TimeoutMs, t.State.String(), topics, parts, groups, msTime(t.StartMs), *msTime(max(t.UpdateMs, 0)), t.Version}
}

// SaveTransaction inserts or replaces t.
func (s *Postgres) SaveTransaction(ctx context.Context, t txn.Txn) error {
	if _, err := s.pool.Exec(ctx, sqlSaveTransaction, transactionArgs(t)...); err != nil {
		return fmt.Errorf("save transaction %q: %w", t.ID, err)
	}
	return nil
}

// LoadTxnOffsets reads the pending transactional offsets.
func (s *Postgres) LoadTxnOffsets(ctx context.Context) ([]txn.PendingOffset, error) {
	rows, err := s.pool.Query(ctx, sqlLoadTxnOffsets)
	if err != nil {
		return nil, fmt.Errorf("load transactional offsets: %w", err)
	}
	defer rows.Close()
	var out []txn.PendingOffset
	for rows.Next() {
		var (
			o         txn.PendingOffset
			id, group []byte
			meta      []byte
		)
		if err := rows.Scan(&id, &o.ProducerID, &group, &o.TopicID, &o.Partition, &o.Offset.Offset, &o.LeaderEpoch, &meta); err != nil {
			return nil, fmt.Errorf("scan transactional offset: %w", err)
		}
		o.TransactionalID, o.Group = string(id), string(group)
		if meta != nil {
			m := string(meta)
			o.Metadata = &m
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load transactional offsets: %w", err)
	}
	return out, nil
}

// SaveTxnOffsets inserts or replaces pending offsets of transaction id in
// one statement. Offsets of topics dropped meanwhile are left out.
func (s *Postgres) SaveTxnOffsets(ctx context.Context, id string, producerID int64, offs []txn.Offset) error {
	var (
		groups = make([][]byte, len(offs))
		topics = make([]int64, len(offs))
		parts  = make([]int32, len(offs))
		values = make([]int64, len(offs))
		epochs = make([]int32, len(offs))
		metas  = make([][]byte, len(offs))
	)
	for i, o := range offs {
		groups[i], topics[i], parts[i], values[i], epochs[i] = []byte(o.Group), o.TopicID, o.Partition, o.Offset, o.LeaderEpoch
		if o.Metadata != nil {
			metas[i] = append([]byte{}, *o.Metadata...)
		}
	}
	if _, err := s.pool.Exec(ctx, sqlSaveTxnOffsets, []byte(id), producerID, groups, topics, parts, values, epochs, metas); err != nil {
		return fmt.Errorf("save transactional offsets of %q: %w", id, err)
	}
	return nil
}

// CompleteTransaction records t's completion and, in the same database
// transaction, commits (CompleteCommit) or drops its pending offsets.
func (s *Postgres) CompleteTransaction(ctx context.Context, t txn.Txn) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if t.State == txn.CompleteCommit {
			if _, err := tx.Exec(ctx, sqlCommitTxnOffsets, []byte(t.ID)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, sqlDropTxnOffsets, []byte(t.ID)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sqlSaveTransaction, transactionArgs(t)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("complete transaction %q: %w", t.ID, err)
	}
	return nil
}

// DeleteTransaction removes an expired transactional id (and, by the
// foreign key, any offsets it still held).
func (s *Postgres) DeleteTransaction(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, sqlDeleteTransaction, []byte(id)); err != nil {
		return fmt.Errorf("delete transaction %q: %w", id, err)
	}
	return nil
}

var _ txn.Store = (*Postgres)(nil)
