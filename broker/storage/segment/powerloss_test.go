package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// The power-loss test: the engine runs on vfs.StrictMem, which forgets at
// a power cut everything that was not made durable (and keeps a random
// part of the rest, torn at page boundaries). A workload appends (plain,
// sourced and keyed batches), syncs, rolls small segments, creates
// partition directories, deletes records, applies retention, compacts and
// writes checkpoints and producer snapshots; the power goes at a random
// change; the logs are reopened from what survived and must hold every
// acknowledged record, at its offset, with no torn batch, and the source
// positions that exactly-once delivery relies on must match the log.
//
// KAFGRES_POWERLOSS_CUTS sets the number of power cuts (default 300; `make
// bench` runs 5,000) and KAFGRES_POWERLOSS_SEED the seed, which every
// failure names.
func TestPowerLoss(t *testing.T) {
	cuts := 300
	if s := os.Getenv("KAFGRES_POWERLOSS_CUTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("KAFGRES_POWERLOSS_CUTS=%q: want a positive count", s)
		}
		cuts = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KAFGRES_POWERLOSS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KAFGRES_POWERLOSS_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (KAFGRES_POWERLOSS_SEED=%d repeats this run)", seed, seed)
	w := newPowerLoss(t, seed)
	for i := range cuts {
		w.cycle = i
		w.run()
		w.fs.Restart(w.rng)
		w.recover()
	}
	t.Logf("%d power cuts: %d mid-workload, %d records acknowledged, %d partitions, %d cleans, %d clean stops, %d torn tails truncated",
		cuts, w.stats.midRun, w.stats.acked, len(w.parts), w.stats.cleans, w.stats.closes, w.stats.truncated)
}

const (
	plRoot         = "/data"
	plSegmentBytes = 12 << 10
	plMaxParts     = 6
	plKeys         = 8
)

type powerLoss struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	fs    *vfs.StrictMem
	parts []*plPartition
	cycle int
	// changesPerRun is how many file system changes the last measured run
	// made, so that cut points spread over a whole run.
	changesPerRun int64
	stats         struct {
		midRun, acked, cleans, truncated, closes int
	}
}

type plPartition struct {
	dir       string
	compacted bool
	log       *Log // nil while the directory does not (durably) exist
	// Every record appended at an offset the log may still hold, acked
	// or not, by offset; and the sourced batches' sources by base offset.
	recs    map[int64]readRec
	sources map[int64]uint64
	acked   int64 // every offset below was acknowledged by Sync
	start   int64 // a start DeleteRecordsBefore returned: durable
	source  uint64
	epochs  []EpochEntry // the last epoch checkpoint written durably
	serial  int
}

func newPowerLoss(t *testing.T, seed uint64) *powerLoss {
	w := &powerLoss{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		fs: vfs.NewStrictMem(), changesPerRun: 200}
	if err := w.fs.MkdirAll(plRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.fs.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	w.addPartition(false)
	w.addPartition(true)
	return w
}

func (w *powerLoss) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("seed %d, cut %d: %s", w.seed, w.cycle, fmt.Sprintf(format, args...))
}

// failed says whether err is the power cut (the workload stops there);
// any other error fails the test.
func (w *powerLoss) failed(what string, err error) bool {
	w.t.Helper()
	switch {
	case err == nil:
		return false
	case errors.Is(err, vfs.ErrPowerCut), w.fs.IsCut():
		// After the cut every call fails, and some fail with errors that
		// wrap something else (a log failed earlier).
		return true
	}
	w.fatalf("%s: %v", what, err)
	return true
}

func (w *powerLoss) options(dir string) Options {
	return Options{Dir: dir, FS: w.fs, Fsync: true, SegmentBytes: plSegmentBytes, TopicID: "00000000000000000000000000000001"}
}

// addPartition creates a partition directory as the broker does and opens
// its log; it reports false if the power went.
func (w *powerLoss) addPartition(compacted bool) bool {
	p := &plPartition{dir: path.Join(plRoot, fmt.Sprintf("t-%d", len(w.parts))), compacted: compacted,
		recs: map[int64]readRec{}, sources: map[int64]uint64{}}
	w.parts = append(w.parts, p)
	if w.failed("create "+p.dir, CreateDir(w.fs, p.dir, []byte("marker\n"), true)) {
		return false
	}
	l, err := Open(w.options(p.dir))
	if w.failed("open "+p.dir, err) {
		return false
	}
	p.log = l
	return true
}

// run is the workload between two power cuts.
func (w *powerLoss) run() {
	before := w.fs.Changes()
	// Every eighth run goes to its end, to measure how long runs are (the
	// cut then comes after its last change); the others are cut at a
	// random change within that length.
	measure := w.cycle%8 == 0
	if !measure {
		w.fs.CutAfter(1 + w.rng.Int64N(w.changesPerRun+w.changesPerRun/5))
	}
	if !w.workload() {
		w.stats.midRun++
	} else if measure {
		w.changesPerRun = max(w.fs.Changes()-before, 1)
	}
	w.fs.Cut()
}

func (w *powerLoss) workload() bool {
	if len(w.parts) < plMaxParts && w.rng.IntN(6) == 0 {
		if !w.addPartition(false) {
			return false
		}
	}
	for range 25 {
		p := w.parts[w.rng.IntN(len(w.parts))]
		if p.log == nil {
			continue
		}
		var ok bool
		switch r := w.rng.IntN(100); {
		case r < 55:
			ok = w.appendSome(p)
		case r < 80:
			ok = w.sync(p)
		case r < 85:
			ok = w.deleteRecords(p)
		case r < 88:
			ok = w.retention(p)
		case r < 93:
			ok = w.clean(p)
		case r < 96:
			ok = w.epochCheckpoint(p)
		case r < 98:
			ok = w.producerSnapshot(p)
		default:
			ok = w.closeReopen(p)
		}
		if !ok {
			return false
		}
	}
	for _, p := range w.parts {
		if p.log != nil && !w.sync(p) {
			return false
		}
	}
	return true
}

// record is the serial-th record of a partition: a compacted partition's
// keys repeat, a plain one's never do.
func (w *powerLoss) record(p *plPartition) readRec {
	p.serial++
	key := fmt.Sprintf("%s-%d", path.Base(p.dir), p.serial)
	if p.compacted {
		key = fmt.Sprintf("k%d", w.rng.IntN(plKeys))
	}
	// Values of varying size put batches across page boundaries.
	value := fmt.Appendf(nil, "c%d-s%d-", w.cycle, p.serial)
	value = append(value, bytes.Repeat([]byte{byte('a' + p.serial%26)}, w.rng.IntN(700))...)
	return readRec{key: key, value: value}
}

func (w *powerLoss) appendSome(p *plPartition) bool {
	n := 1 + w.rng.IntN(4)
	recs := make([]readRec, n)
	kv := make([]testRecord, n)
	for i := range recs {
		recs[i] = w.record(p)
		kv[i] = testRecord{ts: time.Now().UnixMilli(), key: []byte(recs[i].key), value: recs[i].value}
	}
	batch := makeBatch(kv, batchOpts{producerID: -1, producerEpoch: -1, baseSequence: -1})
	var base int64
	var err error
	if !p.compacted && w.rng.IntN(2) == 0 {
		p.source += 1 + uint64(w.rng.IntN(3))
		var bases []int64
		bases, err = p.log.AppendSourced([]SourcedBatch{{Batch: batch, Source: p.source}}, 0)
		if err == nil {
			base = bases[0]
			p.sources[base] = p.source
		}
	} else {
		base, err = p.log.Append(batch, 0)
	}
	if w.failed("append to "+p.dir, err) {
		return false
	}
	for i, r := range recs {
		r.offset = base + int64(i)
		p.recs[r.offset] = r
	}
	return true
}

func (w *powerLoss) sync(p *plPartition) bool {
	end, err := p.log.Sync()
	if w.failed("sync "+p.dir, err) {
		return false
	}
	w.acknowledged(p, end)
	return true
}

// acknowledged records that every offset below end is durable.
func (w *powerLoss) acknowledged(p *plPartition, end int64) {
	w.stats.acked += int(max(end-p.acked, 0))
	p.acked = max(p.acked, end)
}

func (w *powerLoss) deleteRecords(p *plPartition) bool {
	if p.compacted {
		return true
	}
	start, end := p.log.LogStartOffset(), p.log.DurableEnd()
	if end <= start {
		return true
	}
	to := start + w.rng.Int64N(end-start+1)/3
	got, err := p.log.DeleteRecordsBefore(to)
	if w.failed("delete records of "+p.dir, err) {
		return false
	}
	p.start = max(p.start, got)
	return true
}

func (w *powerLoss) retention(p *plPartition) bool {
	if p.compacted {
		return true
	}
	_, err := p.log.ApplyRetention(Retention{Ms: -1, Bytes: 4 * plSegmentBytes}, time.Now())
	return !w.failed("retention of "+p.dir, err)
}

func (w *powerLoss) clean(p *plPartition) bool {
	if !p.compacted {
		return true
	}
	_, err := p.log.Clean(CleanOptions{FirstDirty: p.log.CleanerCheckpoint(), UpperBound: p.log.LogEndOffset(),
		Now: time.Now(), DeleteRetentionMs: 1000, MaxGroupBytes: plSegmentBytes})
	if w.failed("clean "+p.dir, err) {
		return false
	}
	w.stats.cleans++
	return true
}

func (w *powerLoss) epochCheckpoint(p *plPartition) bool {
	from := p.log.LogEndOffset()
	if n := len(p.epochs); n > 0 {
		from = max(from, p.epochs[n-1].StartOffset) // a cut may have cut the log below it
	}
	e := append(slices.Clone(p.epochs), EpochEntry{Epoch: int32(len(p.epochs)), StartOffset: from})
	if w.failed("epoch checkpoint of "+p.dir, p.log.WriteEpochCheckpoint(e)) {
		return false
	}
	p.epochs = e
	return true
}

func (w *powerLoss) producerSnapshot(p *plPartition) bool {
	end := p.log.LogEndOffset()
	err := p.log.WriteProducerSnapshot(end, w.snapshotEntries(p, end))
	return !w.failed("producer snapshot of "+p.dir, err)
}

func (w *powerLoss) snapshotEntries(p *plPartition, end int64) []ProducerSnapshotEntry {
	return []ProducerSnapshotEntry{{ProducerID: int64(w.cycle), Epoch: 1,
		LastSequence: int32(p.serial), LastOffset: end - 1, Timestamp: 1, CurrentTxnFirstOffset: -1}}
}

// closeReopen stops the log as a stopping broker does (with its producer
// snapshot) and opens it again, from the clean stop's record: a close
// that returns has made every record durable, and what the reopened log
// holds is checked as after a cut.
func (w *powerLoss) closeReopen(p *plPartition) bool {
	end := p.log.LogEndOffset()
	if w.failed("close "+p.dir, p.log.CloseWithProducerSnapshot(w.snapshotEntries(p, end))) {
		return false
	}
	w.acknowledged(p, end)
	l, err := Open(w.options(p.dir))
	if w.failed("reopen "+p.dir, err) {
		return false
	}
	p.log = l
	w.stats.closes++
	w.check(p)
	return true
}

// recover reopens every partition from what survived the cut and checks it.
func (w *powerLoss) recover() {
	for _, p := range w.parts {
		p.log = nil
		if _, err := w.fs.Stat(CreatingDir(p.dir)); err == nil {
			// Cut while CreateDir built it: the broker's start-up check
			// removes it (storage.Dir.Check).
			if err := RemoveMarkedDir(w.fs, CreatingDir(p.dir)); err != nil {
				w.fatalf("remove %s: %v", CreatingDir(p.dir), err)
			}
		}
		if _, err := ReadMarker(w.fs, p.dir); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				w.fatalf("marker of %s: %v", p.dir, err)
			}
			if p.acked > 0 {
				w.fatalf("%s is gone after %d records were acknowledged in it", p.dir, p.acked)
			}
			p.recs, p.sources = map[int64]readRec{}, map[int64]uint64{}
			continue
		}
		l, err := Open(w.options(p.dir))
		if err != nil {
			w.fatalf("reopen %s: %v", p.dir, err)
		}
		p.log = l
		w.check(p)
	}
}

func (w *powerLoss) check(p *plPartition) {
	l := p.log
	start, end := l.LogStartOffset(), l.LogEndOffset()
	if end < p.acked {
		w.fatalf("%s ends at %d after a cut; %d was acknowledged", p.dir, end, p.acked)
	}
	if start < p.start {
		w.fatalf("%s starts at %d after a cut; DeleteRecords had moved it to %d", p.dir, start, p.start)
	}
	if end > p.acked {
		w.stats.truncated++ // an unacknowledged tail survived (some of it, perhaps)
	}
	got, _ := readLog(w.t, l) // fails on any batch that does not validate
	present := map[int64]readRec{}
	for _, r := range got {
		want, ok := p.recs[r.offset]
		if !ok || want.key != r.key || !bytes.Equal(want.value, r.value) {
			w.fatalf("%s holds %q=%.20q at %d, which was never appended there (want %q=%.20q)", p.dir, r.key, r.value, r.offset, want.key, want.value)
		}
		present[r.offset] = r
	}
	// Every acknowledged record is there, or (compacted) a later record of
	// its key is.
	latest := map[string]int64{}
	for _, r := range got {
		latest[r.key] = r.offset
	}
	for o := start; o < p.acked; o++ {
		r, ok := p.recs[o]
		if !ok {
			continue // an offset compaction removed before: checked then
		}
		if _, there := present[o]; there {
			continue
		}
		if p.compacted && latest[r.key] > o {
			continue
		}
		w.fatalf("%s lost acknowledged record %d (%q) in a cut: start %d, end %d, acked %d", p.dir, o, r.key, start, end, p.acked)
	}
	// The model forgets what the log no longer has, so that offsets
	// appended again after the cut are checked against the new records.
	for o := range p.recs {
		if _, there := present[o]; !there {
			delete(p.recs, o)
		}
	}
	p.serial += 1000 // new values differ from any lost ones
	p.acked = end
	// The source position is that of the last sourced batch in the log:
	// higher would skip a change on replay, lower would append it twice.
	var want uint64
	for base, s := range p.sources {
		if base < end {
			want = max(want, s)
		} else {
			delete(p.sources, base)
		}
	}
	if got := l.SourceApplied(); got != want {
		w.fatalf("%s: source applied %d after a cut, the log's last sourced batch has %d", p.dir, got, want)
	}
	p.source = max(p.source, want)
	// The last checkpoint written durably, or the one being written at
	// the cut: never a torn one, never an older one.
	entries, _, err := l.ReadEpochCheckpoint()
	if err != nil {
		w.fatalf("%s: epoch checkpoint after a cut: %v", p.dir, err)
	}
	if n := len(p.epochs); (len(entries) != n && len(entries) != n+1) || !slices.Equal(entries[:min(n, len(entries))], p.epochs) {
		w.fatalf("%s: epoch checkpoint %v after a cut; %v was written durably", p.dir, entries, p.epochs)
	}
	p.epochs = entries
	l.LoadProducerSnapshot() // must not fail or panic on what the cut left
}
