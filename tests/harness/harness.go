// Package harness starts real Postgres clusters with kafgres preloaded for
// the integration tests, using the same tests/pgcluster.sh that `make run`
// uses. Nothing is mocked: the supervisor starts the installed broker and
// clients talk to it over TCP.
package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is one Postgres cluster with its supervised broker.
type Cluster struct {
	Dir       string // cluster home: pgdata/, run/, postgres.log
	PGPort    int
	KafkaPort int
	Addr      string // broker address for Kafka clients
	// Bin is the bindir of the PostgreSQL the cluster runs on; empty
	// means the one whose pg_config comes first in PATH.
	Bin  string
	conf string
}

// Script is the path of tests/pgcluster.sh.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "pgcluster.sh")
}

// RepoRoot is the top of the checkout.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// FreePort returns a TCP port nothing listens on right now: with
// $KAFGRES_TEST_PORTS ("lo-hi") one of that range, for machines where each
// tester has ports of its own; else one below the system's ephemeral
// ports. Not one the system picks for a listener (port 0): those are
// ephemeral ports, which any outgoing connection of the machine may take
// as its own before the broker binds the port (seen in CI: a broker that
// could never bind its port).
func FreePort(t testing.TB) int {
	t.Helper()
	if r := os.Getenv("KAFGRES_TEST_PORTS"); r != "" {
		return rangePort(t, r)
	}
	if r := belowEphemeral(); r != "" {
		return rangePort(t, r)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start creates and starts a cluster in a fresh directory; extra lines are
// appended to its postgresql.conf. The cluster is stopped and removed when
// the test ends. $KAFGRES_BROKER_PATH runs another broker build than the
// installed one, for trying a change without installing it.
func Start(t testing.TB, extraConf ...string) *Cluster {
	t.Helper()
	return StartWith(t, func(*Cluster) []string { return extraConf })
}

var (
	portMu   sync.Mutex
	portNext int // the next port of the range to try; 0: a random one of it
)

// belowEphemeral is the range of ports FreePort takes from by default:
// the 12,000 below the system's ephemeral ports (ip_local_port_range), or
// "" if that leaves too few.
func belowEphemeral() string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	var low, high int
	if err == nil {
		_, err = fmt.Sscanf(string(b), "%d %d", &low, &high)
	}
	if err != nil || low < 11024 {
		return ""
	}
	return fmt.Sprintf("%d-%d", low-12000, low-1)
}

// rangePort is FreePort within the range r ("lo-hi"), never the same port
// twice in a process until the range wraps.
func rangePort(t testing.TB, r string) int {
	t.Helper()
	var lo, hi int
	if _, err := fmt.Sscanf(r, "%d-%d", &lo, &hi); err != nil || lo <= 0 || hi < lo {
		t.Fatalf("KAFGRES_TEST_PORTS=%q: want lo-hi", r)
	}
	portMu.Lock()
	defer portMu.Unlock()
	if portNext == 0 {
		// Test processes run side by side (go test runs packages in
		// parallel), each with a counter of its own: they start apart.
		portNext = lo + rand.IntN(hi-lo+1)
	}
	for range hi - lo + 1 {
		if portNext < lo || portNext > hi {
			portNext = lo
		}
		p := portNext
		portNext++
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatalf("no free port in %s", r)
	return 0
}

// StartWith is Start with settings that depend on the cluster's ports
// (kafgres.listeners): conf is called with Dir, PGPort and KafkaPort set.
// pgcluster.sh waits for KafkaPort on 127.0.0.1, so a listener must be
// there.
func StartWith(t testing.TB, conf func(c *Cluster) []string) *Cluster {
	t.Helper()
	return StartOn(t, "", conf)
}

// StartOn is StartWith on the PostgreSQL installed in bindir (see
// Cluster.Bin), for a cluster of another major than PATH's.
func StartOn(t testing.TB, bindir string, conf func(c *Cluster) []string) *Cluster {
	t.Helper()
	var extraConf, engine []string
	// $KAFGRES_STORAGE_ENGINE (segment or table) is the engine of the
	// cluster's new topics, so that a suite runs against either; a test
	// that sets kafgres.storage_engine itself overrides it.
	if e := os.Getenv("KAFGRES_STORAGE_ENGINE"); e != "" {
		engine = append(engine, "kafgres.storage_engine = '"+e+"'")
	}
	if p := os.Getenv("KAFGRES_BROKER_PATH"); p != "" {
		extraConf = append(extraConf, "kafgres.broker_path = '"+p+"'")
	}
	dir, err := os.MkdirTemp("", "kafgres-test-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, PGPort: FreePort(t), KafkaPort: FreePort(t), Bin: bindir}
	c.conf = strings.Join(slices.Concat(engine, conf(c), extraConf), "\n")
	c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.KafkaPort))
	t.Cleanup(func() {
		c.script(t, "stop")
		if !t.Failed() || os.Getenv("KAFGRES_KEEP") == "" {
			os.RemoveAll(dir)
		}
	})
	if out, err := c.run("start", strconv.Itoa(c.PGPort), strconv.Itoa(c.KafkaPort)); err != nil {
		t.Fatalf("start cluster: %v\n%s", err, out)
	}
	c.waitSlot(t, 30*time.Second)
	return c
}

// waitSlot waits until the broker has created its replication slot: the
// Kafka port opens first, and on a busy machine a test's first
// kafgres_produce can come before the slot does. Without wal_level =
// logical there is no slot to wait for.
func (c *Cluster) waitSlot(t testing.TB, timeout time.Duration) {
	t.Helper()
	conn := c.Conn(t)
	var level string
	if err := conn.QueryRow(context.Background(), `SHOW wal_level`).Scan(&level); err != nil {
		t.Fatalf("show wal_level: %v", err)
	}
	if level != "logical" {
		return
	}
	err := Poll(timeout, func() error {
		var n int
		if err := conn.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'kafgres'`).Scan(&n); err != nil {
			t.Fatalf("wait for the replication slot: %v", err)
		}
		if n == 0 {
			return errors.New("no replication slot kafgres")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the broker did not create its replication slot: %v\n%s", err, c.LogTail())
	}
}

func (c *Cluster) run(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{Script(), args[0], c.Dir}, args[1:]...)...)
	cmd.Env = c.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// env is the environment of tests/pgcluster.sh and tests/pgupgrade.sh for c.
func (c *Cluster) env() []string {
	env := append(os.Environ(), "KAFGRES_PG_CONF="+c.conf)
	if c.Bin != "" {
		env = append(env, "PGBIN="+c.Bin)
	}
	return env
}

// Upgrade moves c to the PostgreSQL in bindir with tests/pgupgrade.sh, the
// procedure of docs/operations.md, and returns the new cluster, on c's
// ports; c is left stopped. Every writer must have stopped.
func (c *Cluster) Upgrade(t testing.TB, bindir string) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "kafgres-test-")
	if err != nil {
		t.Fatal(err)
	}
	n := &Cluster{Dir: dir, PGPort: c.PGPort, KafkaPort: c.KafkaPort, Addr: c.Addr, Bin: bindir, conf: c.conf}
	t.Cleanup(func() {
		n.script(t, "stop")
		if !t.Failed() || os.Getenv("KAFGRES_KEEP") == "" {
			os.RemoveAll(dir)
		}
	})
	oldBin := c.Bin
	if oldBin == "" {
		out, err := exec.Command("pg_config", "--bindir").Output()
		if err != nil {
			t.Fatalf("pg_config --bindir: %v", err)
		}
		oldBin = strings.TrimSpace(string(out))
	}
	cmd := exec.Command("bash", filepath.Join(filepath.Dir(Script()), "pgupgrade.sh"),
		c.Dir, dir, strconv.Itoa(c.PGPort), strconv.Itoa(c.KafkaPort))
	cmd.Env = append(c.env(), "OLD_BINDIR="+oldBin, "NEW_BINDIR="+bindir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgupgrade.sh: %v\n%s\n%s", err, out, n.LogTail())
	}
	n.waitSlot(t, 30*time.Second)
	return n
}

func (c *Cluster) script(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.run(args...)
	if err != nil {
		t.Fatalf("pgcluster.sh %s: %v\n%s", args[0], err, out)
	}
	return out
}

// StartPG starts Postgres again after StopPG and waits for the broker.
func (c *Cluster) StartPG(t testing.TB) {
	t.Helper()
	c.script(t, "start", strconv.Itoa(c.PGPort), strconv.Itoa(c.KafkaPort))
}

// StopPG stops Postgres with pg_ctl stop -m mode.
func (c *Cluster) StopPG(t testing.TB, mode string) {
	t.Helper()
	pgctl := exec.Command("bash", "-c", fmt.Sprintf(`cd / && runuser -u postgres -- "$(pg_config --bindir)/pg_ctl" stop -D %q -m %s -w`, filepath.Join(c.Dir, "pgdata"), mode))
	if os.Geteuid() != 0 {
		pgctl = exec.Command("bash", "-c", fmt.Sprintf(`"$(pg_config --bindir)/pg_ctl" stop -D %q -m %s -w`, filepath.Join(c.Dir, "pgdata"), mode))
	}
	if out, err := pgctl.CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// DSN connects as the postgres superuser over the cluster's socket.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", filepath.Join(c.Dir, "run"), c.PGPort)
}

// Conn opens a connection closed at the end of the test.
func (c *Cluster) Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN())
	if err != nil {
		t.Fatalf("connect to Postgres: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Exec runs one statement.
func (c *Cluster) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	conn := c.Conn(t)
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// CreateTopic creates a topic through SQL.
func (c *Cluster) CreateTopic(t testing.TB, name string, partitions int) {
	t.Helper()
	c.Exec(t, "SELECT kafgres_create_topic($1, $2)", name, partitions)
}

// DataDir is the broker's log directory (kafgres.data_directory default).
func (c *Cluster) DataDir() string { return filepath.Join(c.Dir, "pgdata", "kafgres") }

// BrokerPID is the pid of the running broker, from its pid file.
func (c *Cluster) BrokerPID(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.DataDir(), "broker.pid"))
	if err != nil {
		t.Fatalf("read broker pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("parse broker pid: %v", err)
	}
	return pid
}

// KillBroker sends SIGKILL to the broker and returns its pid.
func (c *Cluster) KillBroker(t testing.TB) int {
	t.Helper()
	pid := c.BrokerPID(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill broker %d: %v", pid, err)
	}
	return pid
}

// StopBroker sends SIGTERM to the broker and waits until the process is
// gone; it returns the broker's pid. Sent directly, as here, the broker
// takes as long as it needs to close its logs; sent by the supervisor (a
// reload, Postgres's shutdown) it has 5 s before SIGKILL.
func (c *Cluster) StopBroker(t testing.TB) int {
	t.Helper()
	pid := c.BrokerPID(t)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stop broker %d: %v", pid, err)
	}
	err := Poll(10*time.Minute, func() error {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil // gone
		}
		// A zombie is gone too: it waits only for the supervisor to reap it.
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return nil
		}
		return fmt.Errorf("broker %d still running", pid)
	})
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// WaitBroker waits until a broker other than notPID serves the port.
func (c *Cluster) WaitBroker(t testing.TB, notPID int, timeout time.Duration) {
	t.Helper()
	err := Poll(timeout, func() error {
		b, err := os.ReadFile(filepath.Join(c.DataDir(), "broker.pid"))
		if err != nil {
			return err
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		switch {
		case pid == notPID:
			return fmt.Errorf("broker.pid is still %d", pid)
		case !PortOpen(c.Addr):
			return fmt.Errorf("broker %d does not serve the port yet", pid)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("broker did not come back on %s: %v\n%s", c.Addr, err, c.LogTail())
	}
}

// PortOpen reports whether something accepts TCP connections on addr.
func PortOpen(addr string) bool {
	nc, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	nc.Close()
	return true
}

// LogTail is the end of the Postgres log (which holds the broker's too).
func (c *Cluster) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// KillPostgres sends SIGKILL to the postmaster (as a crash would), which
// takes the supervisor and, through its liveness pipe, the broker with it.
func (c *Cluster) KillPostgres(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "pgdata", "postmaster.pid"))
	if err != nil {
		t.Fatalf("read postmaster.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatalf("parse postmaster.pid: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill postmaster %d: %v", pid, err)
	}
}

// WaitPortClosed waits until nothing accepts connections on addr.
func WaitPortClosed(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() error {
		if PortOpen(addr) {
			return fmt.Errorf("%s still open", addr)
		}
		return nil
	})
}

// KafkaClasspath is the classpath of Apache Kafka 4.4's jars and tools
// (tests/reference/pom.xml, resolved from Maven Central; ~/.m2 caches it),
// for running the kafka-*.sh tool classes by main class.
func KafkaClasspath(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("mvn"); err != nil {
		t.Skip("mvn not installed: the Kafka tool classes come from Maven Central")
	}
	out := filepath.Join(t.TempDir(), "classpath.txt")
	pom := filepath.Join(RepoRoot(), "tests", "reference", "pom.xml")
	if b, err := exec.Command("mvn", "-q", "-B", "-f", pom, "dependency:build-classpath", "-Dmdep.outputFile="+out).CombinedOutput(); err != nil {
		t.Fatalf("resolve the Kafka classpath: %v\n%s", err, b)
	}
	cp, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(cp))
}

// KafkaTool runs a Kafka command-line tool by main class and returns its
// combined output.
func KafkaTool(t testing.TB, classpath, class string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("java", append([]string{"-Xmx256m", "-cp", classpath, class}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
