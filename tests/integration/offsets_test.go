package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

const groupTool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

// consumeAsGroup reads n records of topic in group and commits them.
func consumeAsGroup(t *testing.T, addr, group, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s read %d of %d", group, got, n)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func committedSum(t *testing.T, c *harness.Cluster, group string) (offsets, lag int64) {
	t.Helper()
	err := c.Conn(t).QueryRow(context.Background(),
		`SELECT coalesce(sum(committed_offset), 0), coalesce(sum(lag), 0) FROM kafgres.consumer_lag WHERE group_id = $1`, group).Scan(&offsets, &lag)
	if err != nil {
		t.Fatal(err)
	}
	return offsets, lag
}

// TestCommittedOffsetsAndGroupTool: commits land in kafgres.consumer_lag,
// survive a broker kill and a Postgres restart, and kafka-consumer-groups.sh
// lists, describes, resets and deletes them.
func TestCommittedOffsetsAndGroupTool(t *testing.T) {
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	cp := harness.KafkaClasspath(t)
	c.CreateTopic(t, "cg", 2)
	produceAll(t, c.Addr, "cg", 10)
	consumeAsGroup(t, c.Addr, "g1", "cg", 10)
	harness.Eventually(t, 5*time.Second, func() error {
		if off, lag := committedSum(t, c, "g1"); off != 10 || lag != 0 {
			return fmt.Errorf("consumer_lag: committed %d lag %d, want 10 and 0", off, lag)
		}
		return nil
	})

	tool := func(args ...string) string {
		t.Helper()
		out, err := harness.KafkaTool(t, cp, groupTool, append([]string{"--bootstrap-server", c.Addr}, args...)...)
		if err != nil {
			t.Fatalf("kafka-consumer-groups %v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := tool("--list"); !strings.Contains(out, "g1") {
		t.Fatalf("--list:\n%s", out)
	}
	out := tool("--describe", "--group", "g1")
	if !strings.Contains(out, "cg") || strings.Count(out, "\n") < 3 {
		t.Fatalf("--describe:\n%s", out)
	}
	tool("--reset-offsets", "--group", "g1", "--topic", "cg", "--to-earliest", "--execute")
	if off, lag := committedSum(t, c, "g1"); off != 0 || lag != 10 {
		t.Fatalf("after --to-earliest: committed %d lag %d", off, lag)
	}
	tool("--reset-offsets", "--group", "g1", "--topic", "cg", "--shift-by", "2", "--execute")
	if off, _ := committedSum(t, c, "g1"); off != 4 {
		t.Fatalf("after --shift-by 2: committed sum %d, want 4", off)
	}

	old := c.KillBroker(t)
	c.WaitBroker(t, old, 20*time.Second)
	c.StopPG(t, "fast")
	c.StartPG(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	fetched, err := adm.FetchOffsets(context.Background(), "g1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int32{0, 1} {
		if o, ok := fetched.Lookup("cg", p); !ok || o.At != 2 {
			t.Fatalf("after restarts, partition %d committed %+v, want 2", p, o)
		}
	}
	if out := tool("--list"); !strings.Contains(out, "g1") {
		t.Fatalf("group with offsets not listed after restart:\n%s", out)
	}

	tool("--delete", "--group", "g1")
	if off, _ := committedSum(t, c, "g1"); off != 0 {
		t.Fatal("offsets remain after --delete")
	}
}

// TestOffsetDeleteRefusesSubscribedTopic: OffsetDelete on a topic a live
// member subscribes to is GROUP_SUBSCRIBED_TO_TOPIC; once the group is
// empty the offsets can be deleted.
func TestOffsetDeleteRefusesSubscribedTopic(t *testing.T) {
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	c.CreateTopic(t, "od", 1)
	produceAll(t, c.Addr, "od", 3)
	ctx := context.Background()

	member, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ConsumerGroup("g2"), kgo.ConsumeTopics("od"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 3; {
		got += member.PollFetches(ctx).NumRecords()
	}
	if err := member.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cl, _ := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	set := kadm.TopicsSet{}
	set.Add("od", 0)
	res, err := adm.DeleteOffsets(ctx, "g2", set)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); !errors.Is(err, kerr.GroupSubscribedToTopic) {
		t.Fatalf("delete while subscribed: %v", err)
	}
	member.Close() // leaves the group
	res, err = adm.DeleteOffsets(ctx, "g2", set)
	if err != nil || res.Error() != nil {
		t.Fatalf("delete once empty: %v %v", err, res.Error())
	}
	if off, _ := committedSum(t, c, "g2"); off != 0 {
		t.Fatal("offsets remain after OffsetDelete")
	}
}
