package broker

// Who a connection is: the listener it came through, TLS, and the Kafka
// principal (User:ANONYMOUS, a client certificate's mapped subject, or the
// Postgres role a SASL client authenticated as). SASL users are Postgres
// roles: their SCRAM verifiers, LOGIN, rolvaliduntil and membership in
// kafgres.client_role are read through the metadata store, and the
// sessions of a role that is dropped, loses LOGIN or expires are ended
// within Config.RoleCheckInterval.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/security/acl"
	"github.com/kafgres/kafgres/security/principal"
	"github.com/kafgres/kafgres/security/sasl"
	"github.com/kafgres/kafgres/security/tlsconf"
)

// boundListener is a configured listener with what its connections need.
type boundListener struct {
	Listener
	tls   *tls.Config     // nil: no TLS
	mechs sasl.Mechanisms // SASL listeners only
}

// listenerMechanisms is the SASL mechanisms a listener of protocol p
// offers: the enabled ones, but PLAIN only under TLS.
func listenerMechanisms(enabled []string, p SecurityProtocol) (sasl.Mechanisms, error) {
	names := slices.Clone(enabled)
	if !p.TLS() {
		names = slices.DeleteFunc(names, func(n string) bool { return n == sasl.Plain })
		if len(names) == 0 {
			return sasl.Mechanisms{}, errors.New("PLAIN sends the password in clear and is offered on SASL_SSL listeners only; enable SCRAM-SHA-256 for SASL_PLAINTEXT")
		}
	}
	return sasl.NewMechanisms(names...)
}

// bindListeners prepares the configured listeners: TLS files loaded,
// mechanisms checked, the principal mapper parsed.
func (b *Broker) bindListeners() error {
	var err error
	if b.mapper, err = principal.ParseRules(b.cfg.PrincipalMappingRules); err != nil {
		return fmt.Errorf("ssl.principal.mapping.rules: %w", err)
	}
	for _, l := range b.cfg.Listeners {
		bl := &boundListener{Listener: l}
		if l.Protocol.TLS() {
			if b.tls == nil {
				if b.tls, err = tlsconf.Load(b.cfg.TLS); err != nil {
					return fmt.Errorf("listener %s: %w", l, err)
				}
			}
			// ssl.client.auth applies to SSL listeners; on SASL_SSL the
			// client is SASL's (Kafka takes it per listener there).
			bl.tls = b.tls.Config(l.Protocol == SSL)
		}
		if l.Protocol.SASL() {
			if bl.mechs, err = listenerMechanisms(b.cfg.SASLMechanisms, l.Protocol); err != nil {
				return fmt.Errorf("listener %s: %w", l, err)
			}
		}
		b.listeners = append(b.listeners, bl)
	}
	b.sessions = &sessions{b: b, conns: map[*conn]string{}}
	return nil
}

// ReloadTLS reads the certificate, key and CA files again (SIGHUP). New
// connections use them; open ones keep theirs. On failure the previous
// files stay in use.
func (b *Broker) ReloadTLS() error {
	if b.tls == nil {
		return nil
	}
	return b.tls.Reload()
}

// Listeners are the configured listeners, in the order Serve takes their
// sockets.
func (b *Broker) Listeners() []Listener {
	out := make([]Listener, len(b.listeners))
	for i, l := range b.listeners {
		out[i] = l.Listener
	}
	return out
}

// endpoint is where clients of cc's listener are told the broker is.
func (b *Broker) endpoint(cc *conn) (string, int32) {
	l := b.listeners[0]
	if cc != nil && cc.listener != nil {
		l = cc.listener
	}
	return l.AdvertisedHost, l.AdvertisedPort
}

// Principal is the connection's Kafka principal, "User:name": ANONYMOUS,
// a client certificate's mapped subject (SSL), or the SASL role.
func (cc *conn) Principal() string { return cc.principal.String() }

// ListenerName is the name of the listener the connection came through.
func (cc *conn) ListenerName() string { return cc.listener.Name }

// startTLS runs the server handshake of a TLS listener's connection
// within the handshake timeout, and finds the client certificate's
// principal.
func (b *Broker) startTLS(ctx context.Context, nc net.Conn, l *boundListener) (*tls.Conn, acl.Principal, error) {
	tc := tls.Server(nc, l.tls)
	hctx, cancel := context.WithTimeout(ctx, b.cfg.TLSHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, acl.Principal{}, fmt.Errorf("TLS handshake: %w", err)
	}
	p := anonymous
	if l.Protocol == SSL {
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
			dn, err := principal.SubjectName(certs[0])
			if err != nil {
				return nil, acl.Principal{}, fmt.Errorf("client certificate subject: %w", err)
			}
			name, err := b.mapper.Name(dn)
			if err != nil {
				return nil, acl.Principal{}, fmt.Errorf("client certificate subject %q: %w", dn, err)
			}
			p = acl.Principal{Type: acl.UserType, Name: name}
		}
	}
	return tc, p, nil
}

// roleAllowed says whether a role may hold a session now, and if not why.
func (b *Broker) roleAllowed(c metadata.RoleCredential, found bool, now time.Time) (bool, string) {
	switch {
	case !found:
		return false, "role does not exist"
	case !c.CanLogin:
		return false, "role has NOLOGIN"
	case !c.ValidUntil.IsZero() && !now.Before(c.ValidUntil):
		return false, "role's VALID UNTIL has passed"
	case !c.Member:
		return false, fmt.Sprintf("role is not a member of %s (kafgres.client_role)", b.cfg.ClientRole)
	}
	return true, ""
}

// roleLookup is the SASL exchange's view of pg_authid for one connection:
// it records the role's expiry for the session lifetime.
func (b *Broker) roleLookup(s *saslSession) sasl.Lookup {
	return func(ctx context.Context, user string) (sasl.Role, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		creds, err := b.meta.RoleCredentials(ctx, []string{user}, b.cfg.ClientRole)
		if err != nil {
			return sasl.Role{}, err
		}
		c, found := creds[user]
		if ok, why := b.roleAllowed(c, found, time.Now()); !ok {
			s.refusal = why
			if !found {
				return sasl.Role{Status: sasl.RoleUnknown}, nil
			}
			return sasl.Role{Status: sasl.RoleNotAllowed}, nil
		}
		if c.Verifier == "" {
			s.refusal = "role has no password Kafka clients can use (none set, or a superuser's withheld from a non-superuser broker role)"
		}
		s.validUntil = c.ValidUntil
		return sasl.Role{Status: sasl.RoleFound, Verifier: c.Verifier}, nil
	}
}

// sessions tracks the connections authenticated as Postgres roles, so
// that a role that may no longer log in loses its connections.
type sessions struct {
	b     *Broker
	mu    sync.Mutex
	conns map[*conn]string // connection → role
}

func (s *sessions) add(cc *conn, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns[cc] = role
}

func (s *sessions) remove(cc *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, cc)
}

// watchRoles checks the roles in use every RoleCheckInterval until ctx
// ends. A failed check (Postgres unreachable) closes nothing: it is
// logged and tried again at the next tick.
func (s *sessions) watchRoles(ctx context.Context) {
	every(ctx, s.b.cfg.RoleCheckInterval, func(time.Time) {
		if err := s.check(ctx); err != nil && ctx.Err() == nil {
			s.b.log.Warn("checking the roles of authenticated connections", "err", err)
		}
	})
}

// check closes the connections whose role may not log in now: one query
// for every role in use.
func (s *sessions) check(ctx context.Context) error {
	s.mu.Lock()
	roles := map[string]bool{}
	for _, r := range s.conns {
		roles[r] = true
	}
	s.mu.Unlock()
	if len(roles) == 0 {
		return nil
	}
	names := make([]string, 0, len(roles))
	for r := range roles {
		names = append(names, r)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	creds, err := s.b.meta.RoleCredentials(ctx, names, s.b.cfg.ClientRole)
	if err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for cc, r := range s.conns {
		c, found := creds[r]
		if ok, why := s.b.roleAllowed(c, found, now); !ok {
			cc.log.Info("closing connection: its role may no longer log in", "principal", "User:"+r, "reason", why)
			delete(s.conns, cc)
			cc.nc.Close()
		}
	}
	return nil
}

// logAuthFailure records why a SASL exchange failed; the client only
// learns Kafka's message.
func logAuthFailure(log *slog.Logger, s *saslSession, err error) {
	attrs := []any{"mechanism", s.mechanism, "err", err}
	if s.refusal != "" {
		attrs = append(attrs, "reason", s.refusal)
	}
	log.Info("SASL authentication failed", attrs...)
}
