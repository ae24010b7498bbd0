package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/topicname"
	"github.com/kafgres/kafgres/decoder"
)

// fakeLog records appends; it is not a mock of Postgres or Kafka, just the
// producer's view of the broker.
type fakeLog struct {
	partitions map[string]int32  // absent: no such topic
	maxBytes   map[string]int32  // absent: Kafka's default
	compacted  map[string]bool   // cleanup.policy includes compact
	applied    map[string]uint64 // "topic/partition" -> source
	appended   map[string][]segment.SourcedBatch
	delivered  uint64

	// The source's Kafka transaction: where it is open, the highest
	// source in it, and the partitions of every commit.
	open    map[string]bool
	txnEnd  uint64
	inTxn   map[string][]bool // per append: was it transactional
	commits [][]string
}

func key(topic string, p int32) string { return topic + "/" + string(rune('0'+p)) }

func (f *fakeLog) Topic(_ context.Context, topic string) (TopicInfo, bool, error) {
	n, ok := f.partitions[topic]
	return TopicInfo{ID: int64(len(topic)), Partitions: n, Internal: topicname.Internal(topic)}, ok, nil
}
func (f *fakeLog) Limits(topic string) (Limits, error) {
	l := Limits{MaxMessageBytes: 1048588, Compacted: f.compacted[topic]}
	if m, ok := f.maxBytes[topic]; ok {
		l.MaxMessageBytes = m
	}
	return l, nil
}
func (f *fakeLog) SourceApplied(topic string, p int32) (uint64, error) {
	if p >= f.partitions[topic] {
		return 0, fmt.Errorf("no partition %s-%d", topic, p)
	}
	return f.applied[key(topic, p)], nil
}
func (f *fakeLog) AppendSourced(topic string, p int32, b []segment.SourcedBatch, inTxn bool) (<-chan struct{}, error) {
	f.appended[key(topic, p)] = append(f.appended[key(topic, p)], b...)
	if f.inTxn == nil {
		f.inTxn = map[string][]bool{}
	}
	f.inTxn[key(topic, p)] = append(f.inTxn[key(topic, p)], inTxn)
	if inTxn {
		if f.open == nil {
			f.open = map[string]bool{}
		}
		f.open[key(topic, p)] = true
		for _, sb := range b {
			f.txnEnd = max(f.txnEnd, sb.Source)
		}
	}
	done := make(chan struct{})
	close(done)
	return done, nil
}
func (f *fakeLog) Delivered(lsn uint64, _ bool) { f.delivered = lsn }
func (f *fakeLog) CommitSourced(context.Context) error {
	if len(f.open) == 0 {
		return nil
	}
	var parts []string
	for k := range f.open {
		parts = append(parts, k)
	}
	sort.Strings(parts)
	f.commits = append(f.commits, parts)
	f.open, f.txnEnd = nil, 0
	return nil
}
func (f *fakeLog) SourcedTxn() (bool, uint64) { return len(f.open) > 0, f.txnEnd }

// deadLetters collects dead letters in memory.
type deadLetters struct{ got []DeadLetter }

func (d *deadLetters) DeadLetter(_ context.Context, dl DeadLetter) error {
	d.got = append(d.got, dl)
	return nil
}

// memEpochs keeps epochs in memory.
type memEpochs struct{ byTopic map[int64][]Epoch }

func (m *memEpochs) Load(_ context.Context, id int64) ([]Epoch, error) {
	return append([]Epoch(nil), m.byTopic[id]...), nil
}
func (m *memEpochs) Save(_ context.Context, id int64, e Epoch) error {
	var keep []Epoch
	for _, x := range m.byTopic[id] {
		if x.From < e.From {
			keep = append(keep, x)
		}
	}
	m.byTopic[id] = append(keep, e)
	return nil
}

func newProducer(log Log, dl DeadLetters) *Producer {
	return New(nil, log, nil, dl, &memEpochs{byTopic: map[int64][]Epoch{}}, nil, slog.Default())
}

// txn is a transaction of kafgres_produce records to partition 0 of t.
func txn(end uint64, values ...string) *decoder.Transaction {
	tx := &decoder.Transaction{EndLSN: decoder.LSN(end), CommitTime: time.UnixMilli(1_700_000_000_000)}
	for _, v := range values {
		tx.Items = append(tx.Items, &decoder.Produced{Topic: "t", Partition: 0, Value: []byte(v)})
	}
	return tx
}

// txnTo is a transaction of one kafgres_produce record per value, the ith
// to partition parts[i] of t.
func txnTo(end uint64, parts []int32, values ...string) *decoder.Transaction {
	tx := &decoder.Transaction{EndLSN: decoder.LSN(end), CommitTime: time.UnixMilli(1_700_000_000_000)}
	for i, v := range values {
		tx.Items = append(tx.Items, &decoder.Produced{Topic: "t", Partition: parts[i], Value: []byte(v)})
	}
	return tx
}

// TestGroupAcrossPartitionsIsOneTransaction: a group holding an SQL
// transaction whose records go to several partitions is appended
// transactionally, all of it, and committed once the appends are durable; a
// group whose transactions each stay on one partition needs no transaction,
// even when they are on different partitions.
func TestGroupAcrossPartitionsIsOneTransaction(t *testing.T) {
	log := &fakeLog{partitions: map[string]int32{"t": 3}, applied: map[string]uint64{}, appended: map[string][]segment.SourcedBatch{}}
	p := newProducer(log, &deadLetters{})
	ctx := context.Background()
	if _, err := p.appendWithRetry(ctx, []*decoder.Transaction{txnTo(10, []int32{0, 1, 2}, "a", "b", "c")}); err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{key("t", 0), key("t", 1), key("t", 2)}}; !reflect.DeepEqual(log.commits, want) {
		t.Fatalf("commits %v, want %v", log.commits, want)
	}
	for part := int32(0); part < 3; part++ {
		if got := log.inTxn[key("t", part)]; !reflect.DeepEqual(got, []bool{true}) {
			t.Fatalf("partition %d appends transactional: %v, want [true]", part, got)
		}
	}
	if _, err := p.appendWithRetry(ctx, []*decoder.Transaction{txnTo(20, []int32{1, 1}, "d", "e")}); err != nil {
		t.Fatal(err)
	}
	if got := log.inTxn[key("t", 1)]; !reflect.DeepEqual(got, []bool{true, false}) || len(log.commits) != 1 {
		t.Fatalf("a one-partition group: transactional %v, commits %v; want a plain append and no commit", got, log.commits)
	}
	if _, err := p.appendWithRetry(ctx, []*decoder.Transaction{txnTo(30, []int32{0}, "f"), txnTo(40, []int32{2}, "g")}); err != nil {
		t.Fatal(err)
	}
	if got0, got2 := log.inTxn[key("t", 0)], log.inTxn[key("t", 2)]; !reflect.DeepEqual(got0, []bool{true, false}) ||
		!reflect.DeepEqual(got2, []bool{true, false}) || len(log.commits) != 1 {
		t.Fatalf("one-partition transactions on two partitions: transactional %v and %v, commits %v; want plain appends and no commit", got0, got2, log.commits)
	}
	if _, err := p.appendWithRetry(ctx, []*decoder.Transaction{txnTo(50, []int32{0}, "h"), txnTo(60, []int32{1, 2}, "i", "j")}); err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < 3; part++ {
		if got := log.inTxn[key("t", part)]; !got[len(got)-1] {
			t.Fatalf("a group holding a transaction across partitions: partition %d appends transactional %v, want the last true", part, got)
		}
	}
	if want := [][]string{{key("t", 0), key("t", 1), key("t", 2)}}; len(log.commits) != 2 || !reflect.DeepEqual(log.commits[1:], want) {
		t.Fatalf("commits %v, want a second of %v", log.commits, want)
	}
}

// TestOpenTransactionWaitsForTheReplay: a transaction a crash left open on
// partition 0 holding records up to source 300 stays open, and every append
// joins it, until the replay has reached 300: committing it earlier would
// show read_committed consumers partition 0's part of transaction 300
// without partition 1's.
func TestOpenTransactionWaitsForTheReplay(t *testing.T) {
	log := &fakeLog{partitions: map[string]int32{"t": 2}, applied: map[string]uint64{key("t", 0): 300}, appended: map[string][]segment.SourcedBatch{},
		open: map[string]bool{key("t", 0): true}, txnEnd: 300}
	p := newProducer(log, &deadLetters{})
	p.txnOpen, p.txnEnd = log.SourcedTxn()
	ctx := context.Background()
	if _, err := p.appendWithRetry(ctx, []*decoder.Transaction{txnTo(200, []int32{1}, "x")}); err != nil {
		t.Fatal(err)
	}
	if len(log.commits) != 0 || !reflect.DeepEqual(log.inTxn[key("t", 1)], []bool{true}) {
		t.Fatalf("before the replay reached 300: commits %v, partition 1 transactional %v; want no commit and a transactional append", log.commits, log.inTxn[key("t", 1)])
	}
	if _, err := p.appendWithRetry(ctx, []*decoder.Transaction{txnTo(300, []int32{0, 1}, "y0", "y1")}); err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{key("t", 0), key("t", 1)}}; !reflect.DeepEqual(log.commits, want) {
		t.Fatalf("commits %v, want %v", log.commits, want)
	}
	if n := len(log.appended[key("t", 0)]); n != 0 {
		t.Fatalf("partition 0 got %d batches again; its part of 300 was there", n)
	}
}

func TestAppendGroupSkipsAppliedAndKeepsOrder(t *testing.T) {
	log := &fakeLog{partitions: map[string]int32{"t": 1}, applied: map[string]uint64{key("t", 0): 200}, appended: map[string][]segment.SourcedBatch{}}
	p := newProducer(log, &deadLetters{})
	txns := []*decoder.Transaction{txn(100, "old"), txn(200, "old2"), txn(300, "a", "b"), txn(400, "c")}
	if err := p.appendGroup(context.Background(), txns); err != nil {
		t.Fatal(err)
	}
	got := log.appended[key("t", 0)]
	if len(got) != 1 || got[0].Source != 400 {
		t.Fatalf("batches %+v, want one with source 400", got)
	}
	h, err := segment.ValidateBatch(got[0].Batch)
	if err != nil || h.NumRecords != 3 {
		t.Fatalf("batch: %+v %v, want the 3 records of transactions 300 and 400", h, err)
	}
	if strings.Contains(string(got[0].Batch), "old") {
		t.Fatal("a transaction at or below the applied source was appended again")
	}
}

func TestAppendGroupSplitsOnlyBetweenTransactions(t *testing.T) {
	log := &fakeLog{partitions: map[string]int32{"t": 1}, applied: map[string]uint64{}, appended: map[string][]segment.SourcedBatch{}}
	p := newProducer(log, &deadLetters{})
	big := strings.Repeat("x", 600<<10)
	txns := []*decoder.Transaction{txn(10, big), txn(20, big), txn(30, "small")}
	if err := p.appendGroup(context.Background(), txns); err != nil {
		t.Fatal(err)
	}
	got := log.appended[key("t", 0)]
	if len(got) != 2 || got[0].Source != 10 || got[1].Source != 30 {
		t.Fatalf("sources %v, want a batch ending at each transaction boundary it was cut at", sources(got))
	}
}

func sources(bs []segment.SourcedBatch) []uint64 {
	var out []uint64
	for _, b := range bs {
		out = append(out, b.Source)
	}
	return out
}

// TestAppendGroupDeadLettersOversizedRecords: a record over its topic's
// max.message.bytes is not appended but dead-lettered, whole, and the
// records around it are appended.
func TestAppendGroupDeadLettersOversizedRecords(t *testing.T) {
	log := &fakeLog{partitions: map[string]int32{"t": 1}, maxBytes: map[string]int32{"t": 2000}, applied: map[string]uint64{}, appended: map[string][]segment.SourcedBatch{}}
	dl := &deadLetters{}
	p := newProducer(log, dl)
	big := strings.Repeat("x", 2000)
	tx := txn(10, "before", big, "after")
	tx.Xid = 7
	for i, it := range tx.Items {
		it.(*decoder.Produced).LSN = decoder.LSN(100 + i)
	}
	if err := p.appendGroup(context.Background(), []*decoder.Transaction{tx, txn(20, "next")}); err != nil {
		t.Fatal(err)
	}
	got := log.appended[key("t", 0)]
	if len(got) != 1 {
		t.Fatalf("%d batches, want 1", len(got))
	}
	h, err := segment.ValidateBatch(got[0].Batch)
	if err != nil || h.NumRecords != 3 || strings.Contains(string(got[0].Batch), big) {
		t.Fatalf("batch %+v %v: want before, after and next without the big record", h, err)
	}
	if len(dl.got) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl.got))
	}
	d := dl.got[0]
	rec, _ := d.Row.(DeadRecord)
	if d.LSN != 101 || d.Xid != 7 || rec.Index != 2 || rec.Topic != "t" || rec.Partition != 0 ||
		string(rec.Value) != big || rec.Key != nil ||
		!strings.Contains(d.Error, "max.message.bytes 2000") || !strings.Contains(d.Error, `"t"`) {
		t.Fatalf("dead letter %+v", d)
	}
}

// TestAppendGroupDeadLettersKeylessToCompacted: a compacted topic refuses
// a record without a key, as it refuses a Kafka producer's: it is
// dead-lettered with the reason, and the keyed records around it are
// appended. A skipped transaction's records are all dead-lettered.
func TestAppendGroupDeadLettersKeylessToCompacted(t *testing.T) {
	log := &fakeLog{partitions: map[string]int32{"t": 1}, compacted: map[string]bool{"t": true}, applied: map[string]uint64{}, appended: map[string][]segment.SourcedBatch{}}
	dl := &deadLetters{}
	p := newProducer(log, dl)
	tx := txn(10, "keyed", "keyless", "keyed too")
	tx.Items[0].(*decoder.Produced).Key = []byte("k")
	tx.Items[2].(*decoder.Produced).Key = []byte("k")
	skipped := txn(20, "held")
	skipped.Items[0].(*decoder.Produced).Key = []byte("k")
	skipped.Skipped = errors.New("frame 1: unreadable")
	if err := p.appendGroup(context.Background(), []*decoder.Transaction{tx, skipped}); err != nil {
		t.Fatal(err)
	}
	got := log.appended[key("t", 0)]
	if len(got) != 1 {
		t.Fatalf("%d batches, want 1", len(got))
	}
	if h, err := segment.ValidateBatch(got[0].Batch); err != nil || h.NumRecords != 2 {
		t.Fatalf("batch %+v %v: want the two keyed records", h, err)
	}
	if len(dl.got) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dl.got))
	}
	if rec, _ := dl.got[0].Row.(DeadRecord); string(rec.Value) != "keyless" || !strings.Contains(dl.got[0].Error, "compacted") {
		t.Fatalf("dead letter %+v", dl.got[0])
	}
	if rec, _ := dl.got[1].Row.(DeadRecord); string(rec.Value) != "held" || !strings.Contains(dl.got[1].Error, "kafgres_skip_transaction: frame 1: unreadable") {
		t.Fatalf("dead letter %+v", dl.got[1])
	}
}

// TestBatchSize: the size checked against max.message.bytes is that of
// the batch the record would make alone.
func TestBatchSize(t *testing.T) {
	for _, rec := range []record{
		{},
		{key: []byte("k"), value: []byte("v")},
		{value: []byte(strings.Repeat("v", 300))},
		{key: []byte{}, value: []byte(strings.Repeat("v", 70000)), headers: []kmsg.Header{{Key: "h", Value: []byte("x")}, {Key: strings.Repeat("k", 200)}}},
	} {
		if got, want := batchSize(rec), len(encodeBatch([]record{rec}, []int64{1})); got != want {
			t.Errorf("batchSize = %d, encoded batch has %d bytes (key %d, value %d, %d headers)", got, want, len(rec.key), len(rec.value), len(rec.headers))
		}
	}
}

// values are the record values of batches, in order.
func values(t *testing.T, bs []segment.SourcedBatch) []string {
	t.Helper()
	var out []string
	for _, sb := range bs {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(sb.Batch); err != nil {
			t.Fatal(err)
		}
		rest := b.Records
		for i := int32(0); i < b.NumRecords; i++ {
			n, used := binary.Varint(rest)
			var r kmsg.Record
			if err := r.ReadFrom(rest[:used+int(n)]); err != nil {
				t.Fatal(err)
			}
			out = append(out, string(r.Value))
			rest = rest[used+int(n):]
		}
	}
	return out
}

// crashingLog is a fakeLog whose appends fail after a budget, as if the
// broker died between appending some partitions and acknowledging.
type crashingLog struct {
	*fakeLog
	budget int // appends that succeed; -1: all
}

func (c *crashingLog) AppendSourced(topic string, p int32, b []segment.SourcedBatch, inTxn bool) (<-chan struct{}, error) {
	if c.budget == 0 {
		return nil, errors.New("crash")
	}
	c.budget--
	for _, sb := range b {
		c.applied[key(topic, p)] = max(c.applied[key(topic, p)], sb.Source)
	}
	return c.fakeLog.AppendSourced(topic, p, b, inTxn)
}

// TestPlacementSurvivesReplay: records with and without a key, spread over
// the partitions, appended partly before a "crash", then replayed after
// partitions were added, end up in the topic exactly once each; and a
// replay of a complete group appends nothing.
func TestPlacementSurvivesReplay(t *testing.T) {
	for budget := 0; budget <= 6; budget++ {
		log := &crashingLog{fakeLog: &fakeLog{partitions: map[string]int32{"t": 4}, applied: map[string]uint64{}, appended: map[string][]segment.SourcedBatch{}}, budget: budget}
		p := newProducer(log, &deadLetters{})
		var txns []*decoder.Transaction
		want := map[string]bool{}
		for i := 0; i < 12; i++ {
			tx := &decoder.Transaction{EndLSN: decoder.LSN(1000 + 100*i), CommitTime: time.UnixMilli(1)}
			for j := 0; j < 3; j++ {
				v := fmt.Sprintf("%d-%d", i, j)
				var k []byte
				if j == 1 {
					k = []byte("key" + v)
				}
				tx.Items = append(tx.Items, &decoder.Produced{Topic: "t", Partition: -1, Key: k, Value: []byte(v)})
				want[v] = true
			}
			txns = append(txns, tx)
		}
		first := p.appendGroup(context.Background(), txns)
		if budget < 4 && first == nil {
			t.Fatalf("budget %d: no crash", budget)
		}
		log.partitions["t"] = 7 // CreatePartitions between the crash and the replay
		log.budget = -1
		replay := newProducer(log, &deadLetters{}) // a new broker process
		replay.placement.epochs = p.placement.epochs
		for range 2 {
			if err := replay.appendGroup(context.Background(), txns); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]int{}
		for part := int32(0); part < 7; part++ {
			for _, v := range values(t, log.appended[key("t", part)]) {
				got[v]++
			}
		}
		for v := range want {
			if got[v] != 1 {
				t.Errorf("budget %d: record %s appended %d times", budget, v, got[v])
			}
		}
		if len(got) != len(want) {
			t.Errorf("budget %d: %d distinct records, want %d", budget, len(got), len(want))
		}
	}
}

// TestNullKeyPlacementSpreads: NULL-key transactions use every partition,
// and one transaction's records stay together.
func TestNullKeyPlacementSpreads(t *testing.T) {
	used := map[int32]bool{}
	for lsn := decoder.LSN(0x1000); lsn < 0x1000+64*0x58; lsn += 0x58 {
		used[nullKeyPartition(lsn, 4)] = true
		if nullKeyPartition(lsn, 4) != nullKeyPartition(lsn, 4) {
			t.Fatal("not a function of the LSN")
		}
	}
	if len(used) != 4 {
		t.Fatalf("64 transactions used partitions %v of 4", used)
	}
}

// TestAppendGroupDeadLettersWhatCannotBeAppended: a record for a topic
// that does not exist, for a partition the topic does not have, for one
// of Kafka's internal topics, and a message that does not parse are kept
// as dead letters with the reason; the records around them are appended.
func TestAppendGroupDeadLettersWhatCannotBeAppended(t *testing.T) {
	log := &fakeLog{partitions: map[string]int32{"t": 2, "__consumer_offsets": 50}, applied: map[string]uint64{}, appended: map[string][]segment.SourcedBatch{}}
	dl := &deadLetters{}
	p := newProducer(log, dl)
	tx := &decoder.Transaction{Xid: 9, EndLSN: 500, CommitTime: time.UnixMilli(1), Items: []decoder.Item{
		&decoder.Produced{LSN: 401, Topic: "t", Partition: 0, Value: []byte("a")},
		&decoder.Produced{LSN: 402, Topic: "gone", Partition: -1, Value: []byte("b")},
		&decoder.Produced{LSN: 403, Topic: "t", Partition: 5, Value: []byte("c")},
		&decoder.Unreadable{LSN: 404, Content: []byte{9, 9}, Err: errors.New("malformed kafgres message: unknown format 9")},
		&decoder.Produced{LSN: 405, Topic: "t", Partition: 0, Value: []byte("d")},
		&decoder.Produced{LSN: 406, Topic: "__consumer_offsets", Partition: -1, Value: []byte("e")},
	}}
	if err := p.appendGroup(context.Background(), []*decoder.Transaction{tx}); err != nil {
		t.Fatal(err)
	}
	if got := values(t, log.appended[key("t", 0)]); fmt.Sprint(got) != "[a d]" {
		t.Fatalf("appended %v, want [a d]", got)
	}
	want := []struct {
		lsn decoder.LSN
		why string
	}{{402, `topic "gone" does not exist`}, {403, `partition 5 of topic "t" does not exist (it has 2)`}, {404, "unknown format 9"},
		{406, `topic "__consumer_offsets" is one of Kafka's internal topics`}}
	if len(dl.got) != len(want) {
		t.Fatalf("%d dead letters, want %d: %+v", len(dl.got), len(want), dl.got)
	}
	for i, w := range want {
		d := dl.got[i]
		if d.LSN != w.lsn || d.Xid != 9 || !strings.Contains(d.Error, w.why) {
			t.Errorf("dead letter %d: %+v, want lsn %s and %q", i, d, w.lsn, w.why)
		}
	}
	if u, ok := dl.got[2].Row.(UnreadableRow); !ok || string(u.Content) != "\x09\x09" || u.Index != 4 {
		t.Errorf("unreadable message kept as %+v", dl.got[2].Row)
	}
}

// stuckLog never makes an append durable.
type stuckLog struct{ *fakeLog }

func (stuckLog) AppendSourced(string, int32, []segment.SourcedBatch, bool) (<-chan struct{}, error) {
	return make(chan struct{}), nil
}

// oneShot is a Source that delivers its events, then waits for ctx.
type oneShot struct {
	events []decoder.Event
	acked  chan decoder.LSN
}

func (o *oneShot) Run(ctx context.Context, out chan<- decoder.Event) error {
	for _, ev := range o.events {
		out <- ev
	}
	<-ctx.Done()
	return ctx.Err()
}
func (o *oneShot) Ack(lsn decoder.LSN) { o.acked <- lsn }

// TestStopDoesNotAcknowledgeWhatIsNotDurable: when the broker stops while
// a group's appends are not yet durable, the group is not acknowledged
// (nor published as delivered): the slot must replay it.
func TestStopDoesNotAcknowledgeWhatIsNotDurable(t *testing.T) {
	log := stuckLog{&fakeLog{partitions: map[string]int32{"t": 1}, applied: map[string]uint64{}, appended: map[string][]segment.SourcedBatch{}}}
	src := &oneShot{events: []decoder.Event{txn(100, "v")}, acked: make(chan decoder.LSN, 10)}
	p := New(src, log, nil, &deadLetters{}, &memEpochs{byTopic: map[int64][]Epoch{}}, nil, slog.Default())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	time.Sleep(100 * time.Millisecond) // the group is appended, not durable
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case lsn := <-src.acked:
		t.Fatalf("acknowledged %s, which never became durable", lsn)
	default:
	}
	if log.delivered != 0 {
		t.Fatalf("published %d as delivered", log.delivered)
	}
}

// flakyLog fails the first append to partition 1 and makes appends to
// partition 0 durable only when the test closes gate.
type flakyLog struct {
	*fakeLog
	mu     sync.Mutex
	gate   chan struct{}
	failed bool
}

func (f *flakyLog) AppendSourced(topic string, p int32, b []segment.SourcedBatch, inTxn bool) (<-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p == 1 && !f.failed {
		f.failed = true
		return nil, errors.New("injected: Postgres restarting")
	}
	for _, sb := range b {
		f.applied[key(topic, p)] = max(f.applied[key(topic, p)], sb.Source)
	}
	f.fakeLog.appended[key(topic, p)] = append(f.fakeLog.appended[key(topic, p)], b...)
	if p == 0 {
		return f.gate, nil
	}
	done := make(chan struct{})
	close(done)
	return done, nil
}
func (f *flakyLog) SourceApplied(topic string, p int32) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied[key(topic, p)], nil
}
func (f *flakyLog) Delivered(uint64, bool) {}

// TestRetryWaitsForEarlierAttempt: when a group fails after appending to
// some partitions, the retry skips those partitions, but the group is
// still acknowledged only once their appends from the failed attempt are
// durable.
func TestRetryWaitsForEarlierAttempt(t *testing.T) {
	log := &flakyLog{fakeLog: &fakeLog{partitions: map[string]int32{"t": 2}, applied: map[string]uint64{}, appended: map[string][]segment.SourcedBatch{}},
		gate: make(chan struct{})}
	tx := &decoder.Transaction{EndLSN: 100, CommitTime: time.UnixMilli(1), Items: []decoder.Item{
		&decoder.Produced{Topic: "t", Partition: 0, Value: []byte("a")},
		&decoder.Produced{Topic: "t", Partition: 1, Value: []byte("b")},
	}}
	src := &oneShot{events: []decoder.Event{tx}, acked: make(chan decoder.LSN, 10)}
	p := New(src, log, nil, &deadLetters{}, &memEpochs{byTopic: map[int64][]Epoch{}}, nil, slog.Default())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// The retry comes after 100 ms and appends partition 1 only.
	deadline := time.Now().Add(5 * time.Second)
	for {
		log.mu.Lock()
		n := len(log.fakeLog.appended[key("t", 1)])
		log.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the group was not retried")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case lsn := <-src.acked:
		t.Fatalf("acknowledged %s while partition 0's append from the failed attempt is not durable", lsn)
	case <-time.After(100 * time.Millisecond):
	}
	close(log.gate)
	select {
	case lsn := <-src.acked:
		if lsn != 100 {
			t.Fatalf("acknowledged %s, want 100", lsn)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not acknowledged once durable")
	}
	if got := len(log.fakeLog.appended[key("t", 0)]); got != 1 {
		t.Fatalf("partition 0 got %d appends, want 1", got)
	}
}
