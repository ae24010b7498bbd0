package broker

// The source guard: the SQL source (kafgres_produce, CDC) appends a
// transaction to a partition only if its commit end LSN is above the
// highest source position the partition already holds (producer/producer.go),
// which makes a replay after a crash append nothing twice. That holds only
// while the log's positions come from this server's WAL. After a pg_dump
// and pg_restore into a new cluster, a point-in-time recovery of the
// database with a newer data directory, or a new cluster started on an old
// data directory, the WAL is behind the log: every new transaction ending
// at or below the log's positions would be taken for one already appended
// and skipped, committed data lost without a word.
//
// So before the producer starts, GuardSource compares every partition's
// SourceApplied with the WAL insert position. Every transaction that
// commits later ends above that position, and every transaction the slot
// can still stream committed in this WAL; a partition above it holds
// positions this WAL never reached, so it belongs to another history. The
// insert position is the highest the server has (the flush and write
// positions, and the slot's confirmed_flush, lag it), so it never refuses
// a log that belongs here. A log below the slot's confirmed_flush is normal
// (the slot is acknowledged after the appends), and so is one between
// confirmed_flush and the WAL end (a crash before the acknowledgement):
// that is the replay the skip exists for.
//
// The system identifier is not compared: pg_upgrade changes it, yet the
// log's positions stay valid (the new WAL starts after the old end), and
// a restored backup keeps it though its WAL is older. The timeline is not
// either: a promoted standby is on a new timeline with the same positions.
//
// A refusal is latched in the data directory (storage.Dir.SetSourceGuard)
// with the WAL position it was found at: by the next start the WAL may
// have grown past the log, and comparing again would pass while the new
// transactions below the log's positions would still be skipped. It ends
// only by the operator's rebase (kafgres_rebase_source_positions, or by
// moving the data directory aside). The Kafka side serves meanwhile: its
// appends carry no source positions.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/broker/retry"
)

// sourceGuardPoll is how often a refusing broker reports its refusal and
// looks for the operator's confirmation.
const sourceGuardPoll = 2 * time.Second

// errSourceAhead is the refusal, until the operator rebases.
var errSourceAhead = errors.New("the log's source positions are ahead of the WAL")

// aheadPartition is a partition whose source position is beyond the WAL.
type aheadPartition struct {
	name    string
	applied uint64
}

// GuardSource returns once the log's source positions belong to this
// server's WAL, which may take the operator's rebase (see above); until
// then the SQL source must not append. It returns an error only when ctx
// ends or the data directory cannot be read or written.
func (b *Broker) GuardSource(ctx context.Context) error {
	poll := b.sourceGuardPoll
	if poll <= 0 {
		poll = sourceGuardPoll
	}
	var (
		last     error
		reported *metadata.SourceGuard // written to SQL already
	)
	err := retry.Run(ctx, retry.Policy{Min: poll, Max: poll}, func(ctx context.Context) (bool, error) {
		err := b.checkSource(ctx, &reported)
		last = err
		return false, err
	}, func(f retry.Failure) {
		if f.Log {
			b.log.Error("not appending SQL-produced and CDC records", "err", f.Err.Error())
		}
	})
	if err != nil && ctx.Err() != nil && last != nil {
		return fmt.Errorf("source guard: %w", last)
	}
	return err
}

// checkSource is one look: nil when nothing is ahead of the WAL (any
// refusal is cleared), errSourceAhead while the refusal stands, after
// rebasing if the operator has confirmed. Errors of the data directory are
// permanent. *reported is the refusal written to SQL, rewritten only when
// it changes: the row is the broker's alone.
func (b *Broker) checkSource(ctx context.Context, reported **metadata.SourceGuard) error {
	wal, latched, err := b.data.SourceGuard()
	if err != nil {
		return retry.Permanent(err)
	}
	if !latched {
		if wal, err = b.meta.WALInsertLSN(ctx); err != nil {
			return err
		}
	}
	ahead, top := b.partitionsAhead(wal)
	if len(ahead) == 0 {
		if latched {
			if err := b.data.ClearSourceGuard(); err != nil {
				return retry.Permanent(err)
			}
		}
		return b.meta.ClearSourceGuard(ctx)
	}
	if !latched {
		if err := b.data.SetSourceGuard(wal); err != nil {
			return retry.Permanent(err)
		}
	}
	g := metadata.SourceGuard{WAL: wal, Log: top, Partitions: describeAhead(ahead)}
	if *reported == nil || **reported != g {
		if err := b.meta.ReportSourceGuard(ctx, g); err != nil {
			return err
		}
		*reported = &g
	}
	keep, ok, err := b.meta.SourceGuardRebase(ctx)
	if err != nil {
		return err
	}
	if ok {
		if err := b.rebaseSource(ctx, keep, top); err != nil {
			return err
		}
		return b.checkSource(ctx, reported)
	}
	return fmt.Errorf("%w: the WAL insert position was %s and the log holds %s (%s). "+
		"The database is older than the log or belongs to another cluster (pg_dump/pg_restore, "+
		"point-in-time recovery, a new cluster on an old data directory); new transactions "+
		"ending at or below those positions would be taken for ones already appended and skipped. "+
		"Kafka clients are served meanwhile. Way out (docs/operations.md, \"A log ahead of the WAL\"): "+
		"SELECT kafgres_rebase_source_positions('%s') forgets the positions, or move the data directory aside",
		errSourceAhead, metadata.LSNText(wal), metadata.LSNText(top), g.Partitions, metadata.LSNText(top))
}

// partitionsAhead lists the partitions whose source position is above wal,
// by name, and the highest position of all.
func (b *Broker) partitionsAhead(wal uint64) ([]aheadPartition, uint64) {
	var (
		out []aheadPartition
		top uint64
	)
	for _, t := range b.catalog.topics() {
		for _, p := range t.parts {
			if a := p.log.SourceApplied(); a > wal {
				out = append(out, aheadPartition{fmt.Sprintf("%s-%d", t.name, p.index), a})
				top = max(top, a)
			}
		}
	}
	slices.SortFunc(out, func(x, y aheadPartition) int { return strings.Compare(x.name, y.name) })
	return out, top
}

// describeAhead names the partitions ahead and their positions, the first
// few of them.
func describeAhead(ahead []aheadPartition) string {
	const shown = 20
	var parts []string
	for i, a := range ahead {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(ahead)-shown))
			break
		}
		parts = append(parts, fmt.Sprintf("%s at %s", a.name, metadata.LSNText(a.applied)))
	}
	return strings.Join(parts, ", ")
}

// rebaseSource carries out the operator's confirmation: every partition
// forgets its source positions above keep. First the source's Kafka
// transaction, if a crash left one open, is committed: the replay that
// would have completed it cannot come from this WAL, and its records were
// committed in SQL.
func (b *Broker) rebaseSource(ctx context.Context, keep, top uint64) error {
	if err := b.CommitSourced(ctx); err != nil {
		return retry.Permanent(err)
	}
	for _, t := range b.catalog.topics() {
		for _, p := range t.parts {
			p.mu.Lock()
			err := p.log.ForgetSourcesAbove(keep)
			p.mu.Unlock()
			if err != nil {
				return retry.Permanent(fmt.Errorf("rebase %s-%d: %w", t.name, p.index, err))
			}
		}
	}
	b.log.Warn("forgot the log's source positions as the operator confirmed; SQL-produced and CDC records flow again",
		"kept_up_to", metadata.LSNText(keep), "log_lsn", metadata.LSNText(top))
	return nil
}
