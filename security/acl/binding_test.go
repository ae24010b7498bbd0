package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Short names for the enums, so the tables read like Kafka's tests.
const (
	topic    = kmsg.ACLResourceTypeTopic
	group    = kmsg.ACLResourceTypeGroup
	cluster  = kmsg.ACLResourceTypeCluster
	txnID    = kmsg.ACLResourceTypeTransactionalId
	anyType  = kmsg.ACLResourceTypeAny
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
	anyPat   = kmsg.ACLResourcePatternTypeAny
	match    = kmsg.ACLResourcePatternTypeMatch
	allow    = kmsg.ACLPermissionTypeAllow
	deny     = kmsg.ACLPermissionTypeDeny
	anyPerm  = kmsg.ACLPermissionTypeAny

	opAll             = kmsg.ACLOperationAll
	opAny             = kmsg.ACLOperationAny
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite
	opCreateTokens    = kmsg.ACLOperationCreateTokens
	opDescribeTokens  = kmsg.ACLOperationDescribeTokens
)

func str(s string) *string { return &s }

// pattern is a binding with only its resource pattern set, for the
// pattern-matching tables.
func pattern(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: "User:bob", Host: "*", Operation: opRead, Permission: allow}
}

// patternFilter is a filter on the resource pattern only.
func patternFilter(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType) Filter {
	return Filter{ResourceType: rt, ResourceName: name, PatternType: pt, Operation: opAny, Permission: anyPerm}
}

// The cases of Kafka's ResourcePatternFilterTest, in our words.
func TestFilterMatchesPattern(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter Filter
		b      Binding
		want   bool
	}{
		{"other resource type", patternFilter(topic, str("Name"), literal), pattern(group, "Name", literal), false},
		{"other name", patternFilter(topic, str("Different"), prefixed), pattern(topic, "Name", prefixed), false},
		{"names are case sensitive", patternFilter(topic, str("NAME"), literal), pattern(topic, "Name", literal), false},
		{"other pattern type", patternFilter(topic, str("Name"), literal), pattern(topic, "Name", prefixed), false},
		{"resource type ANY", patternFilter(anyType, str("Name"), prefixed), pattern(topic, "Name", prefixed), true},
		{"nil name", patternFilter(topic, nil, prefixed), pattern(topic, "Name", prefixed), true},
		{"pattern type ANY without name", patternFilter(topic, nil, anyPat), pattern(topic, "Name", prefixed), true},
		{"pattern type MATCH without name", patternFilter(topic, nil, match), pattern(topic, "Name", prefixed), true},
		{"literal exact", patternFilter(topic, str("Name"), literal), pattern(topic, "Name", literal), true},
		{"ANY, literal same name", patternFilter(topic, str("Name"), anyPat), pattern(topic, "Name", literal), true},
		{"MATCH, literal same name", patternFilter(topic, str("Name"), match), pattern(topic, "Name", literal), true},
		{"MATCH, literal that is only a prefix", patternFilter(topic, str("Name-something"), match), pattern(topic, "Name", literal), false},
		{"literal * filter, literal * binding", patternFilter(topic, str("*"), literal), pattern(topic, "*", literal), true},
		{"literal filter does not match literal *", patternFilter(topic, str("Name"), literal), pattern(topic, "*", literal), false},
		{"literal * filter does not match other names", patternFilter(topic, str("*"), literal), pattern(topic, "Name", literal), false},
		{"ANY does not match literal *", patternFilter(topic, str("Name"), anyPat), pattern(topic, "*", literal), false},
		{"MATCH matches literal *", patternFilter(topic, str("Name"), match), pattern(topic, "*", literal), true},
		{"prefixed exact", patternFilter(topic, str("Name"), prefixed), pattern(topic, "Name", prefixed), true},
		{"prefixed filter shorter than prefixed binding", patternFilter(topic, str("Name"), prefixed), pattern(topic, "Name-something", prefixed), false},
		{"prefixed filter longer than prefixed binding", patternFilter(topic, str("Name-something"), prefixed), pattern(topic, "Name", prefixed), false},
		{"ANY does not match a prefix", patternFilter(topic, str("Name-something"), anyPat), pattern(topic, "Name", prefixed), false},
		{"MATCH matches a prefix", patternFilter(topic, str("Name-something"), match), pattern(topic, "Name", prefixed), true},
		{"MATCH does not match a longer prefix", patternFilter(topic, str("Na"), match), pattern(topic, "Name", prefixed), false},
		{"MATCH with * matches literal *", patternFilter(topic, str("*"), match), pattern(topic, "*", literal), true},
		{"MATCH, other type", patternFilter(group, str("Name"), match), pattern(topic, "*", literal), false},
		{"ANY type and MATCH", patternFilter(anyType, str("bar-1"), match), pattern(group, "bar-", prefixed), true},
		{"unknown resource type code matches nothing", patternFilter(99, nil, anyPat), pattern(topic, "Name", literal), false},
		{"unknown pattern type code matches nothing", patternFilter(topic, nil, 99), pattern(topic, "Name", literal), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.filter.Matches(tc.b); got != tc.want {
				t.Errorf("%+v matches %s = %v, want %v", tc.filter, tc.b, got, tc.want)
			}
		})
	}
}

// The entry half of a filter (AccessControlEntryFilter.matches): exact
// strings, no wildcard expansion.
func TestFilterMatchesEntry(t *testing.T) {
	b := Binding{ResourceType: topic, ResourceName: "t", PatternType: literal, Principal: "User:alice", Host: "10.0.0.1", Operation: opWrite, Permission: deny}
	entry := func(principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Filter {
		return Filter{ResourceType: anyType, PatternType: anyPat, Principal: principal, Host: host, Operation: op, Permission: perm}
	}
	for _, tc := range []struct {
		name   string
		filter Filter
		want   bool
	}{
		{"any", AnyFilter(), true},
		{"exact", entry(str("User:alice"), str("10.0.0.1"), opWrite, deny), true},
		{"other principal", entry(str("User:bob"), nil, opAny, anyPerm), false},
		{"User:* filter is a literal string", entry(str("User:*"), nil, opAny, anyPerm), false},
		{"other host", entry(nil, str("10.0.0.2"), opAny, anyPerm), false},
		{"* host filter is a literal string", entry(nil, str("*"), opAny, anyPerm), false},
		{"other operation", entry(nil, nil, opRead, anyPerm), false},
		{"ALL filter is not ANY", entry(nil, nil, opAll, anyPerm), false},
		{"other permission", entry(nil, nil, opAny, allow), false},
		{"unknown operation code", entry(nil, nil, 99, anyPerm), false},
		{"the binding's own filter", b.Filter(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.filter.Matches(b); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	wild := b
	wild.Principal = "User:*"
	if !entry(str("User:*"), nil, opAny, anyPerm).Matches(wild) {
		t.Error("User:* filter does not match a User:* binding")
	}
}

func TestFilterIndefiniteField(t *testing.T) {
	definite := pattern(topic, "t", literal).Filter()
	with := func(change func(*Filter)) Filter {
		f := definite
		change(&f)
		return f
	}
	for _, tc := range []struct {
		filter Filter
		want   string
	}{
		{definite, ""},
		{with(func(f *Filter) { f.PatternType = prefixed }), ""},
		{with(func(f *Filter) { f.PatternType = anyPat }), ""}, // Kafka's rule: ANY is not indefinite
		{with(func(f *Filter) { f.ResourceType = anyType }), "Resource type is ANY."},
		{with(func(f *Filter) { f.ResourceType = 0 }), "Resource type is UNKNOWN."},
		{with(func(f *Filter) { f.ResourceType = 42 }), "Resource type is UNKNOWN."},
		{with(func(f *Filter) { f.ResourceName = nil }), "Resource name is NULL."},
		{with(func(f *Filter) { f.PatternType = match }), "Resource pattern type is MATCH."},
		{with(func(f *Filter) { f.PatternType = 0 }), "Resource pattern type is UNKNOWN."},
		{with(func(f *Filter) { f.Principal = nil }), "Principal is NULL"},
		{with(func(f *Filter) { f.Host = nil }), "Host is NULL"},
		{with(func(f *Filter) { f.Operation = opAny }), "Operation is ANY"},
		{with(func(f *Filter) { f.Operation = 0 }), "Operation is UNKNOWN"},
		{with(func(f *Filter) { f.Permission = anyPerm }), "Permission type is ANY"},
		{with(func(f *Filter) { f.Permission = 0 }), "Permission type is UNKNOWN"},
		{with(func(f *Filter) { f.ResourceType = anyType; f.Principal = nil }), "Resource type is ANY."},
		{AnyFilter(), "Resource type is ANY."},
	} {
		if got := tc.filter.IndefiniteField(); got != tc.want {
			t.Errorf("%+v: IndefiniteField = %q, want %q", tc.filter, got, tc.want)
		}
		if got := tc.filter.MatchesAtMostOne(); got != (tc.want == "") {
			t.Errorf("%+v: MatchesAtMostOne = %v", tc.filter, got)
		}
	}
}

func TestBindingString(t *testing.T) {
	b := Binding{ResourceType: topic, ResourceName: "t", PatternType: prefixed, Principal: "User:a", Host: "*", Operation: opDescribeConfigs, Permission: deny}
	want := "(pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=PREFIXED), entry=(principal=User:a, host=*, operation=DESCRIBE_CONFIGS, permissionType=DENY))"
	if got := b.String(); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
