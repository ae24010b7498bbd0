// The output plugin and the decoder together against a real cluster: the
// decoder package's own tests feed it recorded frames, these stream from a
// replication slot. They live here, not in decoder/, because they need the
// harness, and the product module does not depend on the tests module.

package integration

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/decoder"
	"github.com/kafgres/kafgres/tests/harness"
)

// decoderTestSlot is not "kafgres", so that this test keeps working once
// the broker streams the production slot of the cluster it runs in.
const decoderTestSlot = "kafgres_decoder_test"

const decoderWait = 20 * time.Second

// skipWithoutOutputPlugin skips unless the installed kafgres.so exports
// the output plugin's entry point.
func skipWithoutOutputPlugin(t *testing.T) {
	t.Helper()
	libdir := "/usr/lib/postgresql/15/lib"
	if out, err := exec.Command("pg_config", "--pkglibdir").Output(); err == nil {
		libdir = strings.TrimSpace(string(out))
	}
	lib := filepath.Join(libdir, "kafgres.so")
	f, err := elf.Open(lib)
	if err != nil {
		t.Skipf("output plugin not installed: %v (run make -C outputplugin install)", err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Skipf("read symbols of %s: %v", lib, err)
	}
	for _, s := range syms {
		if s.Name == "_PG_output_plugin_init" {
			return
		}
	}
	t.Skipf("%s has no _PG_output_plugin_init: the output plugin is not installed yet (run make -C outputplugin install)", lib)
}

// runningDecoder is a decoder streaming in the background until stop.
type runningDecoder struct {
	d      *decoder.Decoder
	events chan decoder.Event
	cancel context.CancelFunc
	done   chan error
}

func startDecoder(t *testing.T, c *harness.Cluster) *runningDecoder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningDecoder{
		d: decoder.New(decoder.Config{
			DSN:            c.DSN(),
			Slot:           decoderTestSlot,
			StatusInterval: 100 * time.Millisecond,
			Logger:         slog.New(slog.NewTextHandler(decoderLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		}),
		events: make(chan decoder.Event, 100),
		cancel: cancel,
		done:   make(chan error, 1),
	}
	go func() { r.done <- r.d.Run(ctx, r.events) }()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { r.stop(t) }) })
	return r
}

func (r *runningDecoder) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
		r.done <- err // a second stop returns at once
	case <-time.After(decoderWait):
		t.Fatal("Run did not return after cancel")
	}
}

// nextTxn returns the next transaction, skipping progress events.
func (r *runningDecoder) nextTxn(t *testing.T) *decoder.Transaction {
	t.Helper()
	deadline := time.After(decoderWait)
	for {
		select {
		case ev := <-r.events:
			if txn, ok := ev.(*decoder.Transaction); ok {
				return txn
			}
		case <-deadline:
			t.Fatal("no transaction arrived")
		}
	}
}

// progressPast waits for a Progress beyond lsn; a transaction is a failure.
func (r *runningDecoder) progressPast(t *testing.T, lsn decoder.LSN) decoder.Progress {
	t.Helper()
	deadline := time.After(decoderWait)
	for {
		select {
		case ev := <-r.events:
			switch ev := ev.(type) {
			case decoder.Progress:
				if ev.LSN > lsn {
					return ev
				}
			case *decoder.Transaction:
				t.Fatalf("unexpected transaction xid %d with %d items", ev.Xid, len(ev.Items))
			}
		case <-deadline:
			t.Fatalf("no progress beyond %s arrived", lsn)
		}
	}
}

type decoderLogWriter struct{ t *testing.T }

func (w decoderLogWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

type decoderSlotState struct {
	exists         bool
	active         bool
	activePID      int32
	confirmedFlush decoder.LSN
}

func readDecoderSlot(t *testing.T, conn *pgx.Conn) decoderSlotState {
	t.Helper()
	var s decoderSlotState
	var lsn *string
	var pid *int32
	err := conn.QueryRow(context.Background(),
		`SELECT active, active_pid, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, decoderTestSlot).
		Scan(&s.active, &pid, &lsn)
	if errors.Is(err, pgx.ErrNoRows) {
		return s
	}
	if err != nil {
		t.Fatalf("read slot: %v", err)
	}
	s.exists = true
	if pid != nil {
		s.activePID = *pid
	}
	if lsn != nil {
		if s.confirmedFlush, err = pglogrepl.ParseLSN(*lsn); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func waitDecoderSlot(t *testing.T, conn *pgx.Conn, what string, ok func(decoderSlotState) bool) decoderSlotState {
	t.Helper()
	var s decoderSlotState
	harness.Eventually(t, decoderWait, func() error {
		if s = readDecoderSlot(t, conn); !ok(s) {
			return fmt.Errorf("slot %s: %s did not happen; last state %+v", decoderTestSlot, what, s)
		}
		return nil
	})
	return s
}

// exec runs statements in one transaction, committed or rolled back.
func execDecoderTx(t *testing.T, conn *pgx.Conn, commit bool, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if commit {
		err = tx.Commit(ctx)
	} else {
		err = tx.Rollback(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// decoderEmit produces a record with value: only kafgres_produce's
// messages are delivered (the plugin checks their signature), and it needs
// slot "kafgres", which the cluster's broker has created.
func decoderEmit(value string) string {
	return fmt.Sprintf(`SELECT kafgres_produce('decoder-test', NULL, '%s')`, value)
}

// wantDecodedMessage checks that txn holds one message, kafgres_produce's
// content (format 1, the signature stripped) with value.
func wantDecodedMessage(t *testing.T, txn *decoder.Transaction, value string) {
	t.Helper()
	if len(txn.Items) != 1 {
		t.Fatalf("transaction xid %d has %d items, want 1 message with %q", txn.Xid, len(txn.Items), value)
	}
	m, ok := txn.Items[0].(*decoder.Produced)
	if !ok {
		t.Fatalf("item is %T, want *decoder.Produced", txn.Items[0])
	}
	if m.Topic != "decoder-test" || m.Key != nil || string(m.Value) != value || len(m.Headers) != 0 {
		t.Fatalf("record %+v, want topic decoder-test, NULL key, value %q and no headers", m, value)
	}
	if !(m.LSN <= txn.CommitLSN && txn.CommitLSN < txn.EndLSN) {
		t.Fatalf("positions out of order: message %s commit %s end %s", m.LSN, txn.CommitLSN, txn.EndLSN)
	}
	if d := time.Since(txn.CommitTime); d < -time.Minute || d > time.Minute {
		t.Fatalf("commit time %v is not now", txn.CommitTime)
	}
}

func TestDecoderIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres")
	}
	skipWithoutOutputPlugin(t)
	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()

	r := startDecoder(t, c)
	// Decoding starts where the slot was created: wait for it to stream.
	waitDecoderSlot(t, conn, "active", func(s decoderSlotState) bool { return s.active })

	// Only the committed message kafgres_produce wrote counts: not another
	// prefix, not a non-transactional one, not one written by hand.
	execDecoderTx(t, conn, false, decoderEmit("rolled back"))
	execDecoderTx(t, conn, true, `SELECT pg_logical_emit_message(true, 'other', 'other prefix'::bytea)`)
	execDecoderTx(t, conn, true, `SELECT pg_logical_emit_message(false, 'kafgres', 'not transactional'::bytea)`)
	execDecoderTx(t, conn, true, `SELECT pg_logical_emit_message(true, 'kafgres', 'forged'::bytea)`)
	execDecoderTx(t, conn, true, decoderEmit("hello"))
	execDecoderTx(t, conn, true, `SELECT pg_logical_emit_message(true, 'other', 'after'::bytea)`)
	hello := r.nextTxn(t)
	wantDecodedMessage(t, hello, "hello")

	// Not acknowledged: the slot must not move past it. Waiting for
	// something not to happen: half a second is five status intervals.
	time.Sleep(500 * time.Millisecond)
	if s := readDecoderSlot(t, conn); s.confirmedFlush >= hello.EndLSN {
		t.Fatalf("confirmed_flush_lsn %s reached %s before Ack", s.confirmedFlush, hello.EndLSN)
	}
	r.d.Ack(hello.EndLSN)
	waitDecoderSlot(t, conn, "confirmed_flush_lsn reaches the ack "+hello.EndLSN.String(),
		func(s decoderSlotState) bool { return s.confirmedFlush >= hello.EndLSN })

	// Idle acknowledgement: WAL without kafgres content still moves the
	// slot, through Progress. The second transaction makes sure decoding
	// has a record beyond the first one's end to stop at.
	execDecoderTx(t, conn, true, `CREATE TABLE plain (x int)`, `INSERT INTO plain VALUES (1)`)
	var afterPlain string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&afterPlain); err != nil {
		t.Fatal(err)
	}
	plainEnd, err := pglogrepl.ParseLSN(afterPlain)
	if err != nil {
		t.Fatal(err)
	}
	execDecoderTx(t, conn, true, `INSERT INTO plain VALUES (2)`)
	p := r.progressPast(t, plainEnd)
	r.d.Ack(p.LSN)
	waitDecoderSlot(t, conn, "confirmed_flush_lsn reaches the progress "+p.LSN.String(),
		func(s decoderSlotState) bool { return s.confirmedFlush >= p.LSN })

	// Restart without acknowledging: the slot replays the transaction.
	execDecoderTx(t, conn, true, decoderEmit("again"))
	again := r.nextTxn(t)
	wantDecodedMessage(t, again, "again")
	r.stop(t)
	r = startDecoder(t, c)
	replayed := r.nextTxn(t)
	wantDecodedMessage(t, replayed, "again")
	if replayed.EndLSN != again.EndLSN || replayed.Xid != again.Xid {
		t.Fatalf("replayed xid %d end %s, want xid %d end %s", replayed.Xid, replayed.EndLSN, again.Xid, again.EndLSN)
	}
	r.d.Ack(replayed.EndLSN)
	waitDecoderSlot(t, conn, "confirmed_flush_lsn reaches "+replayed.EndLSN.String(),
		func(s decoderSlotState) bool { return s.confirmedFlush >= replayed.EndLSN })

	// Kill the walsender: the decoder reconnects and keeps delivering.
	before := waitDecoderSlot(t, conn, "active", func(s decoderSlotState) bool { return s.active })
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1`, decoderTestSlot); err != nil {
		t.Fatal(err)
	}
	waitDecoderSlot(t, conn, "active under a new walsender", func(s decoderSlotState) bool {
		return s.active && s.activePID != before.activePID
	})
	execDecoderTx(t, conn, true, decoderEmit("after"))
	after := r.nextTxn(t)
	wantDecodedMessage(t, after, "after")
	if after.EndLSN <= replayed.EndLSN {
		t.Fatalf("transaction after reconnect ends at %s, not after %s", after.EndLSN, replayed.EndLSN)
	}
}

// Row changes of a mapped table arrive as decoder.Change and
// decoder.Truncate items. The mapping row is written directly: this test is
// about frames, not about kafgres_add_mapping's checks.
func TestDecoderIntegrationChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres")
	}
	skipWithoutOutputPlugin(t)
	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()
	var hasMapping bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('kafgres.mapping') IS NOT NULL`).Scan(&hasMapping); err != nil {
		t.Fatal(err)
	}
	if !hasMapping {
		t.Skip("the installed extension has no kafgres.mapping table")
	}

	r := startDecoder(t, c)
	waitDecoderSlot(t, conn, "active", func(s decoderSlotState) bool { return s.active })

	execDecoderTx(t, conn, true,
		`CREATE TABLE orders (id int PRIMARY KEY, note text, doc text)`,
		`ALTER TABLE orders REPLICA IDENTITY FULL`,
		`CREATE TABLE unmapped (id int)`,
		`INSERT INTO kafgres.mapping (name, source_relid, topic, owner_role, search_path)
		 VALUES ('orders', 'orders'::regclass, 'orders', (SELECT oid FROM pg_roles WHERE rolname = current_user), 'public')`)
	// doc is large and incompressible, so it is stored out of line and an
	// update that leaves it alone does not log it.
	execDecoderTx(t, conn, true,
		`INSERT INTO orders VALUES (1, NULL, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 200) i))`,
		`INSERT INTO unmapped VALUES (1)`,
		`UPDATE orders SET note = 'n' WHERE id = 1`,
		`DELETE FROM orders WHERE id = 1`)
	execDecoderTx(t, conn, true, `TRUNCATE orders, unmapped`)

	txn := r.nextTxn(t)
	if len(txn.Items) != 3 {
		t.Fatalf("got %d items, want insert, update, delete: %+v", len(txn.Items), txn.Items)
	}
	ins, upd, del := txn.Items[0].(*decoder.Change), txn.Items[1].(*decoder.Change), txn.Items[2].(*decoder.Change)
	var mappingID int64
	if err := conn.QueryRow(ctx, `SELECT mapping_id FROM kafgres.mapping WHERE name = 'orders'`).Scan(&mappingID); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []*decoder.Change{ins, upd, del} {
		if ch.Op != "IUD"[i] || ch.Schema != "public" || ch.Table != "orders" || ch.RelID == 0 ||
			len(ch.Mappings) != 1 || ch.Mappings[0] != mappingID {
			t.Fatalf("item %d: %+v, want mapping ids [%d]", i, ch, mappingID)
		}
	}
	col := func(tp *decoder.Tuple, name string) decoder.Column {
		t.Helper()
		if tp == nil {
			t.Fatalf("no tuple to read column %s from", name)
		}
		for _, c := range tp.Columns {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no column %s in %+v", name, tp)
		return decoder.Column{}
	}
	if ins.Old != nil || string(col(ins.New, "id").Value) != "1" || col(ins.New, "id").TypeOID != 23 || col(ins.New, "note").Kind != decoder.ColumnNull {
		t.Fatalf("insert: %+v", ins)
	}
	if len(col(ins.New, "doc").Value) != 6400 {
		t.Fatalf("insert doc has %d bytes, want 6400", len(col(ins.New, "doc").Value))
	}
	if string(col(upd.New, "note").Value) != "n" || col(upd.New, "doc").Kind != decoder.ColumnUnchanged || col(upd.Old, "note").Kind != decoder.ColumnNull {
		t.Fatalf("update: new %+v old %+v", upd.New, upd.Old)
	}
	if del.New != nil || string(col(del.Old, "id").Value) != "1" {
		t.Fatalf("delete: %+v", del)
	}

	txn = r.nextTxn(t)
	if len(txn.Items) != 1 {
		t.Fatalf("got %d items, want one truncate", len(txn.Items))
	}
	tr, ok := txn.Items[0].(*decoder.Truncate)
	if !ok || len(tr.Relations) != 1 || tr.Relations[0].Table != "orders" || tr.Relations[0].RelID != ins.RelID ||
		len(tr.Relations[0].Mappings) != 1 || tr.Relations[0].Mappings[0] != mappingID {
		t.Fatalf("truncate: %+v", txn.Items[0])
	}
}

// With wal_level below logical the decoder keeps retrying and says why,
// once.
func TestDecoderIntegrationWALLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres")
	}
	c := harness.Start(t, "wal_level = replica")
	var logs decoderLogBuffer
	d := decoder.New(decoder.Config{DSN: c.DSN(), Slot: decoderTestSlot, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := d.Run(ctx, make(chan decoder.Event)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run returned %v", err)
	}
	got := logs.String()
	if n := strings.Count(got, "\n"); n != 1 {
		t.Fatalf("%d log lines about wal_level, want 1:\n%s", n, got)
	}
	if !strings.Contains(got, `wal_level is \"replica\"`) {
		t.Fatalf("log does not name the setting:\n%s", got)
	}
}

type decoderLogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *decoderLogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *decoderLogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
