package integration

// Consumer groups with several members of real clients: Sarama's consumer
// group (in-process), kafka-python and confluent-kafka through
// testdata/group_member.py, and Kafka's KafkaConsumer through
// testdata/GroupMember.java. confluent-kafka and KafkaConsumer run with
// group.protocol=classic and with group.protocol=consumer (KIP-848:
// ConsumerGroupHeartbeat, the broker assigns). Every member reports which
// offsets it processed; the test accounts for them.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafgres/kafgres/tests/harness"
)

type partOff struct {
	p int32
	o int64
}

// member is one consumer-group member under test, of any client.
type member interface {
	name() string
	assigned() int // partitions it owns now (-1 before its first assignment)
	processed() []partOff
	stop() // graceful: close, leave the group
	kill() // abrupt (SIGKILL for processes)
}

// ledger records what a member processed and what it owns.
type ledger struct {
	mu    sync.Mutex
	owned int
	recs  []partOff
}

func newLedger() *ledger { return &ledger{owned: -1} }

func (l *ledger) assigned() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owned
}

func (l *ledger) processed() []partOff {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]partOff(nil), l.recs...)
}

// ---- members that are processes printing "assigned N" / "rec P O" ----

type procMember struct {
	*ledger
	label string
	cmd   *exec.Cmd
	done  chan struct{}
}

func (m *procMember) name() string { return m.label }

func startProc(t *testing.T, label string, cmd *exec.Cmd) *procMember {
	t.Helper()
	m := &procMember{ledger: newLedger(), label: label, cmd: cmd, done: make(chan struct{})}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), label+".stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", label, err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var p int32
			var o int64
			var n int
			m.mu.Lock()
			if _, err := fmt.Sscanf(sc.Text(), "rec %d %d", &p, &o); err == nil {
				m.recs = append(m.recs, partOff{p, o})
			} else if _, err := fmt.Sscanf(sc.Text(), "assigned %d", &n); err == nil {
				m.owned = n
			}
			m.mu.Unlock()
		}
		cmd.Wait()
		logf.Close()
	}()
	t.Cleanup(func() {
		m.kill()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 2000 {
				b = b[len(b)-2000:]
			}
			t.Logf("%s stderr (tail):\n%s", label, b)
		}
	})
	return m
}

func (m *procMember) stop() {
	if m.cmd.Process != nil {
		m.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		m.kill()
	}
}

func (m *procMember) kill() {
	if m.cmd.Process != nil {
		syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-m.done
	m.mu.Lock()
	m.owned = 0
	m.mu.Unlock()
}

// pythonVenv is the conformance gate's virtualenv with kafka-python and
// confluent-kafka installed: their run scripts create it (and return after
// --help).
func pythonVenv(t *testing.T) string {
	t.Helper()
	root := harness.RepoRoot()
	for _, c := range []string{"kafka-python", "confluent-kafka"} {
		run := filepath.Join(root, "tests", "conformance", "clients", c, "run")
		if out, err := exec.Command("bash", run, "--help").CombinedOutput(); err != nil {
			t.Skipf("cannot set up the Python clients (%s): %v\n%s", c, err, out)
		}
	}
	return filepath.Join(root, "tests", "conformance", ".work", "venv", "bin", "python")
}

// startPython runs group_member.py with lib (kafka-python or
// confluent-kafka) and group.protocol protocol (classic, or consumer for
// confluent-kafka).
func startPython(t *testing.T, python, lib, protocol, label, addr, group, topic string) *procMember {
	script := filepath.Join(harness.RepoRoot(), "tests", "integration", "testdata", "group_member.py")
	return startProc(t, label, exec.Command(python, "-u", script, lib, addr, group, topic, protocol))
}

// startJava runs GroupMember.java with group.protocol protocol (classic or
// consumer).
func startJava(t *testing.T, classpath, protocol, label, addr, group, topic string) *procMember {
	src := filepath.Join(harness.RepoRoot(), "tests", "integration", "testdata", "GroupMember.java")
	return startProc(t, label, exec.Command("java", "-Xmx256m", "-cp", classpath, src, addr, group, topic, protocol))
}

// librdkafkaKIP848 skips unless the venv's confluent-kafka bundles a
// librdkafka whose group.protocol=consumer is generally available (2.10).
func librdkafkaKIP848(t *testing.T, python string) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import confluent_kafka; print(confluent_kafka.libversion()[1])").Output()
	if err != nil {
		t.Skipf("confluent_kafka.libversion(): %v", err)
	}
	var v int
	if _, err := fmt.Sscanf(string(out), "%d", &v); err != nil {
		t.Skipf("confluent_kafka.libversion(): %q", out)
	}
	if v < 0x020a0000 {
		t.Skipf("librdkafka %d.%d.%d predates GA support of group.protocol=consumer (2.10)", v>>24, v>>16&0xff, v>>8&0xff)
	}
}

// ---- Sarama's consumer group, in-process ----

type saramaMember struct {
	*ledger
	label  string
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *saramaMember) name() string { return m.label }

type saramaHandler struct{ l *ledger }

func (h saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	n := 0
	for _, ps := range s.Claims() {
		n += len(ps)
	}
	h.l.mu.Lock()
	h.l.owned = n
	h.l.mu.Unlock()
	return nil
}

func (h saramaHandler) Cleanup(s sarama.ConsumerGroupSession) error {
	h.l.mu.Lock()
	h.l.owned = 0
	h.l.mu.Unlock()
	return nil
}

func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		h.l.mu.Lock()
		h.l.recs = append(h.l.recs, partOff{msg.Partition, msg.Offset})
		h.l.mu.Unlock()
		s.MarkMessage(msg, "")
		s.Commit()
	}
	return nil
}

func startSarama(t *testing.T, label, addr, group, topic string) *saramaMember {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.MaxVersion
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	g, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{ledger: newLedger(), label: label, group: g, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, saramaHandler{m.ledger}); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(m.stop)
	return m
}

func (m *saramaMember) stop() {
	m.cancel()
	<-m.done
	m.group.Close()
}

func (m *saramaMember) kill() { m.stop() } // no way to vanish in-process

// ---- the accounting ----

// waitStable waits until the members own all partitions between them and
// each owns at least one.
func waitStable(t *testing.T, partitions int, ms ...member) {
	t.Helper()
	harness.Eventually(t, groupWait, func() error {
		sum, all := 0, true
		desc := ""
		for _, m := range ms {
			n := m.assigned()
			sum += n
			all = all && n > 0
			desc += fmt.Sprintf(" %s=%d", m.name(), n)
		}
		if !all || sum != partitions {
			return fmt.Errorf("group did not settle on %d partitions:%s", partitions, desc)
		}
		return nil
	})
}

// processedCount counts how often each (partition, offset) was processed.
func processedCount(ms ...member) map[partOff]int {
	seen := map[partOff]int{}
	for _, m := range ms {
		for _, r := range m.processed() {
			seen[r]++
		}
	}
	return seen
}

// waitLag waits until kafgres.consumer_lag shows the group committed
// `total` records in all with lag 0.
func waitLag(t *testing.T, c *harness.Cluster, group string, total int64) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, func() error {
		if off, lag := committedSum(t, c, group); off != total || lag != 0 {
			return fmt.Errorf("consumer_lag of %s: committed %d lag %d, want %d and 0", group, off, lag, total)
		}
		return nil
	})
}

// kip848Joins fails unless the broker log shows at least n members joining
// group through ConsumerGroupHeartbeat (not the classic JoinGroup), so a
// client that fell back to the classic protocol cannot pass for KIP-848.
func kip848Joins(t *testing.T, c *harness.Cluster, group string, n int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	joins := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "member joined consumer group") && strings.Contains(line, group) {
			joins++
		}
	}
	if joins < n {
		t.Errorf("broker log shows %d KIP-848 joins of %s, want %d", joins, group, n)
	}
}

// TestGroupClients: two members of the same client join one group on a
// 4-partition topic; the records produced after the group settled are
// processed exactly once across them, and their commits reach
// kafgres.consumer_lag with lag 0.
func TestGroupClients(t *testing.T) {
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	const partitions, perPartition = 4, 50
	var (
		venvOnce sync.Once
		python   string
		cpOnce   sync.Once
		cp       string
	)
	clients := []struct {
		name  string
		start func(t *testing.T, label, group, topic string) member
	}{
		{"sarama", func(t *testing.T, label, group, topic string) member {
			return startSarama(t, label, c.Addr, group, topic)
		}},
		{"kafka-python", func(t *testing.T, label, group, topic string) member {
			venvOnce.Do(func() { python = pythonVenv(t) })
			return startPython(t, python, "kafka-python", "classic", label, c.Addr, group, topic)
		}},
	}
	for _, protocol := range []string{"classic", "consumer"} {
		name := func(client string) string {
			if protocol == "classic" {
				return client // the names these cases always had
			}
			return client + "-" + protocol
		}
		clients = append(clients, []struct {
			name  string
			start func(t *testing.T, label, group, topic string) member
		}{
			{name("confluent-kafka"), func(t *testing.T, label, group, topic string) member {
				venvOnce.Do(func() { python = pythonVenv(t) })
				if protocol == "consumer" {
					librdkafkaKIP848(t, python)
				}
				return startPython(t, python, "confluent-kafka", protocol, label, c.Addr, group, topic)
			}},
			{name("java"), func(t *testing.T, label, group, topic string) member {
				if _, err := exec.LookPath("java"); err != nil {
					t.Skip("java not installed")
				}
				cpOnce.Do(func() { cp = harness.KafkaClasspath(t) })
				return startJava(t, cp, protocol, label, c.Addr, group, topic)
			}},
		}...)
	}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			topic, group := "gc-"+cl.name, "gc-"+cl.name+"-g"
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("broker log (tail):\n%s", c.LogTail())
				}
			})
			c.CreateTopic(t, topic, partitions)
			a := cl.start(t, cl.name+"-a", group, topic)
			b := cl.start(t, cl.name+"-b", group, topic)
			waitStable(t, partitions, a, b)
			if strings.HasSuffix(cl.name, "-consumer") {
				kip848Joins(t, c, group, 2)
			}
			produceBatch(t, c.Addr, topic, "gc", partitions, perPartition)

			harness.Eventually(t, groupWait, func() error {
				if n := len(processedCount(a, b)); n < partitions*perPartition {
					return fmt.Errorf("processed %d of %d records", n, partitions*perPartition)
				}
				return nil
			})
			waitLag(t, c, group, partitions*perPartition)
			a.stop()
			b.stop()
			seen := processedCount(a, b)
			var dups []string
			for p := int32(0); p < partitions; p++ {
				for o := int64(0); o < perPartition; o++ {
					switch n := seen[partOff{p, o}]; {
					case n == 0:
						t.Errorf("%d/%d never processed", p, o)
					case n > 1:
						dups = append(dups, fmt.Sprintf("%d/%d×%d", p, o, n))
					}
				}
			}
			sort.Strings(dups)
			if len(dups) > 0 {
				t.Errorf("processed more than once in a stable group: %v", dups)
			}
			if len(a.processed()) == 0 || len(b.processed()) == 0 {
				t.Errorf("one member processed nothing: %s %d, %s %d", a.name(), len(a.processed()), b.name(), len(b.processed()))
			}
			waitLag(t, c, group, partitions*perPartition)
		})
	}
}

// TestSaramaTxnOffsetsToActiveGroup: Sarama's consume-transform-produce
// commits the group's offsets with AddOffsetsToTxn, whose TxnOffsetCommit
// (v3) names no member and no generation. Kafka takes such a transactional
// commit while the group has members (its fencing is then the producer's
// epoch alone); a broker applying OffsetCommit's rule for commits without
// a member would answer UNKNOWN_MEMBER_ID, and every such pipeline with a
// running consumer group would fail at CommitTxn.
func TestSaramaTxnOffsetsToActiveGroup(t *testing.T) {
	c := harness.Start(t)
	in, out, group := "sarama-eos-in", "sarama-eos-out", "sarama-eos"
	c.CreateTopic(t, in, 1)
	c.CreateTopic(t, out, 1)
	m := startSarama(t, "member", c.Addr, group, in)
	waitStable(t, 1, m)

	cfg := sarama.NewConfig()
	cfg.Version = sarama.MaxVersion
	cfg.Producer.Return.Successes = true
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.ID = "sarama-eos-txn"
	cfg.Producer.Transaction.Retry.Max = 5
	p, err := sarama.NewSyncProducer([]string{c.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.BeginTxn(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: out, Value: sarama.StringEncoder("transformed")}); err != nil {
		t.Fatal(err)
	}
	offsets := map[string][]*sarama.PartitionOffsetMetadata{in: {{Partition: 0, Offset: 7, LeaderEpoch: -1}}}
	if err := p.AddOffsetsToTxn(offsets, group); err != nil {
		t.Fatalf("AddOffsetsToTxn with the group active: %v", err)
	}
	if err := p.CommitTxn(); err != nil {
		t.Fatalf("CommitTxn with the group active: %v", err)
	}
	adm, cl := txnAdmin(t, c.Addr)
	defer cl.Close()
	harness.Eventually(t, 10*time.Second, func() error {
		offs, err := adm.FetchOffsets(context.Background(), group)
		if err != nil {
			return err
		}
		if o, ok := offs.Lookup(in, 0); !ok || o.At != 7 {
			return fmt.Errorf("committed offset of %s/0: %+v (found %v), want 7", in, o, ok)
		}
		return nil
	})
}
