package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/broker/retry"
	"github.com/kafgres/kafgres/broker/storage/segment"
)

// The segment archiver: kafgres.segment_archive_command, run as Postgres's
// archiver runs archive_command. Every sealed segment's files (indexes
// first, the .log last) are handed to the command in offset order per
// partition; after all of a segment's files succeeded the partition's
// progress file records it (segment.Log.MarkArchived) and only then may
// retention, DeleteRecords and the cleaner reclaim it. A failing command
// is retried with a doubling wait per partition, logged once per cause,
// and meanwhile nothing of that partition past the failure is reclaimed:
// the disk grows, as pg_wal does while archiving fails. A crash after a
// command succeeded and before the progress was written runs it again for
// that segment's files at the next start: as with archive_command, the
// command must succeed when given a file it already archived with the
// same content (docs/operations.md, "Archiving the log").
//
// One goroutine archives every partition, as Postgres has one archiver;
// a partition whose command fails waits out its backoff without holding
// the others up.

// archiveStore is where the archiver reports (kafgres.archive_status).
type archiveStore interface {
	ReportArchiveStatus(ctx context.Context, st []metadata.ArchiveStatus) error
	ClearArchiveStatus(ctx context.Context) error
}

// archivable is what the archiver needs of a partition's log.
type archivable interface {
	PendingArchive() ([]segment.ArchiveSegment, error)
	MarkArchived(end int64) error
	ArchivedOffset() int64
}

// archiveKey names a partition for the archiver: the topic id, since a
// topic dropped and created again under its name is another log.
type archiveKey struct {
	topicID   int64
	topic     string
	partition int32
}

// archiveFileName is %f: <topic>-<partition>-<segment file name>, unique
// across partitions (a topic name never ends in -<digits>-<20 digits>.ext
// ambiguously: the segment file name has a fixed form).
func archiveFileName(topic string, partition int32, path string) string {
	return fmt.Sprintf("%s-%d-%s", topic, partition, filepath.Base(path))
}

// expandArchiveCommand replaces %p, %f and %% in cmd as Postgres does for
// archive_command (replace_percent_placeholders): any other %x, and a
// trailing %, stay as they are. Nothing is quoted: the path and the name
// hold only the data directory's path and Kafka topic name characters
// ([a-zA-Z0-9._-]), and a data directory with spaces needs "%p" quoted in
// the command, as in Postgres.
func expandArchiveCommand(cmd, path, name string) string {
	var b strings.Builder
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		if c != '%' || i+1 == len(cmd) {
			b.WriteByte(c)
			continue
		}
		switch cmd[i+1] {
		case 'p':
			b.WriteString(path)
		case 'f':
			b.WriteString(name)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte(c)
			continue
		}
		i++
	}
	return b.String()
}

// archiveOutputMax bounds how much of a failed command's output is logged
// and reported.
const archiveOutputMax = 1024

// runArchiveCommand runs cmd through /bin/sh in dir; exit status 0 means
// archived. A failure's error carries the status and the start of the
// output.
func runArchiveCommand(ctx context.Context, dir, cmd string) error {
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
	c.Dir = dir
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	// A child of the shell that keeps the output open must not keep the
	// broker waiting once the shell is gone (killed at shutdown).
	c.WaitDelay = 5 * time.Second
	err := c.Run()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(out.String())
	if len(msg) > archiveOutputMax {
		msg = msg[:archiveOutputMax] + "..."
	}
	if msg != "" {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// archiver runs the archive command for every partition. Its state is
// only touched by the goroutine that runs it.
type archiver struct {
	command string
	dir     string // where the command runs: the data directory
	store   archiveStore
	log     *slog.Logger
	now     func() time.Time
	run     func(ctx context.Context, dir, cmd string) error

	retryMin, retryMax time.Duration

	parts     map[archiveKey]*archiveState
	cleared   bool   // kafgres.archive_status was emptied at start
	reportErr string // the last failure to report, logged once
}

// archiveState is one partition's: its backoff and what is reported.
type archiveState struct {
	backoff   retry.Backoff
	notBefore time.Time
	cause     string // of the last failure logged; "" after a success
	held      int    // failures not logged since
	status    metadata.ArchiveStatus
	reported  metadata.ArchiveStatus
	seen      bool // still in the catalog at this pass
}

func newArchiver(command, dir string, store archiveStore, log *slog.Logger, retryMin, retryMax time.Duration) *archiver {
	if retryMin <= 0 {
		retryMin = time.Second
	}
	if retryMax <= 0 {
		retryMax = time.Minute
	}
	return &archiver{
		command: command, dir: dir, store: store, log: log, now: time.Now, run: runArchiveCommand,
		retryMin: retryMin, retryMax: retryMax, parts: map[archiveKey]*archiveState{},
	}
}

func (a *archiver) state(k archiveKey) *archiveState {
	st := a.parts[k]
	if st == nil {
		st = &archiveState{backoff: retry.Backoff{Min: a.retryMin, Max: a.retryMax}}
		st.status.TopicID, st.status.Partition = k.topicID, k.partition
		st.reported.ArchivedOffset = -1 // report at the first pass
		a.parts[k] = st
	}
	st.seen = true
	return st
}

// step archives what partition k has pending, in order, until a command
// fails, its backoff is not over, or ctx ends. It reports whether the
// partition has nothing left to archive.
func (a *archiver) step(ctx context.Context, k archiveKey, l archivable) (done bool, err error) {
	st := a.state(k)
	pending, err := l.PendingArchive()
	if err != nil {
		return false, err
	}
	st.status.ArchivedOffset = l.ArchivedOffset()
	st.setBacklog(pending)
	if a.now().Before(st.notBefore) {
		return false, nil
	}
	for len(pending) > 0 {
		seg := pending[0]
		for _, f := range seg.Files {
			name := archiveFileName(k.topic, k.partition, f)
			abs, aerr := filepath.Abs(f)
			if aerr != nil {
				abs = f
			}
			if err := a.run(ctx, a.dir, expandArchiveCommand(a.command, abs, name)); err != nil {
				if ctx.Err() != nil {
					return false, ctx.Err()
				}
				a.failed(k, st, name, err)
				return false, nil
			}
		}
		if err := l.MarkArchived(seg.End); err != nil {
			a.failed(k, st, archiveFileName(k.topic, k.partition, seg.Files[len(seg.Files)-1]), fmt.Errorf("record progress: %w", err))
			return false, nil
		}
		pending = pending[1:]
		st.backoff.Reset()
		st.notBefore, st.cause, st.held = time.Time{}, "", 0
		st.status.ArchivedOffset = seg.End
		st.status.LastSegment = archiveFileName(k.topic, k.partition, seg.Files[len(seg.Files)-1])
		st.status.LastArchivedAt = a.now()
		st.setBacklog(pending)
		a.log.Debug("archived segment", "topic", k.topic, "partition", k.partition, "base_offset", seg.Base, "end_offset", seg.End)
	}
	return true, nil
}

func (st *archiveState) setBacklog(pending []segment.ArchiveSegment) {
	st.status.BacklogSegments, st.status.BacklogBytes = len(pending), 0
	for _, s := range pending {
		st.status.BacklogBytes += s.Size
	}
}

// failed counts a failure, sets the partition's next attempt, and logs it
// when its cause is news (its text, which names the file, differs from the
// last one logged): a command failing for an hour writes one line, not one
// per retry.
func (a *archiver) failed(k archiveKey, st *archiveState, name string, err error) {
	now := a.now()
	delay := st.backoff.Next()
	st.notBefore = now.Add(delay)
	st.status.Failed++
	st.status.LastFailure = fmt.Sprintf("%s: %v", name, err)
	st.status.LastFailedAt = now
	if st.status.LastFailure == st.cause {
		st.held++
		return
	}
	a.log.Error("segment archive command failed; segments of this partition are kept until it succeeds",
		"topic", k.topic, "partition", k.partition, "file", name, "err", err, "retry_in", delay, "failures_not_logged", st.held)
	st.cause, st.held = st.status.LastFailure, 0
}

// pass archives every partition of topics once and reports what changed.
func (a *archiver) pass(ctx context.Context, topics []*topic) {
	for _, st := range a.parts {
		st.seen = false
	}
	for _, t := range topics {
		for _, p := range t.parts {
			if ctx.Err() != nil {
				return
			}
			l, ok := p.log.(archivable)
			if !ok {
				continue // the engine has no segment files to archive
			}
			k := archiveKey{topicID: t.id, topic: t.name, partition: p.index}
			if _, err := a.step(ctx, k, l); err != nil && !errors.Is(err, segment.ErrClosed) && ctx.Err() == nil {
				a.log.Warn("list segments to archive", "topic", t.name, "partition", p.index, "err", err)
			}
		}
	}
	for k, st := range a.parts {
		if !st.seen {
			delete(a.parts, k) // dropped
		}
	}
	a.report(ctx)
}

// report writes the statuses that changed since the last report; a
// failure is retried at the next pass.
func (a *archiver) report(ctx context.Context) {
	if !a.cleared {
		if err := a.store.ClearArchiveStatus(ctx); err != nil {
			a.reportFailed(err)
			return
		}
		a.cleared = true
	}
	var out []metadata.ArchiveStatus
	var sts []*archiveState
	for _, st := range a.parts {
		if st.status != st.reported {
			out = append(out, st.status)
			sts = append(sts, st)
		}
	}
	if len(out) == 0 {
		return
	}
	if err := a.store.ReportArchiveStatus(ctx, out); err != nil {
		a.reportFailed(err)
		return
	}
	a.reportErr = ""
	for i, st := range sts {
		st.reported = out[i]
	}
}

// reportFailed logs a failure to write kafgres.archive_status when its
// cause is news; archiving goes on regardless (the table is a copy).
func (a *archiver) reportFailed(err error) {
	if err.Error() == a.reportErr {
		return
	}
	a.reportErr = err.Error()
	a.log.Warn("report archive status to Postgres; retrying at the next pass", "err", err)
}

// archive runs the archiver until ctx ends: a pass every ArchiveInterval.
func (b *Broker) archive(ctx context.Context) {
	a := newArchiver(b.cfg.SegmentArchiveCommand, b.cfg.DataDir, b.meta, b.log.With("component", "archiver"),
		b.cfg.ArchiveRetryMin, b.cfg.ArchiveRetryMax)
	interval := b.cfg.ArchiveInterval
	if interval <= 0 {
		interval = time.Second
	}
	a.pass(ctx, b.catalog.topics())
	every(ctx, interval, func(time.Time) { a.pass(ctx, b.catalog.topics()) })
}
