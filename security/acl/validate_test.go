package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestValidateCreation(t *testing.T) {
	good := Binding{ResourceType: topic, ResourceName: "t", PatternType: literal, Principal: "User:alice", Host: "*", Operation: opRead, Permission: allow}
	with := func(change func(*Binding)) Binding {
		b := good
		change(&b)
		return b
	}
	const noColon = "Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)"
	for _, tc := range []struct {
		name  string
		b     Binding
		err   *kerr.Error // nil: accepted
		msg   string
		scope Scope
	}{
		{"literal topic", good, nil, "", 0},
		{"prefixed group", with(func(b *Binding) { b.ResourceType = group; b.PatternType = prefixed }), nil, "", 0},
		{"transactional id", with(func(b *Binding) { b.ResourceType = txnID; b.Operation = opWrite }), nil, "", 0},
		{"delegation token", with(func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeDelegationToken; b.Operation = opDescribe }), nil, "", 0},
		{"user resource", with(func(b *Binding) { b.ResourceType = kmsg.ACLResourceTypeUser; b.Operation = opCreateTokens }), nil, "", 0},
		{"operation that does not fit the resource type", with(func(b *Binding) { b.Operation = opIdempotentWrite }), nil, "", 0},
		{"deny ALL", with(func(b *Binding) { b.Operation = opAll; b.Permission = deny }), nil, "", 0},
		{"literal *", with(func(b *Binding) { b.ResourceName = "*" }), nil, "", 0},
		{"prefixed *", with(func(b *Binding) { b.ResourceName = "*"; b.PatternType = prefixed }), nil, "", 0},
		{"any host string", with(func(b *Binding) { b.Host = "not an address" }), nil, "", 0},
		{"empty host", with(func(b *Binding) { b.Host = "" }), nil, "", 0},
		{"principal with empty parts", with(func(b *Binding) { b.Principal = ":" }), nil, "", 0},
		{"group wildcard principal is just a name", with(func(b *Binding) { b.Principal = "Group:*" }), nil, "", 0},
		{"cluster", with(func(b *Binding) { b.ResourceType = cluster; b.ResourceName = "kafka-cluster" }), nil, "", 0},

		{"cluster with another name", with(func(b *Binding) { b.ResourceType = cluster; b.ResourceName = "*" }),
			kerr.InvalidRequest, "The only valid name for the CLUSTER resource is kafka-cluster", ScopeEntry},
		{"cluster with empty name", with(func(b *Binding) { b.ResourceType = cluster; b.ResourceName = "" }),
			kerr.InvalidRequest, "The only valid name for the CLUSTER resource is kafka-cluster", ScopeEntry},
		{"empty name", with(func(b *Binding) { b.ResourceName = "" }), kerr.InvalidRequest, "Invalid empty resource name", ScopeEntry},
		{"empty prefixed name", with(func(b *Binding) { b.ResourceName = ""; b.PatternType = prefixed }), kerr.InvalidRequest, "Invalid empty resource name", ScopeEntry},
		{"principal without colon", with(func(b *Binding) { b.Principal = "alice" }), kerr.InvalidRequest, noColon, ScopeEntry},
		{"empty principal", with(func(b *Binding) { b.Principal = "" }), kerr.InvalidRequest,
			"Could not parse principal from `` (no colon is present separating the principal type from the principal name)", ScopeEntry},
		{"resource type code Kafka does not know", with(func(b *Binding) { b.ResourceType = 8 }), kerr.InvalidRequest, "Invalid resourceType UNKNOWN", ScopeEntry},
		{"pattern type code Kafka does not know", with(func(b *Binding) { b.PatternType = 5 }), kerr.InvalidRequest, "Invalid patternType UNKNOWN", ScopeEntry},
		{"operation code Kafka does not know", with(func(b *Binding) { b.Operation = 15 }), kerr.InvalidRequest, "Invalid operation UNKNOWN", ScopeEntry},
		{"permission code Kafka does not know", with(func(b *Binding) { b.Permission = -1 }), kerr.InvalidRequest, "Invalid permissionType UNKNOWN", ScopeEntry},
		{"unknown code is checked before the principal", with(func(b *Binding) { b.Operation = 15; b.Principal = "alice" }), kerr.InvalidRequest, "Invalid operation UNKNOWN", ScopeEntry},
		{"empty name is checked before an unknown code", with(func(b *Binding) { b.ResourceName = ""; b.Operation = 15 }), kerr.InvalidRequest, "Invalid empty resource name", ScopeEntry},

		{"resource type ANY", with(func(b *Binding) { b.ResourceType = anyType }), kerr.UnknownServerError, "", ScopeRequest},
		{"pattern type ANY", with(func(b *Binding) { b.PatternType = anyPat }), kerr.UnknownServerError, "", ScopeRequest},
		{"pattern type MATCH", with(func(b *Binding) { b.PatternType = match }), kerr.UnknownServerError, "", ScopeRequest},
		{"operation ANY", with(func(b *Binding) { b.Operation = opAny }), kerr.UnknownServerError, "", ScopeRequest},
		{"permission ANY", with(func(b *Binding) { b.Permission = anyPerm }), kerr.UnknownServerError, "", ScopeRequest},
		{"ANY is checked before the cluster name", with(func(b *Binding) { b.ResourceType = cluster; b.Operation = opAny }), kerr.UnknownServerError, "", ScopeRequest},

		{"resource type 0", with(func(b *Binding) { b.ResourceType = 0 }), kerr.InvalidRequest, "", ScopeConnection},
		{"pattern type 0", with(func(b *Binding) { b.PatternType = 0 }), kerr.InvalidRequest, "", ScopeConnection},
		{"operation 0", with(func(b *Binding) { b.Operation = 0 }), kerr.InvalidRequest, "", ScopeConnection},
		{"permission 0", with(func(b *Binding) { b.Permission = 0 }), kerr.InvalidRequest, "", ScopeConnection},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ValidateCreation(tc.b)
			if tc.err == nil {
				if r != nil {
					t.Fatalf("refused: %v", r)
				}
				return
			}
			if r == nil {
				t.Fatal("accepted")
			}
			if r.Err != tc.err || r.Message != tc.msg || r.Scope != tc.scope {
				t.Errorf("got (%v, %q, scope %d), want (%v, %q, scope %d)", r.Err, r.Message, r.Scope, tc.err, tc.msg, tc.scope)
			}
			if r.Error() == "" {
				t.Error("empty Error()")
			}
		})
	}
}

func TestCheckCreations(t *testing.T) {
	ok := Binding{ResourceType: topic, ResourceName: "t", PatternType: literal, Principal: "User:a", Host: "*", Operation: opRead, Permission: allow}
	emptyName, anyOp, zeroOp := ok, ok, ok
	emptyName.ResourceName = ""
	anyOp.Operation = opAny
	zeroOp.Operation = 0

	res, closeConn := CheckCreations([]Binding{ok, emptyName, ok})
	if closeConn || res[0] != nil || res[2] != nil || res[1] == nil || res[1].Message != "Invalid empty resource name" {
		t.Errorf("per-entry: %v %v", res, closeConn)
	}
	res, closeConn = CheckCreations([]Binding{ok, emptyName, anyOp})
	if closeConn {
		t.Fatal("closes the connection")
	}
	for i, r := range res {
		if r == nil || r.Err != kerr.UnknownServerError || r.Message != "" {
			t.Errorf("result %d: %v, want UNKNOWN_SERVER_ERROR for the whole request", i, r)
		}
	}
	if _, closeConn = CheckCreations([]Binding{anyOp, zeroOp}); !closeConn {
		t.Error("a code of 0 does not close the connection")
	}
}

func TestValidateFilters(t *testing.T) {
	f := func(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Filter {
		return Filter{ResourceType: rt, PatternType: pt, Operation: op, Permission: perm}
	}
	for _, tc := range []struct {
		name          string
		filter        Filter
		describeClose bool
		deleteScope   Scope // meaningful when deleteMsg != "" or deleteClose
		deleteMsg     string
	}{
		{"any", AnyFilter(), false, 0, ""},
		{"match", f(topic, match, opRead, allow), false, 0, ""},
		{"resource type 0", f(0, anyPat, opAny, anyPerm), true, ScopeConnection, ""},
		{"pattern type 0", f(anyType, 0, opAny, anyPerm), true, ScopeConnection, ""},
		{"operation 0", f(anyType, anyPat, 0, anyPerm), true, ScopeConnection, ""},
		{"permission 0", f(anyType, anyPat, opAny, 0), true, ScopeConnection, ""},
		{"unknown resource type code", f(50, anyPat, opAny, anyPerm), false, ScopeEntry, "Unknown patternFilter."},
		{"unknown pattern type code", f(anyType, 9, opAny, anyPerm), false, ScopeEntry, "Unknown patternFilter."},
		{"unknown operation code", f(anyType, anyPat, 99, anyPerm), false, ScopeEntry, "Unknown entryFilter."},
		{"unknown permission code", f(anyType, anyPat, opAny, 4), false, ScopeEntry, "Unknown entryFilter."},
		{"pattern before entry", f(50, anyPat, 99, anyPerm), false, ScopeEntry, "Unknown patternFilter."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := ValidateDescribeFilter(tc.filter); (r != nil) != tc.describeClose || r != nil && r.Scope != ScopeConnection {
				t.Errorf("describe: %+v", r)
			}
			r := ValidateDeleteFilter(tc.filter)
			switch {
			case tc.deleteScope == ScopeConnection && tc.describeClose:
				if r == nil || r.Scope != ScopeConnection {
					t.Errorf("delete: %+v, want connection closed", r)
				}
			case tc.deleteMsg == "":
				if r != nil {
					t.Errorf("delete: %+v, want accepted", r)
				}
			default:
				if r == nil || r.Err != kerr.InvalidRequest || r.Message != tc.deleteMsg || r.Scope != ScopeEntry {
					t.Errorf("delete: %+v, want INVALID_REQUEST %q", r, tc.deleteMsg)
				}
			}
		})
	}
	// What DescribeAcls answers for an unknown code: nothing, no error.
	a, err := New(Config{}, []Binding{{ResourceType: topic, ResourceName: "t", PatternType: literal, Principal: "User:a", Host: "*", Operation: opRead, Permission: allow}})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Describe(f(50, anyPat, opAny, anyPerm)); len(got) != 0 {
		t.Errorf("unknown resource type described %v", got)
	}
}
