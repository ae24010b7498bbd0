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

	"github.com/kafgres/kafgres/tests/harness"
)

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
	// that does not produce, and does not answer kadm's Metadata from
	// what it cached at its start, before the drop (MetadataMinAge, 5 s by
	// default).
	cl.Close()
	if cl, err = kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.MetadataMinAge(10*time.Millisecond)); err != nil {
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
