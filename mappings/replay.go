package mappings

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/decoder"
)

// Dead letters replayed with kafgres_replay_dead_letters.
//
// The function marks the dead letters it asks for with its transaction
// (replay_xid) and writes a signed message (decoder.MappingRequest) naming
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
   AND d.id OPERATOR(pg_catalog.>=) $4 AND d.id OPERATOR(pg_catalog.<=) $5
 ORDER BY d.id`

	heldRowsSQL = `
SELECT d.id, d.lsn::pg_catalog.text, d.xid, d.op, d.new_row::pg_catalog.text, d.old_row::pg_catalog.text
  FROM kafgres.dead_letter AS d
 WHERE d.mapping_id OPERATOR(pg_catalog.=) $1 AND d.held
   AND (d.replayed_lsn IS NULL OR d.replayed_lsn OPERATOR(pg_catalog.=) $2::pg_catalog.pg_lsn)
 ORDER BY d.id`

	resumedSQL = `
UPDATE kafgres.mapping_pause AS p SET resumed_end_lsn = $2::pg_catalog.pg_lsn
 WHERE p.mapping_id OPERATOR(pg_catalog.=) $1`

	markReplayedSQL = `
UPDATE kafgres.dead_letter AS d SET replayed_lsn = $2::pg_catalog.pg_lsn
 WHERE d.id OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[])`

	// a replayed row that failed again is a dead letter again, with the
	// new reason
	replayFailedSQL = `
UPDATE kafgres.dead_letter AS d
   SET error = u.error, expression = u.expression, replay_xid = NULL, replayed_lsn = NULL, held = false
  FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.text[]),
                  pg_catalog.unnest($3::pg_catalog.text[])) AS u(id, error, expression)
 WHERE d.id OPERATOR(pg_catalog.=) u.id`

	// and the pauses delivery has passed the resumes of
	purgeReplayedSQL = `
WITH a AS (SELECT l.applied_lsn FROM kafgres.delivery AS l),
     gone AS (DELETE FROM kafgres.dead_letter AS d
               WHERE d.replayed_lsn OPERATOR(pg_catalog.<=) (SELECT a.applied_lsn FROM a)),
     resumed AS (DELETE FROM kafgres.mapping_pause AS p
                  WHERE p.resumed_end_lsn OPERATOR(pg_catalog.<=) (SELECT a.applied_lsn FROM a))
SELECT EXISTS (SELECT 1 FROM kafgres.dead_letter AS d, a
                WHERE d.replayed_lsn OPERATOR(pg_catalog.>) a.applied_lsn)
    OR EXISTS (SELECT 1 FROM kafgres.mapping_pause AS p, a
                WHERE p.resumed_end_lsn OPERATOR(pg_catalog.>) a.applied_lsn)`
)

// replayRows reads the dead letters of mapping id that the request at
// req's position (its lsn, xid and end) asked for, as rows to render.
func (r *Renderer) replayRows(ctx context.Context, id int64, req renderRow) ([]renderRow, error) {
	rows, err := r.pool.Query(ctx, replayRowsSQL, id, req.xid, req.end.String(), req.first, req.last)
	if err != nil {
		return nil, fmt.Errorf("read the dead letters to replay of mapping %d: %w", id, err)
	}
	return r.readReplayRows(rows, id, req)
}

// readReplayRows reads rows of replayRowsSQL's columns as rows to render
// at req's place.
func (r *Renderer) readReplayRows(rows pgx.Rows, id int64, req renderRow) ([]renderRow, error) {
	var (
		out        []renderRow
		deadID     int64
		lsn, op    string
		xid        int64
		newR, oldR *string
	)
	_, err := pgx.ForEachRow(rows, []any{&deadID, &lsn, &xid, &op, &newR, &oldR}, func() error {
		at, err := pglogrepl.ParseLSN(lsn)
		if err != nil {
			return err
		}
		row := req
		row.resume = false
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

// Pauses: a schema change that breaks a mapping's expressions pauses it
// (the event trigger on ALTER TABLE, in the DDL's transaction: a row of
// kafgres.mapping_pause and a pause request in the stream). Its changes
// committed after the pause request are held in kafgres.dead_letter
// (held), not rendered, until the resume request of the transaction that
// fixed the definition (kafgres_alter_mapping): there, in the stream, the
// held changes are rendered with the new definition and delivered like
// replayed dead letters, and the pause's end is written (resumed_end_lsn),
// so that the decision to hold a change is the same however often the
// stream is read (Pause.holds). Changes held before a crash are skipped
// when read again (deadLettered).

// pauseUnknown says whether a pause or resume request finds the
// definitions behind it: they are read again if not.
func (r *Renderer) pauseUnknown(q *decoder.MappingRequest, tx *decoder.Transaction) bool {
	m := r.byID[q.MappingID]
	if m == nil {
		return false
	}
	switch q.Kind {
	case decoder.RequestPause:
		return m.Pause == nil || m.Pause.PausedLSN < q.LSN
	case decoder.RequestResume:
		return m.Pause == nil || m.Pause.ResumeXid != int64(tx.Xid) && m.Pause.ResumedEnd != tx.EndLSN
	}
	return false
}

// hold takes out of j the rows its mapping's pause holds, writing them to
// kafgres.dead_letter as held, and puts in place of a resume request the
// rows held until then (resumeRows). The mapping's status is paused while
// it holds.
func (r *Renderer) hold(ctx context.Context, j *job) error {
	p := j.m.Pause
	// without a pause or a resume, nothing to look at: no pass over the rows
	if p == nil && !j.resumes {
		return nil
	}
	var (
		out  = make([]renderRow, 0, len(j.rows))
		held []renderRow
	)
	flush := func() error {
		if len(held) == 0 {
			return nil
		}
		// the rows written are a job's, for writeDead
		hj := &job{m: j.m, rows: held}
		failed := make([]failure, len(held))
		for i := range held {
			failed[i] = failure{row: i, err: errors.New("paused: " + p.Reason)}
		}
		held = nil
		return r.writeDead(ctx, hj, failed, true)
	}
	for _, row := range j.rows {
		switch {
		case row.resume:
			if err := flush(); err != nil {
				return err
			}
			rows, err := r.resumeRows(ctx, j.m, row)
			if err != nil {
				return err
			}
			p = j.m.Pause
			out = append(out, rows...)
		case row.replay == 0 && p.holds(row.end):
			held = append(held, row)
		default:
			out = append(out, row)
		}
	}
	if err := flush(); err != nil {
		return err
	}
	j.rows = out
	if p.active() {
		r.statusOf(j.m.ID).set(statusPaused, "paused: "+p.Reason)
	}
	return nil
}

// resumeRows handles the resume request at req: it writes where the pause
// ends, and returns the changes held until then, to deliver there. A
// request its pause does not agree with (not the transaction that fixed
// the mapping, or a pause ended elsewhere) is logged and has no rows.
func (r *Renderer) resumeRows(ctx context.Context, m *Mapping, req renderRow) ([]renderRow, error) {
	p := m.Pause
	switch {
	case p == nil:
		r.logger.Warn("resume request for a mapping that is not paused", "mapping", m.Name, "lsn", req.lsn)
		return nil, nil
	case p.ResumedEnd == req.end: // read again: deliver again what it delivered
	case p.ResumedEnd != 0 || p.ResumeXid != req.xid:
		r.logger.Warn("resume request its pause does not agree with", "mapping", m.Name, "lsn", req.lsn, "xid", req.xid)
		return nil, nil
	default:
		if _, err := r.pool.Exec(ctx, resumedSQL, m.ID, req.end.String()); err != nil {
			return nil, fmt.Errorf("end the pause of mapping %s: %w", m.Name, err)
		}
		p.ResumedEnd = req.end
		r.logger.Info("mapping resumed", "mapping", m.Name, "lsn", req.lsn)
		r.statusOf(m.ID).set(statusActive, "")
		r.replaysPurged = false
		r.schedulePurge()
	}
	rows, err := r.pool.Query(ctx, heldRowsSQL, m.ID, req.end.String())
	if err != nil {
		return nil, fmt.Errorf("read the changes held for mapping %s: %w", m.Name, err)
	}
	return r.readReplayRows(rows, m.ID, req)
}
