// Package acl is Kafka 4.x's ACL model and its standard authorizer
// (org.apache.kafka.metadata.authorizer.StandardAuthorizer), in Go and with
// Kafka's semantics: the bindings CreateAcls stores, the filters of
// DescribeAcls and DeleteAcls, the checks and error messages of CreateAcls
// and DeleteAcls, and the decision for (principal, host, operation,
// resource). It does no I/O: the broker loads bindings from Postgres, builds
// an Authorizer from them and swaps it in (atomic.Pointer) when they change.
// The enums are kmsg's, so request fields pass straight through. Where this
// package knowingly differs from Kafka, docs/security.md ("The authorizer")
// says so.
package acl

import (
	"cmp"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's fixed names.
const (
	// Wildcard is the host, and the LITERAL resource name, that match any.
	Wildcard = "*"
	// WildcardPrincipal is the principal of ACLs that apply to everyone.
	// Only the User type has a wildcard: "Group:*" is an ordinary name.
	WildcardPrincipal = "User:*"
	// ClusterName is the only name the CLUSTER resource has.
	ClusterName = "kafka-cluster"
)

// Binding is one ACL: a resource pattern and an access control entry, as
// CreateAcls creates it and DescribeAcls returns it. Principal and Host are
// kept as the client sent them (Kafka stores and returns the strings).
type Binding struct {
	ResourceType kmsg.ACLResourceType
	ResourceName string
	PatternType  kmsg.ACLResourcePatternType // LITERAL or PREFIXED
	Principal    string                      // "Type:name", e.g. "User:alice"
	Host         string                      // an IP address as Java prints it, or "*"
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType // ALLOW or DENY
}

// Filter selects bindings, as the filters of DescribeAcls and DeleteAcls
// do (Kafka's AclBindingFilter). ResourceType, Operation and Permission may
// be ANY; PatternType may be ANY or MATCH; a nil name, principal or host
// matches any.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// AnyFilter matches every binding (Kafka's AclBindingFilter.ANY).
func AnyFilter() Filter {
	return Filter{
		ResourceType: kmsg.ACLResourceTypeAny,
		PatternType:  kmsg.ACLResourcePatternTypeAny,
		Operation:    kmsg.ACLOperationAny,
		Permission:   kmsg.ACLPermissionTypeAny,
	}
}

// Filter is the filter that matches exactly b (AclBinding.toFilter).
func (b Binding) Filter() Filter {
	name, principal, host := b.ResourceName, b.Principal, b.Host
	return Filter{
		ResourceType: b.ResourceType,
		ResourceName: &name,
		PatternType:  b.PatternType,
		Principal:    &principal,
		Host:         &host,
		Operation:    b.Operation,
		Permission:   b.Permission,
	}
}

// Matches reports whether f selects b, as Kafka's
// ResourcePatternFilter.matches and AccessControlEntryFilter.matches do. A
// MATCH filter with a name selects the bindings that would apply to a
// resource of that name: LITERAL with that name, LITERAL "*", and PREFIXED
// whose name is a prefix of it. An ANY filter with a name selects the
// bindings with exactly that name, whatever their pattern type. Codes Kafka
// does not know count as UNKNOWN, which matches nothing.
func (f Filter) Matches(b Binding) bool {
	rt := resourceTypeOf(f.ResourceType)
	if rt != kmsg.ACLResourceTypeAny && rt != resourceTypeOf(b.ResourceType) {
		return false
	}
	pt, bpt := patternTypeOf(f.PatternType), patternTypeOf(b.PatternType)
	if pt != kmsg.ACLResourcePatternTypeAny && pt != kmsg.ACLResourcePatternTypeMatch && pt != bpt {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		switch {
		case pt == kmsg.ACLResourcePatternTypeAny || pt == bpt:
			if name != b.ResourceName {
				return false
			}
		case bpt == kmsg.ACLResourcePatternTypeLiteral:
			if name != b.ResourceName && b.ResourceName != Wildcard {
				return false
			}
		case bpt == kmsg.ACLResourcePatternTypePrefixed:
			if !strings.HasPrefix(name, b.ResourceName) {
				return false
			}
		default:
			// Kafka throws "Unsupported PatternType" here; a stored
			// binding is always LITERAL or PREFIXED.
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if op := operationOf(f.Operation); op != kmsg.ACLOperationAny && op != operationOf(b.Operation) {
		return false
	}
	perm := permissionOf(f.Permission)
	return perm == kmsg.ACLPermissionTypeAny || perm == permissionOf(b.Permission)
}

// IndefiniteField names the first field that lets f match more than one
// binding, in Kafka's words (AclBindingFilter.findIndefiniteField), or ""
// when f can match at most one. Note that Kafka does not count pattern
// type ANY as indefinite.
func (f Filter) IndefiniteField() string {
	switch rt := resourceTypeOf(f.ResourceType); {
	case rt == kmsg.ACLResourceTypeAny:
		return "Resource type is ANY."
	case rt == kmsg.ACLResourceTypeUnknown:
		return "Resource type is UNKNOWN."
	case f.ResourceName == nil:
		return "Resource name is NULL."
	}
	switch patternTypeOf(f.PatternType) {
	case kmsg.ACLResourcePatternTypeMatch:
		return "Resource pattern type is MATCH."
	case kmsg.ACLResourcePatternTypeUnknown:
		return "Resource pattern type is UNKNOWN."
	}
	switch {
	case f.Principal == nil:
		return "Principal is NULL"
	case f.Host == nil:
		return "Host is NULL"
	}
	switch operationOf(f.Operation) {
	case kmsg.ACLOperationAny:
		return "Operation is ANY"
	case kmsg.ACLOperationUnknown:
		return "Operation is UNKNOWN"
	}
	switch permissionOf(f.Permission) {
	case kmsg.ACLPermissionTypeAny:
		return "Permission type is ANY"
	case kmsg.ACLPermissionTypeUnknown:
		return "Permission type is UNKNOWN"
	}
	return ""
}

// MatchesAtMostOne reports whether f can match at most one binding
// (AclBindingFilter.matchesAtMostOne).
func (f Filter) MatchesAtMostOne() bool { return f.IndefiniteField() == "" }

// compareBindings is the order of Kafka's ACL cache (StandardAcl.compareTo):
// resource type, then resource name in reverse, then pattern type,
// operation, principal, host and permission.
func compareBindings(a, b Binding) int {
	if c := cmp.Compare(a.ResourceType, b.ResourceType); c != 0 {
		return c
	}
	if c := strings.Compare(b.ResourceName, a.ResourceName); c != 0 {
		return c
	}
	if c := cmp.Compare(a.PatternType, b.PatternType); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Operation, b.Operation); c != 0 {
		return c
	}
	if c := strings.Compare(a.Principal, b.Principal); c != 0 {
		return c
	}
	if c := strings.Compare(a.Host, b.Host); c != 0 {
		return c
	}
	return cmp.Compare(a.Permission, b.Permission)
}

// The fromCode functions of Kafka's enums: a code Kafka does not know is
// UNKNOWN.

func resourceTypeOf(v kmsg.ACLResourceType) kmsg.ACLResourceType {
	if v < kmsg.ACLResourceTypeUnknown || v > kmsg.ACLResourceTypeUser {
		return kmsg.ACLResourceTypeUnknown
	}
	return v
}

func patternTypeOf(v kmsg.ACLResourcePatternType) kmsg.ACLResourcePatternType {
	if v < kmsg.ACLResourcePatternTypeUnknown || v > kmsg.ACLResourcePatternTypePrefixed {
		return kmsg.ACLResourcePatternTypeUnknown
	}
	return v
}

func operationOf(v kmsg.ACLOperation) kmsg.ACLOperation {
	if v < kmsg.ACLOperationUnknown || v > kmsg.ACLOperationDescribeTokens {
		return kmsg.ACLOperationUnknown
	}
	return v
}

func permissionOf(v kmsg.ACLPermissionType) kmsg.ACLPermissionType {
	if v < kmsg.ACLPermissionTypeUnknown || v > kmsg.ACLPermissionTypeAllow {
		return kmsg.ACLPermissionTypeUnknown
	}
	return v
}
