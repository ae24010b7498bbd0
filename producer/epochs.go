package producer

import (
	"context"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/decoder"
)

// PGEpochs keeps partition epochs in kafgres.partition_epoch.
type PGEpochs struct {
	Pool *pgxpool.Pool
}

const (
	loadEpochsSQL = `
SELECT e.from_lsn::pg_catalog.text, e.partitions
  FROM kafgres.partition_epoch AS e
 WHERE e.topic_id OPERATOR(pg_catalog.=) $1
 ORDER BY e.from_lsn`
	// One statement: the later epochs go and e is written, or neither.
	saveEpochSQL = `
WITH later AS (
    DELETE FROM kafgres.partition_epoch AS e
     WHERE e.topic_id OPERATOR(pg_catalog.=) $1
       AND e.from_lsn OPERATOR(pg_catalog.>) $2::text::pg_catalog.pg_lsn)
INSERT INTO kafgres.partition_epoch AS e (topic_id, from_lsn, partitions)
VALUES ($1, $2::text::pg_catalog.pg_lsn, $3)
ON CONFLICT (topic_id, from_lsn) DO UPDATE SET partitions = excluded.partitions`
)

func (e PGEpochs) Load(ctx context.Context, topicID int64) ([]Epoch, error) {
	rows, err := e.Pool.Query(ctx, loadEpochsSQL, topicID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Epoch, error) {
		var (
			from string
			ep   Epoch
		)
		if err := row.Scan(&from, &ep.Partitions); err != nil {
			return ep, err
		}
		lsn, err := pglogrepl.ParseLSN(from)
		ep.From = uint64(lsn)
		return ep, err
	})
}

func (e PGEpochs) Save(ctx context.Context, topicID int64, ep Epoch) error {
	_, err := e.Pool.Exec(ctx, saveEpochSQL, topicID, decoder.LSN(ep.From).String(), ep.Partitions)
	return err
}
