package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/decoder"
	"github.com/kafgres/kafgres/tests/harness"
)

// TestPipelineFramesMappingRebuilt: REINDEX and VACUUM FULL of
// kafgres.mapping leave the slot's earlier changes decodable (the plugin
// reads the table without the index whose files are gone).
func TestPipelineFramesMappingRebuilt(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()
	mustExec(t, conn,
		`SELECT 'init' FROM pg_create_logical_replication_slot('frames_check', 'kafgres')`,
		`CREATE TABLE rebuilt (id int PRIMARY KEY)`,
		`SELECT kafgres_create_topic('rebuilt', 1)`,
		`SELECT kafgres_add_mapping('rebuilt', 'rebuilt', 'rebuilt')`,
		`INSERT INTO rebuilt VALUES (1)`,
		`REINDEX TABLE kafgres.mapping`,
		`INSERT INTO rebuilt VALUES (2)`,
		`VACUUM FULL kafgres.mapping`,
		`INSERT INTO rebuilt VALUES (3)`,
		// the old files go at the next checkpoint
		`CHECKPOINT`)
	var id int64
	if err := conn.QueryRow(ctx, `SELECT mapping_id FROM kafgres.mapping WHERE name = 'rebuilt'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range peekFrames(t, conn, "frames_check") {
		if ch, ok := f.Item.(*decoder.Change); ok {
			got = append(got, fmt.Sprintf("%s %v", ch.New.Columns[0].Value, ch.Mappings))
		}
	}
	ids := fmt.Sprint([]int64{id})
	if want := []string{"1 " + ids, "2 " + ids, "3 " + ids}; !slices.Equal(got, want) {
		t.Fatalf("changes: %q, want %q", got, want)
	}
	mustExec(t, conn, `SELECT pg_drop_replication_slot('frames_check')`)
}

// dumpOnFailure logs, when the test fails, what the broker says about its
// mappings and what it dead-lettered, and the end of the log.
func dumpOnFailure(t *testing.T, c *harness.Cluster) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		conn, err := pgx.Connect(context.Background(), c.DSN())
		if err != nil {
			t.Logf("dump: %v", err)
			return
		}
		defer conn.Close(context.Background())
		for _, q := range []string{
			`SELECT name, status, coalesce(last_error, ''), rendered, dead_lettered FROM kafgres.mappings`,
			`SELECT coalesce(mapping_id, 0), coalesce(error, ''), lsn::text FROM kafgres.dead_letter ORDER BY id LIMIT 20`,
		} {
			rows, err := conn.Query(context.Background(), q)
			if err != nil {
				t.Logf("%s: %v", q, err)
				continue
			}
			for rows.Next() {
				vs, _ := rows.Values()
				t.Logf("%v", vs)
			}
			rows.Close()
		}
		t.Logf("log:\n%s", c.LogTail())
	})
}

// logSince is what the cluster's log (Postgres's and the broker's) gained
// after offset, and the new end.
func logSince(t *testing.T, c *harness.Cluster, offset int64) (string, int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	if int64(len(b)) < offset {
		offset = 0
	}
	return string(b[offset:]), int64(len(b))
}

// sortedValues is the records' values, sorted.
func sortedValues(t *testing.T, addr, topic string, n int) []string {
	t.Helper()
	var vs []string
	for _, r := range readTopic(t, addr, topic, n) {
		vs = append(vs, string(r.Value))
	}
	slices.Sort(vs)
	return vs
}

// TestPipelineFramesPartitioned: a mapping on a partitioned table covers
// every leaf below it -- partitions there when it was made, one attached
// later (with its own column order), a sub-partitioned one, and one
// attached inside the transaction that writes to it -- and nothing of a
// partition after it is detached. The frames name the leaf and carry the
// parent's mapping id; every row reaches the topic exactly once.
func TestPipelineFramesPartitioned(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()
	dumpOnFailure(t, c)
	mustExec(t, conn,
		// a second slot, to see the frames the broker is sent
		`SELECT 'init' FROM pg_create_logical_replication_slot('frames_check', 'kafgres')`,
		`CREATE TABLE measurements (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region)`,
		`CREATE TABLE m_eu PARTITION OF measurements FOR VALUES IN ('eu')`,
		`CREATE TABLE m_us PARTITION OF measurements FOR VALUES IN ('us')`,
		`SELECT kafgres_create_topic('measurements', 1)`,
		`SELECT kafgres_add_mapping('measurements', 'measurements', 'measurements',
		   value_expr => $$ new.region || '/' || new.id || '/' || new.v $$,
		   key_expr => $$ new.id::text $$)`,
		// after the mapping: a partition with its own column order, and a
		// sub-partitioned one
		`CREATE TABLE m_late (v text, id int NOT NULL, region text NOT NULL)`,
		`ALTER TABLE measurements ATTACH PARTITION m_late FOR VALUES IN ('late')`,
		`CREATE TABLE m_asia PARTITION OF measurements FOR VALUES IN ('jp', 'kr') PARTITION BY LIST (region)`,
		`CREATE TABLE m_asia_jp PARTITION OF m_asia FOR VALUES IN ('jp')`,
		`CREATE TABLE m_asia_kr PARTITION OF m_asia FOR VALUES IN ('kr')`,
		`CREATE TABLE unmapped (id int)`,
		// a leaf with a mapping of its own as well
		`SELECT kafgres_create_topic('m-eu', 1)`,
		`SELECT kafgres_add_mapping('m-eu', 'm_eu', 'm-eu', value_expr => $$ 'eu only ' || new.id $$)`)
	var mappingID, euID int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT mapping_id FROM kafgres.mapping WHERE name = 'measurements'),
	                                     (SELECT mapping_id FROM kafgres.mapping WHERE name = 'm-eu')`).Scan(&mappingID, &euID); err != nil {
		t.Fatal(err)
	}

	mustExec(t, conn,
		`INSERT INTO measurements VALUES (1, 'eu', 'a'), (2, 'us', 'b'), (3, 'late', 'c'), (4, 'jp', 'd'), (5, 'kr', 'e')`,
		`INSERT INTO m_eu VALUES (6, 'eu', 'direct')`,
		`INSERT INTO m_late (id, region, v) VALUES (7, 'late', 'direct')`,
		`INSERT INTO m_asia_kr VALUES (8, 'kr', 'direct')`,
		`UPDATE measurements SET v = 'b2' WHERE id = 2`,
		// attached and detached inside the transaction that writes to it:
		// only the row written while it is a partition is mapped
		`BEGIN;
		 CREATE TABLE m_tx (id int NOT NULL, region text NOT NULL, v text);
		 INSERT INTO m_tx VALUES (90, 'tx', 'before attach');
		 INSERT INTO unmapped VALUES (1);
		 ALTER TABLE measurements ATTACH PARTITION m_tx FOR VALUES IN ('tx');
		 INSERT INTO m_tx VALUES (9, 'tx', 'attached');
		 ALTER TABLE measurements DETACH PARTITION m_tx;
		 INSERT INTO m_tx VALUES (91, 'tx', 'after detach');
		 COMMIT`)
	waitDelivered(t, conn)

	// The frames: leaf relid and name, the parent's mapping id.
	var got []string
	for _, f := range peekFrames(t, conn, "frames_check") {
		if ch, ok := f.Item.(*decoder.Change); ok {
			var leaf uint32
			if err := conn.QueryRow(ctx, `SELECT $1::regclass::oid`, ch.Schema+"."+ch.Table).Scan(&leaf); err != nil {
				t.Fatal(err)
			}
			if leaf != ch.RelID {
				t.Fatalf("change names %s.%s but relid %d, not %d", ch.Schema, ch.Table, ch.RelID, leaf)
			}
			got = append(got, fmt.Sprintf("%c %s %v", ch.Op, ch.Table, ch.Mappings))
		}
	}
	ids := fmt.Sprint([]int64{mappingID})
	euIDs := fmt.Sprint([]int64{min(mappingID, euID), max(mappingID, euID)})
	want := []string{
		"I m_eu " + euIDs, "I m_us " + ids, "I m_late " + ids, "I m_asia_jp " + ids, "I m_asia_kr " + ids,
		"I m_eu " + euIDs, "I m_late " + ids, "I m_asia_kr " + ids,
		"U m_us " + ids,
		"I m_tx " + ids,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("changes sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mustExec(t, conn, `SELECT pg_drop_replication_slot('frames_check')`)

	// And end to end: every row rendered by the parent's mapping, once.
	wantVals := []string{
		"eu/1/a", "us/2/b", "late/3/c", "jp/4/d", "kr/5/e",
		"eu/6/direct", "late/7/direct", "kr/8/direct",
		"us/2/b2", "tx/9/attached",
	}
	slices.Sort(wantVals)
	if vs := sortedValues(t, c.Addr, "measurements", len(wantVals)); !slices.Equal(vs, wantVals) {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(vs, "\n"), strings.Join(wantVals, "\n"))
	}
	if vs := sortedValues(t, c.Addr, "m-eu", 2); !slices.Equal(vs, []string{"eu only 1", "eu only 6"}) {
		t.Fatalf("records of the leaf's own mapping: %q", vs)
	}
	mappingStatus(t, conn, "measurements", "active")
	mappingStatus(t, conn, "m-eu", "active")
}

// TestPipelineFramesDropExtension: DROP EXTENSION kafgres CASCADE while the
// slot still holds undecoded changes of a mapped table, then CREATE
// EXTENSION again. The old changes went with the old mappings (and topics);
// decoding goes on, and a new mapping and kafgres_produce deliver
// everything written after the new extension, once.
func TestPipelineFramesDropExtension(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()
	mustExec(t, conn,
		`CREATE TABLE dropped_ext (id int PRIMARY KEY, v text)`,
		`SELECT kafgres_create_topic('drop-old', 1)`,
		`SELECT kafgres_add_mapping('drop-old', 'dropped_ext', 'drop-old', value_expr => $$ new.v $$)`,
		`INSERT INTO dropped_ext VALUES (1, 'before')`)
	waitDelivered(t, conn)
	if got := sortedValues(t, c.Addr, "drop-old", 1); got[0] != "before" {
		t.Fatalf("before the drop: %q", got)
	}

	// DROP EXTENSION below refuses while the slot may still have to decode
	// a change of kafgres.mapping (outputplugin/dropguard.c); with the
	// broker stopped it would not wait, so let the slot pass the mapping
	// change first.
	waitSlotPastMappingChanges(t, conn)

	// Stop the broker and end its walsender (which would otherwise decode
	// ahead of the stopped broker, into its socket buffer), so that the
	// changes below stay undecoded in the slot until after the extension
	// is gone and back: the broker's next session decodes them from the
	// slot's confirmed position, before the drop.
	pid := c.BrokerPID(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop broker: %v", err)
	}
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	mustExec(t, conn, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'kafgres'`)
	eventuallyTrue(t, conn, `SELECT NOT active FROM pg_replication_slots WHERE slot_name = 'kafgres'`)
	mustExec(t, conn,
		`INSERT INTO dropped_ext VALUES (2, 'row in flight')`,
		`SELECT kafgres_produce('drop-old', NULL, 'record in flight')`,
		`DROP EXTENSION kafgres CASCADE`,
		// the old mapping table's files go at the next checkpoint
		`CHECKPOINT`,
		`CREATE EXTENSION kafgres`,
		`SELECT kafgres_create_topic('drop-new', 1)`,
		`SELECT kafgres_add_mapping('drop-new', 'dropped_ext', 'drop-new', value_expr => $$ new.v $$)`,
		`INSERT INTO dropped_ext VALUES (3, 'after')`)
	var slots int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'kafgres'`).Scan(&slots); err != nil || slots != 1 {
		t.Fatalf("slot kafgres: %d %v", slots, err)
	}
	// What the slot holds now, decoded by the plugin as the broker will:
	// the row inserted before the drop matched a mapping that is gone with
	// its table, so it is not sent; the record and the row after are.
	frames := peekFrames(t, conn, "kafgres")
	var newID int64
	if err := conn.QueryRow(ctx, `SELECT mapping_id FROM kafgres.mapping WHERE name = 'drop-new'`).Scan(&newID); err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, f := range frames {
		if ch, ok := f.Item.(*decoder.Change); ok {
			changes = append(changes, fmt.Sprintf("%s %v", ch.New.Columns[1].Value, ch.Mappings))
		}
	}
	if want := []string{fmt.Sprintf("after [%d]", newID)}; !slices.Equal(changes, want) {
		t.Fatalf("changes in the slot: %q, want %q", changes, want)
	}

	_, mark := logSince(t, c, 0)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("continue broker: %v", err)
	}
	stopped = false

	mustExec(t, conn, `SELECT kafgres_produce('drop-new', NULL, 'produced after')`)
	waitDelivered(t, conn)
	got := sortedValues(t, c.Addr, "drop-new", 2)
	if want := []string{"after", "produced after"}; !slices.Equal(got, want) {
		t.Fatalf("after CREATE EXTENSION: %q, want %q", got, want)
	}

	// still decoding: more rows go through at once
	mustExec(t, conn, `INSERT INTO dropped_ext VALUES (4, 'later')`)
	waitDelivered(t, conn)
	got = sortedValues(t, c.Addr, "drop-new", 3)
	if want := []string{"after", "later", "produced after"}; !slices.Equal(got, want) {
		t.Fatalf("later: %q, want %q", got, want)
	}

	// One lost connection is the walsender we ended; any error of the
	// plugin, or a retry loop, would show here.
	log, _ := logSince(t, c, mark)
	if m := regexp.MustCompile(`output plugin "kafgres"|unparsable replication stream|could not find pg_class`).FindString(log); m != "" {
		t.Fatalf("decoding failed after CREATE EXTENSION (%q):\n%s", m, tail(log, 4000))
	}
	if n := strings.Count(log, "replication connection lost"); n > 1 {
		t.Fatalf("replication connection lost %d times:\n%s", n, tail(log, 4000))
	}
}

// eventuallyTrue waits up to 20 s for query to return true.
// waitSlotPastMappingChanges waits until slot kafgres's catalog_xmin is
// past every change of kafgres.mapping, logging running-transactions
// records (by CHECKPOINT) for it to move at.
func waitSlotPastMappingChanges(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	const passed = `SELECT coalesce(age(s.catalog_xmin) < (SELECT min(age(m.xmin)) FROM kafgres.mapping AS m), true)
  FROM pg_replication_slots AS s WHERE s.slot_name = 'kafgres'`
	harness.Eventually(t, 30*time.Second, func() error {
		if _, err := conn.Exec(context.Background(), `CHECKPOINT`); err != nil {
			return err
		}
		var ok bool
		if err := conn.QueryRow(context.Background(), passed).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return errors.New("slot kafgres's catalog_xmin is not past the latest mapping change")
		}
		return nil
	})
}

// TestDropExtensionWaitsForSlot: DROP EXTENSION right after a mapping
// change, with the broker streaming, is not refused by the check that the
// slot has decoded the change (outputplugin/dropguard.c): the slot in use
// catches up within the wait, and decoding goes on afterwards. (The
// refusals, with no reader of the slot, are in
// outputplugin/sql/drop_extension.sql.)
func TestDropExtensionWaitsForSlot(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	mustExec(t, conn,
		`CREATE TABLE guarded (id int PRIMARY KEY, v text)`,
		`SELECT kafgres_create_topic('guarded', 1)`,
		`SELECT kafgres_add_mapping('guarded', 'guarded', 'guarded', value_expr => $$ new.v $$)`,
		`SELECT kafgres_remove_mapping('guarded')`,
		`DROP EXTENSION kafgres CASCADE`,
		`CREATE EXTENSION kafgres`,
		`SELECT kafgres_create_topic('guarded-after', 1)`,
		`SELECT kafgres_produce('guarded-after', NULL, 'after the drop')`)
	waitDelivered(t, conn)
	if got := sortedValues(t, c.Addr, "guarded-after", 1); got[0] != "after the drop" {
		t.Fatalf("after DROP and CREATE EXTENSION: %q", got)
	}
	var active bool
	if err := conn.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots WHERE slot_name = 'kafgres'`).Scan(&active); err != nil || !active {
		t.Fatalf("slot kafgres active: %v %v", active, err)
	}
}

func eventuallyTrue(t *testing.T, conn *pgx.Conn, query string) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, func() error {
		var ok bool
		if err := conn.QueryRow(context.Background(), query).Scan(&ok); err != nil {
			return fmt.Errorf("%s: %w", query, err)
		}
		if !ok {
			return fmt.Errorf("%s: still not true", query)
		}
		return nil
	})
}

// peekMessages is what the slot holds: the plugin's messages, each parsed
// into its frames (pg_logical_slot_peek_binary_changes runs the plugin; the
// slot must not be in use).
func peekMessages(t *testing.T, conn *pgx.Conn, slot string) (raw [][]byte, parsed [][]decoder.Frame) {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL)`, slot)
	if err != nil {
		t.Fatalf("peek slot %s: %v", slot, err)
	}
	raw, err = pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatalf("peek slot %s: %v", slot, err)
	}
	for _, b := range raw {
		fs, err := decoder.ParseFrames(b)
		if err != nil {
			t.Fatalf("message %x: %v", b, err)
		}
		parsed = append(parsed, fs)
	}
	return raw, parsed
}

// peekFrames is what the slot holds, as frames.
func peekFrames(t *testing.T, conn *pgx.Conn, slot string) []decoder.Frame {
	t.Helper()
	_, msgs := peekMessages(t, conn, slot)
	var frames []decoder.Frame
	for _, fs := range msgs {
		frames = append(frames, fs...)
	}
	return frames
}

// TestPipelineFramesBatched: the plugin writes a transaction's frames as
// one message, a large transaction's in messages of about 64 KiB, and
// nothing for a transaction without kafgres content, however long.
func TestPipelineFramesBatched(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	const rows = 3000
	mustExec(t, conn,
		`SELECT 'init' FROM pg_create_logical_replication_slot('frames_batch', 'kafgres')`,
		`CREATE TABLE batched (id int PRIMARY KEY, note text)`,
		`CREATE TABLE unmapped (id int PRIMARY KEY)`,
		`SELECT kafgres_create_topic('batched', 1)`,
		`SELECT kafgres_add_mapping('batched', 'batched', 'batched')`,
		`INSERT INTO batched SELECT g, 'small' FROM generate_series(1, 3) g`,
		`INSERT INTO unmapped SELECT g FROM generate_series(1, 1000) g`,
		fmt.Sprintf(`INSERT INTO batched SELECT g, repeat('x', 100) FROM generate_series(4, %d) g`, rows+3),
		`BEGIN`,
		`SELECT kafgres_produce('batched', 'k', 'v')`,
		`INSERT INTO batched VALUES (0, 'with a record')`,
		`COMMIT`)
	defer mustExec(t, conn, `SELECT pg_drop_replication_slot('frames_batch')`)
	raw, msgs := peekMessages(t, conn, "frames_batch")

	kinds := func(fs []decoder.Frame) string {
		var b strings.Builder
		for _, f := range fs {
			b.WriteByte(f.Kind)
		}
		return b.String()
	}
	var txns [][]int // the messages of each transaction, by index
	open := false
	for i, fs := range msgs {
		if !open {
			txns = append(txns, nil)
		}
		txns[len(txns)-1] = append(txns[len(txns)-1], i)
		open = fs[len(fs)-1].Kind != decoder.KindCommit
	}
	if len(txns) != 3 || open {
		t.Fatalf("%d transactions (last open: %v) in %d messages, want 3: %q", len(txns), open, len(msgs), kinds(peekFrames(t, conn, "frames_batch")))
	}
	if got := kinds(msgs[txns[0][0]]); len(txns[0]) != 1 || got != "BIIIC" {
		t.Fatalf("small transaction: %d messages, frames %q; want one message BIIIC", len(txns[0]), got)
	}
	if got := kinds(msgs[txns[2][0]]); len(txns[2]) != 1 || got != "BMIC" {
		t.Fatalf("record and row: %d messages, frames %q; want one message BMIC", len(txns[2]), got)
	}
	large := txns[1]
	if len(large) < 3 {
		t.Fatalf("large transaction in %d messages, want several", len(large))
	}
	next := 4
	for n, i := range large {
		fs := msgs[i]
		last := n == len(large)-1
		if !last {
			// written once it reached 64 KiB, so it holds less than that
			// without its last frame
			lastFrame := len(raw[i]) // bytes of the last frame and its length
			for off := 0; off < len(raw[i]); {
				l := int(binary.BigEndian.Uint32(raw[i][off:]))
				lastFrame = 4 + l
				off += 4 + l
			}
			if len(raw[i]) < 64<<10 || len(raw[i])-lastFrame >= 64<<10 {
				t.Fatalf("message %d of the large transaction: %d bytes, the last frame %d", n, len(raw[i]), lastFrame)
			}
		}
		for j, f := range fs {
			switch {
			case n == 0 && j == 0:
				if f.Kind != decoder.KindBegin {
					t.Fatalf("large transaction starts with %c", f.Kind)
				}
			case last && j == len(fs)-1:
				if f.Kind != decoder.KindCommit {
					t.Fatalf("large transaction ends with %c", f.Kind)
				}
			default:
				ch, ok := f.Item.(*decoder.Change)
				if !ok || string(ch.New.Columns[0].Value) != fmt.Sprint(next) {
					t.Fatalf("message %d frame %d: %+v, want the insert of %d", n, j, f.Item, next)
				}
				next++
			}
		}
	}
	if next != rows+4 {
		t.Fatalf("large transaction carried rows 4 to %d, want to %d", next-1, rows+3)
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return strings.Clone(s)
}
