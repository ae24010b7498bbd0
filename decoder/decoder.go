// Package decoder streams the logical replication slot fed by kafgres's
// output plugin and turns the plugin's frames (docs/producing.md) into
// events: a *Transaction for every committed transaction with kafgres
// content, and a Progress whenever the walsender reports decoding past WAL
// that produced nothing. Message contents are opaque bytes here.
package decoder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Config says where the slot is and how to stream it.
type Config struct {
	DSN            string        // libpq-style; the decoder adds replication=database
	Slot           string        // default "kafgres"
	Plugin         string        // default "kafgres"
	StatusInterval time.Duration // standby status updates at least this often; default 1s
	Logger         *slog.Logger  // default slog.Default()
}

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// Decoder streams one slot. Run it from one goroutine; Ack from any.
type Decoder struct {
	cfg   Config
	log   *slog.Logger
	acked atomic.Uint64
}

// New returns a decoder for cfg with defaults filled in. It does not connect.
func New(cfg Config) *Decoder {
	if cfg.Slot == "" {
		cfg.Slot = "kafgres"
	}
	if cfg.Plugin == "" {
		cfg.Plugin = "kafgres"
	}
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Decoder{cfg: cfg, log: log.With("slot", cfg.Slot)}
}

// Ack records that everything up to lsn is durably handled; status updates
// report it as write/flush/apply position. Monotonic; safe from any goroutine.
func (d *Decoder) Ack(lsn LSN) {
	for {
		cur := d.acked.Load()
		if uint64(lsn) <= cur || d.acked.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

// Run streams until ctx ends and then returns ctx's error; it returns early
// only when the configuration can never work. It connects (retrying with
// backoff), creates the slot if it does not exist, starts replication at the
// slot's confirmed position and sends each complete transaction (as
// *Transaction) and each Progress to out, in stream order. On a lost
// connection it reconnects; an incomplete transaction is dropped, as the
// server sends it again.
func (d *Decoder) Run(ctx context.Context, out chan<- Event) error {
	if err := checkName("slot", d.cfg.Slot); err != nil {
		return err
	}
	if err := checkName("plugin", d.cfg.Plugin); err != nil {
		return err
	}
	s := &stream{d: d, out: out}
	backoff := minBackoff
	failures := 0
	lastLogged := ""
	for {
		err := s.run(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var perr *protocolError
		isProtocol := errors.As(err, &perr)
		if s.streamed && !isProtocol {
			// The session worked: this failure starts a fresh streak.
			backoff, failures, lastLogged = minBackoff, 0, ""
		}
		failures++
		switch {
		case isProtocol:
			// A bug in the plugin or here: always worth an error line. The
			// backoff is not reset, so a frame that fails every time makes
			// us retry every few seconds rather than spin.
			d.log.Error("unparsable replication stream, reconnecting", "err", err,
				"frame_kind", perr.kindName(), "frame_len", perr.length, "wal_start", perr.walStart)
		case s.streamed:
			d.log.Warn("replication connection lost, reconnecting", "err", err)
		case err.Error() != lastLogged:
			// Once per streak and cause: a server that stays down for an
			// hour should not write a line every five seconds.
			d.log.Warn("replication connection failed, retrying", "err", err, "attempt", failures, "retry_in", backoff)
			lastLogged = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// checkName accepts what Postgres accepts as a slot name, which keeps the
// names safe to splice into replication commands.
func checkName(what, name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("decoder: %s name %q must be 1 to 63 characters", what, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("decoder: %s name %q may only contain lower case letters, digits and underscores", what, name)
		}
	}
	return nil
}

// withHint adds the server's detail and hint to err: for a missing or
// untrusted plugin they say what the DBA has to change.
func withHint(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Detail == "" && pgErr.Hint == "" {
		return err
	}
	extra := strings.TrimSpace(pgErr.Detail + " " + pgErr.Hint)
	return fmt.Errorf("%w: %s", err, extra)
}

// protocolError is a frame or message we could not make sense of.
type protocolError struct {
	err      error
	kind     byte
	length   int
	walStart LSN
}

func (e *protocolError) Error() string { return e.err.Error() }
func (e *protocolError) Unwrap() error { return e.err }

// kindName is the frame kind for logs; empty when the error is not a frame's.
func (e *protocolError) kindName() string {
	if e.kind == 0 {
		return ""
	}
	return fmt.Sprintf("%q", rune(e.kind))
}

// stream is the state of Run that outlives a connection.
type stream struct {
	d   *Decoder
	out chan<- Event
	asm assembler
	// high is the highest position delivered (a transaction's EndLSN or a
	// Progress); keepalives not beyond it tell the consumer nothing new.
	high LSN
	// streamed is set once the current session has started streaming.
	streamed bool

	conn       *pgconn.PgConn
	nextStatus time.Time
}

const (
	showWALLevel = "SHOW wal_level"
	// Both are formatted with names checkName accepted. NOEXPORT_SNAPSHOT:
	// we never read the snapshot, and exporting one would hold it open.
	createSlot   = "CREATE_REPLICATION_SLOT %s LOGICAL %s NOEXPORT_SNAPSHOT"
	slotPlugin   = "SELECT s.plugin FROM pg_catalog.pg_replication_slots AS s WHERE s.slot_name OPERATOR(pg_catalog.=) '%s'"
	codeDupSlot  = "42710" // duplicate_object: the slot exists
	closeTimeout = 2 * time.Second
)

// run is one session: connect, prepare the slot, stream until error.
func (s *stream) run(ctx context.Context) error {
	s.streamed = false
	s.asm.reset()
	cfg, err := pgconn.ParseConfig(s.d.cfg.DSN)
	if err != nil {
		return fmt.Errorf("parse DSN: %w", err)
	}
	cfg.RuntimeParams["replication"] = "database"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "kafgres decoder"
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	s.conn = conn
	defer func() {
		// Close politely (Terminate) so the walsender exits and frees the
		// slot at once; the caller's ctx may already be done.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		conn.Close(cctx)
		s.conn = nil
	}()

	if err := s.prepareSlot(ctx); err != nil {
		return err
	}
	opts := pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication}
	// LSN 0: the server starts at the slot's confirmed_flush_lsn.
	if err := pglogrepl.StartReplication(ctx, conn, s.d.cfg.Slot, 0, opts); err != nil {
		return fmt.Errorf("start replication: %w", withHint(err))
	}
	s.streamed = true
	s.d.log.Info("streaming", "acked", LSN(s.d.acked.Load()))
	err = s.receive(ctx)
	if ctx.Err() != nil {
		// Report the last acknowledgement on the way out, so a clean
		// shutdown leaves confirmed_flush_lsn current.
		s.sendStatus()
	}
	return err
}

// prepareSlot checks wal_level and creates the slot if it is missing.
func (s *stream) prepareSlot(ctx context.Context) error {
	res, err := s.conn.Exec(ctx, showWALLevel).ReadAll()
	if err != nil {
		return fmt.Errorf("show wal_level: %w", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return fmt.Errorf("show wal_level: unexpected result")
	}
	if level := string(res[0].Rows[0][0]); level != "logical" {
		return fmt.Errorf("wal_level is %q but logical decoding needs wal_level = logical: set it in postgresql.conf and restart Postgres", level)
	}

	_, err = s.conn.Exec(ctx, fmt.Sprintf(createSlot, s.d.cfg.Slot, s.d.cfg.Plugin)).ReadAll()
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		s.d.log.Info("created replication slot", "plugin", s.d.cfg.Plugin)
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == codeDupSlot:
	default:
		return fmt.Errorf("create replication slot %s: %w", s.d.cfg.Slot, withHint(err))
	}

	// The slot existed: make sure it is ours, or every frame would fail to
	// parse with a far less helpful message.
	res, err = s.conn.Exec(ctx, fmt.Sprintf(slotPlugin, s.d.cfg.Slot)).ReadAll()
	if err != nil {
		return fmt.Errorf("read slot %s: %w", s.d.cfg.Slot, err)
	}
	if len(res) == 1 && len(res[0].Rows) == 1 {
		if p := string(res[0].Rows[0][0]); p != s.d.cfg.Plugin {
			return fmt.Errorf("replication slot %s uses plugin %q, want %q: drop it or configure another slot", s.d.cfg.Slot, p, s.d.cfg.Plugin)
		}
	}
	return nil
}

// receive reads the copy stream until an error or ctx ends. It waits for
// messages no longer than the next status update is due, so updates go out
// on time even when the stream is quiet.
func (s *stream) receive(ctx context.Context) error {
	s.nextStatus = time.Time{}
	for {
		if !time.Now().Before(s.nextStatus) {
			if err := s.sendStatus(); err != nil {
				return err
			}
		}
		rctx, cancel := context.WithDeadline(ctx, s.nextStatus)
		msg, err := s.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if err := s.handle(ctx, msg.Data); err != nil {
				return err
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return errors.New("server ended the replication stream")
		}
	}
}

// handle processes one CopyData message of the stream.
func (s *stream) handle(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return &protocolError{err: errors.New("empty CopyData message")}
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return &protocolError{err: fmt.Errorf("keepalive: %w", err)}
		}
		if ka.ReplyRequested {
			if err := s.sendStatus(); err != nil {
				return err
			}
		}
		// The walsender sends its sent position: everything decoded before
		// it is in the stream already, so it is safe to report even in the
		// middle of a transaction (whose commit lies at or beyond it).
		if lsn := LSN(ka.ServerWALEnd); lsn > s.high {
			s.high = lsn
			return s.emit(ctx, Progress{LSN: lsn})
		}
		return nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return &protocolError{err: fmt.Errorf("XLogData: %w", err)}
		}
		f, err := ParseFrame(x.WALData)
		if err == nil {
			var t *Transaction
			if t, err = s.asm.add(f); err == nil {
				if t == nil {
					return nil
				}
				s.high = max(s.high, t.EndLSN)
				return s.emit(ctx, t)
			}
		}
		pe := &protocolError{err: err, length: len(x.WALData), walStart: LSN(x.WALStart)}
		if len(x.WALData) > 1 {
			pe.kind = x.WALData[1]
		}
		return pe
	default:
		return &protocolError{err: fmt.Errorf("unknown CopyData message type 0x%02x", data[0])}
	}
}

// emit hands ev to the consumer. A slow consumer must not cost us the
// connection, so status updates keep going out while we wait.
func (s *stream) emit(ctx context.Context, ev Event) error {
	for {
		t := time.NewTimer(time.Until(s.nextStatus))
		select {
		case s.out <- ev:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
			if err := s.sendStatus(); err != nil {
				return err
			}
		}
	}
}

// sendStatus reports the acknowledged position as written, flushed and
// applied. Only Ack moves it, so the slot's confirmed_flush_lsn never passes
// what the consumer has made durable. Zero means nothing acknowledged yet,
// which the walsender ignores.
func (s *stream) sendStatus() error {
	s.nextStatus = time.Now().Add(s.d.cfg.StatusInterval)
	acked := pglogrepl.LSN(s.d.acked.Load())
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: acked,
		WALFlushPosition: acked,
		WALApplyPosition: acked,
	})
	if err != nil {
		return fmt.Errorf("send standby status: %w", err)
	}
	return nil
}
