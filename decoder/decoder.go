// Package decoder streams the logical replication slot fed by kafgres's
// output plugin and turns the plugin's frames (docs/producing.md) into
// events: a *Transaction for every committed transaction with kafgres
// content, and a Progress when the walsender has reported decoding past WAL
// that produced nothing. Message contents are opaque bytes here.
//
// The walsender sends a keepalive nearly every time it has decoded new WAL
// and waits for more, so on a busy database without kafgres content there
// is one per commit. Passing each on would wake the consumer (and through it
// the delivery mirror) per commit of someone else's workload, so keepalives
// only record the position, and Progress goes out at most once per
// Config.ProgressInterval: at once for the first keepalive after a quiet
// spell, otherwise when the interval since the last Progress has passed,
// whether or not more messages arrive. A position no later than a
// transaction delivered since is not reported at all: the transaction's
// EndLSN says as much. So a position with no kafgres content is reported
// within ProgressInterval of its keepalive (kafgres_wait_delivered of such
// an LSN returns that much later at most). For the same reason the socket
// is read less often while it carries only keepalives (readPause).
package decoder

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/kafgres/kafgres/broker/retry"
)

// Config says where the slot is and how to stream it.
type Config struct {
	DSN            string        // libpq-style; the decoder adds replication=database
	Slot           string        // default "kafgres"
	Plugin         string        // default "kafgres"
	StatusInterval time.Duration // standby status updates at least this often; default 1s
	// ProgressInterval is the least time between two Progress events;
	// default 20ms. It bounds how late a position without kafgres content
	// is reported, and the consumer's wakeups for such positions (50 a
	// second rather than one per commit). 20 ms is small beside the
	// delivery mirror's own 100 ms for such positions.
	ProgressInterval time.Duration
	// KeepalivePause is how long receive lets keepalives gather before
	// reading again while the stream carries nothing else; default 2ms,
	// negative: never. See readPause.
	KeepalivePause time.Duration
	// Skip says whether the transaction xid, which the stream cannot be
	// read past, is to be skipped (kafgres_skip_transaction); nil: never.
	// It is asked each time the stream stalls on a transaction it can
	// name, before a Stall is delivered.
	Skip func(ctx context.Context, xid uint32) (bool, error)
	// UnreadableXid is a failpoint for tests (producer.FailpointFile):
	// every message of that transaction reads as if it did not parse.
	UnreadableXid uint32
	Logger        *slog.Logger // default slog.Default()
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
	// pauseQuiet is how long the stream must have carried no frames before
	// receive pauses between keepalives (readPause).
	pauseQuiet time.Duration
	// wait is the wait between sessions (retry.Policy.Wait); nil: sleep.
	wait func(context.Context, time.Duration) error
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
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 20 * time.Millisecond
	}
	if cfg.KeepalivePause == 0 {
		cfg.KeepalivePause = 2 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Decoder{cfg: cfg, log: log.With("slot", cfg.Slot), pauseQuiet: time.Second}
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
// *Transaction) and the positions of keepalives (as Progress, coalesced: see
// the package comment) to out, in stream order. On a lost
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
	return retry.Run(ctx, retry.Policy{Min: minBackoff, Max: maxBackoff, Wait: d.wait}, func(ctx context.Context) (bool, error) {
		err := s.run(ctx)
		// A protocol error does not count as progress, so a frame that
		// fails every time makes us retry every few seconds rather than
		// spin.
		return s.streamed && !errors.As(err, new(*protocolError)), err
	}, func(f retry.Failure) {
		var perr *protocolError
		switch {
		case errors.As(f.Err, &perr):
			// A bug in the plugin or here: always worth an error line.
			d.log.Error("unparsable replication stream, reconnecting", "err", f.Err,
				"frame_kind", perr.kindName(), "frame_len", perr.length, "wal_start", perr.walStart)
		case !f.Log:
		case f.Lost:
			d.log.Warn("replication connection lost, reconnecting", "err", f.Err)
		default:
			d.log.Warn("replication connection failed, retrying", "err", f.Err, "attempt", f.Attempt, "retry_in", f.Delay)
		}
	})
}

// PrepareSlot creates the slot if it does not exist, and checks it is
// ours, without streaming: from then on the server keeps the WAL of every
// transaction that commits, for Run to stream when it starts. The broker
// calls it before it may hold Run back (broker.GuardSource), so that what
// commits meanwhile is not lost. It retries as Run does, until ctx ends.
func (d *Decoder) PrepareSlot(ctx context.Context) error {
	if err := checkName("slot", d.cfg.Slot); err != nil {
		return err
	}
	if err := checkName("plugin", d.cfg.Plugin); err != nil {
		return err
	}
	s := &stream{d: d}
	return retry.Run(ctx, retry.Policy{Min: minBackoff, Max: maxBackoff, Wait: d.wait}, func(ctx context.Context) (bool, error) {
		if err := s.connect(ctx); err != nil {
			return false, err
		}
		defer s.disconnect(ctx)
		return false, s.prepareSlot(ctx)
	}, func(f retry.Failure) {
		if f.Log {
			d.log.Warn("preparing the replication slot failed, retrying", "err", f.Err, "attempt", f.Attempt, "retry_in", f.Delay)
		}
	})
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
	d      *Decoder
	out    chan<- Event
	asm    assembler
	parser Parser
	// high is the highest position delivered (a transaction's EndLSN or a
	// Progress); keepalives not beyond it tell the consumer nothing new.
	high LSN
	// pending is the highest keepalive position not delivered yet; it is
	// news only while beyond high.
	pending LSN
	// lastProgress is when the last Progress was delivered.
	lastProgress time.Time
	// streamed is set once the current session has started streaming.
	streamed bool
	// skip is the transaction being skipped, nil when none.
	skip *Transaction

	conn       *pgconn.PgConn
	nextStatus time.Time
	// readDeadline is the read deadline last set on conn's socket.
	readDeadline time.Time
	// paced is conn's socket, which pauses before reading when readPause
	// says so; nil: never.
	paced *pausingConn
	// For readPause: whether the last message was a keepalive, the time
	// since the keepalive before it, and when the last keepalive and the
	// last frame arrived.
	lastWasKeepalive bool
	keepaliveGap     time.Duration
	lastKeepalive    time.Time
	lastFrame        time.Time
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
	// a transaction being skipped comes again from its start
	s.skip = nil
	// A keepalive of the last session may lie inside a transaction that
	// session did not finish; the next session reports its own.
	s.pending = 0
	if err := s.connect(ctx); err != nil {
		return err
	}
	defer s.disconnect(ctx)

	if err := s.prepareSlot(ctx); err != nil {
		return err
	}
	opts := pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication}
	// LSN 0: the server starts at the slot's confirmed_flush_lsn.
	if err := pglogrepl.StartReplication(ctx, s.conn, s.d.cfg.Slot, 0, opts); err != nil {
		return fmt.Errorf("start replication: %w", withHint(err))
	}
	s.streamed = true
	s.d.log.Info("streaming", "acked", LSN(s.d.acked.Load()))
	err := s.receive(ctx)
	if ctx.Err() != nil {
		// Report the last acknowledgement on the way out, so a clean
		// shutdown leaves confirmed_flush_lsn current.
		s.sendStatus()
	}
	return err
}

// connect opens the session's replication connection (s.conn).
func (s *stream) connect(ctx context.Context) error {
	cfg, err := pgconn.ParseConfig(s.d.cfg.DSN)
	if err != nil {
		return fmt.Errorf("parse DSN: %w", err)
	}
	cfg.RuntimeParams["replication"] = "database"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "kafgres decoder"
	}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &pausingConn{Conn: c}, nil
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	s.conn = conn
	s.paced = pausingOf(conn.Conn())
	return nil
}

// disconnect closes the connection politely (Terminate), so the walsender
// exits and frees the slot at once; ctx may already be done.
func (s *stream) disconnect(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	s.conn.Close(cctx)
	s.conn = nil
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
// messages no longer than the next status update or pending Progress is
// due, so both go out on time even when the stream is quiet.
//
// The wait is a read deadline on the socket, moved only when the time it
// waits for changes, rather than a context with a deadline per message: at
// one keepalive per commit of the database, a timer and a context watch per
// message are measurable. ctx's end interrupts a read the same way.
func (s *stream) receive(ctx context.Context) error {
	s.nextStatus = time.Time{}
	netConn := s.conn.Conn()
	stop := context.AfterFunc(ctx, func() { netConn.SetReadDeadline(time.Unix(1, 0)) })
	defer func() {
		stop()
		netConn.SetReadDeadline(time.Time{})
		s.readDeadline = time.Time{}
	}()
	s.readDeadline = time.Time{}
	for {
		now := time.Now()
		if !now.Before(s.nextStatus) {
			if err := s.sendStatus(); err != nil {
				return err
			}
		}
		if err := s.flushProgress(ctx, now); err != nil {
			return err
		}
		if wake := s.wakeAt(); !wake.Equal(s.readDeadline) {
			if err := netConn.SetReadDeadline(wake); err != nil {
				return fmt.Errorf("set read deadline: %w", err)
			}
			s.readDeadline = wake
		}
		// After setting the deadline: had ctx ended just before, its
		// AfterFunc's deadline would have been overwritten.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		if s.paced != nil {
			s.paced.pause.Store(int64(s.readPause(now)))
		}
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			if ctx.Err() == nil && pgconn.Timeout(err) {
				// The deadline passed (or was one ctx's AfterFunc set just
				// as ctx ended): set it anew whatever it is.
				s.readDeadline = time.Time{}
				continue
			}
			if ctx.Err() != nil {
				return fmt.Errorf("receive: %w", ctx.Err())
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

// readPause is how long the socket waits before its next read, so that the
// keepalives of a busy database without kafgres content arrive a few to a
// read instead of one per wakeup of the broker: each wakeup costs more in
// the Go scheduler and its sysmon thread than the message costs to handle.
// It pauses only while that is all the stream carries: the last message was
// a keepalive that came less than KeepalivePause after the one before, and
// no frame has come for pauseQuiet. So kafgres content arriving after such
// a spell waits at most KeepalivePause more, content that keeps coming
// never does, and a slow trickle of keepalives is not held up. Messages
// already read are handled without a pause: it is the socket that waits.
func (s *stream) readPause(now time.Time) time.Duration {
	pause := s.d.cfg.KeepalivePause
	if pause <= 0 || !s.lastWasKeepalive || s.keepaliveGap >= pause ||
		now.Sub(s.lastFrame) < s.d.pauseQuiet {
		return 0
	}
	return pause
}

// wakeAt is when receive must stop waiting for messages: the next status
// update, or the pending Progress if that is due earlier.
func (s *stream) wakeAt() time.Time {
	if s.pending > s.high {
		if due := s.lastProgress.Add(s.d.cfg.ProgressInterval); due.Before(s.nextStatus) {
			return due
		}
	}
	return s.nextStatus
}

// flushProgress delivers the pending keepalive position as a Progress if it
// is news and ProgressInterval has passed since the last one.
func (s *stream) flushProgress(ctx context.Context, now time.Time) error {
	if s.pending <= s.high {
		s.pending = 0
		return nil
	}
	if now.Sub(s.lastProgress) < s.d.cfg.ProgressInterval {
		return nil
	}
	lsn := s.pending
	s.high, s.pending, s.lastProgress = lsn, 0, now
	return s.emit(ctx, Progress{LSN: lsn})
}

// handle processes one CopyData message of the stream.
func (s *stream) handle(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return &protocolError{err: errors.New("empty CopyData message")}
	}
	now := time.Now()
	s.lastWasKeepalive = data[0] == pglogrepl.PrimaryKeepaliveMessageByteID
	if s.lastWasKeepalive {
		s.keepaliveGap = now.Sub(s.lastKeepalive)
		s.lastKeepalive = now
	} else {
		s.lastFrame = now
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
		// middle of a transaction (whose commit lies at or beyond it). It is
		// only recorded here; receive delivers it (flushProgress).
		s.pending = max(s.pending, LSN(ka.ServerWALEnd))
		if s.skip != nil && LSN(ka.ServerWALEnd) >= s.skip.EndLSN {
			// the walsender has sent all of it: its commit frame was in
			// a message that did not parse
			return s.endSkip(ctx)
		}
		return nil
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return &protocolError{err: fmt.Errorf("XLogData: %w", err)}
		}
		frames, err := s.parse(x.WALData)
		if err != nil {
			perr := &protocolError{err: err, length: len(x.WALData), walStart: LSN(x.WALStart)}
			if s.skip != nil {
				if xid, end, ok := peekHeader(x.WALData); ok && xid == s.skip.Xid && end == s.skip.EndLSN {
					s.skipMessage(x, err)
					return nil
				}
				if err := s.endSkip(ctx); err != nil {
					return err
				}
			}
			return s.stalled(ctx, x, perr, nil)
		}
		for i := 0; i < len(frames); i++ {
			f := frames[i]
			if s.skip != nil {
				if f.Xid == s.skip.Xid && f.CommitEndLSN == s.skip.EndLSN {
					if f.Kind == KindCommit {
						if err := s.endSkip(ctx); err != nil {
							return err
						}
					} else if f.Item != nil {
						s.skip.Items = append(s.skip.Items, f.Item)
					}
					continue
				}
				if err := s.endSkip(ctx); err != nil {
					return err
				}
			}
			t, err := s.asm.add(f)
			if i == 0 && err == nil {
				// the message counts for the transaction of its first frame
				if open := s.asm.txn; open != nil {
					open.Bytes += len(x.WALData)
				} else if t != nil {
					t.Bytes += len(x.WALData)
				}
			}
			if err != nil {
				perr := &protocolError{err: err, length: len(x.WALData), walStart: LSN(x.WALStart), kind: f.Kind}
				if err := s.stalled(ctx, x, perr, &f); err != nil {
					return err
				}
				// skipping the transaction: this frame is part of it, or
				// the first of the one after it
				i--
				continue
			}
			if t == nil {
				continue
			}
			s.high = max(s.high, t.EndLSN)
			if err := s.emit(ctx, t); err != nil {
				return err
			}
		}
		return nil
	default:
		return &protocolError{err: fmt.Errorf("unknown CopyData message type 0x%02x", data[0])}
	}
}

// parse parses a message, unless the UnreadableXid failpoint refuses it.
func (s *stream) parse(msg []byte) ([]Frame, error) {
	if fx := s.d.cfg.UnreadableXid; fx != 0 {
		if xid, _, ok := peekHeader(msg); ok && xid == fx {
			return nil, fmt.Errorf("failpoint: transaction %d is unreadable", xid)
		}
	}
	return s.parser.Parse(msg)
}

// stalled handles a message (x) the stream cannot go past: the message
// does not parse (f nil), or frame f of it does not fit the transaction
// being assembled. If the transaction it belongs to can be named and
// Config.Skip says to skip it, skipping starts (s.skip) and stalled
// returns nil; otherwise a Stall is delivered and perr returned, which
// ends the session.
func (s *stream) stalled(ctx context.Context, x pglogrepl.XLogData, perr *protocolError, f *Frame) error {
	st := Stall{LSN: LSN(x.WALStart), Err: perr}
	switch {
	case s.asm.txn != nil:
		st.Xid, st.EndLSN = s.asm.txn.Xid, s.asm.txn.EndLSN
	case f != nil:
		st.Xid, st.EndLSN = f.Xid, f.CommitEndLSN
	default:
		st.Xid, st.EndLSN, _ = peekHeader(x.WALData)
	}
	if st.Xid != 0 && s.d.cfg.Skip != nil {
		skip, err := s.d.cfg.Skip(ctx, st.Xid)
		if err != nil {
			return fmt.Errorf("ask whether to skip transaction %d: %w", st.Xid, err)
		}
		if skip {
			s.d.log.Warn("skipping a transaction the stream cannot be read past (kafgres_skip_transaction)",
				"xid", st.Xid, "end_lsn", st.EndLSN, "err", perr)
			t := s.asm.txn
			if t == nil {
				t = &Transaction{Xid: st.Xid, EndLSN: st.EndLSN}
			}
			s.asm.reset()
			t.Skipped = perr
			s.skip = t
			if f == nil {
				s.skipMessage(x, perr)
			}
			return nil
		}
	}
	if err := s.emit(ctx, st); err != nil {
		return err
	}
	return perr
}

// skipMessage keeps a message of the transaction being skipped that does
// not parse, whole.
func (s *stream) skipMessage(x pglogrepl.XLogData, err error) {
	s.skip.Items = append(s.skip.Items, &Unreadable{LSN: LSN(x.WALStart), Content: bytes.Clone(x.WALData), Whole: true, Err: err})
}

// endSkip delivers the transaction being skipped: it has ended.
func (s *stream) endSkip(ctx context.Context) error {
	t := s.skip
	s.skip = nil
	s.high = max(s.high, t.EndLSN)
	return s.emit(ctx, t)
}

// peekHeader reads the transaction named by the header of a message's
// first frame, for a message that does not parse as a whole; ok is false
// when even that header is not there.
func peekHeader(msg []byte) (xid uint32, endLSN LSN, ok bool) {
	if len(msg) < 4+headerLen || msg[4] != FrameVersion {
		return 0, 0, false
	}
	h := msg[4:]
	return binary.BigEndian.Uint32(h[10:]), LSN(binary.BigEndian.Uint64(h[2:])), true
}

// emit hands ev to the consumer. A slow consumer must not cost us the
// connection, so status updates keep going out while we wait.
func (s *stream) emit(ctx context.Context, ev Event) error {
	select {
	case s.out <- ev:
		// The usual case: room in the channel, and no timer to make.
		return nil
	default:
	}
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
//
// Answering keepalives sooner, or reporting the received position as
// written, would not make the walsender send fewer: it sends one whenever
// it waits for WAL while both positions are behind its sent position
// (WalSndWaitForWal), and decoding each commit moves that past anything we
// could have reported.
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

// pausingConn is the replication connection's socket. Before a read it
// sleeps for the pause the stream last set (readPause), once.
type pausingConn struct {
	net.Conn
	pause atomic.Int64 // a time.Duration
}

// pausingOf finds the pausingConn under c, which may be TLS over it.
func pausingOf(c net.Conn) *pausingConn {
	for {
		switch cc := c.(type) {
		case *pausingConn:
			return cc
		case interface{ NetConn() net.Conn }:
			c = cc.NetConn()
		default:
			return nil
		}
	}
}

func (c *pausingConn) Read(b []byte) (int, error) {
	if d := time.Duration(c.pause.Swap(0)); d > 0 {
		time.Sleep(d)
	}
	return c.Conn.Read(b)
}
