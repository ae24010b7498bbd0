package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/storage/table"
)

// keyedBatch encodes an uncompressed v2 batch of one record per key; a nil
// value is a tombstone.
func keyedBatch(keys []string, values [][]byte) []byte {
	now := time.Now().UnixMilli()
	var records []byte
	for i, k := range keys {
		r := kmsg.Record{OffsetDelta: int32(i), Key: []byte(k), Value: values[i]}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		records = r.AppendTo(records)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(keys) - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(keys)), Records: records,
	}
	out := b.AppendTo(nil)
	be32(out[8:], uint32(len(out)-12))
	be32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

// cleanedRecord is one record as read back: its offset, key and value.
type cleanedRecord struct {
	offset     int64
	key, value []byte
}

// readAll reads the log from its start to its end, every batch checked,
// and returns its records in order.
func readAll(t *testing.T, l *table.Log) (recs []cleanedRecord, batches int) {
	t.Helper()
	off, end := l.LogStartOffset(), l.LogEndOffset()
	for off < end {
		data, err := l.Read(off, 1<<20, end)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(data) == 0 {
			t.Fatalf("read at %d (end %d): nothing", off, end)
		}
		for len(data) > 0 {
			size := 12 + int(binary.BigEndian.Uint32(data[8:]))
			h, err := segment.ValidateStoredBatch(data[:size])
			if err != nil {
				t.Fatalf("batch read at %d: %v", off, err)
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(data[:size]); err != nil {
				t.Fatal(err)
			}
			data = data[size:]
			batches++
			rs := b.Records
			for range b.NumRecords {
				n, k := binary.Varint(rs)
				var r kmsg.Record
				if err := r.ReadFrom(rs[:k+int(n)]); err != nil {
					t.Fatal(err)
				}
				rs = rs[k+int(n):]
				recs = append(recs, cleanedRecord{b.FirstOffset + int64(r.OffsetDelta), r.Key, r.Value})
			}
			off = h.LastOffset() + 1
		}
	}
	return recs, batches
}

// TestTableEngineCompaction (issue #15): the cleaner on a table log. Four
// keys get many versions, one key a tombstone, over leaves of a few
// batches; a clean keeps per key only the latest record below the active
// leaf, the tombstone until delete.retention.ms has passed, every record
// at the offset it was appended at, the last batch of each leaf; the log's
// size follows; the checkpoint is committed; a reopened log reads the
// same. A clean stopped part way (as the broker stopping, or a crash
// between its transactions) leaves a log that reads correctly, and the
// next clean finishes the work.
func TestTableEngineCompaction(t *testing.T) {
	f := newTableFixture(t, 600)
	l := f.open(t)
	defer func() { l.Close() }()

	appended := map[int64]string{} // offset -> value, "" for a tombstone
	latest := map[string]int64{}
	appendVersion := func(v int) {
		t.Helper()
		keys := []string{"k0", "k1", "k2", "k3"}
		vals := make([][]byte, len(keys))
		for i, k := range keys {
			vals[i] = fmt.Appendf(nil, "%s version %d", k, v)
		}
		if v == 20 { // k3 deleted
			vals[3] = nil
		}
		if v > 20 { // k3 stays deleted
			keys, vals = keys[:3], vals[:3]
		}
		base, err := l.Append(keyedBatch(keys, vals), 1)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			appended[base+int64(i)] = string(vals[i])
			latest[k] = base + int64(i)
		}
	}
	for v := range 30 {
		appendVersion(v)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	sizeBefore, rowsBefore := l.Size(), f.rows(t)
	if l.Segments() < 5 {
		t.Fatalf("%d leaves, want several", l.Segments())
	}

	// check reads the log: increasing offsets, each record the one
	// appended there, and every key's latest record.
	check := func(what string) []cleanedRecord {
		t.Helper()
		recs, _ := readAll(t, l)
		prev := int64(-1)
		seen := map[int64]bool{}
		for _, r := range recs {
			if r.offset <= prev {
				t.Fatalf("%s: offset %d after %d", what, r.offset, prev)
			}
			prev = r.offset
			if want, ok := appended[r.offset]; !ok || want != string(r.value) {
				t.Fatalf("%s: record at %d is %q, appended %q", what, r.offset, r.value, want)
			}
			seen[r.offset] = true
		}
		for k, off := range latest {
			if k != "k3" && !seen[off] {
				t.Fatalf("%s: latest record of %s (offset %d) is gone", what, k, off)
			}
		}
		if l.LogEndOffset() != end {
			t.Fatalf("%s: log end %d, want %d", what, l.LogEndOffset(), end)
		}
		return recs
	}
	check("before cleaning")

	now := time.Now()
	c, err := l.Cleanable(l.CleanerCheckpoint(), end, now, 0, 0)
	if err != nil || c.FirstDirty != 0 || c.FirstUncleanable != l.ActiveBase() || c.Ratio() < 0.5 {
		t.Fatalf("cleanable: %+v, %v (active leaf at %d)", c, err, l.ActiveBase())
	}
	opts := func(now time.Time) segment.CleanOptions {
		return segment.CleanOptions{FirstDirty: l.CleanerCheckpoint(), UpperBound: end, Now: now,
			DeleteRetentionMs: time.Hour.Milliseconds(), MaxGroupBytes: 1 << 20}
	}

	// A clean stopped after a few batches of its rewrite.
	calls := 0
	o := opts(now)
	o.Aborted = func() bool { calls++; return calls > 40 }
	if _, err := l.Clean(o); !errors.Is(err, segment.ErrCleanAborted) {
		t.Fatalf("stopped clean: %v", err)
	}
	check("after a stopped clean")

	st, err := l.Clean(opts(now))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("clean: %+v", st)
	if st.End != c.FirstUncleanable || l.CleanerCheckpoint() != st.End {
		t.Fatalf("checkpoint %d, clean end %d; want %d", l.CleanerCheckpoint(), st.End, c.FirstUncleanable)
	}
	recs := check("cleaned")
	active := l.ActiveBase()
	perKey := map[string]int{}
	tombstone := false
	for _, r := range recs {
		if r.offset < active {
			perKey[string(r.key)]++
			tombstone = tombstone || (string(r.key) == "k3" && r.value == nil)
		}
	}
	for k, n := range perKey {
		if n > 1 {
			t.Fatalf("%s: %d records below the active leaf, want 1", k, n)
		}
	}
	if latest["k3"] < active && !tombstone {
		t.Fatalf("the tombstone of k3 went before delete.retention.ms")
	}
	if l.Size() >= sizeBefore/2 || f.rows(t) >= rowsBefore {
		t.Fatalf("size %d (was %d), rows %d (were %d)", l.Size(), sizeBefore, f.rows(t), rowsBefore)
	}
	var stored int64
	if err := f.conn.QueryRow(ctxT(t), "SELECT sum(octet_length(batch)) FROM kafgres.log_batch WHERE topic_id = $1", f.topicID).Scan(&stored); err != nil || stored != l.Size() {
		t.Fatalf("stored %d bytes (%v), Size %d", stored, err, l.Size())
	}

	// More versions, then a clean past delete.retention.ms: the tombstone
	// goes.
	for v := 30; v < 40; v++ {
		appendVersion(v)
	}
	if _, err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	end = l.LogEndOffset()
	if _, err := l.Clean(opts(now.Add(2 * time.Hour))); err != nil {
		t.Fatal(err)
	}
	recs = check("cleaned again")
	for _, r := range recs {
		if string(r.key) == "k3" && r.value == nil && r.offset < l.ActiveBase() {
			t.Fatalf("tombstone at %d kept past delete.retention.ms", r.offset)
		}
	}

	size := l.Size()
	l.Close()
	l = f.open(t)
	if l.Size() != size {
		t.Fatalf("reopened: size %d, was %d", l.Size(), size)
	}
	check("reopened")
}
