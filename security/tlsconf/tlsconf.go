// Package tlsconf holds the broker's TLS server settings: the certificate,
// key and CA files (Kafka's ssl.keystore/ssl.truststore, read as PEM the
// way Postgres reads its ssl_cert_file, ssl_key_file and ssl_ca_file),
// ssl.client.auth and the lowest TLS version. The files are read again on
// Reload (SIGHUP), so certificates are renewed without a restart; handshakes
// already under way keep the configuration they started with.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// ClientAuth is Kafka's ssl.client.auth.
type ClientAuth int

const (
	ClientAuthNone      ClientAuth = iota // no client certificate asked for
	ClientAuthRequested                   // asked for; verified when given
	ClientAuthRequired                    // a verified certificate or no connection
)

// ParseClientAuth reads none, requested or required.
func ParseClientAuth(s string) (ClientAuth, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return ClientAuthNone, nil
	case "requested":
		return ClientAuthRequested, nil
	case "required":
		return ClientAuthRequired, nil
	}
	return 0, fmt.Errorf("ssl client auth %q: want none, requested or required", s)
}

func (c ClientAuth) String() string {
	return [...]string{"none", "requested", "required"}[c]
}

// ParseMinVersion reads the lowest protocol version accepted, spelled as
// Kafka's ssl.enabled.protocols and Postgres's ssl_min_protocol_version
// spell it. Below TLSv1.2 is refused: Kafka 4 enables only 1.2 and 1.3.
func ParseMinVersion(s string) (uint16, error) {
	switch s {
	case "", "TLSv1.2":
		return tls.VersionTLS12, nil
	case "TLSv1.3":
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("minimum TLS version %q: want TLSv1.2 or TLSv1.3", s)
}

// Files is what the broker is configured with.
type Files struct {
	CertFile, KeyFile string // PEM; the certificate file may hold the chain
	CAFile            string // PEM; the CAs client certificates must chain to
	ClientAuth        ClientAuth
	MinVersion        uint16
}

// Server serves TLS with the files as last loaded.
type Server struct {
	files Files
	// The configurations handed to new handshakes: with the configured
	// client authentication (SSL listeners), and without (SASL_SSL, where
	// the principal comes from SASL).
	withAuth, noAuth atomic.Pointer[tls.Config]
}

// Load reads the files once; an error names the file at fault.
func Load(f Files) (*Server, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("TLS needs a certificate file and a key file")
	}
	if f.ClientAuth != ClientAuthNone && f.CAFile == "" {
		return nil, fmt.Errorf("ssl client auth %s needs a CA file to verify client certificates with", f.ClientAuth)
	}
	if f.MinVersion == 0 {
		f.MinVersion = tls.VersionTLS12
	}
	s := &Server{files: f}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. On failure the previous configuration
// stays in use.
func (s *Server) Reload() error {
	cert, err := tls.LoadX509KeyPair(s.files.CertFile, s.files.KeyFile)
	if err != nil {
		return fmt.Errorf("load TLS certificate %s and key %s: %w", s.files.CertFile, s.files.KeyFile, err)
	}
	base := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: s.files.MinVersion}
	noAuth := base.Clone()
	withAuth := base.Clone()
	if s.files.CAFile != "" {
		pem, err := os.ReadFile(s.files.CAFile)
		if err != nil {
			return fmt.Errorf("read TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("TLS CA file %s holds no PEM certificate", s.files.CAFile)
		}
		withAuth.ClientCAs = pool
	}
	switch s.files.ClientAuth {
	case ClientAuthRequested:
		withAuth.ClientAuth = tls.VerifyClientCertIfGiven
	case ClientAuthRequired:
		withAuth.ClientAuth = tls.RequireAndVerifyClientCert
	}
	s.withAuth.Store(withAuth)
	s.noAuth.Store(noAuth)
	return nil
}

// Config is the configuration for a listener's connections: one that picks
// the files as last loaded for each handshake. clientAuth asks for client
// certificates as configured.
func (s *Server) Config(clientAuth bool) *tls.Config {
	cur := &s.noAuth
	if clientAuth {
		cur = &s.withAuth
	}
	return &tls.Config{
		MinVersion: s.files.MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return cur.Load(), nil
		},
	}
}

// ClientAuth is the configured ssl.client.auth.
func (s *Server) ClientAuth() ClientAuth { return s.files.ClientAuth }
