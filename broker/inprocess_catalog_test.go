package broker

import (
	"context"
	"os"
	"strings"
	"testing"
)

// A reload opens the partitions of every topic at once (maxParallelOpens
// at a time) and still publishes each topic with its partitions in index
// order. A topic one of whose logs cannot be opened is kept out, every
// other topic is published, and the logs it did open are closed; once the
// obstacle is gone the next reload opens it, and partitions added later go
// after the ones already open.
func TestReloadOpensInParallel(t *testing.T) {
	tb := startTestBroker(t)
	ctx := context.Background()
	const n = 3 * maxParallelOpens
	in := tb.data.PartitionDir("blocked", 7)
	if err := os.WriteFile(in, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"open", "blocked"} {
		if err := tb.meta.CreateTopic(ctx, name, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	err := tb.catalog.reload(ctx)
	if err == nil || !strings.Contains(err.Error(), "blocked-7") {
		t.Fatalf("reload with blocked-7 in the way: %v", err)
	}
	if tb.catalog.topicByName("blocked") != nil {
		t.Fatal("topic blocked published without its partition 7")
	}
	checkParts := func(name string, want int) []*partition {
		t.Helper()
		top := tb.catalog.topicByName(name)
		if top == nil {
			t.Fatalf("topic %s not published", name)
		}
		if len(top.parts) != want {
			t.Fatalf("topic %s has %d partitions, want %d", name, len(top.parts), want)
		}
		for i, p := range top.parts {
			if p.index != int32(i) || p.closed {
				t.Fatalf("topic %s: partition %d is index %d (closed %v)", name, i, p.index, p.closed)
			}
		}
		return top.parts
	}
	before := checkParts("open", n)

	if err := os.Remove(in); err != nil {
		t.Fatal(err)
	}
	if err := tb.catalog.reload(ctx); err != nil {
		t.Fatal(err)
	}
	checkParts("blocked", n)

	if err := tb.meta.CreatePartitions(ctx, "open", 2*n); err != nil {
		t.Fatal(err)
	}
	if err := tb.catalog.reload(ctx); err != nil {
		t.Fatal(err)
	}
	after := checkParts("open", 2*n)
	for i := range before {
		if after[i] != before[i] {
			t.Fatalf("partition %d of open was opened again", i)
		}
	}
}
