package integration

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/storage/table"
	"github.com/kafgres/kafgres/tests/harness"
)

// tableFixture is a topic of one partition on a cluster of its own, and
// what opens its log with the table engine.
type tableFixture struct {
	conn    *pgx.Conn
	topicID int64
	opts    table.Options
}

func newTableFixture(t *testing.T, segmentBytes int64) *tableFixture {
	t.Helper()
	c := harness.Start(t)
	ctx := ctxT(t)
	c.CreateTopic(t, "tbl", 1)
	f := &tableFixture{conn: c.Conn(t)}
	if err := f.conn.QueryRow(ctx, "SELECT topic_id FROM kafgres.topic WHERE name = 'tbl'").Scan(&f.topicID); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f.opts = table.Options{Pool: pool, TopicID: f.topicID, SegmentBytes: segmentBytes}
	return f
}

func (f *tableFixture) open(t *testing.T) *table.Log {
	t.Helper()
	l, err := table.Open(ctxT(t), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// count is the first column of query's one row, $1 being the topic id.
func (f *tableFixture) count(t *testing.T, query string) int {
	t.Helper()
	var n int
	if err := f.conn.QueryRow(ctxT(t), query, f.topicID).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// rows counts the partition's rows in kafgres.log_batch.
func (f *tableFixture) rows(t *testing.T) int {
	return f.count(t, "SELECT count(*) FROM kafgres.log_batch WHERE topic_id = $1")
}

// leaves counts the leaf tables attached under the partition's table.
func (f *tableFixture) leaves(t *testing.T) int {
	return f.count(t, "SELECT count(*) FROM pg_inherits WHERE inhparent = format('kafgres.log_batch_%s_0', $1::bigint)::regclass")
}

// TestTableEngineAppendRead: the table engine's start (issue #15) against
// a real Postgres: appends are invisible until Sync commits them, then
// read back byte for byte with segment.Log's Read rules (the batch holding
// the offset first, whole batches, the byte and limit bounds), spread over
// leaf tables rolled by size, and found again by a reopened log.
func TestTableEngineAppendRead(t *testing.T) {
	f := newTableFixture(t, 1000)
	ctx, conn, topicID := ctxT(t), f.conn, f.topicID
	l := f.open(t)
	if l.LogEndOffset() != 0 || l.Segments() != 0 {
		t.Fatalf("new log: end %d, %d leaves", l.LogEndOffset(), l.Segments())
	}

	// 30 batches of 3 records, of growing sizes, several to a leaf.
	var want [][]byte
	for i := range 30 {
		b := batch(-1, 0, 0, 3, strings.Repeat("v", 10+4*i))
		base, err := l.Append(b, 7)
		if err != nil || base != int64(3*i) {
			t.Fatalf("append %d: base %d, %v", i, base, err)
		}
		want = append(want, b) // stamped by Append
	}
	if n := f.rows(t); n != 0 || l.DurableEnd() != 0 || l.LogEndOffset() != 90 {
		t.Fatalf("before Sync: %d rows, durable end %d, log end %d", n, l.DurableEnd(), l.LogEndOffset())
	}
	if data, err := l.Read(0, 1<<20, 90); err != nil || len(data) != 0 {
		t.Fatalf("read before Sync: %d bytes, %v", len(data), err)
	}
	if end, err := l.Sync(); err != nil || end != 90 {
		t.Fatalf("sync: %d, %v", end, err)
	}
	if n := f.rows(t); n != 30 {
		t.Fatalf("after Sync: %d rows, want 30", n)
	}

	// The header columns are the batches' headers.
	rows, err := conn.Query(ctx, `SELECT base_offset, last_offset, leader_epoch, producer_id, octet_length(batch)
		FROM kafgres.log_batch WHERE topic_id = $1 ORDER BY last_offset`, topicID)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for rows.Next() {
		var base, last, pid int64
		var epoch, size int32
		if err := rows.Scan(&base, &last, &epoch, &pid, &size); err != nil {
			t.Fatal(err)
		}
		if base != int64(3*i) || last != base+2 || epoch != 7 || pid != -1 || int(size) != len(want[i]) {
			t.Fatalf("row %d: base %d last %d epoch %d producer %d size %d", i, base, last, epoch, pid, size)
		}
		i++
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}

	leaves, attached := l.Segments(), f.leaves(t)
	if leaves < 3 || attached != leaves {
		t.Fatalf("%d leaves in the log, %d attached, want several", leaves, attached)
	}

	cat := func(bs [][]byte) []byte { return bytes.Join(bs, nil) }
	checkRead := func(l *table.Log, what string, offset int64, maxBytes int, limit int64, want []byte) {
		t.Helper()
		got, err := l.Read(offset, maxBytes, limit)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
		}
		// Stamping left every batch valid (both fields are outside the CRC).
		for len(got) > 0 {
			h, err := segment.ParseBatchHeader(got)
			if err == nil {
				_, err = segment.ValidateStoredBatch(got[:min(int(h.Length), len(got))])
			}
			if err != nil {
				t.Fatalf("%s: stored batch at %d: %v", what, h.BaseOffset, err)
			}
			got = got[h.Length:]
		}
	}
	checkRead(l, "everything", 0, 1<<20, 90, cat(want))
	checkRead(l, "from inside the second batch", 4, 1<<20, 90, cat(want[1:]))
	checkRead(l, "a first batch larger than maxBytes", 4, 1, 90, want[1])
	checkRead(l, "as many as fit", 3, len(want[1])+len(want[2])+len(want[3])-1, 90, cat(want[1:3]))
	checkRead(l, "below a limit", 0, 1<<20, 7, cat(want[:3]))
	checkRead(l, "at the log end", 90, 1<<20, 90, nil)
	if _, err := l.Read(91, 1<<20, 90); !errors.Is(err, segment.ErrOffsetOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}

	size := l.Size()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(batch(-1, 0, 0, 1, "late"), 7); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("append after Close: %v", err)
	}

	// A reopened log finds the same log and goes on from its end.
	l = f.open(t)
	defer l.Close()
	if l.LogEndOffset() != 90 || l.DurableEnd() != 90 || l.Segments() != leaves || l.Size() != size {
		t.Fatalf("reopened: end %d, durable %d, %d leaves (want %d), %d bytes (want %d)",
			l.LogEndOffset(), l.DurableEnd(), l.Segments(), leaves, l.Size(), size)
	}
	checkRead(l, "everything, reopened", 0, 1<<20, 90, cat(want))
	more := batch(-1, 0, 0, 2, "more")
	if base, err := l.Append(more, 8); err != nil || base != 90 {
		t.Fatalf("append after reopen: %d, %v", base, err)
	}
	if end, err := l.Sync(); err != nil || end != 92 {
		t.Fatalf("sync after reopen: %d, %v", end, err)
	}
	checkRead(l, "the new batch", 90, 1<<20, 92, more)
}

// TestTableEngineFailedSync: a Sync whose transaction fails (here: the
// leaf it must create is in the way) commits nothing of what it held, the
// log then refuses appends as segment.Log does after a failed fsync, and
// a reopened log ends where the last successful Sync did and goes on.
func TestTableEngineFailedSync(t *testing.T) {
	// Every batch is larger than a leaf may hold: each starts a leaf.
	f := newTableFixture(t, 100)
	l := f.open(t)
	first := batch(-1, 0, 0, 3, strings.Repeat("a", 100))
	if _, err := l.Append(first, 1); err != nil {
		t.Fatal(err)
	}
	if end, err := l.Sync(); err != nil || end != 3 {
		t.Fatalf("sync: %d, %v", end, err)
	}
	blocker := fmt.Sprintf("kafgres.log_batch_%d_0_3", f.topicID)
	if _, err := f.conn.Exec(ctxT(t), "CREATE TABLE "+blocker+" (x int)"); err != nil {
		t.Fatal(err)
	}
	if base, err := l.Append(batch(-1, 0, 0, 3, strings.Repeat("b", 100)), 1); err != nil || base != 3 {
		t.Fatalf("append: %d, %v", base, err)
	}
	if _, err := l.Sync(); err == nil || errors.Is(err, segment.ErrClosed) {
		t.Fatalf("sync into a leaf that is in the way: %v, want the failure", err)
	}
	if l.DurableEnd() != 3 {
		t.Fatalf("durable end %d after the failed sync, want 3", l.DurableEnd())
	}
	if _, err := l.Append(batch(-1, 0, 0, 1, "c"), 1); err == nil {
		t.Fatal("append after a failed sync succeeded")
	}
	if data, err := l.Read(0, 1<<20, 6); err != nil || !bytes.Equal(data, first) {
		t.Fatalf("read after the failed sync: %d bytes, %v", len(data), err)
	}
	if n := f.rows(t); n != 1 {
		t.Fatalf("%d rows, want the first batch's only", n)
	}
	l.Close()

	if _, err := f.conn.Exec(ctxT(t), "DROP TABLE "+blocker); err != nil {
		t.Fatal(err)
	}
	l = f.open(t)
	defer l.Close()
	if l.LogEndOffset() != 3 || l.Segments() != 1 {
		t.Fatalf("reopened: end %d, %d leaves; want 3, 1", l.LogEndOffset(), l.Segments())
	}
	again := batch(-1, 0, 0, 3, strings.Repeat("d", 100))
	if base, err := l.Append(again, 2); err != nil || base != 3 {
		t.Fatalf("append after reopen: %d, %v", base, err)
	}
	if end, err := l.Sync(); err != nil || end != 6 || l.Segments() != 2 {
		t.Fatalf("sync after reopen: %d, %v, %d leaves", end, err, l.Segments())
	}
	if data, err := l.Read(0, 1<<20, 6); err != nil || !bytes.Equal(data, append(append([]byte(nil), first...), again...)) {
		t.Fatalf("read after reopen: %d bytes, %v", len(data), err)
	}
}

// TestTableEngineReadsDuringAppends: readers running beside appends and
// syncs always find every batch below the durable end they saw, and
// nothing above it: DurableEnd only moves once the rows are committed.
func TestTableEngineReadsDuringAppends(t *testing.T) {
	l := newTableFixture(t, 4000).open(t)
	defer l.Close()

	done := make(chan struct{})
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			reads := 0
			for {
				select {
				case <-done:
					if reads == 0 {
						errs <- errors.New("no read ran")
						return
					}
					errs <- nil
					return
				default:
				}
				durable := l.DurableEnd()
				data, err := l.Read(0, 1<<20, durable+100)
				if err != nil {
					errs <- err
					return
				}
				next := int64(0)
				for len(data) > 0 {
					h, err := segment.ParseBatchHeader(data)
					if err != nil || h.BaseOffset != next {
						errs <- fmt.Errorf("batch at %d (%v), want %d", h.BaseOffset, err, next)
						return
					}
					next, data = h.LastOffset()+1, data[h.Length:]
				}
				if after := l.DurableEnd(); next < durable || next > after {
					errs <- fmt.Errorf("read up to %d, outside the durable ends %d and %d seen before and after", next, durable, after)
					return
				}
				reads++
			}
		}()
	}
	for i := range 200 {
		if _, err := l.Append(batch(-1, 0, 0, 2, fmt.Sprintf("value %d", i)), 1); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if l.DurableEnd() != 400 {
		t.Fatalf("durable end %d, want 400", l.DurableEnd())
	}
}

// TestTableEngineLogStart: DeleteRecords and retention move the log start
// with segment.Log's rules and drop whole leaf tables below it (no row is
// deleted); a leaf still holding uncommitted batches stays, a log may lose
// every leaf and go on, and a reopened log drops the leaves a crash left
// below its committed start.
func TestTableEngineLogStart(t *testing.T) {
	// One-record batches, two to a leaf: leaves at 0, 2, 4, ...
	f := newTableFixture(t, 400)
	l := f.open(t)
	one := len(batch(-1, 0, 0, 1, strings.Repeat("x", 100)))
	for i := range 20 {
		if _, err := l.Append(batch(-1, 0, 0, 1, strings.Repeat("x", 100)), 1); err != nil {
			t.Fatal(err)
		}
		if i == 19 {
			if _, err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	state := func() int {
		return f.count(t, "SELECT log_start_offset FROM kafgres.log_state WHERE topic_id = $1")
	}
	check := func(what string, start, end int64, leaves int) {
		t.Helper()
		if l.LogStartOffset() != start || l.LogEndOffset() != end || l.Segments() != leaves ||
			f.leaves(t) != leaves || state() != int(start) {
			t.Fatalf("%s: log [%d, %d) with %d leaves (%d attached), start %d committed; want [%d, %d) with %d",
				what, l.LogStartOffset(), l.LogEndOffset(), l.Segments(), f.leaves(t), state(), start, end, leaves)
		}
	}
	check("written", 0, 20, 10)

	if got, err := l.DeleteRecordsBefore(5); err != nil || got != 5 {
		t.Fatalf("delete records before 5: %d, %v", got, err)
	}
	check("records deleted before 5", 5, 20, 8)
	if n := f.rows(t); n != 16 {
		t.Fatalf("%d rows after DeleteRecords, want 16 (the leaf holding 5 stays whole)", n)
	}
	if _, err := l.Read(4, 1<<20, 20); !errors.Is(err, segment.ErrOffsetOutOfRange) {
		t.Fatalf("read below the start: %v", err)
	}
	if data, err := l.Read(5, 1<<20, 20); err != nil || len(data) != 15*one {
		t.Fatalf("read from the start: %d bytes, %v; want %d", len(data), err, 15*one)
	}
	if got, err := l.DeleteRecordsBefore(3); err != nil || got != 5 {
		t.Fatalf("delete records below the start: %d, %v", got, err)
	}
	if _, err := l.DeleteRecordsBefore(21); !errors.Is(err, segment.ErrOffsetOutOfRange) {
		t.Fatalf("delete records past the end: %v", err)
	}

	// By size: the oldest leaves go while three remain (6 batches).
	if n, err := l.ApplyRetention(segment.Retention{Ms: -1, Bytes: int64(6 * one)}, time.Now()); err != nil || n != 5 {
		t.Fatalf("retention by size: %d leaves, %v; want 5", n, err)
	}
	check("retention by size", 14, 20, 3)
	if n, err := l.ApplyRetention(segment.Retention{Ms: time.Hour.Milliseconds(), Bytes: -1}, time.Now()); err != nil || n != 0 {
		t.Fatalf("retention by time, nothing old: %d, %v", n, err)
	}

	// By time: every leaf is old an hour from now, but the one holding a
	// batch not yet committed stays, and its Sync still lands.
	later := time.Now().Add(time.Hour)
	if base, err := l.Append(batch(-1, 0, 0, 1, strings.Repeat("y", 100)), 1); err != nil || base != 20 {
		t.Fatalf("append: %d, %v", base, err)
	}
	if n, err := l.ApplyRetention(segment.Retention{Ms: 0, Bytes: -1}, later); err != nil || n != 3 {
		t.Fatalf("retention by time: %d leaves, %v; want 3", n, err)
	}
	if end, err := l.Sync(); err != nil || end != 21 {
		t.Fatalf("sync after retention: %d, %v", end, err)
	}
	check("retention by time", 20, 21, 1)

	// Now every leaf goes; the next append starts one.
	if n, err := l.ApplyRetention(segment.Retention{Ms: 0, Bytes: -1}, later); err != nil || n != 1 {
		t.Fatalf("retention of the last leaf: %d, %v", n, err)
	}
	check("no leaf left", 21, 21, 0)
	if n := f.rows(t); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	last := batch(-1, 0, 0, 1, "z")
	if base, err := l.Append(last, 1); err != nil || base != 21 {
		t.Fatalf("append to an emptied log: %d, %v", base, err)
	}
	if end, err := l.Sync(); err != nil || end != 22 {
		t.Fatalf("sync: %d, %v", end, err)
	}
	if data, err := l.Read(21, 1<<20, 22); err != nil || !bytes.Equal(data, last) {
		t.Fatalf("read: %d bytes, %v", len(data), err)
	}
	l.Close()

	l = f.open(t)
	check("reopened", 21, 22, 1)
	l.Close()

	// A start committed with the leaves below it not yet dropped (a crash
	// between the two): Open drops them.
	if _, err := f.conn.Exec(ctxT(t), "UPDATE kafgres.log_state SET log_start_offset = 22 WHERE topic_id = $1", f.topicID); err != nil {
		t.Fatal(err)
	}
	l = f.open(t)
	defer l.Close()
	check("reopened after a crash before the drop", 22, 22, 0)
}

// TestTableEngineDroppedTopic: a log whose topic was dropped under it
// (the broker's catalog not yet reloaded) answers its readers as a closed
// log, which the broker reports as an unknown partition, not as a storage
// failure.
func TestTableEngineDroppedTopic(t *testing.T) {
	f := newTableFixture(t, 0)
	l := f.open(t)
	defer l.Close()
	if _, err := l.Append(batch(-1, 0, 0, 3, "abc"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.conn.Exec(ctxT(t), "SELECT kafgres_drop_topic('tbl')"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(0, 1<<20, 3); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("read of a dropped topic's log: %v, want segment.ErrClosed", err)
	}
	if err := l.ScanBatches(0, func(segment.BatchHeader) error { return nil }); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("scan of a dropped topic's log: %v, want segment.ErrClosed", err)
	}
	if _, err := l.AbortedTxns(0, 3); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("aborted transactions of a dropped topic's log: %v, want segment.ErrClosed", err)
	}
}
