package integration

// Data directory safety (issue #10, item 9): the broker deletes only
// partition directories it created (they carry a marker) and whose topic
// the catalog proves dropped; it does not start while the log is ahead of
// the catalog (a database restored from an older backup); and a new
// partition's directory is durable in its parent before anything appended
// there is acknowledged.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

const markerFile = "kafgres.partition"

// produceN produces n records to topic and waits for every ack.
func produceN(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctxT(t), kgo.StringRecord(fmt.Sprintf("%s-%d", topic, i))).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
}

// logBytes is the size of the record batches in the segment files of a
// partition directory (an active segment's file has zeros written ahead
// while the broker runs, cut when it stops); it fails the test if the
// directory is gone.
func logBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("partition directory: %v", err)
	}
	var n int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			// baseOffset (8 bytes), batchLength (4), then batchLength bytes;
			// a length of zero is the zeros ahead.
			pos := 0
			for pos+12 <= len(b) {
				length := int(binary.BigEndian.Uint32(b[pos+8:]))
				if length == 0 {
					break
				}
				pos += 12 + length
			}
			n += int64(min(pos, len(b)))
		}
	}
	return n
}

// pgctl runs pg_ctl on the cluster as its owner, without waiting for the
// broker (which may refuse to start).
func pgctl(t *testing.T, c *harness.Cluster, args ...string) {
	t.Helper()
	cmd := fmt.Sprintf(`"$(pg_config --bindir)/pg_ctl" -D %q -l %q -w -t 60 %s`,
		filepath.Join(c.Dir, "pgdata"), filepath.Join(c.Dir, "postgres.log"), strings.Join(args, " "))
	run := exec.Command("bash", "-c", cmd)
	if os.Geteuid() == 0 {
		run = exec.Command("runuser", "-u", "postgres", "--", "bash", "-c", "cd / && "+cmd)
	}
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// waitLog waits until the cluster's log contains s.
func waitLog(t *testing.T, c *harness.Cluster, s string, timeout time.Duration) string {
	t.Helper()
	var line string
	err := harness.Poll(timeout, func() error {
		b, _ := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
		i := strings.LastIndex(string(b), s)
		if i < 0 {
			return fmt.Errorf("log has no %q", s)
		}
		line = string(b[i:])
		if j := strings.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v:\n%s", err, c.LogTail())
	}
	return line
}

// ownLike gives paths the owner of ref (the broker's user: the test may
// run as root, the broker as postgres).
func ownLike(t *testing.T, ref string, paths ...string) {
	t.Helper()
	fi, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	for _, p := range paths {
		if err := os.Lchown(p, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDataDirRestoredOlderDatabase: a database restored from a backup
// taken before a topic was created (and before another was dropped and
// recreated) meets the newer log. The broker must keep both logs and not
// start, saying what to do; once the operator moves them aside it starts
// by itself and serves what the catalog knows.
func TestDataDirRestoredOlderDatabase(t *testing.T) {
	// The log lives outside PGDATA, so restoring PGDATA leaves it as it is.
	c := harness.Start(t, "kafgres.data_directory = '../kafgres-log'")
	logDir := filepath.Join(c.Dir, "kafgres-log")
	c.CreateTopic(t, "early", 1)
	c.CreateTopic(t, "swapped", 1)
	produceN(t, c.Addr, "early", 3)
	produceN(t, c.Addr, "swapped", 2)

	// A cold backup of the database.
	c.StopPG(t, "fast")
	pgdata := filepath.Join(c.Dir, "pgdata")
	if out, err := exec.Command("cp", "-a", pgdata, pgdata+".backup").CombinedOutput(); err != nil {
		t.Fatalf("back up: %v\n%s", err, out)
	}
	c.StartPG(t)

	// Life goes on after the backup.
	c.CreateTopic(t, "late", 1)
	produceN(t, c.Addr, "late", 5)
	c.Exec(t, "SELECT kafgres_drop_topic('swapped')")
	c.CreateTopic(t, "swapped", 1)
	produceN(t, c.Addr, "swapped", 4)
	lateDir, swappedDir := filepath.Join(logDir, "late-0"), filepath.Join(logDir, "swapped-0")
	lateBytes, swappedBytes := logBytes(t, lateDir), logBytes(t, swappedDir)

	// The database is restored; the log is not.
	c.StopPG(t, "fast")
	if err := os.RemoveAll(pgdata); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pgdata+".backup", pgdata); err != nil {
		t.Fatal(err)
	}
	pgctl(t, c, "start")

	msg := waitLog(t, c, "not starting: data directory does not match the catalog", 30*time.Second)
	for _, want := range []string{lateDir, swappedDir, "restore the data directory", "move the listed directories"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal does not mention %q:\n%s", want, msg)
		}
	}
	// Waiting for something not to happen: the broker checks the data
	// directory again every 2 s; give it a recheck in which it must keep
	// refusing to start.
	time.Sleep(3 * time.Second)
	if harness.PortOpen(c.Addr) {
		t.Fatal("the broker started although the log is ahead of the catalog")
	}
	if n := logBytes(t, lateDir); n != lateBytes {
		t.Fatalf("late-0 has %d bytes of log, had %d", n, lateBytes)
	}
	if n := logBytes(t, swappedDir); n != swappedBytes {
		t.Fatalf("swapped-0 has %d bytes of log, had %d", n, swappedBytes)
	}

	// The fix the message names: move the logs the catalog does not know
	// out of the data directory. The broker notices by itself.
	aside := filepath.Join(c.Dir, "aside")
	if err := os.Mkdir(aside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{lateDir, swappedDir} {
		if err := os.Rename(d, filepath.Join(aside, filepath.Base(d))); err != nil {
			t.Fatal(err)
		}
	}
	err := harness.Poll(30*time.Second, func() error {
		if !harness.PortOpen(c.Addr) {
			return errors.New("the broker did not start after the conflicting logs were moved aside")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail())
	}
	if got := consumeN(t, c.Addr, "early", 3); len(got) != 3 {
		t.Fatalf("early: %d records", len(got))
	}
	// swapped is the catalog's (older) topic again, with a fresh log.
	produceN(t, c.Addr, "swapped", 1)
	if got := consumeN(t, c.Addr, "swapped", 1); string(got[0].Value) != "swapped-0" || got[0].Offset != 0 {
		t.Fatalf("swapped: %q at %d", got[0].Value, got[0].Offset)
	}
}

// TestDataDirOnlyOwnDirectoriesDeleted: while the broker is down (frozen),
// one topic is dropped and another dropped and recreated; the broker's
// next start removes their logs (the catalog recorded the drops), adopts a
// directory without marker that holds its topic's log (as 0.2.0 made
// them), finishes deletions and creations a crash interrupted, and leaves
// directories it did not create alone.
func TestDataDirOnlyOwnDirectoriesDeleted(t *testing.T) {
	c := harness.Start(t)
	data := c.DataDir()
	for _, tp := range []string{"keep", "gone", "reborn"} {
		c.CreateTopic(t, tp, 1)
		produceN(t, c.Addr, tp, 3)
	}
	for _, tp := range []string{"keep", "gone", "reborn"} {
		if _, err := os.Stat(filepath.Join(data, tp+"-0", markerFile)); err != nil {
			t.Fatalf("new partition directory without marker: %v", err)
		}
	}
	keepBytes := logBytes(t, filepath.Join(data, "keep-0"))

	// Not kafgres's: a directory named like a partition, one looking like
	// another Kafka's log, and one of a name the catalog has.
	foreign := map[string]string{
		"foreign-0": "notes.txt",
		"alien-3":   "00000000000000000000.log",
	}
	for d, f := range foreign {
		if err := os.MkdirAll(filepath.Join(data, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, d, f), []byte("someone else's"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(data, "alien-3", "partition.metadata"), []byte("version: 0\ntopic_id: "+strings.Repeat("ab", 16)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	pid := c.BrokerPID(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c.Exec(t, "SELECT kafgres_drop_topic('gone')")
	c.Exec(t, "SELECT kafgres_drop_topic('reborn')")
	c.CreateTopic(t, "reborn", 1)
	// keep-0 as a 0.2.0 broker left it: no marker.
	if err := os.Remove(filepath.Join(data, "keep-0", markerFile)); err != nil {
		t.Fatal(err)
	}
	// Work a crash interrupted: a deletion (renamed, marker still there)
	// and a creation (marker written, not yet renamed).
	interrupted := []string{"keep-0." + strings.Repeat("0f", 16) + "-delete", "later-0.kafgres-new"}
	for _, d := range interrupted {
		if err := os.MkdirAll(filepath.Join(data, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, d, markerFile), []byte("version: 0\nkafgres_topic_id: 99\ntopic_uuid: "+strings.Repeat("0f", 16)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ownLike(t, data, filepath.Join(data, d), filepath.Join(data, d, markerFile))
	}
	syscall.Kill(pid, syscall.SIGKILL)
	c.WaitBroker(t, pid, 60*time.Second)

	for _, d := range append([]string{"gone-0"}, interrupted...) {
		if _, err := os.Stat(filepath.Join(data, d)); !os.IsNotExist(err) {
			t.Errorf("%s still there after restart (%v)", d, err)
		}
	}
	for d, f := range foreign {
		if b, err := os.ReadFile(filepath.Join(data, d, f)); err != nil || string(b) != "someone else's" {
			t.Errorf("%s/%s was touched: %q, %v", d, f, b, err)
		}
	}
	if n := logBytes(t, filepath.Join(data, "keep-0")); n != keepBytes {
		t.Errorf("keep-0 has %d bytes of log, had %d", n, keepBytes)
	}
	marker, err := os.ReadFile(filepath.Join(data, "keep-0", markerFile))
	if err != nil {
		t.Fatalf("keep-0 not adopted: %v", err)
	}
	var uuid []byte
	if err := c.Conn(t).QueryRow(context.Background(), `SELECT topic_uuid FROM kafgres.topic WHERE name = 'keep'`).Scan(&uuid); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(marker), hex.EncodeToString(uuid)) {
		t.Errorf("keep-0 marker %q does not name the topic's uuid %x", marker, uuid)
	}
	if got := consumeN(t, c.Addr, "keep", 3); len(got) != 3 {
		t.Fatalf("keep: %d records", len(got))
	}
	// reborn is the new topic: its predecessor's records are gone.
	produceN(t, c.Addr, "reborn", 1)
	if got := consumeN(t, c.Addr, "reborn", 1); got[0].Offset != 0 {
		t.Fatalf("reborn starts at offset %d, want a fresh log", got[0].Offset)
	}

	// A topic whose name a foreign directory holds is not served over it,
	// and other topics keep working.
	c.CreateTopic(t, "foreign", 1)
	c.CreateTopic(t, "after", 1)
	produceN(t, c.Addr, "after", 1)
	if b, err := os.ReadFile(filepath.Join(data, "foreign-0", "notes.txt")); err != nil || string(b) != "someone else's" {
		t.Fatalf("foreign-0 was touched by creating topic foreign: %q, %v", b, err)
	}
}

// TestNewPartitionDirDurable: the directory of a new partition is fsynced
// into the data directory before the partition's first append is fsynced
// (and so before any produce to it is acknowledged). Watched with strace
// on the running broker.
func TestNewPartitionDirDurable(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace not installed")
	}
	c := harness.Start(t)
	data := c.DataDir()
	out := filepath.Join(c.Dir, "strace.txt")
	pid := c.BrokerPID(t)
	st := exec.Command("strace", "-f", "-y", "-qq", "-e", "trace=mkdir,mkdirat,rename,renameat,renameat2,fsync,fdatasync",
		"-o", out, "-p", fmt.Sprint(pid))
	stderr, err := st.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Process.Kill(); st.Wait() })
	go bufio.NewReader(stderr).WriteTo(os.Stderr)
	// strace is attached once it is the tracer of every thread of the
	// broker: from then on each of their system calls is reported (-f
	// attaches threads made later as they are made).
	if err := harness.Poll(10*time.Second, func() error { return tracedBy(pid, st.Process.Pid) }); err != nil {
		t.Skipf("strace could not attach to the broker: %v", err)
	}

	produceN(t, c.Addr, "fresh", 1) // auto-created
	st.Process.Signal(os.Interrupt)
	st.Wait()

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	dirLine, parentSync, logSync := -1, -1, -1
	for i, l := range lines {
		switch {
		case dirLine < 0 && (strings.Contains(l, "mkdir") || strings.Contains(l, "rename")) && strings.Contains(l, `/fresh-0"`) && !strings.Contains(l, "= -1"):
			dirLine = i // the directory gets its final name
		case dirLine >= 0 && parentSync < 0 && strings.Contains(l, "sync(") && strings.Contains(l, "<"+data+">"):
			parentSync = i
		case logSync < 0 && strings.Contains(l, "sync(") && strings.Contains(l, "/fresh-0/00000000000000000000.log>"):
			logSync = i
		}
	}
	if dirLine < 0 || logSync < 0 {
		t.Fatalf("trace lacks the partition's creation or its first log fsync:\n%s", b)
	}
	if parentSync < 0 || parentSync > logSync {
		t.Fatalf("the data directory %s was not fsynced between creating fresh-0 (line %d) and its first log fsync (line %d):\n%s", data, dirLine+1, logSync+1, b)
	}
}

// tracedBy reports, as an error, a thread of process pid that tracer does
// not trace (ptrace) yet.
func tracedBy(pid, tracer int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			return err
		}
		want := fmt.Sprintf("\nTracerPid:\t%d\n", tracer)
		if !strings.Contains(string(b), want) {
			return fmt.Errorf("thread %s of %d is not traced by %d", task.Name(), pid, tracer)
		}
	}
	return nil
}
