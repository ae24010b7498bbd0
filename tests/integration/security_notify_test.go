package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// TestSecurityNotifyStorm: any role that may log in can NOTIFY kafgres's
// channels (issue #42, item 10), and each notification used to reload a
// whole cache (2,000 of them, 2.7 s of the broker's CPU). A role with no
// privileges sends 2,000 notifications on each channel; meanwhile and
// after, a client's Metadata request is answered within a second, and
// the broker's CPU for the storm stays well under a reload per
// notification.
func TestSecurityNotifyStorm(t *testing.T) {
	c := harness.Start(t)
	conn := c.Conn(t)
	ctx := context.Background()
	c.CreateTopic(t, "storm", 1)
	// a catalog of some size: a reload reads all of it
	mustExec(t, conn, `SELECT kafgres_create_topic('storm-' || g, 4) FROM generate_series(1, 300) AS g`,
		`CREATE ROLE nobody LOGIN`)
	nobody := connAs(t, c, "nobody")

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	served := func() time.Duration {
		t.Helper()
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("storm")
		req.Topics = append(req.Topics, topic)
		resp, err := req.RequestWith(rctx, cl)
		if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("metadata during the storm: %v %+v", err, resp)
		}
		return time.Since(start)
	}
	served()

	// the 300 topics' partitions are opened first (a second or two of
	// CPU): measure from when the broker is idle
	pid := c.BrokerPID(t)
	cpuBefore := brokerCPU(t, pid)
	for settle := time.Now().Add(60 * time.Second); ; {
		time.Sleep(500 * time.Millisecond)
		now := brokerCPU(t, pid)
		idle := now-cpuBefore < 50*time.Millisecond
		cpuBefore = now
		if idle {
			break
		}
		if time.Now().After(settle) {
			t.Fatal("the broker did not settle after creating the topics")
		}
	}
	storm := make(chan error, 1)
	go func() {
		// 2,000 transactions of one notification on each channel
		for _, ch := range []string{"kafgres_topics", "kafgres_acls", "kafgres_mappings"} {
			for i := range 2000 {
				if _, err := nobody.Exec(ctx, `SELECT pg_notify($1, $2)`, ch, strconv.Itoa(i)); err != nil {
					storm <- err
					return
				}
			}
		}
		storm <- nil
	}()
	worst := time.Duration(0)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		worst = max(worst, served())
		time.Sleep(50 * time.Millisecond)
	}
	if err := <-storm; err != nil {
		t.Fatal(err)
	}
	worst = max(worst, served())
	time.Sleep(time.Second) // the last coalesced reloads
	cpu := brokerCPU(t, pid) - cpuBefore
	t.Logf("6,000 notifications: slowest Metadata %v, broker CPU %v", worst, cpu)
	if worst > time.Second {
		t.Errorf("a Metadata request took %v during the storm", worst)
	}
	// a reload per notification was 2.7 s for 2,000 of one channel
	if cpu > 2*time.Second {
		t.Errorf("the storm cost the broker %v of CPU", cpu)
	}
}

// brokerCPU is the CPU time process pid has used (user and system), from
// /proc/<pid>/stat, in clock ticks of 10 ms.
func brokerCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// the command may hold spaces: the fields after it follow its ")"
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
