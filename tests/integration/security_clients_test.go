package integration

// Issue #13's acceptance with real clients: Sarama (in-process),
// kafka-python and confluent-kafka (testdata/security_client.py) and Kafka's
// own Java clients (testdata/SecurityClient.java) log in with SCRAM-SHA-256
// over SASL_PLAINTEXT and SASL_SSL, PLAIN over SASL_SSL and a client
// certificate on the SSL listener of startAuthCluster; wrong password,
// unknown role, NOLOGIN, expired and non-member roles are refused with the
// client's authentication error; and with no ACLs alice's produce, fetch,
// group join+commit, create and delete topic and describe configs fail with
// the authorization error Kafka gives (docs/kafka-authorization.md), then
// succeed once granted in SQL. franz-go and kcat are in
// security_auth_test.go.
//
// Every client runs the same table (secMatrix), in three phases against
// one cluster per test: logins, the ACL cells before the grants, the ACL
// cells after them. A process client runs each phase in one process, which
// prints one result per cell.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafgres/kafgres/tests/harness"
)

// secWait bounds one operation of one cell; secPhaseWait one process
// running a whole phase.
const (
	secWait      = 12 * time.Second
	secPhaseWait = 3 * time.Minute
)

// secRefused is what every refused login must report (or the client's
// equivalent, see secClient.authFailure).
const secRefused = "SASL_AUTHENTICATION_FAILED"

// secCell is one cell of the matrix: a client configured for listener
// with mech as user does op.
type secCell struct {
	name           string
	listener       string // SASL_PLAINTEXT, SASL_SSL or SSL (mTLS)
	mech           string // SCRAM-SHA-256, PLAIN; empty on SSL
	user, password string
	op             string // see "The ops" below
	topic, group   string
	want           string      // "" (success), secRefused, or the Kafka error before the grants
	grant          [][3]string // the ACLs (operation, resource type, name) that let alice do it
}

// The ops, the same for every client (op in secCell):
//
//	login          a metadata or describe-cluster request
//	roundtrip      produce one record, then fetch partition 0 from the start
//	produce        produce one record
//	fetch          fetch partition 0 from the start without a group
//	group          join group (subscribe), fetch a record, commit it
//	create         CreateTopics topic
//	delete         DeleteTopics topic
//	topic-configs  DescribeConfigs of topic
//	broker-configs DescribeConfigs of broker 1

// secPhase is a named list of cells and what each must give in it.
type secPhase struct {
	name  string
	cells []secCell
	want  func(secCell) string
}

// secMatrix is the table for the client whose resources start with p:
// topic p-auth (alice may read and write it from the start), p-acl,
// p-del and p-new (no ACLs until the grants), group p-g. The group cell
// reads p-auth, so its only missing right is the group's: with no ACL on
// the topic either, which of the two errors a client meets first is its
// own request order.
func secMatrix(p string) (logins, acls []secCell) {
	auth := p + "-auth"
	ok := func(name, listener, mech string) secCell {
		return secCell{name: name, listener: listener, mech: mech, user: "alice", password: "pencil", op: "roundtrip", topic: auth}
	}
	refused := func(name, listener, mech, user, password string) secCell {
		return secCell{name: name, listener: listener, mech: mech, user: user, password: password, op: "login", want: secRefused}
	}
	logins = []secCell{
		ok("scram SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-256"),
		ok("scram SASL_SSL", "SASL_SSL", "SCRAM-SHA-256"),
		ok("plain SASL_SSL", "SASL_SSL", "PLAIN"),
		{name: "mTLS", listener: "SSL", op: "roundtrip", topic: auth},
		refused("wrong password", "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "wrong"),
		refused("unknown role", "SASL_PLAINTEXT", "SCRAM-SHA-256", "nobody", "pencil"),
		refused("NOLOGIN role", "SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "pencil"),
		refused("expired role", "SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "pencil"),
		refused("not in client role", "SASL_PLAINTEXT", "SCRAM-SHA-256", "dave", "pencil"),
		refused("wrong password scram SASL_SSL", "SASL_SSL", "SCRAM-SHA-256", "alice", "wrong"),
		refused("wrong password plain SASL_SSL", "SASL_SSL", "PLAIN", "alice", "wrong"),
	}
	acl := func(op, topic, group, want string, grant ...[3]string) secCell {
		return secCell{name: op, listener: "SASL_PLAINTEXT", mech: "SCRAM-SHA-256", user: "alice", password: "pencil",
			op: op, topic: topic, group: group, want: want, grant: grant}
	}
	acls = []secCell{
		acl("produce", p+"-acl", "", "TOPIC_AUTHORIZATION_FAILED", [3]string{"WRITE", "TOPIC", p + "-acl"}),
		acl("fetch", p+"-acl", "", "TOPIC_AUTHORIZATION_FAILED", [3]string{"READ", "TOPIC", p + "-acl"}),
		acl("group", auth, p+"-g", "GROUP_AUTHORIZATION_FAILED", [3]string{"READ", "GROUP", p + "-g"}),
		acl("create", p+"-new", "", "TOPIC_AUTHORIZATION_FAILED", [3]string{"CREATE", "TOPIC", p + "-new"}),
		acl("delete", p+"-del", "", "TOPIC_AUTHORIZATION_FAILED", [3]string{"DELETE", "TOPIC", p + "-del"}),
		acl("topic-configs", p+"-acl", "", "TOPIC_AUTHORIZATION_FAILED", [3]string{"DESCRIBE_CONFIGS", "TOPIC", p + "-acl"}),
		acl("broker-configs", "", "", "CLUSTER_AUTHORIZATION_FAILED", [3]string{"DESCRIBE_CONFIGS", "CLUSTER", "kafka-cluster"}),
	}
	return logins, acls
}

// secResult is what a client reported for a cell: code empty on success,
// else the Kafka error name it gave (or its own), and the message.
type secResult struct{ code, detail string }

// secClient is one client under test: run runs cells in order and returns
// their results by name; authFailure accepts the client's own report of a
// refused login where it has no SASL_AUTHENTICATION_FAILED.
type secClient struct {
	name        string
	run         func(t *testing.T, cells []secCell) map[string]secResult
	authFailure func(r secResult) bool
}

// runSecMatrix sets p's resources up on a, then runs the three phases with
// cl, each cell a subtest.
func runSecMatrix(t *testing.T, a *authCluster, p string, cl secClient) {
	logins, acls := secMatrix(p)
	for _, topic := range []string{p + "-auth", p + "-acl", p + "-del"} {
		a.CreateTopic(t, topic, 1)
	}
	for _, op := range []string{"READ", "WRITE"} {
		a.Exec(t, `SELECT kafgres_acl_grant('User:alice', $1, 'TOPIC', $2)`, op, p+"-auth")
	}
	a.waitTopicGranted(t, p+"-auth")
	asTabled := func(c secCell) string { return c.want }
	phases := []secPhase{
		{"logins", logins, asTabled},
		{"denied", acls, asTabled},
		{"granted", acls, func(secCell) string { return "" }},
	}
	for _, ph := range phases {
		if ph.name == "granted" {
			for _, c := range acls {
				for _, g := range c.grant {
					a.Exec(t, `SELECT kafgres_acl_grant('User:alice', $1, $2, $3)`, g[0], g[1], g[2])
				}
			}
			a.waitGranted(t, p)
		}
		got := cl.run(t, ph.cells)
		for _, c := range ph.cells {
			t.Run(ph.name+"/"+c.name, func(t *testing.T) {
				r, ok := got[c.name]
				switch want := ph.want(c); {
				case !ok:
					t.Errorf("%s: no result", cl.name)
				case want == secRefused && r.code != want && cl.authFailure != nil && cl.authFailure(r):
					t.Logf("%s reports the refused login as %s: %s", cl.name, r.code, r.detail)
				case r.code != want:
					if want == "" {
						want = "success"
					}
					t.Errorf("%s %s as %s on %s: want %s, got %q: %s", cl.name, c.op, c.user, c.listener, want, r.code, r.detail)
				}
			})
		}
	}
	if t.Failed() {
		t.Logf("broker log (tail):\n%s", a.LogTail())
	}
	// The cluster grant would let the next client on this cluster through
	// its denied phase: take every grant back and wait until the broker
	// has.
	for _, c := range acls {
		for _, g := range c.grant {
			a.Exec(t, `SELECT kafgres_acl_revoke('User:alice', $1, $2, $3)`, g[0], g[1], g[2])
		}
	}
	a.waitBrokerConfigsDenied(t)
}

// eventuallyAsAlice waits until check passes for alice's admin client on
// the SASL_PLAINTEXT listener: the broker learns of grants and revokes
// through NOTIFY, within about a second, later on a busy machine.
func (a *authCluster) eventuallyAsAlice(t *testing.T, check func(context.Context, *kadm.Client) error) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.saslPlain), scramUser("alice", "pencil"), kgo.RequestTimeoutOverhead(secWait))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	harness.Eventually(t, 15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), secWait)
		defer cancel()
		return check(ctx, adm)
	})
}

// waitGranted waits until the broker has loaded the grants: alice may
// describe p-acl's configs, the last topic grant, and the broker's, the
// cluster grant.
func (a *authCluster) waitGranted(t *testing.T, p string) {
	t.Helper()
	a.eventuallyAsAlice(t, func(ctx context.Context, adm *kadm.Client) error {
		rc, err := adm.DescribeTopicConfigs(ctx, p+"-acl")
		if err == nil {
			_, err = rc.On(p+"-acl", nil)
		}
		if err != nil {
			return fmt.Errorf("topic configs: %w", err)
		}
		bc, err := adm.DescribeBrokerConfigs(ctx, 1)
		if err == nil {
			_, err = bc.On("1", nil)
		}
		if err != nil {
			return fmt.Errorf("broker configs: %w", err)
		}
		return nil
	})
}

// waitTopicGranted waits until the broker lets alice see topic (READ and
// WRITE imply DESCRIBE).
func (a *authCluster) waitTopicGranted(t *testing.T, topic string) {
	t.Helper()
	a.eventuallyAsAlice(t, func(ctx context.Context, adm *kadm.Client) error {
		ts, err := adm.ListTopics(ctx, topic)
		if err == nil {
			err = ts[topic].Err
		}
		if err != nil {
			return fmt.Errorf("metadata of %s as alice: %w", topic, err)
		}
		return nil
	})
}

// waitBrokerConfigsDenied waits until alice may no longer describe the
// broker's configs.
func (a *authCluster) waitBrokerConfigsDenied(t *testing.T) {
	t.Helper()
	a.eventuallyAsAlice(t, func(ctx context.Context, adm *kadm.Client) error {
		bc, err := adm.DescribeBrokerConfigs(ctx, 1)
		if err == nil {
			_, err = bc.On("1", nil)
		}
		if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			return fmt.Errorf("broker configs after the revoke: %v", err)
		}
		return nil
	})
}

// clientCertFiles issues a client certificate whose subject the cluster's
// rule maps to alice, and writes it as PEM files: the certificate, its
// PKCS#8 key, and both in one file (a Java PEM key store).
func (a *authCluster) clientCertFiles(t *testing.T) (cert tls.Certificate, certFile, keyFile, keystore string) {
	t.Helper()
	cert = a.pki.issue(t, pkix.Name{CommonName: "Alice", Organization: []string{"Example"}}, false)
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	certFile = a.pki.write(t, "client.crt", "CERTIFICATE", cert.Certificate[0])
	keyFile = a.pki.write(t, "client.key", "PRIVATE KEY", key)
	keystore = filepath.Join(a.pki.dir, "client.pem")
	both := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})...)
	if err := os.WriteFile(keystore, both, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, certFile, keyFile, keystore
}

// ---- process clients: one process per phase, reading a spec file ----

// writeSecSpec writes the spec security_client.py and SecurityClient.java
// read: the listeners' addresses, the PEM files, the cells.
func (a *authCluster) writeSecSpec(t *testing.T, cells []secCell) string {
	t.Helper()
	_, certFile, keyFile, keystore := a.clientCertFiles(t)
	var b strings.Builder
	for _, l := range [][2]string{{"SASL_PLAINTEXT", a.saslPlain}, {"SASL_SSL", a.saslSSL}, {"SSL", a.s}} {
		fmt.Fprintf(&b, "addr\t%s\t%s\n", l[0], l[1])
	}
	fmt.Fprintf(&b, "ca\t%s\ncert\t%s\nkey\t%s\nkeystore\t%s\n", a.pki.caFile, certFile, keyFile, keystore)
	for _, c := range cells {
		fmt.Fprintf(&b, "cell\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.name, c.listener, c.mech, c.user, c.password, c.op, c.topic, c.group)
	}
	f, err := os.CreateTemp(t.TempDir(), "spec-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// runSecProcess runs a client process and reads its RESULT lines.
func runSecProcess(t *testing.T, name string, args ...string) map[string]secResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), secPhaseWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	res := map[string]secResult{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if f := strings.SplitN(sc.Text(), "\t", 4); len(f) == 4 && f[0] == "RESULT" {
			res[f[1]] = secResult{code: f[2], detail: f[3]}
		}
	}
	if err != nil {
		tail := stderr.String()
		if len(tail) > 3000 {
			tail = tail[len(tail)-3000:]
		}
		t.Errorf("%s: %v\n%s", name, err, tail)
	}
	return res
}

// ---- Sarama, in-process ----

// saramaSCRAM adapts franz-go's SCRAM-SHA-256 client to Sarama's
// SCRAMClient (Sarama brings no SCRAM implementation of its own).
type saramaSCRAM struct {
	first []byte
	sess  sasl.Session
	done  bool
}

func (s *saramaSCRAM) Begin(user, password, _ string) error {
	sess, first, err := scram.Auth{User: user, Pass: password}.AsSha256Mechanism().Authenticate(context.Background(), "")
	s.sess, s.first = sess, first
	return err
}

// Step answers Sarama's first, empty, challenge with the client-first
// message, then the server's messages.
func (s *saramaSCRAM) Step(challenge string) (string, error) {
	if s.first != nil {
		first := s.first
		s.first = nil
		return string(first), nil
	}
	done, resp, err := s.sess.Challenge([]byte(challenge))
	s.done = done
	return string(resp), err
}

func (s *saramaSCRAM) Done() bool { return s.done }

func saramaConfig(a *authCluster, c secCell, cert tls.Certificate) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.MaxVersion
	cfg.ClientID = "sarama-sec"
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = 5*time.Second, secWait, secWait
	cfg.Metadata.Retry.Max, cfg.Metadata.Retry.Backoff = 1, 200*time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max, cfg.Producer.Retry.Backoff = 1, 200*time.Millisecond
	cfg.Producer.Timeout = secWait
	cfg.Admin.Retry.Max, cfg.Admin.Timeout = 1, secWait
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Retry.Max = 0
	if c.mech != "" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLMechanism(c.mech)
		cfg.Net.SASL.User, cfg.Net.SASL.Password = c.user, c.password
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	}
	if c.listener != "SASL_PLAINTEXT" {
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = a.tlsConfig()
		if c.listener == "SSL" {
			cfg.Net.TLS.Config = a.tlsConfig(cert)
		}
	}
	return cfg
}

// saramaCell does c's op with a new Sarama client.
func saramaCell(addr string, cfg *sarama.Config, c secCell) error {
	client, err := sarama.NewClient([]string{addr}, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	switch c.op {
	case "login":
		_, err = client.Controller()
		return err
	case "roundtrip", "produce":
		if err := saramaProduce(client, c.topic, c.name); err != nil || c.op == "produce" {
			return err
		}
		return saramaFetch(client, c.topic)
	case "fetch":
		return saramaFetch(client, c.topic)
	case "group":
		return saramaGroup(client, c.topic, c.group)
	}
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return err
	}
	switch c.op {
	case "create":
		return adm.CreateTopic(c.topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
	case "delete":
		return adm.DeleteTopic(c.topic)
	case "topic-configs":
		_, err = adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: c.topic})
		return err
	case "broker-configs":
		_, err = adm.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: "1"})
		return err
	}
	return fmt.Errorf("unknown op %q", c.op)
}

func saramaProduce(client sarama.Client, topic, value string) error {
	p, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("v-" + value)})
	return err
}

func saramaFetch(client sarama.Client, topic string) error {
	cons, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return err
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		return err
	}
	defer pc.Close()
	select {
	case <-pc.Messages():
		return nil
	case err := <-pc.Errors():
		return err
	case <-time.After(secWait):
		return errors.New("TIMEOUT: no record")
	}
}

// saramaGroupHandler commits the first record it gets and ends the session.
type saramaGroupHandler struct {
	got    chan struct{}
	cancel context.CancelFunc
}

func (saramaGroupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h saramaGroupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		s.MarkMessage(msg, "")
		s.Commit()
		select {
		case <-h.got:
		default:
			close(h.got)
		}
		h.cancel()
		return nil
	}
	return nil
}

func saramaGroup(client sarama.Client, topic, group string) error {
	g, err := sarama.NewConsumerGroupFromClient(group, client)
	if err != nil {
		return err
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), secWait)
	defer cancel()
	h := saramaGroupHandler{got: make(chan struct{}), cancel: cancel}
	errc := make(chan error, 1)
	go func() {
		for err := range g.Errors() {
			select {
			case errc <- err:
			default:
			}
		}
	}()
	err = g.Consume(ctx, []string{topic}, h)
	select {
	case <-h.got:
		// Sarama's Commit reports no error: check the offset arrived
		adm, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			return err
		}
		offs, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
		if err != nil {
			return err
		}
		if b := offs.GetBlock(topic, 0); b == nil || b.Offset < 1 {
			return fmt.Errorf("commit did not reach the broker: %+v", b)
		}
		return nil
	default:
	}
	if err == nil {
		select {
		case err = <-errc:
		default:
			err = errors.New("TIMEOUT: no record")
		}
	}
	return err
}

// saramaResult names a Sarama error by the Kafka error code inside it.
func saramaResult(err error) secResult {
	if err == nil {
		return secResult{}
	}
	// Sarama wraps a broker's error code with its message so that only
	// errors.Is finds it
	for code := int16(1); code < 130; code++ {
		if errors.Is(err, sarama.KError(code)) {
			if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
				return secResult{code: e.Message, detail: err.Error()}
			}
		}
	}
	if strings.HasPrefix(err.Error(), "TIMEOUT") {
		return secResult{code: "TIMEOUT", detail: err.Error()}
	}
	return secResult{code: fmt.Sprintf("%T", err), detail: err.Error()}
}

// ---- the tests ----

func TestSecurityClientsSarama(t *testing.T) {
	a := startAuthCluster(t)
	cert, _, _, _ := a.clientCertFiles(t)
	addr := map[string]string{"SASL_PLAINTEXT": a.saslPlain, "SASL_SSL": a.saslSSL, "SSL": a.s}
	cl := secClient{name: "sarama", run: func(t *testing.T, cells []secCell) map[string]secResult {
		res := map[string]secResult{}
		for _, c := range cells {
			err := saramaCell(addr[c.listener], saramaConfig(a, c, cert), c)
			res[c.name] = saramaResult(err)
		}
		return res
	}}
	runSecMatrix(t, a, "sarama", cl)
}

func TestSecurityClientsPython(t *testing.T) {
	python := pythonVenv(t)
	a := startAuthCluster(t)
	script := filepath.Join(harness.RepoRoot(), "tests", "integration", "testdata", "security_client.py")
	for _, lib := range []struct{ name, prefix string }{{"kafka-python", "kpy"}, {"confluent-kafka", "ck"}} {
		t.Run(lib.name, func(t *testing.T) {
			cl := secClient{name: lib.name, run: func(t *testing.T, cells []secCell) map[string]secResult {
				return runSecProcess(t, lib.name, python, "-u", script, lib.name, a.writeSecSpec(t, cells))
			}}
			switch lib.name {
			case "kafka-python":
				// kafka-python raises no error for a refused login: it logs
				// the broker's SASL_AUTHENTICATION_FAILED and treats the
				// broker as unreachable (security_client.py, SaslLog)
				cl.authFailure = func(r secResult) bool {
					return r.code == "LOGGED_SASL_AUTHENTICATION_FAILED" && strings.Contains(r.detail, "Authentication failed")
				}
			case "confluent-kafka":
				// librdkafka reports a refused login as its local
				// _AUTHENTICATION error carrying the broker's message
				cl.authFailure = func(r secResult) bool {
					return r.code == "_AUTHENTICATION" && strings.Contains(r.detail, "Authentication failed")
				}
			}
			runSecMatrix(t, a, lib.prefix, cl)
		})
	}
}

func TestSecurityClientsJava(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("java not installed")
	}
	cp := harness.KafkaClasspath(t)
	a := startAuthCluster(t)
	src := filepath.Join(harness.RepoRoot(), "tests", "integration", "testdata", "SecurityClient.java")
	cl := secClient{name: "java", run: func(t *testing.T, cells []secCell) map[string]secResult {
		return runSecProcess(t, "java", "java", "-Xmx256m", "-cp", cp, src, a.writeSecSpec(t, cells))
	}}
	runSecMatrix(t, a, "java", cl)
}
