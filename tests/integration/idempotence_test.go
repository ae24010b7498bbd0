package integration

import (
	"context"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafgres/kafgres/tests/harness"
	"github.com/kafgres/kafgres/tests/hostile"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batch encodes an uncompressed v2 batch of n records as a producer would.
func batch(pid int64, epoch int16, seq int32, n int, value string) []byte {
	now := time.Now().UnixMilli()
	var records []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(value)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // a zero length encodes in one byte
		records = r.AppendTo(records)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(n), Records: records,
	}
	out := b.AppendTo(nil)
	// Fix up length (bytes after the length field) and CRC (from attributes on).
	be32(out[8:], uint32(len(out)-12))
	be32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

func be32(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v) }

type rawClient struct {
	t  *testing.T
	cl *kgo.Client
}

func newRaw(t *testing.T, addr string) *rawClient {
	// Produce v12 addresses topics by name, which keeps the helpers simple;
	// kgo would otherwise pick v13 (topic ids).
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(0, 12)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &rawClient{t: t, cl: cl}
}

func (r *rawClient) produce(topic string, records []byte) (int16, int64) {
	r.t.Helper()
	req := hostile.ProduceRequest(topic, records)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		r.t.Fatalf("produce: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, p.BaseOffset
}

func (r *rawClient) topicID(topic string) [16]byte {
	r.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), r.cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		r.t.Fatalf("metadata for %s: %v", topic, err)
	}
	return resp.Topics[0].TopicID
}

func (r *rawClient) initProducerID() int64 {
	r.t.Helper()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(context.Background(), r.cl)
	if err != nil || resp.ErrorCode != 0 {
		r.t.Fatalf("InitProducerId: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID
}

func (r *rawClient) logEnd(topic string) int64 {
	r.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), r.cl)
	if err != nil {
		r.t.Fatalf("ListOffsets: %v", err)
	}
	return resp.Topics[0].Partitions[0].Offset
}

func wantProduce(t *testing.T, what string, gotCode int16, gotOff int64, wantErr *kerr.Error, wantOff int64) {
	t.Helper()
	var code int16
	if wantErr != nil {
		code = wantErr.Code
	}
	if gotCode != code || (wantErr == nil && gotOff != wantOff) {
		t.Fatalf("%s: got (%v, offset %d), want (%v, offset %d)", what, kerr.ErrorForCode(gotCode), gotOff, wantErr, wantOff)
	}
}

// TestIdempotentSequenceWindow drives the sequence rules with raw requests,
// including across a kill -9 of the broker (state rebuilt from the log).
func TestIdempotentSequenceWindow(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "seq", 1)
	r := newRaw(t, c.Addr)
	pid := r.initProducerID()

	code, off := r.produce("seq", batch(pid, 0, 0, 3, "a"))
	wantProduce(t, "first batch", code, off, nil, 0)
	code, off = r.produce("seq", batch(pid, 0, 0, 3, "a"))
	wantProduce(t, "retried first batch", code, off, nil, 0)
	code, off = r.produce("seq", batch(pid, 0, 3, 2, "b"))
	wantProduce(t, "second batch", code, off, nil, 3)
	if end := r.logEnd("seq"); end != 5 {
		t.Fatalf("log end %d after a duplicate, want 5", end)
	}
	code, off = r.produce("seq", batch(pid, 0, 9, 1, "gap"))
	wantProduce(t, "sequence gap", code, off, kerr.OutOfOrderSequenceNumber, -1)

	old := c.KillBroker(t)
	c.WaitBroker(t, old, 20*time.Second)
	r = newRaw(t, c.Addr)
	code, off = r.produce("seq", batch(pid, 0, 3, 2, "b"))
	wantProduce(t, "retry after restart", code, off, nil, 3)
	code, off = r.produce("seq", batch(pid, 0, 5, 1, "c"))
	wantProduce(t, "next after restart", code, off, nil, 5)

	code, off = r.produce("seq", batch(pid, 1, 0, 1, "epoch1"))
	wantProduce(t, "epoch bump", code, off, nil, 6)
	code, off = r.produce("seq", batch(pid, 0, 6, 1, "stale"))
	wantProduce(t, "stale epoch", code, off, kerr.InvalidProducerEpoch, -1)
	code, off = r.produce("seq", batch(pid, 2, 5, 1, "bump-not-zero"))
	wantProduce(t, "epoch bump with non-zero sequence", code, off, kerr.OutOfOrderSequenceNumber, -1)
	if end := r.logEnd("seq"); end != 7 {
		t.Fatalf("log end %d, want 7", end)
	}
}

// TestProduceValidation: the errors Kafka gives for bad batches.
func TestProduceValidation(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "val", 1)
	r := newRaw(t, c.Addr)

	bad := batch(-1, -1, -1, 1, "x")
	bad[len(bad)-1] ^= 0xff
	code, off := r.produce("val", bad)
	wantProduce(t, "bad crc", code, off, kerr.CorruptMessage, -1)

	two := append(batch(-1, -1, -1, 1, "x"), batch(-1, -1, -1, 1, "y")...)
	code, off = r.produce("val", two)
	wantProduce(t, "two batches", code, off, kerr.InvalidRecord, -1)

	big := batch(-1, -1, -1, 1, string(make([]byte, 1100000)))
	code, off = r.produce("val", big)
	wantProduce(t, "too large", code, off, kerr.MessageTooLarge, -1)

	code, off = r.produce("nope", batch(-1, -1, -1, 1, "x"))
	wantProduce(t, "unknown topic", code, off, kerr.UnknownTopicOrPartition, -1)

	code, off = r.produce("val", batch(-1, -1, -1, 1, "ok"))
	wantProduce(t, "valid after errors", code, off, nil, 0)
}
