package main

// The secure pair (issue #13): a reference Kafka 4.4 and a kafgres cluster
// configured alike — SASL_PLAINTEXT and SASL_SSL listeners, SCRAM-SHA-256
// and PLAIN, users admin and alice, StandardAuthorizer semantics with
// super.users=User:admin — against which the scenarios marked "secure" run,
// each with the client flags and the ACLs scenarios.json gives it
// (PROTOCOL.md "Security").

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The users both brokers of the secure pair know. bob, whom the
// unknown-user scenario logs in as, exists on neither.
var secureUsers = []struct{ Name, Password string }{
	{"admin", "admin-secret"},
	{"alice", "alice-secret"},
}

const secureSuperUser = "User:admin"

// ClientSecurity is how a secure scenario's client connects: the flags of
// PROTOCOL.md "Security" (--security-protocol, --sasl-mechanism,
// --username, --password; --ca-file is added by the runner for SASL_SSL).
type ClientSecurity struct {
	Protocol  string `json:"protocol"` // SASL_PLAINTEXT or SASL_SSL
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	Password  string `json:"password"`
}

// args are the client flags for this security on a broker whose CA is caFile.
func (s *ClientSecurity) args(caFile string) []string {
	a := []string{"--security-protocol", s.Protocol, "--sasl-mechanism", s.Mechanism,
		"--username", s.Username, "--password", s.Password}
	if s.Protocol == "SASL_SSL" {
		a = append(a, "--ca-file", caFile)
	}
	return a
}

// ACLSpec is one ACL a secure scenario needs, as scenarios.json spells it:
// Kafka's enum names, and "{prefix}" and "{topic}" in the resource name
// for the client's prefix and the scenario's topic 0.
type ACLSpec struct {
	Principal    string                      `json:"principal"`
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Name         string                      `json:"name"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

func (a ACLSpec) resolve(prefix, scenario string) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType = a.ResourceType
	c.ResourceName = strings.NewReplacer("{prefix}", prefix, "{topic}", fmt.Sprintf("%s-%s-0", prefix, scenario)).Replace(a.Name)
	c.ResourcePatternType = a.PatternType
	c.Principal = a.Principal
	c.Host = "*"
	c.Operation = a.Operation
	c.PermissionType = a.Permission
	return c
}

// SecureBroker is one broker of the secure pair as the gate sees it.
type SecureBroker struct {
	Broker            // Addr is the SASL_PLAINTEXT listener; CreateTopics as admin
	SSLAddr string    // the SASL_SSL listener
	CAFile  string    // the CA its certificate chains to
	Admin   []kgo.Opt // the runner's own connection, as User:admin
}

// addrFor is the listener a client with this security connects to.
func (b *SecureBroker) addrFor(s *ClientSecurity) string {
	if s != nil && s.Protocol == "SASL_SSL" {
		return b.SSLAddr
	}
	return b.Addr
}

// adminOpts are franz-go options for User:admin over SASL_PLAINTEXT.
func adminOpts(addr string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism()),
	}
}

// SetACLs creates the ACLs as User:admin and checks every creation.
func SetACLs(ctx context.Context, opts []kgo.Opt, acls []kmsg.CreateACLsRequestCreation) error {
	if len(acls) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = acls
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("CreateAcls: %w", err)
	}
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("CreateAcls %+v: %w (%v)", acls[i], err, deref(r.ErrorMessage))
		}
	}
	return waitACLs(ctx, cl, len(acls))
}

// ClearACLs deletes every ACL, as User:admin.
func ClearACLs(ctx context.Context, opts []kgo.Opt) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType = kmsg.ACLResourceTypeAny
	f.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	f.Operation = kmsg.ACLOperationAny
	f.PermissionType = kmsg.ACLPermissionTypeAny
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Filters = []kmsg.DeleteACLsRequestFilter{f}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("DeleteAcls: %w", err)
	}
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("DeleteAcls: %w (%v)", err, deref(r.ErrorMessage))
		}
	}
	return waitACLs(ctx, cl, 0)
}

// waitACLs waits until DescribeAcls lists n ACLs: Kafka applies them
// through its metadata log, after CreateAcls has answered.
func waitACLs(ctx context.Context, cl *kgo.Client, n int) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType = kmsg.ACLResourceTypeAny
		req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
		req.Operation = kmsg.ACLOperationAny
		req.PermissionType = kmsg.ACLPermissionTypeAny
		resp, err := req.RequestWith(ctx, cl)
		got := -1
		if err == nil && resp.ErrorCode == 0 {
			got = 0
			for _, r := range resp.Resources {
				got += len(r.ACLs)
			}
		}
		if got == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("DescribeAcls lists %d ACLs, want %d (err %v)", got, n, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// PKI is the certificate material of the secure pair: one CA and a server
// certificate for 127.0.0.1 (IP SAN, so clients verify the host), both
// brokers serving the same one.
type PKI struct {
	CAFile   string // CA certificate, PEM (clients' --ca-file)
	CertFile string // server certificate, PEM
	KeyFile  string // its key, PKCS#8 PEM
	Keystore string // key then certificate chain in one PEM (Kafka's ssl.keystore.type=PEM)
}

// WritePKI generates the CA and the server certificate into dir.
func WritePKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kafgres conformance CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make the server certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	p := &PKI{
		CAFile:   filepath.Join(dir, "ca.crt"),
		CertFile: filepath.Join(dir, "server.crt"),
		KeyFile:  filepath.Join(dir, "server.key"),
		Keystore: filepath.Join(dir, "server-keystore.pem"),
	}
	files := []struct {
		name string
		data []byte
	}{
		{p.CAFile, caPEM},
		{p.CertFile, append(append([]byte{}, certPEM...), caPEM...)},
		{p.KeyFile, keyPEM},
		{p.Keystore, append(append(append([]byte{}, keyPEM...), certPEM...), caPEM...)},
	}
	for _, f := range files {
		// readable by the "postgres" OS user the kafgres cluster runs as;
		// a throwaway test key
		if err := os.WriteFile(f.name, f.data, 0o644); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// TLSConfig trusts the PKI's CA (the runner's own SASL_SSL connections).
func (p *PKI) TLSConfig() (*tls.Config, error) {
	b, err := os.ReadFile(p.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("no CA certificate in " + p.CAFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// secureReferenceBroker is the secure reference as the gate uses it; its
// topics are created through the Admin API as User:admin (the Java client
// of CreateReferenceTopics speaks PLAINTEXT only).
func secureReferenceBroker(r *Reference, pki *PKI) *SecureBroker {
	admin := adminOpts(r.Addr())
	return &SecureBroker{
		Broker: Broker{Name: "reference", Addr: r.Addr(), CreateTopics: func(ctx context.Context, topics []TopicSpec) error {
			return createTopicsAs(ctx, admin, topics)
		}},
		SSLAddr: r.SSLAddr(), CAFile: pki.CAFile, Admin: admin,
	}
}

func createTopicsAs(ctx context.Context, opts []kgo.Opt, topics []TopicSpec) error {
	if len(topics) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t.Name
		rt.NumPartitions = int32(t.Partitions)
		rt.ReplicationFactor = 1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("CreateTopics %s: %w (%v)", t.Topic, err, deref(t.ErrorMessage))
		}
	}
	return nil
}
