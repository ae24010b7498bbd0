package producer

import (
	"context"
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/decoder"
)

// fakeLog records appends; it is not a mock of Postgres or Kafka, just the
// producer's view of the broker.
type fakeLog struct {
	partitions map[string]int32
	applied    map[string]uint64 // "topic/partition" -> source
	appended   map[string][]segment.SourcedBatch
	delivered  uint64
}

func key(topic string, p int32) string { return topic + "/" + string(rune('0'+p)) }

func (f *fakeLog) Partitions(_ context.Context, topic string) (int32, error) {
	return f.partitions[topic], nil
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
	p := New(nil, log, nil, slog.Default())
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
	p := New(nil, log, nil, slog.Default())
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
