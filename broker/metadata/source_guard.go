package metadata

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SourceGuard is the broker's refusal to append SQL-produced and CDC
// records because its log is ahead of the WAL (kafgres.source_guard,
// broker/source_guard.go).
type SourceGuard struct {
	WAL        uint64 // the WAL insert position the log was found ahead of
	Log        uint64 // the highest source position in the log
	Partitions string // the partitions ahead, with their positions
}

const sqlWALInsertLSN = `SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_insert_lsn(), '0/0')::bigint`

// WALInsertLSN is the server's WAL insert position: every transaction
// that commits from now on ends beyond it.
func (s *Postgres) WALInsertLSN(ctx context.Context) (uint64, error) {
	var lsn int64
	if err := s.pool.QueryRow(ctx, sqlWALInsertLSN).Scan(&lsn); err != nil {
		return 0, fmt.Errorf("read the WAL insert position: %w", err)
	}
	return uint64(lsn), nil
}

// The operator's confirmation (rebase_to) stands only for the log
// position it named: a refusal for another log position clears it.
const sqlReportSourceGuard = `
INSERT INTO kafgres.source_guard (wal_lsn, log_lsn, partitions)
VALUES ($1::text::pg_lsn, $2::text::pg_lsn, $3)
ON CONFLICT (singleton) DO UPDATE
   SET wal_lsn = EXCLUDED.wal_lsn, partitions = EXCLUDED.partitions, log_lsn = EXCLUDED.log_lsn,
       rebase_to = CASE WHEN source_guard.log_lsn OPERATOR(pg_catalog.=) EXCLUDED.log_lsn
                        THEN source_guard.rebase_to END`

// ReportSourceGuard shows the refusal in kafgres.source_guard (and
// kafgres.pipeline).
func (s *Postgres) ReportSourceGuard(ctx context.Context, g SourceGuard) error {
	if _, err := s.pool.Exec(ctx, sqlReportSourceGuard, LSNText(g.WAL), LSNText(g.Log), g.Partitions); err != nil {
		return fmt.Errorf("report the source guard: %w", err)
	}
	return nil
}

const sqlSourceGuardRebase = `SELECT pg_catalog.pg_wal_lsn_diff(rebase_to, '0/0')::bigint FROM kafgres.source_guard WHERE rebase_to IS NOT NULL`

// SourceGuardRebase is the operator's confirmation
// (kafgres_rebase_source_positions): forget the log's source positions
// above keep; ok is false while there is none.
func (s *Postgres) SourceGuardRebase(ctx context.Context) (keep uint64, ok bool, err error) {
	var k int64
	err = s.pool.QueryRow(ctx, sqlSourceGuardRebase).Scan(&k)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read the source guard: %w", err)
	}
	return uint64(k), true, nil
}

// ClearSourceGuard removes the refusal from kafgres.source_guard.
func (s *Postgres) ClearSourceGuard(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM kafgres.source_guard`); err != nil {
		return fmt.Errorf("clear the source guard: %w", err)
	}
	return nil
}

// WALInsertLSN is what SetWALInsertLSN set (tests).
func (m *Memory) WALInsertLSN(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.walInsert, nil
}

// SetWALInsertLSN sets the WAL position WALInsertLSN reports (tests).
func (m *Memory) SetWALInsertLSN(lsn uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.walInsert = lsn
}

func (m *Memory) ReportSourceGuard(_ context.Context, g SourceGuard) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.guard == nil || m.guard.Log != g.Log {
		m.guardRebase = nil
	}
	m.guard = &g
	return nil
}

// SourceGuard is the refusal reported, if any (tests).
func (m *Memory) SourceGuard() (SourceGuard, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.guard == nil {
		return SourceGuard{}, false
	}
	return *m.guard, true
}

// ConfirmSourceRebase is kafgres_rebase_source_positions (tests).
func (m *Memory) ConfirmSourceRebase(log, keep uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.guard == nil || m.guard.Log != log {
		return fmt.Errorf("no refusal at log position %d", log)
	}
	m.guardRebase = &keep
	return nil
}

func (m *Memory) SourceGuardRebase(context.Context) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.guardRebase == nil {
		return 0, false, nil
	}
	return *m.guardRebase, true, nil
}

func (m *Memory) ClearSourceGuard(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.guard, m.guardRebase = nil, nil
	return nil
}
