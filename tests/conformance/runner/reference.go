package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The reference broker: Apache Kafka 4.4.0 from Maven Central (the pom in
// tests/reference), KRaft, one node that is broker and controller. Maven's
// ~/.m2 is the artifact cache; the resolved classpath is cached in the cache
// dir so a warm start needs no Maven at all.

// Reference is a running (or stopped) reference broker and where it lives.
type Reference struct {
	Dir            string `json:"dir"`
	Port           int    `json:"port"`
	ControllerPort int    `json:"controller_port"`
	PID            int    `json:"pid"`
	// Secure: Port is a SASL_PLAINTEXT listener and SSLPort a SASL_SSL
	// one (secure.go); else Port is PLAINTEXT.
	Secure  bool `json:"secure,omitempty"`
	SSLPort int  `json:"ssl_port,omitempty"`

	pki *PKI

	done chan struct{} // closed when the process we started exits
}

// Addr is the bootstrap address clients use.
func (r *Reference) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port)) }

// SSLAddr is the SASL_SSL listener of a secure reference broker.
func (r *Reference) SSLAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.SSLPort)) }

// Classpath returns the reference classpath, resolving it with Maven when
// it is missing or older than the pom.
func Classpath(repo, cache string) (string, error) {
	pom := filepath.Join(repo, "tests", "reference", "pom.xml")
	file := filepath.Join(cache, "reference-classpath.txt")
	if fresh(file, pom) {
		b, err := os.ReadFile(file)
		return strings.TrimSpace(string(b)), err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	// written aside and renamed, as the Java client's run script does: both
	// may resolve it at the same time
	tmp := fmt.Sprintf("%s.tmp.%d", file, os.Getpid())
	cmd := exec.Command("mvn", "-q", "-f", pom, "dependency:build-classpath", "-Dmdep.outputFile="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("resolve the reference classpath with Maven: %w\n%s", err, out)
	}
	if err := os.Rename(tmp, file); err != nil {
		return "", err
	}
	b, err := os.ReadFile(file)
	return strings.TrimSpace(string(b)), err
}

// fresh reports whether file exists, is not empty and is newer than src.
func fresh(file, src string) bool {
	f, err := os.Stat(file)
	if err != nil || f.Size() == 0 {
		return false
	}
	s, err := os.Stat(src)
	return err == nil && f.ModTime().After(s.ModTime())
}

// StartReference formats a fresh single-node KRaft log under dir and starts
// the broker on free ports, waiting until it accepts connections.
func StartReference(ctx context.Context, repo, cache, dir string) (*Reference, error) {
	return startReference(ctx, repo, cache, dir, nil, gateJVM)
}

// StartServerReference is StartReference with Kafka's own JVM settings
// (ServerJVM) instead of the gate's small heap: the side-by-side
// benchmarks compare against Kafka as kafka-server-start.sh runs it.
func StartServerReference(ctx context.Context, repo, cache, dir string) (*Reference, error) {
	return startReference(ctx, repo, cache, dir, nil, ServerJVM)
}

// gateJVM keeps the gate's broker small: it shares the machine with
// kafgres and a dozen client processes, and serves little data.
var gateJVM = []string{"-Xmx512m"}

// ServerJVM is what kafka-server-start.sh and kafka-run-class.sh of Kafka
// 4.4 give the broker by default (KAFKA_HEAP_OPTS and
// KAFKA_JVM_PERFORMANCE_OPTS), less the GC log file.
var ServerJVM = []string{"-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"}

// StartSecureReference starts the reference broker of the secure pair:
// SASL listeners serving pki's certificate, SCRAM users made at format
// time, the StandardAuthorizer (secure.go).
func StartSecureReference(ctx context.Context, repo, cache, dir string, pki *PKI) (*Reference, error) {
	return startReference(ctx, repo, cache, dir, pki, gateJVM)
}

func startReference(ctx context.Context, repo, cache, dir string, pki *PKI, jvm []string) (*Reference, error) {
	cp, err := Classpath(repo, cache)
	if err != nil {
		return nil, err
	}
	// a broker left over from an earlier run in this dir would hold its files
	if old, err := loadState[Reference](dir); err == nil {
		old.Stop()
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	r := &Reference{Dir: dir, Secure: pki != nil, pki: pki}
	if r.Port, err = freePort(); err != nil {
		return nil, err
	}
	if r.Secure {
		if r.SSLPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	if r.ControllerPort, err = freePort(); err != nil {
		return nil, err
	}
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte(r.serverProperties()), 0o644); err != nil {
		return nil, err
	}
	logConf := filepath.Join(dir, "log4j2.properties")
	if err := os.WriteFile(logConf, []byte(brokerLog4j), 0o644); err != nil {
		return nil, err
	}

	formatArgs := []string{"-cp", cp, "-Dlog4j2.configurationFile=" + logConf,
		"kafka.tools.StorageTool", "format", "-t", newClusterID(), "-c", props}
	if r.Secure {
		// SCRAM credentials live in the metadata log: made at format time
		for _, u := range secureUsers {
			formatArgs = append(formatArgs, "--add-scram", fmt.Sprintf("SCRAM-SHA-256=[name=%s,password=%s]", u.Name, u.Password))
		}
	}
	format := exec.CommandContext(ctx, "java", formatArgs...)
	if out, err := format.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("format the reference broker's storage: %w\n%s", err, out)
	}

	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// not CommandContext: the broker outlives this call (and, for
	// `runner reference start`, this process)
	args := append(append([]string{}, jvm...), "-Dlog4j2.configurationFile="+logConf, "-cp", cp, "kafka.Kafka", props)
	cmd := exec.Command("java", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the reference broker: %w", err)
	}
	r.PID = cmd.Process.Pid
	r.done = make(chan struct{})
	go func() { cmd.Wait(); close(r.done) }()
	if err := saveState(dir, r); err != nil {
		r.Stop()
		return nil, err
	}

	deadline := time.Now().Add(90 * time.Second)
	for !portOpen(r.Addr()) {
		select {
		case <-r.done:
			return nil, fmt.Errorf("the reference broker exited during startup; see %s", logf.Name())
		case <-ctx.Done():
			r.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("the reference broker did not open %s within 90 s; see %s", r.Addr(), logf.Name())
		}
	}
	return r, nil
}

// serverProperties configure the reference broker like kafgres's gate
// cluster (gateConf in kafgres.go): no initial rebalance delay, and
// timed-out transactions and dirty compacted logs looked for every 500 ms.
func (r *Reference) serverProperties() string {
	if r.Secure {
		return r.secureProperties()
	}
	return fmt.Sprintf(`# written by the conformance runner
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:%[1]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=PLAINTEXT://127.0.0.1:%[1]d
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=%[3]s
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=500
log.cleaner.backoff.ms=500
`, r.Port, r.ControllerPort, filepath.Join(r.Dir, "data"))
}

// secureProperties configure the secure pair's reference broker. The
// controller listener stays PLAINTEXT: the broker registers with its
// controller as User:ANONYMOUS there, which the StandardAuthorizer must
// let do CLUSTER_ACTION before any ACL exists, so ANONYMOUS is a super
// user. No client-facing listener is PLAINTEXT, so no client is ever
// ANONYMOUS. PLAIN is enabled on SASL_SSL only, as kafgres offers it
// (security.md); its users are the JAAS user_* options, SCRAM's are in
// the metadata log.
func (r *Reference) secureProperties() string {
	var plainUsers strings.Builder
	for _, u := range secureUsers {
		fmt.Fprintf(&plainUsers, " user_%s=%q", u.Name, u.Password)
	}
	return fmt.Sprintf(`# written by the conformance runner (secure pair)
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:%[2]d
controller.listener.names=CONTROLLER
listeners=SASL_PLAINTEXT://127.0.0.1:%[1]d,SASL_SSL://127.0.0.1:%[4]d,CONTROLLER://127.0.0.1:%[2]d
advertised.listeners=SASL_PLAINTEXT://127.0.0.1:%[1]d,SASL_SSL://127.0.0.1:%[4]d
inter.broker.listener.name=SASL_PLAINTEXT
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN
listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-256
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret"%[6]s;
ssl.keystore.type=PEM
ssl.keystore.location=%[5]s
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=%[7]s;User:ANONYMOUS
allow.everyone.if.no.acl.found=false
log.dirs=%[3]s
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=500
log.cleaner.backoff.ms=500
`, r.Port, r.ControllerPort, filepath.Join(r.Dir, "data"), r.SSLPort, r.pki.Keystore, plainUsers.String(), secureSuperUser)
}

const brokerLog4j = `# reference broker logging: INFO to stdout (server.log)
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
`

// newClusterID makes a Kafka cluster id: 16 random bytes, URL-safe base64
// without padding. Kafka never hands out ids starting with '-' (they would
// read as options on a command line), so neither do we.
func newClusterID() string {
	for {
		var b [16]byte
		rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// Stop terminates the broker (SIGTERM, then SIGKILL after 20 s) and waits.
func (r *Reference) Stop() error {
	if r.PID <= 0 {
		return nil
	}
	defer os.Remove(filepath.Join(r.Dir, stateFile))
	// a pid from a state file may have been reused since: only signal it if
	// it still is a Kafka broker
	if r.done == nil {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", r.PID))
		if err != nil || !strings.Contains(string(cmdline), "kafka.Kafka") {
			return nil
		}
	}
	if err := syscall.Kill(r.PID, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("stop reference broker %d: %w", r.PID, err)
	}
	if r.waitExit(20 * time.Second) {
		return nil
	}
	syscall.Kill(r.PID, syscall.SIGKILL)
	r.waitExit(10 * time.Second)
	return nil
}

// waitExit waits for the broker to exit: through Wait when we started it
// (it is our child), by probing the pid when an earlier process did.
func (r *Reference) waitExit(d time.Duration) bool {
	if r.done != nil {
		select {
		case <-r.done:
			return true
		case <-time.After(d):
			return false
		}
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if syscall.Kill(r.PID, 0) != nil {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// The state file lets `runner reference stop` (another process) find what
// `runner reference start` started.
const stateFile = "state.json"

func saveState(dir string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, stateFile), b, 0o644)
}

func loadState[T any](dir string) (*T, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, stateFile), err)
	}
	return v, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func portOpen(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
