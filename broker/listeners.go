package broker

// Listeners as Kafka names them (listeners, advertised.listeners,
// listener.security.protocol.map): each is NAME://host:port, where NAME is
// a security protocol or, through the protocol map, a name of the
// operator's choosing. Clients are told the advertised endpoint of the
// listener they connected through, as Kafka answers with the endpoints of
// the same listener name.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// SecurityProtocol is one of Kafka's four security protocols.
type SecurityProtocol string

const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// TLS reports a protocol whose connections start with a TLS handshake.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports a protocol whose clients authenticate with SASL.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

func parseProtocol(s string) (SecurityProtocol, bool) {
	switch p := SecurityProtocol(strings.ToUpper(s)); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, true
	}
	return "", false
}

// Listener is one Kafka listener: where it binds, how clients on it are
// secured, and the endpoint they are told to use.
type Listener struct {
	Name           string // listener name, upper case (Kafka's ListenerName)
	Protocol       SecurityProtocol
	Addr           string // host:port to bind; an empty host binds every interface
	AdvertisedHost string
	AdvertisedPort int32
}

// String is the listener as Kafka's listeners setting spells it.
func (l Listener) String() string { return l.Name + "://" + l.Addr }

// Advertised is the listener as advertised.listeners spells it.
func (l Listener) Advertised() string {
	return l.Name + "://" + net.JoinHostPort(l.AdvertisedHost, strconv.Itoa(int(l.AdvertisedPort)))
}

// ParseListeners reads Kafka's listeners, advertised.listeners and
// listener.security.protocol.map values. A listener without an advertised
// entry advertises its own address, a wildcard host replaced by this
// machine's name, as Kafka does.
func ParseListeners(listeners, advertised, protocolMap string) ([]Listener, error) {
	protocols := map[string]SecurityProtocol{}
	for _, entry := range splitList(protocolMap) {
		name, proto, ok := strings.Cut(entry, ":")
		p, known := parseProtocol(strings.TrimSpace(proto))
		if !ok || !known || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("listener.security.protocol.map entry %q: want NAME:PROTOCOL with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", entry)
		}
		protocols[strings.ToUpper(strings.TrimSpace(name))] = p
	}
	var out []Listener
	for _, entry := range splitList(listeners) {
		name, host, port, err := parseEndpoint(entry)
		if err != nil {
			return nil, fmt.Errorf("listeners: %w", err)
		}
		p, ok := protocols[name]
		if !ok {
			if p, ok = parseProtocol(name); !ok {
				return nil, fmt.Errorf("listeners: %q: listener name %s is not a security protocol and not in listener.security.protocol.map", entry, name)
			}
		}
		for _, l := range out {
			if l.Name == name {
				return nil, fmt.Errorf("listeners: listener name %s is given twice", name)
			}
		}
		out = append(out, Listener{Name: name, Protocol: p, Addr: net.JoinHostPort(host, strconv.Itoa(int(port))),
			AdvertisedHost: advertisable(host), AdvertisedPort: port})
	}
	if len(out) == 0 {
		return nil, errors.New("listeners: none given")
	}
	seen := map[string]bool{}
	for _, entry := range splitList(advertised) {
		name, host, port, err := parseEndpoint(entry)
		if err != nil {
			return nil, fmt.Errorf("advertised listeners: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("advertised listeners: listener name %s is given twice", name)
		}
		seen[name] = true
		if host == "" || net.ParseIP(host).IsUnspecified() {
			return nil, fmt.Errorf("advertised listeners: %q: a client cannot connect to a wildcard address", entry)
		}
		i := indexOfListener(out, name)
		if i < 0 {
			return nil, fmt.Errorf("advertised listeners: %q: no listener is named %s", entry, name)
		}
		out[i].AdvertisedHost, out[i].AdvertisedPort = host, port
	}
	return out, nil
}

func indexOfListener(ls []Listener, name string) int {
	for i, l := range ls {
		if l.Name == name {
			return i
		}
	}
	return -1
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// parseEndpoint splits NAME://host:port; the host may be empty or a
// bracketed IPv6 literal.
func parseEndpoint(s string) (name, host string, port int32, err error) {
	name, addr, ok := strings.Cut(s, "://")
	if !ok || name == "" {
		return "", "", 0, fmt.Errorf("%q: want NAME://host:port", s)
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", 0, fmt.Errorf("%q: %w", s, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", "", 0, fmt.Errorf("%q: port %q is not a number in 0-65535", s, p)
	}
	return strings.ToUpper(name), host, int32(n), nil
}

// advertisable turns a wildcard listen host into one a client can dial.
func advertisable(host string) string {
	if host != "" && !net.ParseIP(host).IsUnspecified() {
		return host
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "localhost"
}

// Advertisable is the host a client is told for a listener bound to host:
// host itself, or this machine's name for a wildcard.
func Advertisable(host string) string { return advertisable(host) }

// loopback reports a bind host only this machine can reach.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkPlaintextRemote refuses, unless allowed, a listener that
// authenticates nobody on an address other machines can reach: the safe
// default of issue #13.
func checkPlaintextRemote(ls []Listener, allowed bool) error {
	if allowed {
		return nil
	}
	for _, l := range ls {
		host, _, err := net.SplitHostPort(l.Addr)
		if err != nil {
			return fmt.Errorf("listener %s: %w", l, err)
		}
		if l.Protocol == Plaintext && !loopback(host) {
			return fmt.Errorf("listener %s: a PLAINTEXT listener on a non-loopback address lets anyone who can reach it use every topic without authentication; "+
				"use SASL_SSL, SASL_PLAINTEXT or SSL with kafgres.ssl_client_auth = required, bind it to a loopback address, "+
				"or set kafgres.allow_plaintext_remote = on to accept unauthenticated clients from the network", l)
		}
	}
	return nil
}
