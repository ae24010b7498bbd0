package producer

import (
	"context"
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/decoder"
)

// fakeLog records appends; it is not a mock of Postgres or Kafka, just the
// producer's view of the broker.
type fakeLog struct {
	partitions map[string]int32
	maxBytes   map[string]int32  // absent: Kafka's default
	applied    map[string]uint64 // "topic/partition" -> source
	appended   map[string][]segment.SourcedBatch
	delivered  uint64
}

func key(topic string, p int32) string { return topic + "/" + string(rune('0'+p)) }

func (f *fakeLog) Partitions(_ context.Context, topic string) (int32, error) {
	return f.partitions[topic], nil
}
func (f *fakeLog) MaxMessageBytes(topic string) (int32, error) {
	if m, ok := f.maxBytes[topic]; ok {
		return m, nil
	}
	return 1048588, nil
}
func (f *fakeLog) SourceApplied(topic string, p int32) (uint64, error) {
	return f.applied[key(topic, p)], nil
}
func (f *fakeLog) AppendSourced(topic string, p int32, b []segment.SourcedBatch) (<-chan struct{}, error) {
	f.appended[key(topic, p)] = append(f.appended[key(topic, p)], b...)
	done := make(chan struct{})
	close(done)
	return done, nil
}
func (f *fakeLog) Delivered(lsn uint64) { f.delivered = lsn }

// deadLetters collects dead letters in memory.
type deadLetters struct{ got []DeadLetter }

func (d *deadLetters) DeadLetter(_ context.Context, dl DeadLetter) error {
	d.got = append(d.got, dl)
	return nil
}

// message encodes kafgres_produce content (docs/producing.md).
func message(topic string, partition int32, value string) []byte {
	b := []byte{1}
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(partition))
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // NULL key
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	b = append(b, value...)
	return binary.BigEndian.AppendUint16(b, 0)
}

func txn(end uint64, values ...string) *decoder.Transaction {
	tx := &decoder.Transaction{EndLSN: decoder.LSN(end), CommitTime: time.UnixMilli(1_700_000_000_000)}
	for _, v := range values {
		tx.Items = append(tx.Items, &decoder.Message{Content: message("t", 0, v)})
	}
	return tx
}

func TestAppendGroupSkipsAppliedAndKeepsOrder(t *testing.T) {
	log := &fakeLog{partitions: map[string]int32{"t": 1}, applied: map[string]uint64{key("t", 0): 200}, appended: map[string][]segment.SourcedBatch{}}
	p := New(nil, log, nil, &deadLetters{}, slog.Default())
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
	p := New(nil, log, nil, &deadLetters{}, slog.Default())
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
	p := New(nil, log, nil, dl, slog.Default())
	big := strings.Repeat("x", 2000)
	tx := txn(10, "before", big, "after")
	tx.Xid = 7
	for i, it := range tx.Items {
		it.(*decoder.Message).LSN = decoder.LSN(100 + i)
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
	if d.LSN != 101 || d.Xid != 7 || d.Record.Index != 2 || d.Record.Topic != "t" || d.Record.Partition != 0 ||
		string(d.Record.Value) != big || d.Record.Key != nil ||
		!strings.Contains(d.Error, "max.message.bytes 2000") || !strings.Contains(d.Error, `"t"`) {
		t.Fatalf("dead letter %+v", d)
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

// TestParseMessageRefusesSignedEnvelope: the output plugin strips the
// signed envelope (format 3, outputplugin/auth.h) before anything reaches
// the broker; one that got here anyway is an error, not a record.
func TestParseMessageRefusesSignedEnvelope(t *testing.T) {
	env := append([]byte{3}, make([]byte, 32)...)
	env = append(env, message("t", 0, "v")...)
	if _, err := parseMessage(env); err == nil {
		t.Fatal("a signed envelope parsed as a record")
	}
	if rec, err := parseMessage(message("t", 0, "v")); err != nil || string(rec.value) != "v" {
		t.Fatalf("payload: %+v %v", rec, err)
	}
}
