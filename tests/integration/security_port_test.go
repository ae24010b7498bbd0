package integration

// Limits on client input at the Kafka port (issue #10, item 7; items 5, 6
// and 8 are tested in-process in broker/inprocess_limits_test.go and
// broker/inprocess_produce_test.go): connections are made to a real
// cluster. Settings the supervisor does not pass (a lower descriptor limit)
// come from a wrapper script run as the broker.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafgres/kafgres/tests/harness"
	"github.com/kafgres/kafgres/tests/hostile"
)

// brokerWrapper makes the cluster started next run the broker under test
// through a shell script: shell lines first (a ulimit), then the broker
// with the supervisor's flags and extra ones appended.
func brokerWrapper(t *testing.T, pre string, flags ...string) {
	t.Helper()
	real := os.Getenv("KAFGRES_BROKER_PATH")
	if real == "" {
		out, err := exec.Command("pg_config", "--bindir").Output()
		if err != nil {
			t.Fatalf("pg_config --bindir: %v", err)
		}
		real = filepath.Join(strings.TrimSpace(string(out)), "kafgres-broker")
	}
	// Not t.TempDir(): the postgres OS user must reach the script.
	dir, err := os.MkdirTemp("", "kafgres-wrap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\n%s\nexec '%s' \"$@\" %s\n", pre, real, strings.Join(flags, " "))
	path := filepath.Join(dir, "kafgres-broker")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KAFGRES_BROKER_PATH", path)
}

// rawProducer sends hand-built Produce requests; maxVersion pins the
// Produce version (12 addresses topics by name).
func rawProducer(t *testing.T, addr string, maxVersion int16) *kgo.Client {
	t.Helper()
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(0, maxVersion)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceRaw(t *testing.T, cl *kgo.Client, topic string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := hostile.ProduceRequest(topic, records)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.Topics[0].Partitions[0]
}

// rec is one record of a hand-built batch.
type rec struct {
	offsetDelta int32
	tsDelta     int64
	key, value  []byte
}

func encodeRecs(recs []rec) []byte {
	var out []byte
	for _, r := range recs {
		kr := kmsg.Record{TimestampDelta64: r.tsDelta, OffsetDelta: r.offsetDelta, Key: r.key, Value: r.value}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // the length encodes in one byte below 64
		out = kr.AppendTo(out)
	}
	return out
}

// batchSpec describes a hand-built v2 batch; zero fields take a
// producer's usual values.
type batchSpec struct {
	baseOffset      int64
	attributes      int16
	lastOffsetDelta int32 // -1: from numRecords
	numRecords      int32
	firstTimestamp  int64
	maxTimestamp    int64
	producerID      int64
	baseSequence    int32
	records         []byte // the records section as sent (compressed or not)
}

func plainSpec(recs []rec) batchSpec {
	now := time.Now().UnixMilli()
	return batchSpec{lastOffsetDelta: int32(len(recs) - 1), numRecords: int32(len(recs)),
		firstTimestamp: now, maxTimestamp: now, producerID: -1, baseSequence: -1, records: encodeRecs(recs)}
}

func (s batchSpec) build() []byte {
	b := kmsg.RecordBatch{
		FirstOffset: s.baseOffset, PartitionLeaderEpoch: -1, Magic: 2, Attributes: s.attributes,
		LastOffsetDelta: s.lastOffsetDelta, FirstTimestamp: s.firstTimestamp, MaxTimestamp: s.maxTimestamp,
		ProducerID: s.producerID, ProducerEpoch: -1, FirstSequence: s.baseSequence,
		NumRecords: s.numRecords, Records: s.records,
	}
	if s.producerID >= 0 {
		b.ProducerEpoch = 0
	}
	return hostile.Recrc(b.AppendTo(nil))
}

// TestAcceptSurvivesDescriptorExhaustion (finding 7): with a low descriptor
// limit, connections beyond it make Accept fail with EMFILE. The broker
// logs it, keeps serving the clients it has, and accepts again once
// descriptors are free; it neither exits nor restarts.
func TestAcceptSurvivesDescriptorExhaustion(t *testing.T) {
	brokerWrapper(t, "ulimit -n 128")
	c := harness.Start(t)
	c.CreateTopic(t, "fd", 1)
	pid := c.BrokerPID(t)
	cl := rawProducer(t, c.Addr, 12)
	if p := produceRaw(t, cl, "fd", plainSpec([]rec{{value: []byte("0")}}).build()); p.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	var hogs []net.Conn
	defer func() {
		for _, nc := range hogs {
			nc.Close()
		}
	}()
	for i := 0; i < 200; i++ {
		nc, err := net.DialTimeout("tcp", c.Addr, 2*time.Second)
		if err != nil {
			break // the backlog is full
		}
		hogs = append(hogs, nc)
	}
	logPath := filepath.Join(c.Dir, "postgres.log")
	err := harness.Poll(20*time.Second, func() error {
		if b, _ := os.ReadFile(logPath); !bytes.Contains(b, []byte("accept failed; retrying")) {
			return fmt.Errorf("no accept failure logged with %d connections", len(hogs))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail())
	}
	// The client connected before keeps being served meanwhile.
	if p := produceRaw(t, cl, "fd", plainSpec([]rec{{value: []byte("1")}}).build()); p.ErrorCode != 0 {
		t.Fatalf("produce on an established connection: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	for _, nc := range hogs {
		nc.Close()
	}
	hogs = nil

	fresh := rawProducer(t, c.Addr, 12)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = harness.Poll(30*time.Second, func() error {
		_, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, fresh)
		return err
	})
	if err != nil {
		t.Fatalf("no new connection served after the descriptors were freed: %v\n%s", err, c.LogTail())
	}
	if p := produceRaw(t, fresh, "fd", plainSpec([]rec{{value: []byte("2")}}).build()); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("produce on a new connection: %v offset %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	if now := c.BrokerPID(t); now != pid {
		t.Fatalf("broker %d was replaced by %d", pid, now)
	}
	if err := exec.Command("kill", "-0", strconv.Itoa(pid)).Run(); err != nil {
		t.Fatalf("broker %d gone: %v", pid, err)
	}
}
