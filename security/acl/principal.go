package acl

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// UserType is the principal type of every built-in authentication
// mechanism (and of User:ANONYMOUS, an unauthenticated connection).
const UserType = "User"

// Principal is who a connection authenticated as (Kafka's KafkaPrincipal):
// a type, "User" for every built-in mechanism, and a name.
type Principal struct {
	Type string
	Name string
}

// String is "Type:name", the form ACLs and super.users spell principals in.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// ParsePrincipal reads "Type:name" as Kafka's
// SecurityUtils.parseKafkaPrincipal does: the type ends at the first colon,
// and either part may be empty ("User:" and ":alice" are accepted).
func ParsePrincipal(s string) (Principal, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok {
		return Principal{}, errors.New("expected a string in format principalType:principalName but got " + s)
	}
	return Principal{Type: typ, Name: name}, nil
}

// ParseSuperUsers reads Kafka's super.users setting: principals separated
// by ";", each trimmed, empty ones skipped, every one of which must parse.
// The result keeps the strings as written, since Kafka compares a
// connection's principal to them as strings.
func ParseSuperUsers(s string) ([]string, error) {
	var users []string
	for _, v := range strings.Split(s, ";") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if _, err := ParsePrincipal(v); err != nil {
			return nil, err
		}
		users = append(users, v)
	}
	return users, nil
}

// HostAddress is a client address as Java's InetAddress.getHostAddress
// prints it, the form Kafka matches ACL hosts against: IPv4 dotted, an
// IPv4-mapped IPv6 address as IPv4 (Java turns those into Inet4Address),
// other IPv6 addresses as eight lowercase hexadecimal groups without
// compression or leading zeros ("0:0:0:0:0:0:0:1", never "::1"), followed by
// "%" and the zone if there is one. Kafka prints the numeric scope id
// there, so a caller with an interface name in the zone should pass the
// index instead.
func HostAddress(addr netip.Addr) string {
	if !addr.IsValid() {
		return ""
	}
	addr = addr.Unmap()
	if addr.Is4() {
		return addr.String()
	}
	b := addr.As16()
	var sb strings.Builder
	sb.Grow(39)
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(strconv.FormatUint(uint64(b[i])<<8|uint64(b[i+1]), 16))
	}
	if z := addr.Zone(); z != "" {
		sb.WriteByte('%')
		sb.WriteString(z)
	}
	return sb.String()
}
