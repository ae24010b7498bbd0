package mappings

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/decoder"
)

// Dead letters replayed with kafgres_replay_dead_letters.
//
// The function marks the dead letters it asks for with its transaction
// (replay_xid) and writes a signed message (decoder.ReplayRequest) naming
// the mapping; only it can mark them, so the message cannot ask for more.
// Where the message is in the stream, the renderer reads the marked dead
// letters, oldest first, and renders them with the mapping's current
// definition like the changes they were: those that render are marked
// delivered there (replayed_lsn, the end of the request's transaction)
// before their records are appended, those that fail again are unmarked
// with the new error. The records are appended with the request's
// transaction as their source, so appending them again after a crash is
// refused per partition like any other, and a request read again renders
// the rows marked for it again. A delivered dead letter is removed only
// once delivery has passed the request (purgeReplayed): until then it is
// what keeps its original change, should the stream bring it again, from
// being rendered a second time (deadLettered).

const (
	replayRowsSQL = `
SELECT d.id, d.lsn::pg_catalog.text, d.xid, d.op, d.new_row::pg_catalog.text, d.old_row::pg_catalog.text
  FROM kafgres.dead_letter AS d
 WHERE d.mapping_id OPERATOR(pg_catalog.=) $1
   AND d.replay_xid IS NOT NULL
   AND d.replay_xid::pg_catalog.text::pg_catalog.int8 OPERATOR(pg_catalog.%) 4294967296 OPERATOR(pg_catalog.=) $2
   AND (d.replayed_lsn IS NULL OR d.replayed_lsn OPERATOR(pg_catalog.=) $3::pg_catalog.pg_lsn)
 ORDER BY d.id`

	markReplayedSQL = `
UPDATE kafgres.dead_letter AS d SET replayed_lsn = $2::pg_catalog.pg_lsn
 WHERE d.id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])`

	// a replayed row that failed again is a dead letter again, with the
	// new reason
	replayFailedSQL = `
UPDATE kafgres.dead_letter AS d
   SET error = u.error, expression = u.expression, replay_xid = NULL, replayed_lsn = NULL
  FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.text[]),
                  pg_catalog.unnest($3::pg_catalog.text[])) AS u(id, error, expression)
 WHERE d.id OPERATOR(pg_catalog.=) u.id`

	purgeReplayedSQL = `
WITH a AS (SELECT l.applied_lsn FROM kafgres.delivery AS l),
     gone AS (DELETE FROM kafgres.dead_letter AS d
               WHERE d.replayed_lsn OPERATOR(pg_catalog.<=) (SELECT a.applied_lsn FROM a))
SELECT EXISTS (SELECT 1 FROM kafgres.dead_letter AS d, a
                WHERE d.replayed_lsn OPERATOR(pg_catalog.>) a.applied_lsn)`
)

// replayRows reads the dead letters of mapping id that the request at
// req's position (its lsn, xid and end) asked for, as rows to render.
func (r *Renderer) replayRows(ctx context.Context, id int64, req renderRow) ([]renderRow, error) {
	rows, err := r.pool.Query(ctx, replayRowsSQL, id, req.xid, req.end.String())
	if err != nil {
		return nil, fmt.Errorf("read the dead letters to replay of mapping %d: %w", id, err)
	}
	var (
		out        []renderRow
		deadID     int64
		lsn, op    string
		xid        int64
		newR, oldR *string
	)
	_, err = pgx.ForEachRow(rows, []any{&deadID, &lsn, &xid, &op, &newR, &oldR}, func() error {
		at, err := pglogrepl.ParseLSN(lsn)
		if err != nil {
			return err
		}
		row := req
		row.replay, row.lsn, row.xid, row.op, row.newJSON, row.oldJSON = deadID, at, xid, op, newR, oldR
		out = append(out, row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the dead letters to replay of mapping %d: %w", id, err)
	}
	return out, nil
}

// markReplayed marks the replayed rows of j that rendered (failed rows
// excluded) as delivered at the request's end.
func (r *Renderer) markReplayed(ctx context.Context, j *job, failed []failure) error {
	failing := make(map[int]bool, len(failed))
	for _, f := range failed {
		failing[f.row] = true
	}
	var (
		ids []int64
		end decoder.LSN
	)
	for i, row := range j.rows {
		if row.replay != 0 && !failing[i] {
			ids, end = append(ids, row.replay), row.end
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := r.pool.Exec(ctx, markReplayedSQL, ids, end.String()); err != nil {
		return fmt.Errorf("mark %d replayed dead letters of mapping %s delivered: %w", len(ids), j.m.Name, err)
	}
	r.replaysPurged = false
	r.schedulePurge()
	return nil
}

// replayFailed writes the new reasons of replayed rows that failed again.
func (r *Renderer) replayFailed(ctx context.Context, j *job, ids []int64, errs, exprs []*string) error {
	if _, err := r.pool.Exec(ctx, replayFailedSQL, ids, errs, exprs); err != nil {
		return fmt.Errorf("dead-letter %d replayed changes of mapping %s again: %w", len(ids), j.m.Name, err)
	}
	return nil
}

// purgeReplayed removes the dead letters whose replay delivery has
// passed. While some are left it runs again after a while, with nothing
// else to render too. Failures are logged: it is tried again later.
func (r *Renderer) purgeReplayed(ctx context.Context) {
	r.lastPurge = time.Now()
	var left bool
	if err := r.pool.QueryRow(ctx, purgeReplayedSQL).Scan(&left); err != nil {
		r.logger.Warn("remove replayed dead letters", "err", err)
		left = true
	}
	r.replaysPurged = !left
	if left {
		r.schedulePurge()
	}
}

// schedulePurge runs purgeReplayed after a while, unless it is pending.
func (r *Renderer) schedulePurge() {
	if r.purgeTimer == nil {
		r.purgeTimer = time.AfterFunc(retireInterval, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.purgeTimer = nil
			if r.closed {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r.purgeReplayed(ctx)
		})
	}
}
