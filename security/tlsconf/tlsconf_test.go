package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// handshake runs a TLS handshake between the server config and a client
// that offers at most maxVersion.
func handshake(server *tls.Config, pool *x509.CertPool, maxVersion uint16) error {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errs := make(chan error, 1)
	go func() { errs <- tls.Server(a, server).Handshake() }()
	cerr := tls.Client(b, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MaxVersion: maxVersion}).Handshake()
	b.Close()
	serr := <-errs
	if cerr != nil {
		return cerr
	}
	return serr
}

// TestMinVersion: kafgres.ssl_min_protocol_version refuses clients that
// cannot speak it.
func TestMinVersion(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	for _, tc := range []struct {
		min, clientMax string
		ok             bool
	}{
		{"TLSv1.2", "TLSv1.2", true},
		{"TLSv1.2", "TLSv1.3", true},
		{"TLSv1.3", "TLSv1.3", true},
		{"TLSv1.3", "TLSv1.2", false},
	} {
		min, err := ParseMinVersion(tc.min)
		if err != nil {
			t.Fatal(err)
		}
		clientMax, _ := ParseMinVersion(tc.clientMax)
		s, err := Load(Files{CertFile: certFile, KeyFile: keyFile, MinVersion: min})
		if err != nil {
			t.Fatal(err)
		}
		if err := handshake(s.Config(false), pool, clientMax); (err == nil) != tc.ok {
			t.Errorf("minimum %s, client up to %s: handshake error %v, want ok=%v", tc.min, tc.clientMax, err, tc.ok)
		}
	}
	if _, err := ParseMinVersion("TLSv1.1"); err == nil {
		t.Error("TLSv1.1 accepted as a minimum")
	}
}
