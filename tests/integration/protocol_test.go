package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestFetchLongPollWokenByAppend: a fetch at the log end with a long
// MaxWait returns as soon as a record is produced, not at the deadline.
func TestFetchLongPollWokenByAppend(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "poll", 1)
	r := newRaw(t, c.Addr)

	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 10_000, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "poll", r.topicID("poll") // kgo sends Fetch v13+: ids
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	pcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("poll"))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	produced := make(chan error, 1)
	go func() {
		// The delay is what is measured: the fetch must not return
		// before the append (took >= 400ms below) but soon after it.
		time.Sleep(500 * time.Millisecond)
		produced <- pcl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("wake")}).FirstErr()
	}()
	start := time.Now()
	resp, err := req.RequestWith(context.Background(), r.cl)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch returned error %d with %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if took < 400*time.Millisecond || took > 5*time.Second {
		t.Fatalf("long poll returned after %v; want shortly after the 500ms append", took)
	}

	// MaxWait with nothing to return: the deadline is honoured.
	req.MaxWaitMillis = 300
	req.Topics[0].Partitions[0].FetchOffset = 1
	start = time.Now()
	if _, err := req.RequestWith(context.Background(), r.cl); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("empty fetch returned after %v, before MaxWait", took)
	}

	// Past the log end: OFFSET_OUT_OF_RANGE.
	req.Topics[0].Partitions[0].FetchOffset = 99
	resp, _ = req.RequestWith(context.Background(), r.cl)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past end: code %d", code)
	}
}

// TestListOffsets: earliest, latest, by timestamp and max timestamp through
// the admin client.
func TestListOffsets(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "times", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.DefaultProduceTopic("times"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	base := time.UnixMilli(1_700_000_000_000)
	stamps := []time.Duration{0, 10, 5, 30, 20} // ms after base; 30 is the max
	for _, d := range stamps {
		rec := &kgo.Record{Value: []byte("x"), Timestamp: base.Add(d * time.Millisecond)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	check := func(name string, got kadm.ListedOffsets, want int64) {
		t.Helper()
		if err := got.Error(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		o, _ := got.Lookup("times", 0)
		if o.Offset != want {
			t.Fatalf("%s: offset %d, want %d", name, o.Offset, want)
		}
	}
	start, err := adm.ListStartOffsets(ctx, "times")
	check("earliest", start, 0)
	end, err := adm.ListEndOffsets(ctx, "times")
	check("latest", end, 5)
	at, err := adm.ListOffsetsAfterMilli(ctx, base.Add(6*time.Millisecond).UnixMilli(), "times")
	check("first at or after +6ms", at, 1)
	at, err = adm.ListOffsetsAfterMilli(ctx, base.Add(25*time.Millisecond).UnixMilli(), "times")
	check("first at or after +25ms", at, 3)
	at, err = adm.ListOffsetsAfterMilli(ctx, base.Add(time.Hour).UnixMilli(), "times")
	check("after every record", at, 5) // kadm maps "none" to the end offset
	_ = err

	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "times"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -3 // max timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.Offset != 3 || p.Timestamp != base.Add(30*time.Millisecond).UnixMilli() {
		t.Fatalf("max timestamp: offset %d ts %d", p.Offset, p.Timestamp)
	}
}

// TestAutoCreateAndSQLDrop: Metadata auto-creates with the default partition
// count; a topic dropped in SQL disappears from the broker and its log
// directory is removed; with auto-create off an unknown topic is an error.
func TestAutoCreateAndSQLDrop(t *testing.T) {
	c := harness.Start(t, "kafgres.default_partitions = 4")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cl.Close() }()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	began := time.Now()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "auto", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to auto-created topic: %v", err)
	}
	md, err := adm.Metadata(ctx, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(md.Topics["auto"].Partitions); n != 4 {
		t.Fatalf("auto-created topic has %d partitions, want kafgres.default_partitions = 4", n)
	}
	// A producing client would re-create the topic on its next metadata
	// refresh after the drop, as it would against Kafka; watch with one
	// that does not produce.
	cl.Close()
	if cl, err = kgo.NewClient(kgo.SeedBrokers(c.Addr)); err != nil {
		t.Fatal(err)
	}
	adm = kadm.NewClient(cl)

	t.Logf("auto-created after %v", time.Since(began))
	c.Exec(t, "SELECT kafgres_drop_topic('auto')")
	dropped := time.Now()
	harness.Eventually(t, 5*time.Second, func() error {
		md, err = adm.Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := md.Topics["auto"]; ok {
			return errors.New("dropped topic still listed by the broker")
		}
		return nil
	})
	// The catalog forgets the topic first, then closes and deletes its
	// logs, so the directories go a moment after the metadata: within the
	// same 5 s of the drop.
	harness.Eventually(t, time.Until(dropped.Add(5*time.Second)), func() error {
		for p := 0; p < 4; p++ {
			dir := filepath.Join(c.DataDir(), fmt.Sprintf("auto-%d", p))
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				return fmt.Errorf("log directory %s of the dropped topic still there (%v)", dir, err)
			}
		}
		return nil
	})
	t.Logf("drop seen after %v", time.Since(dropped))

	off := harness.Start(t, "kafgres.auto_create_topics = off")
	cl2, err := kgo.NewClient(kgo.SeedBrokers(off.Addr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	md, err = kadm.NewClient(cl2).Metadata(ctx, "nothere")
	if err != nil {
		t.Fatal(err)
	}
	if err := md.Topics["nothere"].Err; !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic with auto-create off: %v", err)
	}
}

// TestMetadataAuthorizedOperations: asked for (v8+), a topic's authorized
// operations are every topic operation, as Kafka without an authorizer
// answers; kafka-python's describe_topics fails on the "not provided" value.
func TestMetadataAuthorizedOperations(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "ops", 1)
	r := newRaw(t, c.Addr)
	for _, asked := range []bool{true, false} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 8
		req.IncludeTopicAuthorizedOperations = asked
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("ops")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), r.cl)
		if err != nil {
			t.Fatal(err)
		}
		want := int32(-2147483648)
		if asked {
			want = 3576 // READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
		}
		if got := resp.Topics[0].AuthorizedOperations; got != want {
			t.Fatalf("asked=%v: authorized operations %d, want %d", asked, got, want)
		}
	}
}

// TestMetadataByTopicIDWithEmptyName: the Java Admin's describeTopics by
// id sends each id with Name "" (the field's default), not null. Kafka
// looks such topics up by id; answering for the name "" instead leaves a
// zero id in the response, which the Java client rejects.
func TestMetadataByTopicIDWithEmptyName(t *testing.T) {
	c := harness.Start(t)
	c.CreateTopic(t, "byid", 2)
	r := newRaw(t, c.Addr)
	id := r.topicID("byid")
	unknown := [16]byte{1, 2, 3}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, want := range [][16]byte{id, unknown} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic, rt.TopicID = kmsg.StringPtr(""), want
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(context.Background(), r.cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics in the response, want 2", len(resp.Topics))
	}
	known, missing := resp.Topics[0], resp.Topics[1]
	if known.ErrorCode != 0 || known.TopicID != id || known.Topic == nil || *known.Topic != "byid" || len(known.Partitions) != 2 {
		t.Fatalf("by id: error %d, id %x, name %v, %d partitions; want byid with 2 partitions",
			known.ErrorCode, known.TopicID, known.Topic, len(known.Partitions))
	}
	if missing.ErrorCode != kerr.UnknownTopicID.Code || missing.TopicID != unknown {
		t.Fatalf("unknown id: error %d, id %x; want UNKNOWN_TOPIC_ID for %x", missing.ErrorCode, missing.TopicID, unknown)
	}
}
