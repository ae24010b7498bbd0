package integration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// TestTableEngineSourced: the exactly-once position of the SQL producer
// goes into each sourced batch's row, so it is durable exactly when the
// batch is: a Sync that fails loses both, a reopened log knows the
// position of what it committed, and dropping every leaf (DeleteRecords)
// does not make it forget. Out-of-order sources are refused whole.
func TestTableEngineSourced(t *testing.T) {
	f := newTableFixture(t, 100) // every batch starts a leaf
	l := f.open(t)
	b := func() []byte { return batch(-1, 0, 0, 2, strings.Repeat("s", 100)) }
	bases, err := l.AppendSourced([]segment.SourcedBatch{{Batch: b(), Source: 0x100}, {Batch: b(), Source: 0x200}}, 3)
	if err != nil || !slices.Equal(bases, []int64{0, 2}) || l.SourceApplied() != 0x200 {
		t.Fatalf("append sourced: %v, %v, applied %#x", bases, err, l.SourceApplied())
	}
	for _, bad := range [][]segment.SourcedBatch{
		{{Batch: b(), Source: 0x1ff}},                              // below what the log has
		{{Batch: b(), Source: 0}},                                  // 0 is no source
		{{Batch: b(), Source: 0x300}, {Batch: b(), Source: 0x250}}, // out of order within
	} {
		if _, err := l.AppendSourced(bad, 3); !errors.Is(err, segment.ErrSourceOrder) {
			t.Fatalf("append sourced %v: %v, want ErrSourceOrder", bad, err)
		}
	}
	if l.LogEndOffset() != 4 || l.SourceApplied() != 0x200 {
		t.Fatalf("refused appends moved the log: end %d, applied %#x", l.LogEndOffset(), l.SourceApplied())
	}
	if end, err := l.Sync(); err != nil || end != 4 {
		t.Fatalf("sync: %d, %v", end, err)
	}
	if lsn := f.count(t, "SELECT count(*) FROM kafgres.log_batch WHERE topic_id = $1 AND source_lsn = '0/200'"); lsn != 1 {
		t.Fatalf("%d rows with source_lsn 0/200, want 1", lsn)
	}

	// A failed Sync (a table in the way of the leaf at 4) commits neither
	// the batch nor its position.
	blocker := fmt.Sprintf("kafgres.log_batch_%d_0_4", f.topicID)
	if _, err := f.conn.Exec(ctxT(t), "CREATE TABLE "+blocker+" (x int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendSourced([]segment.SourcedBatch{{Batch: b(), Source: 0x300}}, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Sync(); err == nil {
		t.Fatal("sync into a leaf that is in the way succeeded")
	}
	l.Close()
	if _, err := f.conn.Exec(ctxT(t), "DROP TABLE "+blocker); err != nil {
		t.Fatal(err)
	}
	l = f.open(t)
	if l.LogEndOffset() != 4 || l.SourceApplied() != 0x200 {
		t.Fatalf("reopened after a failed sync: end %d, applied %#x; want 4, 0x200", l.LogEndOffset(), l.SourceApplied())
	}

	// A plain batch after the sourced ones leaves the newest leaf without
	// a position: the open looks further back.
	if _, err := l.Append(batch(-1, 0, 0, 1, strings.Repeat("p", 100)), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = f.open(t)
	if l.SourceApplied() != 0x200 {
		t.Fatalf("reopened behind a plain batch: applied %#x, want 0x200", l.SourceApplied())
	}
	// Every leaf dropped: the position is kept in log_state.
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if n := f.leaves(t); n != 0 {
		t.Fatalf("%d leaves after deleting every record", n)
	}
	l.Close()
	l = f.open(t)
	defer l.Close()
	if l.SourceApplied() != 0x200 || l.LogEndOffset() != 5 {
		t.Fatalf("reopened with no leaf: applied %#x, end %d; want 0x200, 5", l.SourceApplied(), l.LogEndOffset())
	}
	if _, err := l.AppendSourced([]segment.SourcedBatch{{Batch: b(), Source: 0x100}}, 3); !errors.Is(err, segment.ErrSourceOrder) {
		t.Fatalf("a source already applied, after the leaves went: %v, want ErrSourceOrder", err)
	}
}

// TestTableEngineForgetSources: the source guard's way out on a table
// log: positions above keep go (rows, pending batches), durably, and
// SourceApplied falls to the last one kept; the batches stay.
func TestTableEngineForgetSources(t *testing.T) {
	f := newTableFixture(t, 100)
	l := f.open(t)
	b := func() []byte { return batch(-1, 0, 0, 1, strings.Repeat("f", 50)) }
	for _, src := range []uint64{0x100, 0x200, 0x300} {
		if _, err := l.AppendSourced([]segment.SourcedBatch{{Batch: b(), Source: src}}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendSourced([]segment.SourcedBatch{{Batch: b(), Source: 0x400}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.ForgetSourcesAbove(0x150); err != nil {
		t.Fatal(err)
	}
	if got := l.SourceApplied(); got != 0x100 {
		t.Fatalf("applied %#x after forgetting above 0x150, want 0x100", got)
	}
	if _, err := l.AppendSourced([]segment.SourcedBatch{{Batch: b(), Source: 0x180}}, 0); err != nil {
		t.Fatalf("a source above the one kept: %v", err)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	l.Close()
	l = f.open(t)
	if l.SourceApplied() != 0x180 || l.LogEndOffset() != end || end != 5 {
		t.Fatalf("reopened: applied %#x, end %d; want 0x180 and the 5 batches", l.SourceApplied(), l.LogEndOffset())
	}
}

// TestTableEngineAbortedTxns: an ABORT marker of a transaction with data
// here keeps its transaction index entry in its own row, and AbortedTxns
// answers read_committed fetches with segment.Log's (Kafka's) rules: from
// the leaf holding the fetch offset, entries ending at or after it and
// starting below the upper bound, stopping at the first whose last stable
// offset reaches the bound. A marker at the wrong offset is refused.
func TestTableEngineAbortedTxns(t *testing.T) {
	f := newTableFixture(t, 1<<20)
	l := f.open(t)
	txnBatch := func(pid int64) []byte {
		s := plainSpec([]rec{{value: []byte("t")}, {offsetDelta: 1, value: []byte("u")}})
		s.producerID, s.baseSequence, s.attributes = pid, 0, 0x10
		return s.build()
	}
	marker := func(pid int64, commit bool) []byte {
		return segment.NewMarkerBatch(segment.Marker{ProducerID: pid, Commit: commit}, time.Now().UnixMilli())
	}
	mustAppend := func(b []byte) int64 {
		t.Helper()
		base, err := l.Append(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		return base
	}
	mustMarker := func(pid int64, a *segment.AbortedTxn) {
		t.Helper()
		if _, err := l.AppendMarker(marker(pid, a == nil), 1, a); err != nil {
			t.Fatal(err)
		}
	}
	// pid 1 aborts [0, 4) while pid 2 is open from 2: LSO 2.
	mustAppend(txnBatch(1))                                                                               // 0-1
	mustAppend(txnBatch(2))                                                                               // 2-3
	mustMarker(1, &segment.AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 4, LastStableOffset: 2}) // 4
	mustMarker(2, nil)                                                                                    // 5: commit
	mustAppend(txnBatch(3))                                                                               // 6-7
	mustMarker(3, &segment.AbortedTxn{ProducerID: 3, FirstOffset: 6, LastOffset: 8, LastStableOffset: 9}) // 8
	if _, err := l.AppendMarker(marker(4, false), 1, &segment.AbortedTxn{ProducerID: 4, FirstOffset: 9, LastOffset: 42, LastStableOffset: 43}); err == nil {
		t.Fatal("a marker whose entry names another offset was appended")
	}
	if end, err := l.Sync(); err != nil || end != 9 {
		t.Fatalf("sync: %d, %v", end, err)
	}
	a1 := segment.AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 4, LastStableOffset: 2}
	a3 := segment.AbortedTxn{ProducerID: 3, FirstOffset: 6, LastOffset: 8, LastStableOffset: 9}
	for _, c := range []struct {
		from, upper int64
		want        []segment.AbortedTxn
	}{
		{0, 9, []segment.AbortedTxn{a1, a3}},
		{0, 2, []segment.AbortedTxn{a1}}, // a1's LSO reaches 2: stop
		{5, 9, []segment.AbortedTxn{a3}}, // a1 ends before 5
		{0, 6, []segment.AbortedTxn{a1}}, // a3 starts at 6
		{9, 9, nil},
	} {
		got, err := l.AbortedTxns(c.from, c.upper)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("AbortedTxns(%d, %d) = %v, %v; want %v", c.from, c.upper, got, err, c.want)
		}
	}
	l.Close()
	l = f.open(t)
	defer l.Close()
	if got, err := l.AbortedTxns(0, 9); err != nil || !slices.Equal(got, []segment.AbortedTxn{a1, a3}) {
		t.Fatalf("reopened: %v, %v", got, err)
	}
	if n := f.count(t, "SELECT count(*) FROM kafgres.log_batch WHERE topic_id = $1 AND txn_first_offset IS NOT NULL"); n != 2 {
		t.Fatalf("%d rows with a transaction index entry, want 2", n)
	}
}

// tsBatch is a batch of one record per timestamp.
func tsBatch(ts ...int64) []byte {
	recs := make([]rec, len(ts))
	for i, x := range ts {
		recs[i] = rec{offsetDelta: int32(i), tsDelta: x - ts[0], value: []byte(strings.Repeat("t", 60))}
	}
	s := plainSpec(recs)
	s.firstTimestamp, s.maxTimestamp = ts[0], slices.Max(ts)
	return s.build()
}

// TestTableEngineScanAndTimestamps: ScanBatches returns the headers of the
// committed batches and then of those not yet committed, from the log
// start on; the timestamp lookups find the record inside the batch (not
// just the batch), honour the limit and the log start, and skip the
// records of a batch that lie below the start.
func TestTableEngineScanAndTimestamps(t *testing.T) {
	f := newTableFixture(t, 500)
	l := f.open(t)
	defer l.Close()
	// Offsets: 0-2 ts 100 300 200 | 3-4 ts 250 900 | 5-7 ts 50 900 400 | 8 ts 1000
	for _, b := range [][]byte{tsBatch(100, 300, 200), tsBatch(250, 900), tsBatch(50, 900, 400)} {
		if _, err := l.Append(b, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(tsBatch(1000), 1); err != nil { // not committed
		t.Fatal(err)
	}
	var bases []int64
	scan := func(from int64) []int64 {
		bases = nil
		if err := l.ScanBatches(from, func(h segment.BatchHeader) error { bases = append(bases, h.BaseOffset); return nil }); err != nil {
			t.Fatal(err)
		}
		return bases
	}
	if got := scan(0); !slices.Equal(got, []int64{0, 3, 5, 8}) {
		t.Fatalf("scan from 0: %v", got)
	}
	if got := scan(4); !slices.Equal(got, []int64{3, 5, 8}) {
		t.Fatalf("scan from 4: %v", got)
	}
	stop := errors.New("stop")
	if err := l.ScanBatches(0, func(segment.BatchHeader) error { return stop }); err != stop {
		t.Fatalf("scan stopped by fn: %v", err)
	}

	type lookup struct {
		off, ts int64
		ok      bool
	}
	oft := func(ts, limit int64) lookup {
		o, x, ok, err := l.OffsetForTimestamp(ts, limit)
		if err != nil {
			t.Fatal(err)
		}
		return lookup{o, x, ok}
	}
	maxTs := func(limit int64) lookup {
		o, x, ok, err := l.MaxTimestamp(limit)
		if err != nil {
			t.Fatal(err)
		}
		return lookup{o, x, ok}
	}
	for _, c := range []struct {
		ts, limit int64
		want      lookup
	}{
		{0, 100, lookup{0, 100, true}},
		{250, 100, lookup{1, 300, true}}, // inside the first batch
		{301, 100, lookup{4, 900, true}},
		{901, 100, lookup{}}, // 1000 is not committed
		{400, 3, lookup{}},   // the limit stops before offset 3
		{260, 5, lookup{1, 300, true}},
	} {
		if got := oft(c.ts, c.limit); got != c.want {
			t.Errorf("OffsetForTimestamp(%d, %d) = %+v, want %+v", c.ts, c.limit, got, c.want)
		}
	}
	if got := maxTs(100); got != (lookup{4, 900, true}) { // the first record with 900
		t.Errorf("MaxTimestamp(100) = %+v", got)
	}
	if got := maxTs(3); got != (lookup{1, 300, true}) {
		t.Errorf("MaxTimestamp(3) = %+v", got)
	}
	// The start inside the second batch: offset 3 (ts 250) is gone, 4 is
	// not; inside the first batch: only 2 (ts 200) of it counts.
	if _, err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	if got := oft(250, 3); got != (lookup{}) {
		t.Errorf("after the start moved to 2, OffsetForTimestamp(250, 3) = %+v, want none", got)
	}
	if got := oft(150, 100); got != (lookup{2, 200, true}) {
		t.Errorf("after the start moved to 2, OffsetForTimestamp(150) = %+v", got)
	}
	if got := maxTs(3); got != (lookup{2, 200, true}) {
		t.Errorf("after the start moved to 2, MaxTimestamp(3) = %+v", got)
	}
	if got := scan(0); !slices.Equal(got, []int64{0, 3, 5, 8}) {
		t.Fatalf("scan after the start moved to 2: %v", got)
	}
	if _, err := l.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	if got := maxTs(100); got != (lookup{4, 900, true}) {
		t.Errorf("after the start moved to 4, MaxTimestamp = %+v", got)
	}
	if got := scan(0); !slices.Equal(got, []int64{3, 5, 8}) {
		t.Fatalf("scan after the start moved to 4: %v", got)
	}
}

// TestTableEngineProducerState: producer snapshots and leader epochs are
// rows beside the batches. A snapshot past the durable end waits for the
// Sync that commits its batches (a crash before it leaves none that
// describes lost batches); the newest between the log start and end is
// loaded, a corrupt one deleted; the log start takes those below it; a
// closed log still writes one (the broker's clean shutdown). Leaves roll
// at the segment limits set on the open log, by size and by age.
func TestTableEngineProducerState(t *testing.T) {
	f := newTableFixture(t, 1<<20)
	l := f.open(t)
	snaps := func() int {
		return f.count(t, "SELECT count(*) FROM kafgres.log_producer_snapshot WHERE topic_id = $1")
	}
	if _, _, ok := l.LoadProducerSnapshot(); ok {
		t.Fatal("a new log has a producer snapshot")
	}
	if _, ok, err := l.ReadEpochCheckpoint(); ok || err != nil {
		t.Fatalf("a new log has leader epochs: %v", err)
	}
	e1 := []segment.ProducerSnapshotEntry{{ProducerID: 7, Epoch: 1, LastSequence: 4, LastOffset: 4, OffsetDelta: 4, Timestamp: 99, CurrentTxnFirstOffset: -1}}
	if err := l.WriteProducerSnapshot(0, e1); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Append(batch(-1, 0, 0, 5, "x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.SetSegmentLimits(1, 0) // every batch from now on starts a leaf
	if _, err := l.Append(batch(-1, 0, 0, 5, "x"), 1); err != nil {
		t.Fatal(err)
	}
	e2 := []segment.ProducerSnapshotEntry{{ProducerID: 8, Epoch: 2, LastSequence: 9, LastOffset: 19, OffsetDelta: 4, Timestamp: 100, CurrentTxnFirstOffset: 15}}
	if err := l.WriteProducerSnapshot(20, e2); err != nil {
		t.Fatal(err)
	}
	if n := snaps(); n != 1 {
		t.Fatalf("%d snapshots before the Sync of the batches the one at 20 describes, want 1", n)
	}
	if off, got, ok := l.LoadProducerSnapshot(); !ok || off != 0 || !slices.Equal(got, e1) {
		t.Fatalf("load before the Sync: %d, %v, %v", off, got, ok)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if off, got, ok := l.LoadProducerSnapshot(); !ok || off != 20 || !slices.Equal(got, e2) || l.Segments() != 2 {
		t.Fatalf("load after the Sync: %d, %v, %v; %d leaves", off, got, ok, l.Segments())
	}
	// A snapshot that does not decode is dropped and the older one used.
	if _, err := f.conn.Exec(ctxT(t), "UPDATE kafgres.log_producer_snapshot SET snapshot = '\\x00' WHERE topic_id = $1 AND snapshot_offset = 20", f.topicID); err != nil {
		t.Fatal(err)
	}
	if off, _, ok := l.LoadProducerSnapshot(); !ok || off != 0 || snaps() != 1 {
		t.Fatalf("load past a corrupt snapshot: %d, %v; %d left", off, ok, snaps())
	}

	epochs := []segment.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 15}}
	if err := l.WriteEpochCheckpoint(epochs); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := l.ReadEpochCheckpoint(); !ok || err != nil || !slices.Equal(got, epochs) {
		t.Fatalf("epochs: %v, %v, %v", got, ok, err)
	}

	// Roll by age: the active leaf is older than segment.ms.
	l.SetSegmentLimits(1<<20, 1)
	time.Sleep(5 * time.Millisecond)
	if _, err := l.Append(batch(-1, 0, 0, 5, "x"), 1); err != nil {
		t.Fatal(err)
	}
	if l.Segments() != 3 || l.ActiveBase() != 20 {
		t.Fatalf("after segment.ms: %d leaves, active at %d; want 3, 20", l.Segments(), l.ActiveBase())
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	// The log start passes the snapshot at 0.
	if err := l.WriteProducerSnapshot(15, e1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecordsBefore(15); err != nil {
		t.Fatal(err)
	}
	if n := snaps(); n != 1 {
		t.Fatalf("%d snapshots after the start moved to 15, want the one at 15", n)
	}
	l.Close()
	// Written after Close, as the broker does at a clean shutdown.
	if err := l.WriteProducerSnapshot(25, e2); err != nil {
		t.Fatalf("snapshot on a closed log: %v", err)
	}
	l = f.open(t)
	defer l.Close()
	if off, got, ok := l.LoadProducerSnapshot(); !ok || off != 25 || !slices.Equal(got, e2) {
		t.Fatalf("reopened: %d, %v, %v", off, got, ok)
	}
	if got, ok, err := l.ReadEpochCheckpoint(); !ok || err != nil || !slices.Equal(got, epochs) {
		t.Fatalf("reopened epochs: %v, %v, %v", got, ok, err)
	}
}
