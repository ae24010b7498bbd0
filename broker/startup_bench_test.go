package broker

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// TestStartupTimeLargeLog measures how long opening one partition with a
// large log takes with its producer snapshot and leader epoch checkpoint
// and without them (a rebuild from every batch header, as before they
// existed). It writes KAFGRES_STARTUP_BENCH_MB megabytes of 1 KiB
// idempotent batches and runs only when that is set.
func TestStartupTimeLargeLog(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("KAFGRES_STARTUP_BENCH_MB"))
	if mb == 0 {
		t.Skip("set KAFGRES_STARTUP_BENCH_MB")
	}
	dir := filepath.Join(t.TempDir(), "p-0")
	opts := segment.Options{Dir: dir, SegmentBytes: 128 << 20, Fsync: false}
	l, err := segment.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{dir: dir, epoch: 1, log: l, logger: slog.New(slog.DiscardHandler), producers: producerWindow{}}
	if _, err := p.loadState(time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	value := string(make([]byte, 1000))
	seqs := map[int64]int32{}
	batches := 0
	for l.Size() < int64(mb)<<20 {
		pid := int64(batches % 8)
		b := producerBatch(pid, 0, seqs[pid], 1, value)
		seqs[pid]++
		h, err := segment.ParseBatchHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if r := p.append(b, h); r.err != nil {
			t.Fatal(r.err)
		}
		batches++
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	open := func() (time.Duration, int) {
		start := time.Now()
		l, err := segment.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		q := &partition{dir: dir, epoch: p.epoch + 1, log: l, logger: p.logger, producers: producerWindow{}}
		n, err := q.loadState(time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		p = q
		if err := q.close(); err != nil {
			t.Fatal(err)
		}
		return d, n
	}
	d, n := open()
	t.Logf("%d MB, %d batches, %d segments: open with snapshot %v (%d headers read)", mb, batches, l.Segments(), d, n)
	for _, name := range []string{"*.snapshot", segment.EpochCheckpointFile} {
		files, _ := filepath.Glob(filepath.Join(dir, name))
		for _, f := range files {
			os.Remove(f)
		}
	}
	d, n = open()
	t.Logf("open without snapshot or checkpoint (full scan, the old way) %v (%d headers read)", d, n)
	d, n = open()
	t.Logf("open again, with the snapshot written by the close %v (%d headers read)", d, n)
}
