package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

// archiveStatus is a row of kafgres_archive_status().
type archiveStatus struct {
	archived, failed, backlog int64
	last, failure             string
}

func readArchiveStatus(t *testing.T, conn *pgx.Conn, topic string) (archiveStatus, bool) {
	t.Helper()
	var s archiveStatus
	var last, failure *string
	err := conn.QueryRow(context.Background(),
		`SELECT archived_offset, failed_count, backlog_segments, last_archived_segment, last_failure
		   FROM kafgres_archive_status() WHERE topic = $1 AND partition = 0`, topic).
		Scan(&s.archived, &s.failed, &s.backlog, &last, &failure)
	if err != nil {
		return s, false
	}
	if last != nil {
		s.last = *last
	}
	if failure != nil {
		s.failure = *failure
	}
	return s, true
}

// segmentBases lists the base offsets of dir's .log files, ascending.
func segmentBases(t *testing.T, dir string) []int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".log"); ok && len(n) == 20 {
			if b, err := strconv.ParseInt(n, 10, 64); err == nil {
				out = append(out, b)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// produceArchived produces n 1 KiB records to partition 0 of a new topic
// with 1 MiB segments and returns their values by offset.
func produceArchived(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, n int, configs map[string]*string) map[int64][]byte {
	t.Helper()
	sp := func(s string) *string { return &s }
	cfg := map[string]*string{"segment.bytes": sp("1048576")}
	for k, v := range configs {
		cfg[k] = v
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	acked := map[int64][]byte{}
	for i := 0; i < n; i += 100 {
		var recs []*kgo.Record
		for j := i; j < min(i+100, n); j++ {
			v := make([]byte, 1024)
			copy(v, fmt.Sprintf("record %d", j))
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(j)), Value: v})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			acked[r.Offset] = r.Value
		}
	}
	return acked
}

func brokerPath(t *testing.T) string {
	if p := os.Getenv("KAFGRES_BROKER_PATH"); p != "" {
		return p
	}
	out, err := exec.Command("pg_config", "--bindir").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "kafgres-broker")
}

// TestSegmentArchiveRestore (issue #15): with kafgres.segment_archive_command
// set, sealed segments stay while the command fails (the archive
// directory is missing: failures and backlog show in
// kafgres_archive_status(), retention deletes nothing), are archived once
// it works, and only then does retention reclaim them. Then the
// partition's directory is deleted with Postgres stopped, `kafgres-broker
// restore` rebuilds it from the archive, and a franz-go consumer reads
// every archived record back at its acknowledged offset, including those
// retention had deleted from the live log.
func TestSegmentArchiveRestore(t *testing.T) {
	const topic = "archived"
	var archive string
	c := harness.StartWith(t, func(c *harness.Cluster) []string {
		archive = filepath.Join(c.Dir, "archive")
		return []string{
			fmt.Sprintf(`kafgres.segment_archive_command = 'cp %%p %s/%%f && echo %%f >> %s/list'`, archive, archive),
			"kafgres.log_retention_check_interval = 200",
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sp := func(s string) *string { return &s }
	acked := produceArchived(t, ctx, cl, topic, 3500, map[string]*string{"retention.ms": sp("1000")})
	dir := filepath.Join(c.DataDir(), topic+"-0")
	conn := c.Conn(t)

	// The command fails: the archive directory does not exist.
	harness.Eventually(t, 30*time.Second, func() error {
		s, ok := readArchiveStatus(t, conn, topic)
		if !ok || s.failed == 0 || s.backlog < 3 || !strings.Contains(s.failure, "archive") {
			return fmt.Errorf("status %+v, %v", s, ok)
		}
		return nil
	})
	// A sleep, because this checks that something does not happen:
	// retention (every 200 ms, retention.ms 1 s) deletes no unarchived
	// segment.
	time.Sleep(2 * time.Second)
	if b := segmentBases(t, dir); len(b) < 4 || b[0] != 0 {
		t.Fatalf("segments %v: retention deleted unarchived segments", b)
	}
	if !strings.Contains(c.LogTail(), "segment archive command failed") {
		t.Fatalf("failure not logged:\n%s", c.LogTail())
	}

	if err := os.Mkdir(archive, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(archive, 0o777); err != nil {
		t.Fatal(err)
	}
	bases := segmentBases(t, dir)
	activeBase := bases[len(bases)-1]
	harness.Eventually(t, 60*time.Second, func() error {
		s, _ := readArchiveStatus(t, conn, topic)
		if s.archived != activeBase || s.backlog != 0 {
			return fmt.Errorf("status %+v, want archived %d", s, activeBase)
		}
		return nil
	})
	// Now retention reclaims them.
	harness.Eventually(t, 30*time.Second, func() error {
		if b := segmentBases(t, dir); len(b) != 1 {
			return fmt.Errorf("segments %v", b)
		}
		return nil
	})
	list, err := os.ReadFile(filepath.Join(archive, "list"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, n := range strings.Fields(string(list)) {
		if seen[n] {
			t.Fatalf("%s archived twice", n)
		}
		seen[n] = true
	}
	if len(seen) != 4*(len(bases)-1) {
		t.Fatalf("archived %d files for %d sealed segments: %v", len(seen), len(bases)-1, seen)
	}

	var uuid string
	if err := conn.QueryRow(ctx, `SELECT topic_uuid::text FROM kafgres.topic WHERE name = $1`, topic).Scan(&uuid); err != nil {
		t.Fatal(err)
	}
	// The restored records are older than retention.ms (1 s): retention
	// would delete them again at its first check after the restart, as
	// Kafka's would, before they can be read back. Whoever restores keeps
	// them by lifting retention first.
	if rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: sp("-1")}}, topic); err != nil || rs[0].Err != nil {
		t.Fatalf("lift retention: %v %v", err, rs)
	}
	cl.Close()
	c.StopPG(t, "fast")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	args := []string{brokerPath(t), "restore", "--archive", archive, "--data-dir", c.DataDir(), "--topic", topic, "--partition", "0", "--topic-uuid", uuid}
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	t.Logf("restore: %s", out)
	c.StartPG(t)
	conn = c.Conn(t)

	cl2, err := kgo.NewClient(kgo.SeedBrokers(c.Addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	next := int64(0)
	for next < activeBase {
		fs := cl2.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed up to %d of %d: %v\n--- kafgres log ---\n%s", next, activeBase, ctx.Err(), c.LogTail())
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch: %v", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("record at %d, want %d", r.Offset, next)
			}
			if string(r.Value) != string(acked[r.Offset]) {
				t.Fatalf("record at %d: %.20q, acknowledged %.20q", r.Offset, r.Value, acked[r.Offset])
			}
			next++
		})
	}
	// The restored segments are not archived again.
	harness.Eventually(t, 30*time.Second, func() error {
		s, ok := readArchiveStatus(t, conn, topic)
		if !ok || s.archived != activeBase || s.backlog != 0 {
			return fmt.Errorf("status after restore %+v, %v", s, ok)
		}
		return nil
	})
	if after, _ := os.ReadFile(filepath.Join(archive, "list")); string(after) != string(list) {
		t.Fatalf("archived again after restore:\n%s", after[len(list):])
	}
}

// TestSegmentArchiveKill (issue #15): the broker is killed with SIGKILL
// while its archive command runs; after the supervisor restarts it, every
// sealed segment is archived, equal to the log's files, and only the
// segment in progress at the kill may have been given to the command a
// second time (Postgres's "once": a command may run again for a file
// whose success was not yet recorded; docs/operations.md).
func TestSegmentArchiveKill(t *testing.T) {
	const topic = "archived-kill"
	var archive string
	c := harness.StartWith(t, func(c *harness.Cluster) []string {
		archive = filepath.Join(c.Dir, "archive")
		if err := os.Mkdir(archive, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(archive, 0o777); err != nil {
			t.Fatal(err)
		}
		// Slow, and idempotent as Postgres asks: a copy renamed into place.
		return []string{fmt.Sprintf(`kafgres.segment_archive_command = 'sleep 0.1; cp %%p %s/%%f.tmp && mv %s/%%f.tmp %s/%%f && echo %%f >> %s/list'`,
			archive, archive, archive, archive)}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	produceArchived(t, ctx, cl, topic, 6500, nil)
	dir := filepath.Join(c.DataDir(), topic+"-0")
	conn := c.Conn(t)
	lines := func() []string {
		b, err := os.ReadFile(filepath.Join(archive, "list"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return strings.Fields(string(b))
	}
	harness.Eventually(t, 30*time.Second, func() error {
		if n := len(lines()); n < 6 {
			return fmt.Errorf("%d files archived", n)
		}
		return nil
	})
	old := c.KillBroker(t)
	c.WaitBroker(t, old, 30*time.Second)
	bases := segmentBases(t, dir)
	activeBase := bases[len(bases)-1]
	harness.Eventually(t, 60*time.Second, func() error {
		s, _ := readArchiveStatus(t, conn, topic)
		if s.archived != activeBase || s.backlog != 0 {
			return fmt.Errorf("status %+v, want archived %d", s, activeBase)
		}
		return nil
	})
	count := map[string]int{}
	for _, n := range lines() {
		count[n]++
	}
	twice := map[string]bool{}
	for _, base := range bases[:len(bases)-1] {
		for _, ext := range []string{".index", ".timeindex", ".txnindex", ".log"} {
			name := fmt.Sprintf("%s-0-%020d%s", topic, base, ext)
			switch count[name] {
			case 1:
			case 2:
				twice[fmt.Sprint(base)] = true
			default:
				t.Errorf("%s archived %d times", name, count[name])
			}
			if ext != ".log" {
				continue
			}
			want, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%020d.log", base)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(archive, name))
			if err != nil || string(got) != string(want) {
				t.Errorf("%s: archived copy differs (%d bytes, want %d), %v", name, len(got), len(want), err)
			}
		}
	}
	if len(twice) > 1 {
		t.Fatalf("segments %v given to the command twice; at most the one in progress may be", twice)
	}
	if len(count) != 4*(len(bases)-1) {
		t.Fatalf("archived %d distinct files for %d sealed segments", len(count), len(bases)-1)
	}
}
