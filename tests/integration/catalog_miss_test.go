package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestUnknownTopicLookupsBounded: a client asking again and again for a
// topic that does not exist is answered from the broker's catalog, with a
// reload from Postgres now and then (every 100 ms at most for one name),
// not a query per request; a topic created in SQL is still found at once.
func TestUnknownTopicLookupsBounded(t *testing.T) {
	c := harness.Start(t)
	// Produce v12: the last version that names topics (v13 gives ids)
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(0, 12)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := ctxT(t)
	conn := c.Conn(t)
	// Every reload reads kafgres.partition. A backend's statistics reach
	// the view when it ends (or some seconds later): end the broker's
	// connections, which its pool opens again.
	scans := func() int64 {
		t.Helper()
		if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid, 10000)
			FROM pg_stat_activity WHERE application_name = 'kafgres' AND pid <> pg_backend_pid()`); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := conn.QueryRow(context.Background(), `SELECT seq_scan + coalesce(idx_scan, 0)
			FROM pg_stat_user_tables WHERE relid = 'kafgres.partition'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := scans()
	const requests = 300
	start := time.Now()
	for i := 0; i < requests; i++ {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = 1
		req.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "no-such-topic"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch(-1, -1, -1, 1, "v")
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("request %d: error %v, want UNKNOWN_TOPIC_OR_PARTITION", i, kerr.ErrorForCode(code))
		}
	}
	elapsed := time.Since(start)
	reloads := scans() - before
	if limit := int64(elapsed/(100*time.Millisecond)) + 3; reloads > limit {
		t.Fatalf("%d produce requests for an unknown topic in %v read the catalog %d times, want at most %d", requests, elapsed, reloads, limit)
	}
	t.Logf("%d requests in %v: %d catalog reads", requests, elapsed, reloads)

	// created in SQL, then asked for at once: the first miss of a name
	// reloads, so no notification needs to have arrived
	c.Exec(t, `SELECT kafgres_create_topic('made-in-sql', 1)`)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("made-in-sql")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("topic created in SQL: metadata error %v, %d partitions", kerr.ErrorForCode(code), len(resp.Topics[0].Partitions))
	}
	produceAll(t, c.Addr, "made-in-sql", 3)
}

// TestCatalogAfterTerminatedConnections: when the broker's connections to
// Postgres have been ended under it (pg_terminate_backend, a restart), a
// lookup that reloads on a miss still finds a topic created a moment ago:
// the reload retries on a fresh connection instead of failing on the
// pool's dead ones.
func TestCatalogAfterTerminatedConnections(t *testing.T) {
	c := harness.Start(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := ctxT(t)
	conn := c.Conn(t)
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("after-terminate-%d", i)
		if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid, 10000)
			FROM pg_stat_activity WHERE application_name = 'kafgres' AND pid <> pg_backend_pid()`); err != nil {
			t.Fatal(err)
		}
		c.Exec(t, `SELECT kafgres_create_topic($1, 1)`, name)
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].ErrorCode; code != 0 {
			t.Fatalf("%s, created right after the broker's connections were ended: %v", name, kerr.ErrorForCode(code))
		}
	}
}
