package acl

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The scenarios of Kafka's StandardAuthorizerTest, AuthorizerTest and
// BaseAuthorizerTest, rewritten as tables.

func acl(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func user(name string) Principal { return Principal{Type: UserType, Name: name} }

func build(t testing.TB, cfg Config, bindings ...Binding) *Authorizer {
	t.Helper()
	a, err := New(cfg, bindings)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// superman is the super user of the Kafka tests' default authorizer.
var defaultCfg = Config{SuperUsers: []string{"User:superman"}}

type question struct {
	who  Principal
	host string
	op   kmsg.ACLOperation
	rt   kmsg.ACLResourceType
	name string
	want Decision
}

func ask(t *testing.T, a *Authorizer, qs []question) {
	t.Helper()
	for _, q := range qs {
		host := q.host
		if host == "" {
			host = "127.0.0.1"
		}
		if got := a.Authorize(q.who, host, q.op, q.rt, q.name); got != q.want {
			t.Errorf("%s from %s: %s %s %q = %s, want %s", q.who, host, operationName(q.op), resourceTypeName(q.rt), q.name, got, q.want)
		}
	}
}

var everyOperation = []kmsg.ACLOperation{opAll, opRead, opWrite, opCreate, opDelete, opAlter, opDescribe,
	opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite, opCreateTokens, opDescribeTokens}

// Which ALLOW operations imply DESCRIBE and DESCRIBE_CONFIGS, and that DENY
// implies nothing (testFindResultImplication).
func TestImpliedOperations(t *testing.T) {
	fooACL := func(op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
		return acl(topic, "foo_", prefixed, "User:bob", "*", op, perm)
	}
	for _, tc := range []struct {
		acl  Binding
		op   kmsg.ACLOperation
		want Decision
	}{
		{fooACL(opDescribe, allow), opDescribe, Allowed},
		{fooACL(opRead, allow), opDescribe, Allowed},
		{fooACL(opWrite, allow), opDescribe, Allowed},
		{fooACL(opDelete, allow), opDescribe, Allowed},
		{fooACL(opAlter, allow), opDescribe, Allowed},
		{fooACL(opCreate, allow), opDescribe, Denied},
		{fooACL(opAlterConfigs, allow), opDescribe, Denied},
		{fooACL(opDescribeConfigs, allow), opDescribeConfigs, Allowed},
		{fooACL(opAlterConfigs, allow), opDescribeConfigs, Allowed},
		{fooACL(opDescribe, allow), opRead, Denied},
		{fooACL(opAlter, allow), opAlterConfigs, Denied},
		{fooACL(opWrite, allow), opIdempotentWrite, Denied},
		{fooACL(opDescribe, deny), opDescribe, Denied},
		{fooACL(opAlterConfigs, deny), opAlterConfigs, Denied},
	} {
		a := build(t, defaultCfg, tc.acl)
		if got := a.Authorize(user("bob"), "127.0.0.1", tc.op, topic, "foo_bar"); got != tc.want {
			t.Errorf("%s: %s = %s, want %s", tc.acl, operationName(tc.op), got, tc.want)
		}
	}
	// A DENY of READ, WRITE, DELETE or ALTER does not deny DESCRIBE, nor a
	// DENY of ALTER_CONFIGS DESCRIBE_CONFIGS: with an ALLOW ALL beside
	// them, the implied operation stays allowed.
	for _, pair := range [][2]kmsg.ACLOperation{
		{opRead, opDescribe}, {opWrite, opDescribe}, {opDelete, opDescribe}, {opAlter, opDescribe},
		{opAlterConfigs, opDescribeConfigs},
	} {
		a := build(t, defaultCfg, fooACL(pair[0], deny), fooACL(opAll, allow))
		if got := a.Authorize(user("bob"), "127.0.0.1", pair[1], topic, "foo_bar"); got != Allowed {
			t.Errorf("DENY %s denies %s", operationName(pair[0]), operationName(pair[1]))
		}
		if got := a.Authorize(user("bob"), "127.0.0.1", pair[0], topic, "foo_bar"); got != Denied {
			t.Errorf("DENY %s does not deny itself", operationName(pair[0]))
		}
	}
}

// testAclInheritance: ALLOW/DENY of each parent operation on the cluster,
// checked against every operation.
func TestOperationInheritance(t *testing.T) {
	const host = "192.168.3.1"
	for _, tc := range []struct {
		parent  kmsg.ACLOperation
		perm    kmsg.ACLPermissionType
		implied []kmsg.ACLOperation
	}{
		{opAll, allow, everyOperation},
		{opAll, deny, everyOperation},
		{opRead, allow, []kmsg.ACLOperation{opDescribe}},
		{opWrite, allow, []kmsg.ACLOperation{opDescribe}},
		{opDelete, allow, []kmsg.ACLOperation{opDescribe}},
		{opAlter, allow, []kmsg.ACLOperation{opDescribe}},
		{opDescribe, deny, nil},
		{opAlterConfigs, allow, []kmsg.ACLOperation{opDescribeConfigs}},
		{opDescribeConfigs, deny, nil},
		{opIdempotentWrite, allow, nil},
		{opCreateTokens, allow, nil},
	} {
		bindings := []Binding{acl(cluster, ClusterName, literal, "User:alice", "*", tc.parent, tc.perm)}
		if tc.perm == deny {
			bindings = append(bindings, acl(cluster, ClusterName, literal, "User:alice", "*", opAll, allow))
		}
		a := build(t, defaultCfg, bindings...)
		for _, op := range everyOperation {
			affected := op == tc.parent || slices.Contains(tc.implied, op)
			want := Decision(affected)
			if tc.perm == deny {
				want = !want
			}
			if got := a.Authorize(user("alice"), host, op, cluster, ClusterName); got != want {
				t.Errorf("%s %s: %s = %s, want %s", permissionName(tc.perm), operationName(tc.parent), operationName(op), got, want)
			}
		}
	}
}

// testFindResultPrincipalMatching and the custom-principal tests: a
// principal matches by type and name; only User:* is a wildcard.
func TestPrincipalMatching(t *testing.T) {
	a := build(t, defaultCfg,
		acl(topic, "foo_", prefixed, "User:bob", "*", opRead, allow),
		acl(group, "bar", literal, "User:*", "*", opRead, deny),
		acl(group, "bar", literal, "User:*", "*", opDescribe, allow),
		acl(group, "baz", literal, "Group:*", "*", opRead, allow),
		acl(group, "qux", literal, "Group:alice", "*", opRead, allow),
		acl(txnID, "t", literal, "User:CN=a:b", "*", opWrite, allow),
	)
	ask(t, a, []question{
		{who: user("bob"), op: opRead, rt: topic, name: "foo_bar", want: Allowed},
		{who: user("alice"), op: opRead, rt: topic, name: "foo_bar", want: Denied},
		{who: user("alice"), op: opRead, rt: group, name: "bar", want: Denied},
		{who: user("alice"), op: opDescribe, rt: group, name: "bar", want: Allowed},
		{who: Principal{"Group", "x"}, op: opDescribe, rt: group, name: "bar", want: Allowed}, // User:* covers every type
		{who: user("alice"), op: opRead, rt: group, name: "baz", want: Denied},
		{who: Principal{"Group", "alice"}, op: opRead, rt: group, name: "baz", want: Denied},
		{who: Principal{"Group", "*"}, op: opRead, rt: group, name: "baz", want: Allowed},
		{who: user("alice"), op: opRead, rt: group, name: "qux", want: Denied},
		{who: Principal{"Group", "alice"}, op: opRead, rt: group, name: "qux", want: Allowed},
		{who: user("CN=a:b"), op: opWrite, rt: txnID, name: "t", want: Allowed},
		{who: Principal{"User:CN=a", "b"}, op: opWrite, rt: txnID, name: "t", want: Denied},
	})
}

// testSimpleAuthorizations, testDenyPrecedenceWithOperationAll,
// testTopicAclWithOperationAll, testAuthorizationWithManyAcls and
// testPrefixAcls.
func TestStandardAuthorizerScenarios(t *testing.T) {
	t.Run("simple", func(t *testing.T) {
		a := build(t, defaultCfg,
			acl(topic, "foo_", prefixed, "User:bob", "*", opRead, allow),
			acl(topic, "foo_", prefixed, "User:bob", "*", opWrite, allow),
			acl(group, "bar", literal, "User:*", "*", opDescribeConfigs, allow),
			acl(group, "bar", literal, "User:*", "*", opAlterConfigs, allow),
		)
		ask(t, a, []question{
			{who: user("bob"), op: opRead, rt: topic, name: "foo_", want: Allowed},
			{who: user("fred"), op: opAlterConfigs, rt: group, name: "bar", want: Allowed},
		})
	})
	t.Run("deny precedence with ALL", func(t *testing.T) {
		a := build(t, defaultCfg,
			acl(topic, "foo", literal, "User:alice", "*", opAll, deny),
			acl(topic, "foo", prefixed, "User:alice", "*", opRead, allow),
			acl(topic, "foo", literal, "User:*", "*", opAll, deny),
			acl(topic, "foo", prefixed, "User:*", "*", opDescribe, allow),
		)
		ask(t, a, []question{
			{who: user("alice"), op: opWrite, rt: topic, name: "foo", want: Denied},
			{who: user("alice"), op: opRead, rt: topic, name: "foo", want: Denied},
			{who: user("alice"), op: opDescribe, rt: topic, name: "foo", want: Denied},
			{who: user("alice"), op: opRead, rt: topic, name: "foobar", want: Allowed},
			{who: user("bob"), op: opDescribe, rt: topic, name: "foo", want: Denied},
			{who: user("bob"), op: opRead, rt: topic, name: "foo", want: Denied},
			{who: user("bob"), op: opWrite, rt: topic, name: "foo", want: Denied},
			{who: user("bob"), op: opDescribe, rt: topic, name: "foobaz", want: Allowed},
			{who: user("bob"), op: opRead, rt: topic, name: "foobaz", want: Denied},
		})
	})
	t.Run("ALL on topics", func(t *testing.T) {
		a := build(t, defaultCfg,
			acl(topic, "foo", literal, "User:*", "*", opAll, allow),
			acl(topic, "bar", prefixed, "User:alice", "*", opAll, allow),
			acl(topic, "baz", literal, "User:bob", "*", opAll, allow),
		)
		ask(t, a, []question{
			{who: user("alice"), op: opWrite, rt: topic, name: "foo", want: Allowed},
			{who: user("alice"), op: opDescribeConfigs, rt: topic, name: "bar", want: Allowed},
			{who: user("alice"), op: opDescribe, rt: topic, name: "baz", want: Denied},
			{who: user("bob"), op: opWrite, rt: topic, name: "foo", want: Allowed},
			{who: user("bob"), op: opRead, rt: topic, name: "bar", want: Denied},
			{who: user("bob"), op: opDescribe, rt: topic, name: "baz", want: Allowed},
			{who: user("malory"), op: opDescribe, rt: topic, name: "foo", want: Allowed},
			{who: user("malory"), op: opWrite, rt: topic, name: "bar", want: Denied},
			{who: user("malory"), op: opRead, rt: topic, name: "baz", want: Denied},
		})
	})
	t.Run("many ACLs", func(t *testing.T) {
		a := build(t, defaultCfg,
			acl(topic, "green2", literal, "User:*", "*", opRead, allow),
			acl(topic, "green", prefixed, "User:bob", "*", opRead, allow),
			acl(topic, "betamax4", literal, "User:bob", "*", opRead, allow),
			acl(topic, "betamax", literal, "User:bob", "*", opRead, allow),
			acl(topic, "beta", prefixed, "User:*", "*", opRead, allow),
			acl(topic, "alpha", prefixed, "User:*", "*", opRead, allow),
			acl(topic, "alp", prefixed, "User:bob", "*", opRead, deny),
			acl(group, "*", literal, "User:bob", "*", opWrite, allow),
			acl(group, "wheel", literal, "User:*", "*", opWrite, deny),
		)
		ask(t, a, []question{
			{who: user("bob"), op: opRead, rt: topic, name: "green1", want: Allowed},
			{who: user("bob"), op: opWrite, rt: group, name: "wheel", want: Denied},
			{who: user("bob"), op: opRead, rt: topic, name: "alpha", want: Denied},
			{who: user("bob"), op: opWrite, rt: group, name: "arbitrary", want: Allowed},
			{who: user("bob"), op: opRead, rt: topic, name: "ala", want: Denied},
			{who: user("alice"), op: opRead, rt: topic, name: "alphabet", want: Allowed},
			{who: user("alice"), op: opRead, rt: topic, name: "betamax", want: Allowed},
			{who: user("alice"), op: opRead, rt: topic, name: "green1", want: Denied},
			{who: user("superman"), op: opWrite, rt: group, name: "wheel", want: Allowed},
		})
	})
	t.Run("prefixes", func(t *testing.T) {
		a := build(t, defaultCfg,
			acl(topic, "fooa", prefixed, "User:alice", "*", opAll, allow),
			acl(topic, "foobar", literal, "User:bob", "*", opAll, allow),
			acl(topic, "f", prefixed, "User:bob", "*", opAll, allow),
		)
		ask(t, a, []question{
			{who: user("bob"), op: opWrite, rt: topic, name: "foobarr", want: Allowed},
			{who: user("bob"), op: opRead, rt: topic, name: "goobar", want: Denied},
			{who: user("bob"), op: opRead, rt: topic, name: "fooa", want: Allowed},
			{who: user("alice"), op: opDescribe, rt: topic, name: "fooa", want: Allowed},
			{who: user("alice"), op: opWrite, rt: topic, name: "bar", want: Denied},
			{who: user("alice"), op: opRead, rt: topic, name: "baz", want: Denied},
		})
	})
	t.Run("prefix among many others", func(t *testing.T) { // testAuthorizeWithPrefixedResource
		var bs []Binding
		for _, p := range []struct {
			name string
			pt   kmsg.ACLResourcePatternType
		}{
			{"a_other", literal}, {"a_other", prefixed}, {"foo-1a2b", prefixed}, {"foo-3c4d", prefixed},
			{"foo-5e6f-zzz", prefixed}, {"fooo-7a8b", prefixed}, {"fo-9c0d", prefixed}, {"fop-1e2f", prefixed},
			{"fon-3a4b", prefixed}, {"fon-", prefixed}, {"z_other", prefixed}, {"z_other", literal},
		} {
			bs = append(bs, acl(topic, p.name, p.pt, "User:alice", "*", opRead, deny))
		}
		bs = append(bs, acl(topic, "foo", prefixed, "User:alice", "*", opRead, allow))
		ask(t, build(t, defaultCfg, bs...), []question{
			{who: user("alice"), op: opRead, rt: topic, name: "foo-0000", want: Allowed},
			{who: user("alice"), op: opRead, rt: topic, name: "foo-1a2b-x", want: Denied},
			{who: user("alice"), op: opRead, rt: topic, name: "fon-x", want: Denied},
		})
	})
	t.Run("single character names", func(t *testing.T) {
		a := build(t, defaultCfg,
			acl(topic, "f", literal, "User:alice", "*", opRead, allow),
			acl(topic, "_", prefixed, "User:alice", "*", opRead, allow),
		)
		ask(t, a, []question{
			{who: user("alice"), op: opRead, rt: topic, name: "f", want: Allowed},
			{who: user("alice"), op: opRead, rt: topic, name: "foo", want: Denied},
			{who: user("alice"), op: opRead, rt: topic, name: "_foo", want: Allowed},
			{who: user("alice"), op: opRead, rt: topic, name: "_", want: Allowed},
			{who: user("alice"), op: opRead, rt: topic, name: "foo_", want: Denied},
		})
	})
}

// testHostAddressAclValidation and testTopicAcl: hosts match exactly or
// through "*".
func TestHosts(t *testing.T) {
	const host1, host2, local = "192.168.1.1", "192.168.1.2", "127.0.0.1"
	a := build(t, defaultCfg,
		acl(topic, "foo", literal, "User:alice", host1, opRead, deny),
		acl(topic, "foo", literal, "User:alice", "*", opRead, allow),
		acl(topic, "bar", literal, "User:bob", host2, opRead, allow),
		acl(topic, "bar", literal, "User:*", local, opDescribe, allow),
	)
	for _, tc := range []struct {
		who                  string
		host                 string
		fooRead, barRead, bd Decision
	}{
		{"alice", local, Allowed, Denied, Allowed},
		{"alice", host1, Denied, Denied, Denied},
		{"alice", host2, Allowed, Denied, Denied},
		{"bob", local, Denied, Denied, Allowed},
		{"bob", host1, Denied, Denied, Denied},
		{"bob", host2, Denied, Allowed, Allowed},
	} {
		ask(t, a, []question{
			{who: user(tc.who), host: tc.host, op: opRead, rt: topic, name: "foo", want: tc.fooRead},
			{who: user(tc.who), host: tc.host, op: opRead, rt: topic, name: "bar", want: tc.barRead},
			{who: user(tc.who), host: tc.host, op: opDescribe, rt: topic, name: "bar", want: tc.bd},
		})
	}

	const name = "topic"
	b := build(t, defaultCfg,
		acl(topic, name, literal, "User:alice", host1, opRead, allow),
		acl(topic, name, literal, "User:alice", host2, opRead, allow),
		acl(topic, name, literal, "User:alice", host1, opRead, deny),
		acl(topic, name, literal, "User:alice", host1, opWrite, allow),
		acl(topic, name, literal, "User:alice", "*", opDescribe, allow),
		acl(topic, name, literal, "User:rob", "*", opRead, allow),
		acl(topic, name, literal, "User:batman", "*", opWrite, allow),
	)
	ask(t, b, []question{
		{who: user("alice"), host: host2, op: opRead, rt: topic, name: name, want: Allowed},
		{who: user("alice"), host: host1, op: opRead, rt: topic, name: name, want: Denied},
		{who: user("alice"), host: host1, op: opWrite, rt: topic, name: name, want: Allowed},
		{who: user("alice"), host: host2, op: opWrite, rt: topic, name: name, want: Denied},
		{who: user("alice"), host: host1, op: opDescribe, rt: topic, name: name, want: Allowed},
		{who: user("alice"), host: host2, op: opDescribe, rt: topic, name: name, want: Allowed},
		{who: user("alice"), host: host1, op: opAlter, rt: topic, name: name, want: Denied},
		{who: user("rob"), host: host1, op: opDescribe, rt: topic, name: name, want: Allowed},
		{who: user("batman"), host: host1, op: opDescribe, rt: topic, name: name, want: Allowed},
		{who: user("rob"), host: host1, op: opRead, rt: topic, name: name, want: Allowed},
		{who: user("batman"), host: host1, op: opWrite, rt: topic, name: name, want: Allowed},
	})
}

// testDenyTakesPrecedence, testAllowAllAccess, testSuperUserHasAccess,
// testWildCardAcls, testAuthorizeWithEmptyResourceName.
func TestWildcardsAndSuperUsers(t *testing.T) {
	const host = "192.168.2.1"
	ask(t, build(t, defaultCfg,
		acl(topic, "t", literal, "User:*", "*", opAll, allow),
		acl(topic, "t", literal, "User:alice", host, opAll, deny),
	), []question{
		{who: user("alice"), host: host, op: opRead, rt: topic, name: "t", want: Denied},
		{who: user("alice"), host: "192.168.2.2", op: opRead, rt: topic, name: "t", want: Allowed},
		{who: user("random"), host: "192.0.4.4", op: opRead, rt: topic, name: "t", want: Allowed},
	})

	supers := Config{SuperUsers: []string{"User:superuser1", "User:superuser2", "a:b:c"}}
	denyAll := build(t, supers,
		acl(topic, "*", literal, "User:*", "*", opAll, deny),
		acl(cluster, ClusterName, literal, "User:*", "*", opAll, deny),
	)
	ask(t, denyAll, []question{
		{who: user("superuser1"), op: opRead, rt: topic, name: "t", want: Allowed},
		{who: user("superuser2"), op: opAlter, rt: cluster, name: ClusterName, want: Allowed},
		{who: user("superuser3"), op: opRead, rt: topic, name: "t", want: Denied},
		{who: Principal{"Group", "superuser1"}, op: opRead, rt: topic, name: "t", want: Denied},
		// Kafka compares super users as "Type:name" strings.
		{who: Principal{"a:b", "c"}, op: opRead, rt: topic, name: "t", want: Allowed},
		{who: Principal{"a", "b:c"}, op: opRead, rt: topic, name: "t", want: Allowed},
		// And a super user needs no ACL at all.
		{who: user("superuser1"), op: opRead, rt: group, name: "g", want: Allowed},
	})

	const host1 = "192.168.3.1"
	wild := build(t, defaultCfg,
		acl(topic, "*", literal, "User:alice", host1, opRead, allow),
		acl(topic, "t", literal, "User:alice", host1, opWrite, allow),
		acl(topic, "*", literal, "User:alice", host1, opWrite, deny),
	)
	ask(t, wild, []question{
		{who: user("alice"), host: host1, op: opRead, rt: topic, name: "t", want: Allowed},
		{who: user("alice"), host: host1, op: opRead, rt: topic, name: "other", want: Allowed},
		{who: user("alice"), host: host1, op: opWrite, rt: topic, name: "t", want: Denied},
		{who: user("alice"), host: host1, op: opRead, rt: group, name: "t", want: Denied},
	})

	ask(t, build(t, defaultCfg), []question{
		{who: user("alice"), op: opRead, rt: group, name: "", want: Denied},
	})
	ask(t, build(t, defaultCfg, acl(group, "*", literal, "User:alice", "*", opRead, allow)), []question{
		{who: user("alice"), op: opRead, rt: group, name: "", want: Allowed},
		{who: user("alice"), op: opRead, rt: group, name: "*", want: Allowed},
	})
	// A PREFIXED "*" is an ordinary prefix.
	ask(t, build(t, defaultCfg, acl(group, "*", prefixed, "User:alice", "*", opRead, allow)), []question{
		{who: user("alice"), op: opRead, rt: group, name: "g", want: Denied},
		{who: user("alice"), op: opRead, rt: group, name: "*g", want: Allowed},
	})
}

// testAllowEveryoneIfNoAclFoundConfigEnabled/Disabled, testNoAclFound:
// the default applies only when no ACL, for anyone, applies to the
// resource.
func TestAllowIfNoACL(t *testing.T) {
	bindings := []Binding{
		acl(topic, "topic1", literal, "User:Alice", "*", opRead, allow),
		acl(topic, "pre", prefixed, "User:Alice", "*", opRead, allow),
	}
	for _, open := range []bool{true, false} {
		a := build(t, Config{SuperUsers: []string{"User:alice", "User:chris"}, AllowIfNoACL: open}, bindings...)
		ask(t, a, []question{
			{who: user("Bob"), op: opRead, rt: topic, name: "topic1", want: Denied},
			{who: user("Bob"), op: opRead, rt: topic, name: "prefix", want: Denied},
			{who: user("Bob"), op: opRead, rt: topic, name: "topic2", want: Decision(open)},
			{who: user("Bob"), op: opWrite, rt: group, name: "g", want: Decision(open)},
			{who: user("Alice"), op: opWrite, rt: topic, name: "topic1", want: Denied},
			{who: user("alice"), op: opWrite, rt: topic, name: "topic1", want: Allowed},
		})
	}
	ask(t, build(t, Config{AllowIfNoACL: true}), []question{
		{who: user("anyone"), op: opAlter, rt: cluster, name: ClusterName, want: Allowed},
	})
	ask(t, build(t, Config{}), []question{
		{who: user("anyone"), op: opDescribe, rt: topic, name: "t", want: Denied},
	})
}

// Kafka's StandardAuthorizerData scans its sorted ACL set from the literal
// "*" entry down; for names starting with a character below '*' and an ACL
// sharing that first character, that scan loops or throws (see
// docs/security.md). We answer what the rules say.
func TestNamesBelowWildcard(t *testing.T) {
	a := build(t, Config{AllowIfNoACL: true},
		acl(group, "!x", literal, "User:alice", "*", opRead, allow),
		acl(group, "!!x", prefixed, "User:alice", "*", opRead, allow),
		acl(group, "!a", prefixed, "User:bob", "*", opRead, allow),
	)
	ask(t, a, []question{
		{who: user("alice"), op: opRead, rt: group, name: "!abc", want: Denied},
		{who: user("bob"), op: opRead, rt: group, name: "!abc", want: Allowed},
		{who: user("alice"), op: opRead, rt: group, name: "!!xy", want: Allowed},
		{who: user("alice"), op: opRead, rt: group, name: "!!abc", want: Allowed}, // no ACL applies: the default
		{who: user("alice"), op: opRead, rt: group, name: " ", want: Allowed},
	})
}

// The BaseAuthorizerTest authorizeByResourceType scenarios.
func TestAuthorizeByResourceType(t *testing.T) {
	const host1, host2 = "192.168.1.1", "192.168.1.2"
	u1, u2 := user("user1"), user("user2")
	type step struct {
		add  []Binding
		who  Principal
		host string
		op   kmsg.ACLOperation
		rt   kmsg.ACLResourceType
		want Decision
	}
	run := func(t *testing.T, cfg Config, steps []step) {
		t.Helper()
		var bs []Binding
		for i, s := range steps {
			bs = append(bs, s.add...)
			a := build(t, cfg, bs...)
			if got := a.AuthorizeByResourceType(s.who, s.host, s.op, s.rt); got != s.want {
				t.Errorf("step %d: %s from %s %s on some %s = %s, want %s", i, s.who, s.host, operationName(s.op), resourceTypeName(s.rt), got, s.want)
			}
		}
	}
	allowRead := acl(topic, "sb1", literal, "User:user1", host1, opRead, allow)
	denyRead := acl(topic, "sb1", literal, "User:user1", host1, opRead, deny)
	t.Run("add and remove", func(t *testing.T) {
		ask := func(bs ...Binding) Decision {
			return build(t, defaultCfg, bs...).AuthorizeByResourceType(u1, host1, opRead, topic)
		}
		if ask() != Denied || ask(allowRead) != Allowed || ask(allowRead, denyRead) != Denied {
			t.Error("wrong answer")
		}
	})
	t.Run("unrelated deny does not dominate", func(t *testing.T) {
		run(t, defaultCfg, []step{{
			add: []Binding{
				acl(topic, "sb1", literal, "User:user1", host1, opRead, deny),
				acl(topic, "sb1", literal, "User:user2", host1, opRead, deny),
				acl(topic, "sb1", literal, "User:user1", host2, opWrite, deny),
				acl(topic, "sb1", literal, "User:user2", host2, opRead, deny),
				acl(topic, "sb1", literal, "User:user1", host2, opRead, allow),
				acl(topic, "sb2", literal, "User:user1", host2, opRead, deny),
				acl(group, "s", prefixed, "User:user1", host2, opRead, deny),
			},
			who: u1, host: host1, op: opRead, rt: topic, want: Denied,
		},
			{who: u1, host: host1, op: opRead, rt: group, want: Denied},
			{who: u1, host: host1, op: opRead, rt: txnID, want: Denied},
			{who: u1, host: host1, op: opRead, rt: cluster, want: Denied},
			{who: u1, host: host2, op: opRead, rt: topic, want: Allowed},
		})
	})
	t.Run("deny takes precedence", func(t *testing.T) {
		run(t, defaultCfg, []step{
			{add: []Binding{acl(topic, "sb1", literal, "User:user1", host1, opWrite, allow)}, who: u1, host: host1, op: opWrite, rt: topic, want: Allowed},
			{add: []Binding{acl(topic, "sb1", literal, "User:user1", host1, opWrite, deny)}, who: u1, host: host1, op: opWrite, rt: topic, want: Denied},
		})
	})
	t.Run("prefixed deny dominates", func(t *testing.T) {
		a := func(name string, perm kmsg.ACLPermissionType) []Binding {
			return []Binding{acl(group, name, prefixed, "User:user1", host1, opRead, perm)}
		}
		run(t, defaultCfg, []step{
			{add: a("abcde", allow), who: u1, host: host1, op: opRead, rt: group, want: Allowed},
			{add: a("abcd", deny), who: u1, host: host1, op: opRead, rt: group, want: Denied},
			{add: a("abc", allow), who: u1, host: host1, op: opRead, rt: group, want: Allowed},
			{add: a("a", deny), who: u1, host: host1, op: opRead, rt: group, want: Denied},
			{add: a("ab", allow), who: u1, host: host1, op: opRead, rt: group, want: Denied},
		})
	})
	t.Run("literal deny and prefixed allow", func(t *testing.T) {
		run(t, defaultCfg, []step{
			{add: []Binding{acl(group, "ab", literal, "User:user1", host1, opRead, allow)}, who: u1, host: host1, op: opRead, rt: group, want: Allowed},
			{add: []Binding{acl(group, "ab", literal, "User:user1", host1, opRead, deny)}, who: u1, host: host1, op: opRead, rt: group, want: Denied},
			// A literal deny of the same name does not dominate a prefix.
			{add: []Binding{acl(group, "ab", prefixed, "User:user1", host1, opRead, allow)}, who: u1, host: host1, op: opRead, rt: group, want: Allowed},
		})
	})
	t.Run("wildcard deny dominates", func(t *testing.T) {
		run(t, defaultCfg, []step{
			{add: []Binding{acl(group, "hello", prefixed, "User:user1", host1, opWrite, allow)}, who: u1, host: host1, op: opWrite, rt: group, want: Allowed},
			{add: []Binding{acl(group, "*", literal, "User:user1", host1, opWrite, deny)}, who: u1, host: host1, op: opWrite, rt: group, want: Denied},
			{add: []Binding{acl(group, "*", literal, "User:user1", host1, opWrite, allow)}, who: u1, host: host1, op: opWrite, rt: group, want: Denied},
			{add: []Binding{acl(group, "aloha", literal, "User:user1", host1, opWrite, allow)}, who: u1, host: host1, op: opWrite, rt: group, want: Denied},
		})
	})
	t.Run("wildcard allow", func(t *testing.T) {
		run(t, defaultCfg, []step{
			{add: []Binding{acl(group, "x", prefixed, "User:user1", host1, opWrite, deny)}, who: u1, host: host1, op: opWrite, rt: group, want: Denied},
			{add: []Binding{acl(group, "*", literal, "User:user1", host1, opWrite, allow)}, who: u1, host: host1, op: opWrite, rt: group, want: Allowed},
		})
	})
	t.Run("ALL operation", func(t *testing.T) {
		run(t, defaultCfg, []step{
			{who: u1, host: host1, op: opRead, rt: topic, want: Denied},
			{add: []Binding{
				acl(topic, "sb1", literal, "User:user1", host1, opWrite, deny),
				acl(topic, "sb1", literal, "User:user1", host1, opAll, allow),
			}, who: u1, host: host1, op: opRead, rt: topic, want: Allowed},
			{add: []Binding{acl(topic, "sb1", literal, "User:user1", host1, opAll, deny)}, who: u1, host: host1, op: opRead, rt: topic, want: Denied},
		})
	})
	t.Run("no implied operations", func(t *testing.T) {
		run(t, defaultCfg, []step{
			{add: []Binding{acl(topic, "sb1", literal, "User:user1", host1, opRead, allow)}, who: u1, host: host1, op: opDescribe, rt: topic, want: Denied},
		})
	})
	t.Run("all hosts", func(t *testing.T) {
		run(t, defaultCfg, []step{
			{who: u1, host: host1, op: opRead, rt: topic, want: Denied},
			{add: []Binding{acl(topic, "sb1", literal, "User:user1", host1, opRead, allow)}, who: u1, host: host1, op: opRead, rt: topic, want: Allowed},
			{add: []Binding{acl(topic, "sb1", literal, "User:user1", "*", opRead, deny)}, who: u1, host: host1, op: opRead, rt: topic, want: Denied},
			{add: []Binding{acl(topic, "sb2", literal, "User:user1", host1, opRead, deny)}, who: u1, host: host1, op: opRead, rt: topic, want: Denied},
			{who: u1, host: host2, op: opRead, rt: topic, want: Denied},
			{add: []Binding{acl(topic, "sb2", literal, "User:user1", "*", opRead, allow)}, who: u1, host: host2, op: opRead, rt: topic, want: Allowed},
			{add: []Binding{acl(topic, "sb2", literal, "User:user1", "*", opRead, deny)}, who: u1, host: host2, op: opRead, rt: topic, want: Denied},
		})
	})
	t.Run("all principals", func(t *testing.T) {
		run(t, defaultCfg, []step{
			{who: u1, host: host1, op: opRead, rt: topic, want: Denied},
			{add: []Binding{acl(topic, "sb1", literal, "User:user1", host1, opRead, allow)}, who: u1, host: host1, op: opRead, rt: topic, want: Allowed},
			{add: []Binding{acl(topic, "sb1", literal, "User:*", host1, opRead, deny)}, who: u1, host: host1, op: opRead, rt: topic, want: Denied},
			{add: []Binding{acl(topic, "sb2", literal, "User:user1", host1, opRead, deny)}, who: u1, host: host1, op: opRead, rt: topic, want: Denied},
			{who: u2, host: host1, op: opRead, rt: topic, want: Denied},
			{add: []Binding{acl(topic, "sb2", literal, "User:*", host1, opRead, allow)}, who: u2, host: host1, op: opRead, rt: topic, want: Allowed},
			{add: []Binding{acl(topic, "sb2", literal, "User:*", host1, opRead, deny)}, who: u2, host: host1, op: opRead, rt: topic, want: Denied},
		})
	})
	t.Run("super user", func(t *testing.T) {
		cfg := Config{SuperUsers: []string{"User:superuser1"}}
		var bs []Binding
		for _, rt := range []kmsg.ACLResourceType{topic, cluster, group, txnID} {
			bs = append(bs, acl(rt, "*", literal, "User:*", "*", opAll, deny))
		}
		a := build(t, cfg, bs...)
		for _, rt := range []kmsg.ACLResourceType{topic, cluster, group, txnID} {
			if a.AuthorizeByResourceType(user("superuser1"), "192.0.4.4", opRead, rt) != Allowed {
				t.Errorf("super user denied on %s", resourceTypeName(rt))
			}
			if a.AuthorizeByResourceType(user("other"), "192.0.4.4", opRead, rt) != Denied {
				t.Errorf("other user allowed on %s", resourceTypeName(rt))
			}
		}
	})
	t.Run("no ACL found override", func(t *testing.T) {
		open := Config{AllowIfNoACL: true}
		for _, op := range []kmsg.ACLOperation{opRead, opWrite} {
			if build(t, open).AuthorizeByResourceType(u1, host1, op, topic) != Allowed {
				t.Errorf("%s denied with allow.everyone.if.no.acl.found", operationName(op))
			}
		}
		// The "hardcode" probe: an ACL that applies to that name, for
		// someone else, turns the default off.
		a := build(t, open, acl(topic, "hard", prefixed, "User:user2", "*", opWrite, allow))
		if a.AuthorizeByResourceType(u1, host1, opWrite, topic) != Denied {
			t.Error("allowed although an ACL applies to \"hardcode\"")
		}
		if build(t, open, acl(topic, "t", literal, "User:user2", "*", opWrite, allow)).AuthorizeByResourceType(u1, host1, opWrite, topic) != Allowed {
			t.Error("an ACL on another topic turned the default off")
		}
	})
	t.Run("filter arguments", func(t *testing.T) {
		a := build(t, Config{SuperUsers: []string{"User:user1"}})
		for _, q := range []struct {
			op kmsg.ACLOperation
			rt kmsg.ACLResourceType
		}{{opAny, topic}, {0, topic}, {opRead, anyType}, {opRead, 0}, {opRead, 42}} {
			if a.AuthorizeByResourceType(u1, host1, q.op, q.rt) != Denied {
				t.Errorf("%v on %v allowed", q.op, q.rt)
			}
		}
	})
}

// The idempotent producer check of InitProducerId: IDEMPOTENT_WRITE on the
// cluster, or WRITE on any topic. Kafka 4.x has no implication between the
// two inside the authorizer: the handler asks both.
func TestIdempotentWrite(t *testing.T) {
	a := build(t, defaultCfg, acl(topic, "t", literal, "User:producer", "*", opWrite, allow))
	p := user("producer")
	if a.Authorize(p, "127.0.0.1", opIdempotentWrite, cluster, ClusterName) != Denied {
		t.Error("WRITE on a topic implies IDEMPOTENT_WRITE inside Authorize")
	}
	if a.AuthorizeByResourceType(p, "127.0.0.1", opWrite, topic) != Allowed {
		t.Error("WRITE on some topic not found")
	}
}

func TestAuthorizedOperations(t *testing.T) {
	const (
		read, write, create, del, alter, describe = 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
		clusterAction, describeConfigs, alterCfg  = 1 << 9, 1 << 10, 1 << 11
		idempotentWrite, createTokens, descTokens = 1 << 12, 1 << 13, 1 << 14
	)
	// The broker's constants today (no authorizer) must be what Kafka
	// reports without one.
	for rt, want := range map[kmsg.ACLResourceType]int32{
		topic:                               read | write | create | del | alter | describe | describeConfigs | alterCfg,
		group:                               read | del | describe | describeConfigs | alterCfg,
		cluster:                             create | alter | describe | clusterAction | describeConfigs | alterCfg | idempotentWrite,
		txnID:                               describe | write,
		kmsg.ACLResourceTypeDelegationToken: describe,
		kmsg.ACLResourceTypeUser:            createTokens | descTokens,
		anyType:                             0,
		0:                                   0,
	} {
		if got := SupportedOperations(rt); got != want {
			t.Errorf("SupportedOperations(%s) = %b, want %b", resourceTypeName(rt), got, want)
		}
	}

	a := build(t, Config{SuperUsers: []string{"User:admin"}},
		acl(topic, "t", literal, "User:bob", "*", opRead, allow),
		acl(topic, "t", prefixed, "User:bob", "*", opAlterConfigs, allow),
		acl(topic, "t", literal, "User:bob", "*", opDelete, deny),
		acl(group, "g", literal, "User:*", "*", opAll, allow),
		acl(group, "g", literal, "User:eve", "*", opDescribe, deny),
		acl(cluster, ClusterName, literal, "User:bob", "*", opIdempotentWrite, allow),
	)
	for _, tc := range []struct {
		who  string
		rt   kmsg.ACLResourceType
		name string
		want int32
	}{
		{"bob", topic, "t", read | describe | describeConfigs | alterCfg},
		{"bob", topic, "tx", describeConfigs | alterCfg},
		{"bob", topic, "other", 0},
		{"alice", group, "g", read | del | describe | describeConfigs | alterCfg},
		{"eve", group, "g", read | del | describeConfigs | alterCfg},
		{"bob", cluster, ClusterName, idempotentWrite},
		{"admin", topic, "t", SupportedOperations(topic)},
		{"admin", cluster, ClusterName, SupportedOperations(cluster)},
		{"bob", anyType, "t", 0},
	} {
		if got := a.AuthorizedOperations(user(tc.who), "127.0.0.1", tc.rt, tc.name); got != tc.want {
			t.Errorf("%s on %s %q: %b, want %b", tc.who, resourceTypeName(tc.rt), tc.name, got, tc.want)
		}
	}
	open := build(t, Config{AllowIfNoACL: true})
	if got := open.AuthorizedOperations(user("x"), "127.0.0.1", group, "g"); got != SupportedOperations(group) {
		t.Errorf("allow.everyone.if.no.acl.found: %b", got)
	}
}

// testListAcls, testAclsFilter, testGetAclsPrincipal: what DescribeAcls
// lists and each DeleteAcls filter selects.
func TestDescribe(t *testing.T) {
	res1, res2 := "foo-1", "bar-1"
	acl1 := acl(topic, res1, literal, "User:alice", "*", opRead, allow)
	acl2 := acl(topic, res1, literal, "User:alice", "192.168.0.1", opWrite, allow)
	acl3 := acl(topic, res2, literal, "User:alice", "*", opDescribe, allow)
	acl4 := acl(topic, "bar-", prefixed, "User:*", "*", opRead, allow)
	acl5 := acl(group, "g", literal, "User:*", "*", opRead, deny)
	a := build(t, defaultCfg, acl4, acl2, acl5, acl1, acl3, acl1) // acl1 twice
	if a.Len() != 5 {
		t.Errorf("Len = %d, want 5 (duplicates count once)", a.Len())
	}
	for _, tc := range []struct {
		name   string
		filter Filter
		want   []Binding
	}{
		// Kafka's order: type, then name descending, then pattern type...
		{"any", AnyFilter(), []Binding{acl1, acl2, acl3, acl4, acl5}},
		{"one resource", patternFilter(topic, &res1, literal), []Binding{acl1, acl2}},
		{"prefixed resource", patternFilter(topic, str("bar-"), prefixed), []Binding{acl4}},
		{"match", patternFilter(anyType, &res2, match), []Binding{acl3, acl4}},
		{"type", patternFilter(topic, nil, anyPat), []Binding{acl1, acl2, acl3, acl4}},
		{"exact binding", acl1.Filter(), []Binding{acl1}},
		{"nothing", patternFilter(topic, str("baz"), anyPat), nil},
		{"principal", Filter{ResourceType: anyType, PatternType: anyPat, Principal: str("User:alice"), Operation: opAny, Permission: anyPerm}, []Binding{acl1, acl2, acl3}},
		{"wildcard principal", Filter{ResourceType: anyType, PatternType: anyPat, Principal: str("User:*"), Operation: opAny, Permission: anyPerm}, []Binding{acl4, acl5}},
		{"permission", Filter{ResourceType: anyType, PatternType: anyPat, Operation: opAny, Permission: deny}, []Binding{acl5}},
	} {
		if got := a.Describe(tc.filter); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v\nwant %v", tc.name, got, tc.want)
		}
	}
	if got := a.Bindings(); !slices.Equal(got, a.Describe(AnyFilter())) {
		t.Errorf("Bindings: %v", got)
	}
}

func TestNewRefuses(t *testing.T) {
	good := acl(topic, "t", literal, "User:a", "*", opRead, allow)
	bad := []Binding{
		acl(topic, "t", literal, "a", "*", opRead, allow),
		acl(topic, "", literal, "User:a", "*", opRead, allow),
		acl(topic, "t", match, "User:a", "*", opRead, allow),
		acl(anyType, "t", literal, "User:a", "*", opRead, allow),
		acl(topic, "t", literal, "User:a", "*", opAny, allow),
		acl(topic, "t", literal, "User:a", "*", opRead, anyPerm),
		acl(42, "t", literal, "User:a", "*", opRead, allow),
	}
	for _, b := range bad {
		if _, err := New(Config{}, []Binding{good, b}); err == nil {
			t.Errorf("accepted %s", b)
		}
	}
	if _, err := New(Config{SuperUsers: []string{"admin"}}, nil); err == nil {
		t.Error("accepted super user without a type")
	}
	// Kafka's authorizer stores any CLUSTER name; only CreateAcls checks it.
	if _, err := New(Config{}, []Binding{acl(cluster, "*", literal, "User:a", "*", opAll, deny)}); err != nil {
		t.Error(err)
	}
}

// Readers keep answering while the broker swaps authorizers (run with
// -race).
func TestSwapWhileReading(t *testing.T) {
	var current atomic.Pointer[Authorizer]
	current.Store(build(t, Config{}))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a := current.Load()
				a.Authorize(user("u"), "127.0.0.1", opRead, topic, "t")
				a.AuthorizedOperations(user("u"), "127.0.0.1", topic, "t")
				a.Describe(AnyFilter())
			}
		}()
	}
	for i := range 50 {
		perm := allow
		if i%2 == 1 {
			perm = deny
		}
		current.Store(build(t, Config{}, acl(topic, "t", literal, "User:u", "*", opRead, perm)))
	}
	close(stop)
	wg.Wait()
	if got := current.Load().Authorize(user("u"), "127.0.0.1", opRead, topic, "t"); got != Denied {
		t.Errorf("after the last swap: %s", got)
	}
}

// benchAuthorizer has n ACLs of each kind: literal topics per user,
// prefixes of every length per team, a few wildcards and denies.
func benchAuthorizer(b *testing.B, n int) *Authorizer {
	var bs []Binding
	for i := range n {
		bs = append(bs,
			acl(topic, fmt.Sprintf("orders-%d", i), literal, fmt.Sprintf("User:u%d", i%100), "*", opRead, allow),
			acl(topic, fmt.Sprintf("team-%d-", i)+strings.Repeat("x", i%40), prefixed, fmt.Sprintf("User:u%d", i%100), "*", opWrite, allow),
			acl(group, fmt.Sprintf("g-%d", i), prefixed, "User:*", "*", opRead, allow),
		)
	}
	bs = append(bs,
		acl(topic, "*", literal, "User:auditor", "*", opDescribe, allow),
		acl(topic, "orders-1", literal, "User:u1", "10.0.0.1", opRead, deny),
	)
	a, err := New(Config{SuperUsers: []string{"User:admin"}}, bs)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{10, 10000} {
		a := benchAuthorizer(b, n)
		names := make([]string, 64)
		for i := range names {
			names[i] = fmt.Sprintf("orders-%d", i*n/len(names))
		}
		b.Run(fmt.Sprintf("literal/%d", 3*n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				a.Authorize(user("u7"), "10.0.0.2", opRead, topic, names[i%len(names)])
			}
		})
		b.Run(fmt.Sprintf("prefixed/%d", 3*n), func(b *testing.B) {
			b.ReportAllocs()
			name := fmt.Sprintf("team-%d-", n/2) + strings.Repeat("x", 60)
			for b.Loop() {
				a.Authorize(user("u7"), "10.0.0.2", opWrite, topic, name)
			}
		})
		b.Run(fmt.Sprintf("authorized-operations/%d", 3*n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				a.AuthorizedOperations(user("u7"), "10.0.0.2", topic, names[i%len(names)])
			}
		})
	}
}

func BenchmarkNew(b *testing.B) {
	bs := benchAuthorizer(b, 10000).Bindings()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(Config{}, bs); err != nil {
			b.Fatal(err)
		}
	}
}

// reference is Authorize written from the rules alone: the ACLs that apply
// to a resource are exactly those a MATCH filter on its name selects (the
// same definition Kafka's DescribeAcls uses), then deny, allow, default.
func reference(cfg Config, bindings []Binding, p Principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) Decision {
	if slices.Contains(cfg.SuperUsers, p.String()) {
		return Allowed
	}
	found, allowed := false, false
	for _, b := range bindings {
		if !patternFilter(rt, &name, match).Matches(b) {
			continue
		}
		found = true
		bp, _ := ParsePrincipal(b.Principal)
		if bp != p && b.Principal != WildcardPrincipal || b.Host != Wildcard && b.Host != host {
			continue
		}
		if b.Permission == deny && (b.Operation == opAll || b.Operation == op) {
			return Denied
		}
		if b.Permission == allow && allowImplies(b.Operation, op) {
			allowed = true
		}
	}
	if allowed {
		return Allowed
	}
	return Decision(!found && cfg.AllowIfNoACL)
}

// Like Kafka's StandardAuthorizerPropertyTest: random ACLs over a small
// alphabet, so that names, prefixes and wildcards collide often, checked
// against the reference.
func TestAuthorizeAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randName := func() string {
		const alphabet = "ab*!"
		b := make([]byte, 1+rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	ops := []kmsg.ACLOperation{opAll, opRead, opWrite, opDescribe, opAlter, opDescribeConfigs, opAlterConfigs}
	for round := range 300 {
		cfg := Config{AllowIfNoACL: rng.IntN(2) == 0, SuperUsers: []string{"User:root"}}
		var bs []Binding
		for range rng.IntN(12) {
			bs = append(bs, Binding{
				ResourceType: []kmsg.ACLResourceType{topic, group}[rng.IntN(2)],
				ResourceName: randName(),
				PatternType:  []kmsg.ACLResourcePatternType{literal, prefixed}[rng.IntN(2)],
				Principal:    pick("User:a", "User:b", "User:*", "Group:a"),
				Host:         pick("*", "10.0.0.1", "10.0.0.2"),
				Operation:    ops[rng.IntN(len(ops))],
				Permission:   []kmsg.ACLPermissionType{allow, deny}[rng.IntN(2)],
			})
		}
		a := build(t, cfg, bs...)
		for range 40 {
			p, _ := ParsePrincipal(pick("User:a", "User:b", "Group:a", "User:root"))
			host := pick("10.0.0.1", "10.0.0.2")
			op := ops[1+rng.IntN(len(ops)-1)]
			rt := []kmsg.ACLResourceType{topic, group}[rng.IntN(2)]
			name := randName()
			want := reference(cfg, bs, p, host, op, rt, name)
			if got := a.Authorize(p, host, op, rt, name); got != want {
				t.Fatalf("round %d: %s from %s %s %s %q = %s, want %s; ACLs %v", round, p, host, operationName(op), resourceTypeName(rt), name, got, want, bs)
			}
		}
	}
}
