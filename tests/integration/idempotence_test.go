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

func (r *rawClient) initProducerID() int64 {
	r.t.Helper()
	resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(context.Background(), r.cl)
	if err != nil || resp.ErrorCode != 0 {
		r.t.Fatalf("InitProducerId: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID
}
