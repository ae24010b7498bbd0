package acl

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka refuses a bad ACL creation or filter at one of three stages, and
// the stage decides what the client sees. Scope names the stage.
type Scope int8

const (
	// ScopeEntry: only this creation (or filter) fails, with Err and
	// Message in its result; the others of the request proceed. Kafka's
	// AclApis checks and its controller's AclControlManager checks.
	ScopeEntry Scope = iota
	// ScopeRequest: every creation of the request fails with Err
	// (UNKNOWN_SERVER_ERROR) and a null message, and nothing is created.
	// Kafka's handler throws IllegalArgumentException while turning the
	// request into AclBindings.
	ScopeRequest
	// ScopeConnection: Kafka cannot parse the request (its request
	// class's validate throws) and closes the connection without an
	// answer. Message is for the broker's log only.
	ScopeConnection
)

// Refusal is why Kafka refuses a creation or a filter.
type Refusal struct {
	Err     *kerr.Error // the error code
	Message string      // the response's error message; "" is null
	Scope   Scope
	detail  string // Kafka's exception text where the response has none
}

func (r *Refusal) Error() string {
	switch {
	case r.Message != "":
		return r.Message
	case r.detail != "":
		return r.detail
	}
	return r.Err.Message
}

func entryRefusal(msg string) *Refusal {
	return &Refusal{Err: kerr.InvalidRequest, Message: msg, Scope: ScopeEntry}
}

func requestRefusal(detail string) *Refusal {
	return &Refusal{Err: kerr.UnknownServerError, Scope: ScopeRequest, detail: detail}
}

func connectionRefusal(detail string) *Refusal {
	return &Refusal{Err: kerr.InvalidRequest, Scope: ScopeConnection, detail: detail}
}

// ValidateCreation is Kafka 4.x's verdict on one creation of a CreateAcls
// request (nil: it is created, or already exists, which also succeeds).
// The checks, in Kafka's order:
//
//   - a code of 0 (UNKNOWN) in resource type, pattern type, operation or
//     permission: CreateAclsRequest.validate rejects the request
//     (ScopeConnection). Codes Kafka does not know at all get past this and
//     count as UNKNOWN below;
//   - resource type ANY, pattern type ANY or MATCH, operation ANY or
//     permission ANY: the ResourcePattern and AccessControlEntry
//     constructors throw (ScopeRequest);
//   - AclApis: a CLUSTER resource not named "kafka-cluster", an empty
//     resource name (INVALID_REQUEST);
//   - AclControlManager.validateNewAcl: an unknown resource type, pattern
//     type, operation or permission, a principal without a colon
//     (INVALID_REQUEST).
//
// Hosts are not checked, and DELEGATION_TOKEN and USER resources are
// accepted like any other (Kafka 4.x has no rule of its own for them).
// Version 0 of CreateAcls (literal patterns only) is not Kafka 4.x's
// concern: 4.0 serves the API from version 1 (KIP-896).
func ValidateCreation(b Binding) *Refusal {
	if b.ResourceType == kmsg.ACLResourceTypeUnknown || b.PatternType == kmsg.ACLResourcePatternTypeUnknown ||
		b.Operation == kmsg.ACLOperationUnknown || b.Permission == kmsg.ACLPermissionTypeUnknown {
		return connectionRefusal("CreatableAcls contain unknown elements")
	}
	rt, pt := resourceTypeOf(b.ResourceType), patternTypeOf(b.PatternType)
	op, perm := operationOf(b.Operation), permissionOf(b.Permission)
	switch {
	case rt == kmsg.ACLResourceTypeAny:
		return requestRefusal("resourceType must not be ANY")
	case pt == kmsg.ACLResourcePatternTypeMatch || pt == kmsg.ACLResourcePatternTypeAny:
		return requestRefusal("patternType must not be " + patternName(pt))
	case op == kmsg.ACLOperationAny:
		return requestRefusal("operation must not be ANY")
	case perm == kmsg.ACLPermissionTypeAny:
		return requestRefusal("permissionType must not be ANY")
	}
	if rt == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterName {
		return entryRefusal("The only valid name for the CLUSTER resource is " + ClusterName)
	}
	if b.ResourceName == "" {
		return entryRefusal("Invalid empty resource name")
	}
	if msg := storedProblem(b); msg != "" {
		return entryRefusal(msg)
	}
	return nil
}

// storedProblem is AclControlManager.validateNewAcl, the controller's
// check of every ACL it stores (not the CLUSTER name, which only the
// CreateAcls handler checks).
func storedProblem(b Binding) string {
	switch resourceTypeOf(b.ResourceType) {
	case kmsg.ACLResourceTypeUnknown, kmsg.ACLResourceTypeAny:
		return "Invalid resourceType " + resourceTypeName(resourceTypeOf(b.ResourceType))
	}
	switch pt := patternTypeOf(b.PatternType); pt {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return "Invalid patternType " + patternName(pt)
	}
	switch op := operationOf(b.Operation); op {
	case kmsg.ACLOperationUnknown, kmsg.ACLOperationAny:
		return "Invalid operation " + operationName(op)
	}
	switch perm := permissionOf(b.Permission); perm {
	case kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny:
	default:
		return "Invalid permissionType " + permissionName(perm)
	}
	if b.ResourceName == "" {
		return "Resource name should not be empty"
	}
	if _, err := ParsePrincipal(b.Principal); err != nil {
		return "Could not parse principal from `" + b.Principal + "` (no colon is present separating the principal type from the principal name)"
	}
	return ""
}

// CheckCreations applies ValidateCreation to the creations of one
// CreateAcls request and resolves the scopes as Kafka does: closeConn if
// Kafka would close the connection; otherwise one result per creation, nil
// for those to create, and the same UNKNOWN_SERVER_ERROR for all of them
// if any creation fails the whole request.
func CheckCreations(creations []Binding) (results []*Refusal, closeConn bool) {
	results = make([]*Refusal, len(creations))
	var whole *Refusal
	for i, c := range creations {
		r := ValidateCreation(c)
		switch {
		case r == nil:
		case r.Scope == ScopeConnection:
			return nil, true
		case r.Scope == ScopeRequest && whole == nil:
			whole = r
		}
		results[i] = r
	}
	if whole != nil {
		for i := range results {
			results[i] = whole
		}
	}
	return results, false
}

// ValidateDescribeFilter is Kafka's verdict on a DescribeAcls filter: only
// a code of 0 (UNKNOWN) in resource type, pattern type, operation or
// permission is refused, by closing the connection. A code Kafka does not
// know otherwise is UNKNOWN, which matches nothing: the answer is empty,
// without an error.
func ValidateDescribeFilter(f Filter) *Refusal {
	if hasZeroCode(f) {
		return connectionRefusal("DescribeAclsRequest contains UNKNOWN elements")
	}
	return nil
}

// ValidateDeleteFilter is Kafka's verdict on one DeleteAcls filter: a code
// of 0 closes the connection (DeleteAclsRequest's validation); an unknown
// resource type or pattern type, or an unknown operation or permission,
// fails that filter with INVALID_REQUEST (AclControlManager.validateFilter).
func ValidateDeleteFilter(f Filter) *Refusal {
	if hasZeroCode(f) {
		return connectionRefusal("Filters contain UNKNOWN elements")
	}
	if resourceTypeOf(f.ResourceType) == kmsg.ACLResourceTypeUnknown ||
		patternTypeOf(f.PatternType) == kmsg.ACLResourcePatternTypeUnknown {
		return entryRefusal("Unknown patternFilter.")
	}
	if operationOf(f.Operation) == kmsg.ACLOperationUnknown ||
		permissionOf(f.Permission) == kmsg.ACLPermissionTypeUnknown {
		return entryRefusal("Unknown entryFilter.")
	}
	return nil
}

func hasZeroCode(f Filter) bool {
	return f.ResourceType == kmsg.ACLResourceTypeUnknown || f.PatternType == kmsg.ACLResourcePatternTypeUnknown ||
		f.Operation == kmsg.ACLOperationUnknown || f.Permission == kmsg.ACLPermissionTypeUnknown
}

// The names of Java's enum constants, which Kafka's messages print.

func resourceTypeName(v kmsg.ACLResourceType) string {
	return [...]string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}[resourceTypeOf(v)]
}

func patternName(v kmsg.ACLResourcePatternType) string {
	return [...]string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}[patternTypeOf(v)]
}

func operationName(v kmsg.ACLOperation) string {
	return [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
		"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}[operationOf(v)]
}

func permissionName(v kmsg.ACLPermissionType) string {
	return [...]string{"UNKNOWN", "ANY", "DENY", "ALLOW"}[permissionOf(v)]
}
