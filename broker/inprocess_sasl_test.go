package broker

// Listeners and authentication, in process: SASL listeners whose users are
// metadata.Memory roles, TLS with certificates made by the test.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/security/tlsconf"
)

// A verifier Postgres 15 made for the password "pencil".
const pencilVerifier = "SCRAM-SHA-256$4096:+FtRzwUvRTUUIc6d1nt9Xg==$SlJy3wwGBWBE1riacMg3WO7o9xzA7f6davgdONslktM=:myMA7xhYP5aq3+0PpRbeFTBMuWp+RGePmcSXAaXOuJM="

// listenerBroker is a broker serving every listener of its config, each on
// an ephemeral loopback port.
type listenerBroker struct {
	*testBroker
	addrs map[string]string // listener name → address
}

// startListenerBroker serves cfg's listeners (their addresses replaced by
// ephemeral ports). prepare runs on the broker before it serves.
func startListenerBroker(t *testing.T, listeners []Listener, mem *metadata.Memory, adjust func(*Config), prepare func(*Broker)) *listenerBroker {
	t.Helper()
	cfg := Config{
		DataDir:                    t.TempDir(),
		DSN:                        "unused: the store is in memory",
		GroupInitialRebalanceDelay: -1,
		MirrorInterval:             time.Millisecond,
		RoleCheckInterval:          20 * time.Millisecond,
		FailedAuthDelay:            time.Millisecond,
	}
	var lns []net.Listener
	addrs := map[string]string{}
	for _, l := range listeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		l.Addr = ln.Addr().String()
		if l.AdvertisedHost == "" {
			l.AdvertisedHost = "127.0.0.1"
		}
		if l.AdvertisedPort == 0 {
			l.AdvertisedPort = int32(ln.Addr().(*net.TCPAddr).Port)
		}
		addrs[l.Name] = l.Addr
		cfg.Listeners = append(cfg.Listeners, l)
	}
	if adjust != nil {
		adjust(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	b, err := open(ctx, cfg, mem, log)
	if err != nil {
		cancel()
		for _, ln := range lns {
			ln.Close()
		}
		t.Fatalf("open broker: %v", err)
	}
	if prepare != nil {
		prepare(b)
	}
	done := make(chan error, 1)
	go func() { done <- b.Serve(ctx, lns...) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
			b.Close()
		})
	}
	t.Cleanup(stop)
	tb := &testBroker{Broker: b, t: t, meta: mem, addr: cfg.Listeners[0].Addr, stop: stop}
	return &listenerBroker{testBroker: tb, addrs: addrs}
}

func (lb *listenerBroker) dialListener(t *testing.T, name string) *testClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", lb.addrs[name], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &testClient{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func saslListener() []Listener {
	return []Listener{{Name: "SASL_PLAINTEXT", Protocol: SASLPlaintext}}
}

func memWithAlice() *metadata.Memory {
	mem := metadata.NewMemory()
	mem.SetRole("alice", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true})
	return mem
}

func handshake(t *testing.T, c *testClient, version int16, mech string) *kmsg.SASLHandshakeResponse {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = version, mech
	return c.do(req).(*kmsg.SASLHandshakeResponse)
}

func authenticate(c *testClient, version int16, token []byte) (*kmsg.SASLAuthenticateResponse, error) {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = version, token
	resp, err := c.roundTrip(req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.SASLAuthenticateResponse), nil
}

// scramLogin runs a SCRAM-SHA-256 exchange over SaslAuthenticate at
// version; it returns the last response, or the first failed one.
func scramLogin(t *testing.T, c *testClient, version int16, user, password string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	client, err := scram.SHA256.NewClient(user, password, "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	first, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := authenticate(c, version, []byte(first))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		return resp
	}
	final, err := conv.Step(string(resp.SASLAuthBytes))
	if err != nil {
		t.Fatal(err)
	}
	resp, err = authenticate(c, version, []byte(final))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode == 0 {
		if _, err := conv.Step(string(resp.SASLAuthBytes)); err != nil {
			t.Fatalf("server final message: %v", err)
		}
	}
	return resp
}

// expectClosed checks that the broker closes c without answering further.
func expectClosed(t *testing.T, c *testClient) {
	t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.r.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("connection still open (read %d bytes, err %v)", n, err)
	}
}

func TestSASLScramV1(t *testing.T) {
	lb := startListenerBroker(t, saslListener(), memWithAlice(), nil, nil)
	c := lb.dialListener(t, "SASL_PLAINTEXT")

	av := c.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	versions := map[int16][2]int16{}
	for _, k := range av.ApiKeys {
		versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if versions[17] != [2]int16{0, 1} || versions[36] != [2]int16{0, 2} {
		t.Fatalf("ApiVersions before authentication: SaslHandshake %v, SaslAuthenticate %v", versions[17], versions[36])
	}
	hs := handshake(t, c, 1, "SCRAM-SHA-256")
	if hs.ErrorCode != 0 || strings.Join(hs.SupportedMechanisms, ",") != "SCRAM-SHA-256" {
		t.Fatalf("handshake: code %d, mechanisms %v (PLAIN must not be offered without TLS)", hs.ErrorCode, hs.SupportedMechanisms)
	}
	resp := scramLogin(t, c, 2, "alice", "pencil")
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 0 {
		t.Fatalf("authenticate: code %d %v, lifetime %d", resp.ErrorCode, resp.ErrorMessage, resp.SessionLifetimeMillis)
	}
	c.do(kmsg.NewPtrMetadataRequest())

	// Authenticated: both SASL keys answer as Kafka's KafkaApis does.
	if hs := handshake(t, c, 1, "SCRAM-SHA-256"); hs.ErrorCode != kerr.IllegalSaslState.Code || len(hs.SupportedMechanisms) != 0 {
		t.Fatalf("handshake after authentication: %+v", hs)
	}
	again, err := authenticate(c, 1, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if again.ErrorCode != kerr.IllegalSaslState.Code || again.ErrorMessage == nil || *again.ErrorMessage != "SaslAuthenticate request received after successful authentication" {
		t.Fatalf("authenticate after authentication: %+v", again)
	}
	c.do(kmsg.NewPtrMetadataRequest())
}

func TestSASLRequestBeforeAuthenticationCloses(t *testing.T) {
	lb := startListenerBroker(t, saslListener(), memWithAlice(), nil, nil)
	c := lb.dialListener(t, "SASL_PLAINTEXT")
	if _, err := c.roundTrip(kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("Metadata before authentication was answered")
	}

	// During the exchange (v1), another request gets its own error
	// response with ILLEGAL_SASL_STATE, then the close.
	c = lb.dialListener(t, "SASL_PLAINTEXT")
	handshake(t, c, 1, "SCRAM-SHA-256")
	resp, err := c.roundTrip(kmsg.NewPtrDescribeClusterRequest())
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.DescribeClusterResponse).ErrorCode; code != kerr.IllegalSaslState.Code {
		t.Fatalf("DescribeCluster during authentication: code %d", code)
	}
	expectClosed(t, c)

	// A second ApiVersions before the handshake closes.
	c = lb.dialListener(t, "SASL_PLAINTEXT")
	c.do(kmsg.NewPtrApiVersionsRequest())
	if _, err := c.roundTrip(kmsg.NewPtrApiVersionsRequest()); err == nil {
		t.Fatal("second ApiVersions before the handshake was answered")
	}
}

func TestSASLFailures(t *testing.T) {
	mem := memWithAlice()
	mem.SetRole("nologin", metadata.MemoryRole{Verifier: pencilVerifier})
	mem.SetRole("expired", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true, ValidUntil: time.Now().Add(-time.Hour)})
	mem.SetRole("outsider", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true})
	mem.SetRole("member", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true, MemberOf: []string{"kafka_clients"}})
	lb := startListenerBroker(t, saslListener(), mem, func(c *Config) { c.ClientRole = "kafka_clients" }, nil)
	const refused = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
	for _, tc := range []struct{ user, password string }{
		{"member", "wrong"}, {"nobody", "pencil"}, {"nologin", "pencil"}, {"expired", "pencil"}, {"outsider", "pencil"},
	} {
		c := lb.dialListener(t, "SASL_PLAINTEXT")
		handshake(t, c, 1, "SCRAM-SHA-256")
		resp := scramLogin(t, c, 1, tc.user, tc.password)
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != refused {
			t.Errorf("%s/%s: code %d, message %v", tc.user, tc.password, resp.ErrorCode, resp.ErrorMessage)
		}
		expectClosed(t, c)
	}
	c := lb.dialListener(t, "SASL_PLAINTEXT")
	handshake(t, c, 1, "SCRAM-SHA-256")
	if resp := scramLogin(t, c, 1, "member", "pencil"); resp.ErrorCode != 0 {
		t.Fatalf("member of the client role: code %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
}

// TestSASLFailureAnswerDelayed: the failure's answer itself waits for
// connection.failed.authentication.delay.ms, as Kafka sends it only when
// its delayed close comes due, so a client learns of a wrong password no
// sooner than that.
func TestSASLFailureAnswerDelayed(t *testing.T) {
	const delay = 300 * time.Millisecond
	lb := startListenerBroker(t, saslListener(), memWithAlice(), func(c *Config) { c.FailedAuthDelay = delay }, nil)
	c := lb.dialListener(t, "SASL_PLAINTEXT")
	handshake(t, c, 1, "SCRAM-SHA-256")
	start := time.Now()
	resp := scramLogin(t, c, 1, "alice", "wrong")
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("wrong password: code %d", resp.ErrorCode)
	}
	if took := time.Since(start); took < delay {
		t.Errorf("the failure was answered after %v, before the %v delay", took, delay)
	}
	expectClosed(t, c)
}

func TestSASLMechanismRefused(t *testing.T) {
	lb := startListenerBroker(t, saslListener(), memWithAlice(), nil, nil)
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-512", "scram-sha-256"} {
		c := lb.dialListener(t, "SASL_PLAINTEXT")
		hs := handshake(t, c, 1, mech)
		if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(hs.SupportedMechanisms, ",") != "SCRAM-SHA-256" {
			t.Errorf("%s: %+v", mech, hs)
		}
		expectClosed(t, c)
	}
}

// TestSASLHandshakeV0 sends the tokens bare after a v0 handshake.
func TestSASLHandshakeV0(t *testing.T) {
	lb := startListenerBroker(t, saslListener(), memWithAlice(), nil, nil)
	c := lb.dialListener(t, "SASL_PLAINTEXT")
	handshake(t, c, 0, "SCRAM-SHA-256")
	client, _ := scram.SHA256.NewClient("alice", "pencil", "")
	conv := client.NewConversation()
	token, _ := conv.Step("")
	for !conv.Done() {
		if _, err := c.nc.Write(frame([]byte(token))); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c.r, size[:]); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c.r, reply); err != nil {
			t.Fatal(err)
		}
		var err error
		if token, err = conv.Step(string(reply)); err != nil {
			t.Fatal(err)
		}
	}
	if !conv.Valid() {
		t.Fatal("server signature not valid")
	}
	c.do(kmsg.NewPtrMetadataRequest())

	// A wrong password over v0 is not answered: the connection closes.
	c = lb.dialListener(t, "SASL_PLAINTEXT")
	handshake(t, c, 0, "SCRAM-SHA-256")
	client, _ = scram.SHA256.NewClient("alice", "wrong", "")
	conv = client.NewConversation()
	first, _ := conv.Step("")
	c.nc.Write(frame([]byte(first)))
	var size [4]byte
	io.ReadFull(c.r, size[:])
	reply := make([]byte, binary.BigEndian.Uint32(size[:]))
	io.ReadFull(c.r, reply)
	final, _ := conv.Step(string(reply))
	c.nc.Write(frame([]byte(final)))
	expectClosed(t, c)
}

func TestSASLReauthentication(t *testing.T) {
	lb := startListenerBroker(t, saslListener(), memWithAlice(), func(c *Config) { c.ConnectionsMaxReauth = 1500 * time.Millisecond }, nil)
	c := lb.dialListener(t, "SASL_PLAINTEXT")
	handshake(t, c, 1, "SCRAM-SHA-256")
	if resp := scramLogin(t, c, 1, "alice", "pencil"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 1500 {
		t.Fatalf("authenticate: code %d, lifetime %d, want 1500", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	c.do(kmsg.NewPtrMetadataRequest())
	// Re-authenticate (KIP-368): a handshake and a new exchange on the
	// same connection.
	if hs := handshake(t, c, 1, "SCRAM-SHA-256"); hs.ErrorCode != 0 {
		t.Fatalf("re-authentication handshake: %+v", hs)
	}
	if resp := scramLogin(t, c, 2, "alice", "pencil"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 1500 {
		t.Fatalf("re-authenticate: code %d, lifetime %d", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	// A second re-authentication within a second is answered as after
	// authentication.
	if hs := handshake(t, c, 1, "SCRAM-SHA-256"); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("re-authentication within a second: %+v", hs)
	}
	c.do(kmsg.NewPtrMetadataRequest())
	time.Sleep(1600 * time.Millisecond) // past the lifetime: the next request must close
	if _, err := c.roundTrip(kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("request after the session lifetime was answered")
	}
}

func TestSASLReauthenticationOtherPrincipal(t *testing.T) {
	mem := memWithAlice()
	mem.SetRole("bob", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true})
	lb := startListenerBroker(t, saslListener(), mem, func(c *Config) { c.ConnectionsMaxReauth = time.Hour }, nil)
	c := lb.dialListener(t, "SASL_PLAINTEXT")
	handshake(t, c, 1, "SCRAM-SHA-256")
	scramLogin(t, c, 1, "alice", "pencil")
	handshake(t, c, 1, "SCRAM-SHA-256")
	resp := scramLogin(t, c, 1, "bob", "pencil")
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != "Cannot change principals during re-authentication from User.alice: User.bob" {
		t.Fatalf("re-authentication as bob: code %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	expectClosed(t, c)
}

// TestSASLRoleExpiry: the session lifetime ends at the role's VALID UNTIL.
func TestSASLRoleExpiry(t *testing.T) {
	mem := metadata.NewMemory()
	mem.SetRole("alice", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true, ValidUntil: time.Now().Add(time.Hour)})
	lb := startListenerBroker(t, saslListener(), mem, func(c *Config) { c.RoleCheckInterval = time.Hour }, nil)
	c := lb.dialListener(t, "SASL_PLAINTEXT")
	handshake(t, c, 1, "SCRAM-SHA-256")
	resp := scramLogin(t, c, 1, "alice", "pencil")
	if got := time.Duration(resp.SessionLifetimeMillis) * time.Millisecond; resp.ErrorCode != 0 || got > time.Hour || got < 59*time.Minute {
		t.Fatalf("authenticate: code %d, lifetime %v, want about an hour", resp.ErrorCode, got)
	}
}

// TestSASLRoleRevoked: a role that is dropped or loses LOGIN loses its
// connections within the role check interval.
func TestSASLRoleRevoked(t *testing.T) {
	mem := memWithAlice()
	mem.SetRole("bob", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true})
	lb := startListenerBroker(t, saslListener(), mem, nil, nil)
	login := func(user string) *testClient {
		c := lb.dialListener(t, "SASL_PLAINTEXT")
		handshake(t, c, 1, "SCRAM-SHA-256")
		if resp := scramLogin(t, c, 1, user, "pencil"); resp.ErrorCode != 0 {
			t.Fatalf("%s: code %d", user, resp.ErrorCode)
		}
		return c
	}
	alice, bob := login("alice"), login("bob")
	mem.DropRole("alice")
	expectClosed(t, alice)
	bob.do(kmsg.NewPtrMetadataRequest())
	mem.SetRole("bob", metadata.MemoryRole{Verifier: pencilVerifier})
	expectClosed(t, bob)
}

func TestPlaintextListenerSASLKeys(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	if hs := handshake(t, c, 1, "SCRAM-SHA-256"); hs.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT: %+v", hs)
	}
	c.do(kmsg.NewPtrMetadataRequest())
}

// TestListenerEndpoints: each listener's clients are told that listener's
// advertised endpoint.
func TestListenerEndpoints(t *testing.T) {
	lb := startListenerBroker(t, []Listener{
		{Name: "INTERNAL", Protocol: Plaintext, AdvertisedHost: "internal.example", AdvertisedPort: 19092},
		{Name: "EXTERNAL", Protocol: Plaintext, AdvertisedHost: "external.example", AdvertisedPort: 29092},
	}, metadata.NewMemory(), nil, nil)
	for name, host := range map[string]string{"INTERNAL": "internal.example", "EXTERNAL": "external.example"} {
		c := lb.dialListener(t, name)
		md := c.do(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		fcr := c.do(fc).(*kmsg.FindCoordinatorResponse)
		dc := c.do(kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse)
		if md.Brokers[0].Host != host || fcr.Host != host || dc.Brokers[0].Host != host {
			t.Errorf("%s: Metadata %s, FindCoordinator %s, DescribeCluster %s; want %s", name, md.Brokers[0].Host, fcr.Host, dc.Brokers[0].Host, host)
		}
	}
}

// testPKI is a CA with a server certificate for 127.0.0.1 and client
// certificates, written as PEM files.
type testPKI struct {
	dir               string
	ca                *x509.Certificate
	caKey             *ecdsa.PrivateKey
	caFile            string
	certFile, keyFile string
	pool              *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	p.caKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.ca)
	p.caFile = p.write(t, "ca.crt", "CERTIFICATE", der)
	server := p.issue(t, pkix.Name{CommonName: "127.0.0.1"}, true)
	p.certFile = p.write(t, "server.crt", "CERTIFICATE", server.Certificate[0])
	keyDER, _ := x509.MarshalECPrivateKey(server.PrivateKey.(*ecdsa.PrivateKey))
	p.keyFile = p.write(t, "server.key", "EC PRIVATE KEY", keyDER)
	return p
}

func (p *testPKI) write(t *testing.T, name, kind string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (p *testPKI) issue(t *testing.T, subject pkix.Name, server bool) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (p *testPKI) files(auth tlsconf.ClientAuth) tlsconf.Files {
	return tlsconf.Files{CertFile: p.certFile, KeyFile: p.keyFile, CAFile: p.caFile, ClientAuth: auth}
}

func (lb *listenerBroker) dialTLS(t *testing.T, name string, p *testPKI, certs ...tls.Certificate) (*testClient, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	nc, err := tls.DialWithDialer(d, "tcp", lb.addrs[name], &tls.Config{RootCAs: p.pool, Certificates: certs, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { nc.Close() })
	if err := nc.Handshake(); err != nil {
		return nil, err
	}
	return &testClient{t: t, nc: nc, r: bufio.NewReader(nc)}, nil
}

// principalProbe makes DescribeCluster report the connection's principal
// as its cluster id, so a test can see who the broker took the client for.
func principalProbe(b *Broker) {
	for i := range b.apis {
		if b.apis[i].key == 60 {
			b.apis[i].handle = func(_ context.Context, _ *Broker, cc *conn, req kmsg.Request) (kmsg.Response, error) {
				resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
				resp.ClusterID = cc.Principal() + " via " + cc.ListenerName()
				return resp, nil
			}
		}
	}
}

func principalOf(t *testing.T, c *testClient) string {
	t.Helper()
	return c.do(kmsg.NewPtrDescribeClusterRequest()).(*kmsg.DescribeClusterResponse).ClusterID
}

func TestMutualTLSPrincipal(t *testing.T) {
	p := newTestPKI(t)
	lb := startListenerBroker(t, []Listener{{Name: "SSL", Protocol: SSL}}, metadata.NewMemory(), func(c *Config) {
		c.TLS = p.files(tlsconf.ClientAuthRequired)
		c.PrincipalMappingRules = "RULE:^CN=([^,]*),OU=kafka,.*$/$1/L,DEFAULT"
	}, principalProbe)
	c, err := lb.dialTLS(t, "SSL", p, p.issue(t, pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"kafka"}, Organization: []string{"Example"}}, false))
	if err != nil {
		t.Fatal(err)
	}
	if got := principalOf(t, c); got != "User:alice via SSL" {
		t.Fatalf("mapped principal %q", got)
	}
	c, err = lb.dialTLS(t, "SSL", p, p.issue(t, pkix.Name{CommonName: "Bob", Organization: []string{"Example"}}, false))
	if err != nil {
		t.Fatal(err)
	}
	if got := principalOf(t, c); got != "User:CN=Bob,O=Example via SSL" {
		t.Fatalf("DEFAULT principal %q", got)
	}
	// Without a certificate the handshake fails (TLS 1.3 reports it on
	// the first read).
	c, err = lb.dialTLS(t, "SSL", p)
	if err == nil {
		if _, err = c.roundTrip(kmsg.NewPtrDescribeClusterRequest()); err == nil {
			t.Fatal("connection without a client certificate served")
		}
	}
}

func TestSASLSSLPlain(t *testing.T) {
	p := newTestPKI(t)
	lb := startListenerBroker(t, []Listener{{Name: "SASL_SSL", Protocol: SASLSSL}}, memWithAlice(), func(c *Config) {
		c.TLS = p.files(tlsconf.ClientAuthNone)
	}, principalProbe)
	c, err := lb.dialTLS(t, "SASL_SSL", p)
	if err != nil {
		t.Fatal(err)
	}
	hs := handshake(t, c, 1, "PLAIN")
	if hs.ErrorCode != 0 || strings.Join(hs.SupportedMechanisms, ",") != "SCRAM-SHA-256,PLAIN" {
		t.Fatalf("handshake: %+v", hs)
	}
	resp, err := authenticate(c, 1, []byte("\x00alice\x00pencil"))
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("PLAIN: %v %+v", err, resp)
	}
	if got := principalOf(t, c); got != "User:alice via SASL_SSL" {
		t.Fatalf("principal %q", got)
	}
	c, err = lb.dialTLS(t, "SASL_SSL", p)
	if err != nil {
		t.Fatal(err)
	}
	handshake(t, c, 1, "PLAIN")
	resp, err = authenticate(c, 1, []byte("\x00alice\x00wrong"))
	if err != nil || resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || *resp.ErrorMessage != "Authentication failed: Invalid username or password" {
		t.Fatalf("PLAIN, wrong password: %v %+v", err, resp)
	}
}

func TestTLSReload(t *testing.T) {
	p := newTestPKI(t)
	lb := startListenerBroker(t, []Listener{{Name: "SSL", Protocol: SSL}}, metadata.NewMemory(), func(c *Config) {
		c.TLS = p.files(tlsconf.ClientAuthNone)
	}, principalProbe)
	if _, err := lb.dialTLS(t, "SSL", p); err != nil {
		t.Fatal(err)
	}
	// A new CA and server certificate in the same files: clients that
	// trust only the new CA connect after the reload.
	q := newTestPKI(t)
	for _, f := range [][2]string{{q.certFile, p.certFile}, {q.keyFile, p.keyFile}} {
		b, _ := os.ReadFile(f[0])
		os.WriteFile(f[1], b, 0o600)
	}
	if _, err := lb.dialTLS(t, "SSL", q); err == nil {
		t.Fatal("new certificate served before the reload")
	}
	if err := lb.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	c, err := lb.dialTLS(t, "SSL", q)
	if err != nil {
		t.Fatal(err)
	}
	if got := principalOf(t, c); got != "User:ANONYMOUS via SSL" {
		t.Fatalf("principal %q", got)
	}
}

func TestParseListeners(t *testing.T) {
	ls, err := ParseListeners("SASL_SSL://0.0.0.0:9093, plaintext://127.0.0.1:9092,INTERNAL://[::1]:9094",
		"SASL_SSL://kafka.example:443", "INTERNAL:SASL_PLAINTEXT")
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{Name: "SASL_SSL", Protocol: SASLSSL, Addr: "0.0.0.0:9093", AdvertisedHost: "kafka.example", AdvertisedPort: 443},
		{Name: "PLAINTEXT", Protocol: Plaintext, Addr: "127.0.0.1:9092", AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092},
		{Name: "INTERNAL", Protocol: SASLPlaintext, Addr: "[::1]:9094", AdvertisedHost: "::1", AdvertisedPort: 9094},
	}
	if len(ls) != len(want) {
		t.Fatalf("got %+v", ls)
	}
	for i := range want {
		if ls[i] != want[i] {
			t.Errorf("listener %d: %+v, want %+v", i, ls[i], want[i])
		}
	}
	for _, bad := range [][3]string{
		{"FOO://:9092", "", ""},
		{"PLAINTEXT://:9092,PLAINTEXT://:9093", "", ""},
		{"PLAINTEXT://:9092", "SSL://x:1", ""},
		{"PLAINTEXT://:9092", "PLAINTEXT://0.0.0.0:1", ""},
		{"PLAINTEXT:9092", "", ""},
		{"", "", ""},
		{"A://:1", "", "A:KERBEROS"},
	} {
		if _, err := ParseListeners(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("ParseListeners%q accepted", bad)
		}
	}
}

// TestPlaintextRemoteRefused: safe by default.
func TestPlaintextRemoteRefused(t *testing.T) {
	base := Config{DataDir: "/d", DSN: "x"}
	for _, tc := range []struct {
		listeners string
		allow     bool
		ok        bool
	}{
		{"PLAINTEXT://127.0.0.1:9092", false, true},
		{"PLAINTEXT://localhost:9092", false, true},
		{"PLAINTEXT://[::1]:9092", false, true},
		{"PLAINTEXT://0.0.0.0:9092", false, false},
		{"PLAINTEXT://:9092", false, false},
		{"PLAINTEXT://10.0.0.1:9092", false, false},
		{"PLAINTEXT://0.0.0.0:9092", true, true},
		{"SASL_PLAINTEXT://0.0.0.0:9092", false, true},
	} {
		ls, err := ParseListeners(tc.listeners, "", "")
		if err != nil {
			t.Fatal(err)
		}
		cfg := base
		cfg.Listeners, cfg.AllowPlaintextRemote = ls, tc.allow
		err = cfg.validateDefaulted()
		if (err == nil) != tc.ok {
			t.Errorf("%s allow=%v: %v", tc.listeners, tc.allow, err)
		}
		if err != nil && !strings.Contains(err.Error(), "kafgres.allow_plaintext_remote") {
			t.Errorf("%s: the error does not name kafgres.allow_plaintext_remote: %v", tc.listeners, err)
		}
	}
	// The old --listen spelling is held to the same rule.
	cfg := base
	cfg.ListenAddr, cfg.AdvertisedHost, cfg.AdvertisedPort = ":9092", "h", 9092
	if err := cfg.validateDefaulted(); err == nil {
		t.Error("--listen=:9092 without allow_plaintext_remote accepted")
	}
	// PLAIN alone cannot serve SASL_PLAINTEXT.
	cfg = base
	cfg.Listeners, _ = ParseListeners("SASL_PLAINTEXT://127.0.0.1:1", "", "")
	cfg.SASLMechanisms = []string{"PLAIN"}
	if err := cfg.validateDefaulted(); err == nil || !strings.Contains(err.Error(), "PLAIN") {
		t.Errorf("PLAIN-only SASL_PLAINTEXT: %v", err)
	}
}
