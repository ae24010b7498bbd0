package producer

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/decoder"
)

// Status publishes the pipeline's state where SQL reads it
// (kafgres.pipeline): a stall is a state there, never only a log line.
type Status interface {
	Stalled(ctx context.Context, s Stall) error
	Flowing(ctx context.Context) error
}

// Stall is what holds every SQL-produced and CDC record back: the stream
// cannot be read past LSN, or a mapping with on_error 'stall' cannot
// render a change of the transaction Xid (0: not known) that ends at
// EndLSN. Skippable: kafgres_skip_transaction may skip that transaction.
type Stall struct {
	Reason    string
	LSN       decoder.LSN
	Xid       uint32
	EndLSN    decoder.LSN
	Skippable bool
}

// passedBy says whether delivery up to acked has got past the stall.
func (s *Stall) passedBy(acked uint64) bool {
	if s.EndLSN > 0 {
		return acked >= uint64(s.EndLSN)
	}
	return acked > uint64(s.LSN)
}

// PGStatus keeps the state in kafgres.delivery, and answers the
// decoder's question whether to skip a transaction from it.
type PGStatus struct {
	Pool *pgxpool.Pool
}

const (
	// since stays while the stall is the same one
	stalledSQL = `
UPDATE kafgres.delivery AS s
   SET since = CASE WHEN s.state OPERATOR(pg_catalog.=) 'stalled'
                     AND s.stalled_lsn OPERATOR(pg_catalog.=) $2::text::pg_catalog.pg_lsn
                    THEN s.since ELSE pg_catalog.now() END,
       state = 'stalled', reason = $1,
       stalled_lsn = $2::text::pg_catalog.pg_lsn,
       stalled_xid = $3,
       stalled_end_lsn = $4::text::pg_catalog.pg_lsn,
       skippable = $5`
	flowingSQL = `
UPDATE kafgres.delivery AS s
   SET state = 'flowing', since = pg_catalog.now(), reason = NULL, stalled_lsn = NULL,
       stalled_xid = NULL, stalled_end_lsn = NULL, skippable = false, skip_xid = NULL
 WHERE s.state OPERATOR(pg_catalog.<>) 'flowing'`
	skipSQL = `
SELECT s.skip_xid OPERATOR(pg_catalog.=) $1 FROM kafgres.delivery AS s`
)

func (p PGStatus) Stalled(ctx context.Context, s Stall) error {
	var xid, end any
	if s.Xid != 0 {
		xid = int64(s.Xid)
	}
	if s.EndLSN != 0 {
		end = s.EndLSN.String()
	}
	if _, err := p.Pool.Exec(ctx, stalledSQL, s.Reason, s.LSN.String(), xid, end, s.Skippable); err != nil {
		return fmt.Errorf("record the pipeline's stall: %w", err)
	}
	return nil
}

func (p PGStatus) Flowing(ctx context.Context) error {
	if _, err := p.Pool.Exec(ctx, flowingSQL); err != nil {
		return fmt.Errorf("record that the pipeline flows: %w", err)
	}
	return nil
}

// Skip says whether kafgres_skip_transaction asked to skip xid.
func (p PGStatus) Skip(ctx context.Context, xid uint32) (bool, error) {
	var skip *bool
	if err := p.Pool.QueryRow(ctx, skipSQL, int64(xid)).Scan(&skip); err != nil {
		return false, fmt.Errorf("read kafgres.delivery: %w", err)
	}
	return skip != nil && *skip, nil
}
