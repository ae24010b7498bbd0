package decoder

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

	"github.com/kafgres/kafgres/tests/harness"
)

// testSlot is not "kafgres", so that this test keeps working once the
// broker streams the production slot of the cluster it runs in.
const testSlot = "kafgres_decoder_test"

const waitFor = 20 * time.Second

// skipWithoutPlugin skips unless the installed kafgres.so exports the
// output plugin's entry point.
func skipWithoutPlugin(t *testing.T) {
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

// running is a decoder streaming in the background until stop.
type running struct {
	d      *Decoder
	events chan Event
	cancel context.CancelFunc
	done   chan error
}

func startDecoder(t *testing.T, c *harness.Cluster) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{
		d: New(Config{
			DSN:            c.DSN(),
			Slot:           testSlot,
			StatusInterval: 100 * time.Millisecond,
			Logger:         slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		}),
		events: make(chan Event, 100),
		cancel: cancel,
		done:   make(chan error, 1),
	}
	go func() { r.done <- r.d.Run(ctx, r.events) }()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { r.stop(t) }) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
		r.done <- err // a second stop returns at once
	case <-time.After(waitFor):
		t.Fatal("Run did not return after cancel")
	}
}

// nextTxn returns the next transaction, skipping progress events.
func (r *running) nextTxn(t *testing.T) *Transaction {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case ev := <-r.events:
			if txn, ok := ev.(*Transaction); ok {
				return txn
			}
		case <-deadline:
			t.Fatal("no transaction arrived")
		}
	}
}

// progressPast waits for a Progress beyond lsn; a transaction is a failure.
func (r *running) progressPast(t *testing.T, lsn LSN) Progress {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case ev := <-r.events:
			switch ev := ev.(type) {
			case Progress:
				if ev.LSN > lsn {
					return ev
				}
			case *Transaction:
				t.Fatalf("unexpected transaction xid %d with %d items", ev.Xid, len(ev.Items))
			}
		case <-deadline:
			t.Fatalf("no progress beyond %s arrived", lsn)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

type slotState struct {
	exists         bool
	active         bool
	activePID      int32
	confirmedFlush LSN
}

func readSlot(t *testing.T, conn *pgx.Conn) slotState {
	t.Helper()
	var s slotState
	var lsn *string
	var pid *int32
	err := conn.QueryRow(context.Background(),
		`SELECT active, active_pid, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, testSlot).
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

func waitSlot(t *testing.T, conn *pgx.Conn, what string, ok func(slotState) bool) slotState {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		s := readSlot(t, conn)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s: %s did not happen; last state %+v", testSlot, what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exec runs statements in one transaction, committed or rolled back.
func execTx(t *testing.T, conn *pgx.Conn, commit bool, stmts ...string) {
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

// emit produces a record with value: only kafgres_produce's messages are
// delivered (the plugin checks their signature), and it needs slot
// "kafgres", which the cluster's broker has created.
func emit(value string) string {
	return fmt.Sprintf(`SELECT kafgres_produce('decoder-test', NULL, '%s')`, value)
}

// wantMessage checks that txn holds one message, kafgres_produce's content
// (format 1, the signature stripped) with value.
func wantMessage(t *testing.T, txn *Transaction, value string) {
	t.Helper()
	if len(txn.Items) != 1 {
		t.Fatalf("transaction xid %d has %d items, want 1 message with %q", txn.Xid, len(txn.Items), value)
	}
	m, ok := txn.Items[0].(*Produced)
	if !ok {
		t.Fatalf("item is %T, want *Produced", txn.Items[0])
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
	skipWithoutPlugin(t)
	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()

	r := startDecoder(t, c)
	// Decoding starts where the slot was created: wait for it to stream.
	waitSlot(t, conn, "active", func(s slotState) bool { return s.active })

	// Only the committed message kafgres_produce wrote counts: not another
	// prefix, not a non-transactional one, not one written by hand.
	execTx(t, conn, false, emit("rolled back"))
	execTx(t, conn, true, `SELECT pg_logical_emit_message(true, 'other', 'other prefix'::bytea)`)
	execTx(t, conn, true, `SELECT pg_logical_emit_message(false, 'kafgres', 'not transactional'::bytea)`)
	execTx(t, conn, true, `SELECT pg_logical_emit_message(true, 'kafgres', 'forged'::bytea)`)
	execTx(t, conn, true, emit("hello"))
	execTx(t, conn, true, `SELECT pg_logical_emit_message(true, 'other', 'after'::bytea)`)
	hello := r.nextTxn(t)
	wantMessage(t, hello, "hello")

	// Not acknowledged: the slot must not move past it.
	time.Sleep(500 * time.Millisecond)
	if s := readSlot(t, conn); s.confirmedFlush >= hello.EndLSN {
		t.Fatalf("confirmed_flush_lsn %s reached %s before Ack", s.confirmedFlush, hello.EndLSN)
	}
	r.d.Ack(hello.EndLSN)
	waitSlot(t, conn, "confirmed_flush_lsn reaches the ack "+hello.EndLSN.String(),
		func(s slotState) bool { return s.confirmedFlush >= hello.EndLSN })

	// Idle acknowledgement: WAL without kafgres content still moves the
	// slot, through Progress. The second transaction makes sure decoding
	// has a record beyond the first one's end to stop at.
	execTx(t, conn, true, `CREATE TABLE plain (x int)`, `INSERT INTO plain VALUES (1)`)
	var afterPlain string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&afterPlain); err != nil {
		t.Fatal(err)
	}
	plainEnd, err := pglogrepl.ParseLSN(afterPlain)
	if err != nil {
		t.Fatal(err)
	}
	execTx(t, conn, true, `INSERT INTO plain VALUES (2)`)
	p := r.progressPast(t, plainEnd)
	r.d.Ack(p.LSN)
	waitSlot(t, conn, "confirmed_flush_lsn reaches the progress "+p.LSN.String(),
		func(s slotState) bool { return s.confirmedFlush >= p.LSN })

	// Restart without acknowledging: the slot replays the transaction.
	execTx(t, conn, true, emit("again"))
	again := r.nextTxn(t)
	wantMessage(t, again, "again")
	r.stop(t)
	r = startDecoder(t, c)
	replayed := r.nextTxn(t)
	wantMessage(t, replayed, "again")
	if replayed.EndLSN != again.EndLSN || replayed.Xid != again.Xid {
		t.Fatalf("replayed xid %d end %s, want xid %d end %s", replayed.Xid, replayed.EndLSN, again.Xid, again.EndLSN)
	}
	r.d.Ack(replayed.EndLSN)
	waitSlot(t, conn, "confirmed_flush_lsn reaches "+replayed.EndLSN.String(),
		func(s slotState) bool { return s.confirmedFlush >= replayed.EndLSN })

	// Kill the walsender: the decoder reconnects and keeps delivering.
	before := waitSlot(t, conn, "active", func(s slotState) bool { return s.active })
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1`, testSlot); err != nil {
		t.Fatal(err)
	}
	waitSlot(t, conn, "active under a new walsender", func(s slotState) bool {
		return s.active && s.activePID != before.activePID
	})
	execTx(t, conn, true, emit("after"))
	after := r.nextTxn(t)
	wantMessage(t, after, "after")
	if after.EndLSN <= replayed.EndLSN {
		t.Fatalf("transaction after reconnect ends at %s, not after %s", after.EndLSN, replayed.EndLSN)
	}
}

// Row changes of a mapped table arrive as Change and Truncate items. The
// mapping row is written directly: this test is about frames, not about
// kafgres_add_mapping's checks.
func TestDecoderIntegrationChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres")
	}
	skipWithoutPlugin(t)
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
	waitSlot(t, conn, "active", func(s slotState) bool { return s.active })

	execTx(t, conn, true,
		`CREATE TABLE orders (id int PRIMARY KEY, note text, doc text)`,
		`ALTER TABLE orders REPLICA IDENTITY FULL`,
		`CREATE TABLE unmapped (id int)`,
		`INSERT INTO kafgres.mapping (name, source_relid, topic, owner_role, search_path)
		 VALUES ('orders', 'orders'::regclass, 'orders', (SELECT oid FROM pg_roles WHERE rolname = current_user), 'public')`)
	// doc is large and incompressible, so it is stored out of line and an
	// update that leaves it alone does not log it.
	execTx(t, conn, true,
		`INSERT INTO orders VALUES (1, NULL, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 200) i))`,
		`INSERT INTO unmapped VALUES (1)`,
		`UPDATE orders SET note = 'n' WHERE id = 1`,
		`DELETE FROM orders WHERE id = 1`)
	execTx(t, conn, true, `TRUNCATE orders, unmapped`)

	txn := r.nextTxn(t)
	if len(txn.Items) != 3 {
		t.Fatalf("got %d items, want insert, update, delete: %+v", len(txn.Items), txn.Items)
	}
	ins, upd, del := txn.Items[0].(*Change), txn.Items[1].(*Change), txn.Items[2].(*Change)
	var mappingID int64
	if err := conn.QueryRow(ctx, `SELECT mapping_id FROM kafgres.mapping WHERE name = 'orders'`).Scan(&mappingID); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []*Change{ins, upd, del} {
		if ch.Op != "IUD"[i] || ch.Schema != "public" || ch.Table != "orders" || ch.RelID == 0 ||
			len(ch.Mappings) != 1 || ch.Mappings[0] != mappingID {
			t.Fatalf("item %d: %+v, want mapping ids [%d]", i, ch, mappingID)
		}
	}
	col := func(tp *Tuple, name string) Column {
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
		return Column{}
	}
	if ins.Old != nil || string(col(ins.New, "id").Value) != "1" || col(ins.New, "id").TypeOID != 23 || col(ins.New, "note").Kind != ColumnNull {
		t.Fatalf("insert: %+v", ins)
	}
	if len(col(ins.New, "doc").Value) != 6400 {
		t.Fatalf("insert doc has %d bytes, want 6400", len(col(ins.New, "doc").Value))
	}
	if string(col(upd.New, "note").Value) != "n" || col(upd.New, "doc").Kind != ColumnUnchanged || col(upd.Old, "note").Kind != ColumnNull {
		t.Fatalf("update: new %+v old %+v", upd.New, upd.Old)
	}
	if del.New != nil || string(col(del.Old, "id").Value) != "1" {
		t.Fatalf("delete: %+v", del)
	}

	txn = r.nextTxn(t)
	if len(txn.Items) != 1 {
		t.Fatalf("got %d items, want one truncate", len(txn.Items))
	}
	tr, ok := txn.Items[0].(*Truncate)
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
	var logs syncBuffer
	d := New(Config{DSN: c.DSN(), Slot: testSlot, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := d.Run(ctx, make(chan Event)); !errors.Is(err, context.DeadlineExceeded) {
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

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
