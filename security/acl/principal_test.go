package acl

import (
	"net/netip"
	"slices"
	"testing"
)

func TestParsePrincipal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Principal
		err  string
	}{
		{"User:alice", Principal{"User", "alice"}, ""},
		{"User:*", Principal{"User", "*"}, ""},
		{"User:CN=a,OU=b:c", Principal{"User", "CN=a,OU=b:c"}, ""}, // the type ends at the first colon
		{"User:", Principal{"User", ""}, ""},
		{":alice", Principal{"", "alice"}, ""},
		{"alice", Principal{}, "expected a string in format principalType:principalName but got alice"},
		{"", Principal{}, "expected a string in format principalType:principalName but got "},
	} {
		got, err := ParsePrincipal(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v", tc.in, got, err)
		}
		if got.String() != tc.in {
			t.Errorf("%q: String() = %q", tc.in, got.String())
		}
	}
}

// Kafka's StandardAuthorizerTest.testGetConfiguredSuperUsers, in our words.
func TestParseSuperUsers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" ", nil},
		{"User:bob;User:alice ", []string{"User:bob", "User:alice"}},
		{";  User:bob  ;  User:alice ", []string{"User:bob", "User:alice"}},
	} {
		got, err := ParseSuperUsers(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, %v", tc.in, got, err)
		}
	}
	if _, err := ParseSuperUsers("bob;:alice"); err == nil || err.Error() != "expected a string in format principalType:principalName but got bob" {
		t.Errorf("bob;:alice: %v", err)
	}
}

func TestHostAddress(t *testing.T) {
	for in, want := range map[string]string{
		"192.168.1.1":        "192.168.1.1",
		"::ffff:192.168.1.1": "192.168.1.1",
		"::1":                "0:0:0:0:0:0:0:1",
		"::":                 "0:0:0:0:0:0:0:0",
		"2001:db8::ff00:42":  "2001:db8:0:0:0:0:ff00:42",
		"fe80::1%7":          "fe80:0:0:0:0:0:0:1%7",
		"2001:0DB8:0000::1":  "2001:db8:0:0:0:0:0:1",
	} {
		if got := HostAddress(netip.MustParseAddr(in)); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	if got := HostAddress(netip.Addr{}); got != "" {
		t.Errorf("zero address: %q", got)
	}
}
