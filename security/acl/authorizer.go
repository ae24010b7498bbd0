package acl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decision is the answer to one authorization question.
type Decision bool

const (
	Denied  Decision = false
	Allowed Decision = true
)

func (d Decision) String() string {
	if d {
		return "ALLOWED"
	}
	return "DENIED"
}

// Config is the authorizer's part of the broker configuration.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything,
	// whatever the ACLs say (Kafka's super.users; ParseSuperUsers reads
	// that setting). Kafka compares them to the connection's principal as
	// strings.
	SuperUsers []string
	// AllowIfNoACL is allow.everyone.if.no.acl.found: a resource that no
	// ACL applies to, for any principal, is open to everyone.
	AllowIfNoACL bool
}

// Authorizer answers authorization questions from one immutable set of
// bindings, so any number of goroutines may use it at once. To change the
// bindings, build a new one with New and publish it (atomic.Pointer):
// requests in flight finish on the old one, as Kafka's do on the snapshot
// they started with.
type Authorizer struct {
	superUsers   map[string]struct{}
	allowIfNoACL bool
	byType       [kmsg.ACLResourceTypeUser + 1]*typeIndex
	all          []Binding // deduplicated, in compareBindings order
}

// typeIndex holds the ACLs of one resource type, arranged so that finding
// those that apply to a name costs a few map lookups whatever their number.
type typeIndex struct {
	literal    map[string][]entry // LITERAL, "*" included, by name
	prefixed   map[string][]entry // PREFIXED, by name
	prefixLens []int              // the distinct lengths of prefixed names, ascending
	bindings   []Binding          // this type's bindings, for AuthorizeByResourceType
	entries    []entry            // bindings[i] parsed
}

// entry is the part of a binding that decides whether it applies to a
// connection and an operation, with the principal parsed once.
type entry struct {
	principal Principal
	anyone    bool // User:*
	host      string
	op        kmsg.ACLOperation
	allow     bool
}

// New builds an authorizer over bindings. Duplicates count once. A binding
// Kafka's controller would not have stored (AclControlManager's checks:
// concrete resource type, operation and permission, LITERAL or PREFIXED,
// non-empty name, principal with a colon) is an error, as are super users
// that do not parse; the caller keeps its previous authorizer.
func New(cfg Config, bindings []Binding) (*Authorizer, error) {
	a := &Authorizer{superUsers: make(map[string]struct{}, len(cfg.SuperUsers)), allowIfNoACL: cfg.AllowIfNoACL}
	for _, u := range cfg.SuperUsers {
		if _, err := ParsePrincipal(u); err != nil {
			return nil, fmt.Errorf("super user %q: %w", u, err)
		}
		a.superUsers[u] = struct{}{}
	}
	all := slices.Clone(bindings)
	for _, b := range all {
		if msg := storedProblem(b); msg != "" {
			return nil, fmt.Errorf("ACL %s: %s", b, msg)
		}
	}
	slices.SortFunc(all, compareBindings)
	all = slices.Compact(all)
	a.all = all
	for _, b := range all {
		t := a.byType[b.ResourceType]
		if t == nil {
			t = &typeIndex{literal: map[string][]entry{}, prefixed: map[string][]entry{}}
			a.byType[b.ResourceType] = t
		}
		p, _ := ParsePrincipal(b.Principal) // checked above
		e := entry{
			principal: p,
			anyone:    p.Type == UserType && p.Name == Wildcard,
			host:      b.Host,
			op:        b.Operation,
			allow:     b.Permission == kmsg.ACLPermissionTypeAllow,
		}
		t.bindings = append(t.bindings, b)
		t.entries = append(t.entries, e)
		if b.PatternType == kmsg.ACLResourcePatternTypeLiteral {
			t.literal[b.ResourceName] = append(t.literal[b.ResourceName], e)
			continue
		}
		if _, seen := t.prefixed[b.ResourceName]; !seen {
			t.prefixLens = append(t.prefixLens, len(b.ResourceName))
		}
		t.prefixed[b.ResourceName] = append(t.prefixed[b.ResourceName], e)
	}
	for _, t := range a.byType {
		if t != nil {
			slices.Sort(t.prefixLens)
			t.prefixLens = slices.Compact(t.prefixLens)
		}
	}
	return a, nil
}

// Authorize decides whether principal, connected from host (as
// HostAddress prints it), may perform op on the resource of type
// resourceType named name, as Kafka's StandardAuthorizer does:
//
//   - a super user may do anything;
//   - the ACLs that apply to the resource are those of its type that are
//     LITERAL with its name, LITERAL "*", or PREFIXED with a prefix of its
//     name;
//   - of those, the ones for this principal or User:*, and for this host or
//     "*", decide: any DENY for op (or ALL) denies; otherwise any ALLOW for
//     op (or ALL, or an operation implying op) allows. READ, WRITE, DELETE
//     and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; a
//     DENY implies nothing but itself (DENY ALL denies everything);
//   - if none of them decides: allowed when no ACL at all applies to the
//     resource and AllowIfNoACL is set, denied otherwise.
func (a *Authorizer) Authorize(principal Principal, host string, op kmsg.ACLOperation, resourceType kmsg.ACLResourceType, name string) Decision {
	if a.isSuperUser(principal) {
		return Allowed
	}
	var m matcher
	if t := a.typeIndex(resourceType); t != nil {
		m = matcher{principal: principal, host: host, op: op}
		t.match(&m, name)
	}
	switch {
	case m.deny:
		return Denied
	case m.allow:
		return Allowed
	case !m.found:
		return Decision(a.allowIfNoACL)
	}
	return Denied
}

func (a *Authorizer) isSuperUser(p Principal) bool {
	if len(a.superUsers) == 0 {
		return false
	}
	_, ok := a.superUsers[p.String()]
	return ok
}

func (a *Authorizer) typeIndex(rt kmsg.ACLResourceType) *typeIndex {
	if rt < 0 || int(rt) >= len(a.byType) {
		return nil
	}
	return a.byType[rt]
}

// matcher accumulates the verdict of the ACLs that apply to one resource.
type matcher struct {
	principal Principal
	host      string
	op        kmsg.ACLOperation
	found     bool // some ACL applies to the resource, for anyone
	allow     bool
	deny      bool
}

// match feeds m the ACLs that apply to name, stopping at the first DENY.
func (t *typeIndex) match(m *matcher, name string) {
	if m.scan(t.literal[name]) {
		return
	}
	if name != Wildcard && m.scan(t.literal[Wildcard]) {
		return
	}
	for _, n := range t.prefixLens {
		if n > len(name) {
			return
		}
		if m.scan(t.prefixed[name[:n]]) {
			return
		}
	}
}

// scan applies es to m and reports whether one of them denies.
func (m *matcher) scan(es []entry) bool {
	if len(es) > 0 {
		m.found = true
	}
	for i := range es {
		e := &es[i]
		if !e.anyone && e.principal != m.principal {
			continue
		}
		if e.host != Wildcard && e.host != m.host {
			continue
		}
		if !e.allow {
			if e.op == kmsg.ACLOperationAll || e.op == m.op {
				m.deny = true
				return true
			}
			continue
		}
		if allowImplies(e.op, m.op) {
			m.allow = true
		}
	}
	return false
}

// allowImplies reports whether an ALLOW ACL for aclOp allows op
// (StandardAuthorizerData.findResult).
func allowImplies(aclOp, op kmsg.ACLOperation) bool {
	if aclOp == kmsg.ACLOperationAll || aclOp == op {
		return true
	}
	switch op {
	case kmsg.ACLOperationDescribe:
		switch aclOp {
		case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter:
			return true
		}
	case kmsg.ACLOperationDescribeConfigs:
		return aclOp == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// AuthorizeByResourceType decides whether principal may perform op on at
// least one resource of resourceType, as the default
// Authorizer.authorizeByResourceType Kafka's StandardAuthorizer inherits
// (KIP-679). The broker asks it for InitProducerId without a transactional
// id: IDEMPOTENT_WRITE on the cluster, or else WRITE on some topic. Kafka's
// rules, which differ from Authorize's:
//
//   - first Authorize on a resource named "hardcode": this lets super users
//     through, and everyone when AllowIfNoACL is set and no ACL applies to
//     that name;
//   - then only ACLs for this principal or User:*, this host or "*", and op
//     itself or ALL count (no implied operations);
//   - a DENY on LITERAL "*" denies; else an ALLOW on LITERAL "*" allows;
//     else an ALLOW on a LITERAL name allows unless that name is denied
//     LITERAL or by a PREFIXED deny that is a prefix of it, and an ALLOW on a
//     PREFIXED name allows unless a PREFIXED deny is a prefix of it;
//   - otherwise denied.
//
// An op or resourceType that is ANY or UNKNOWN is denied (Kafka throws).
func (a *Authorizer) AuthorizeByResourceType(principal Principal, host string, op kmsg.ACLOperation, resourceType kmsg.ACLResourceType) Decision {
	switch {
	case resourceTypeOf(resourceType) <= kmsg.ACLResourceTypeAny, operationOf(op) <= kmsg.ACLOperationAny:
		return Denied
	}
	if a.Authorize(principal, host, op, resourceType, "hardcode") == Allowed {
		return Allowed
	}
	t := a.typeIndex(resourceType)
	if t == nil {
		return Denied
	}
	var (
		denyLiteral, denyPrefixed map[string]bool
		allowLiteral, allowPrefix []string
		allowAll                  bool
	)
	for i, b := range t.bindings {
		e := &t.entries[i]
		if e.host != host && e.host != Wildcard {
			continue
		}
		if !e.anyone && e.principal != principal {
			continue
		}
		if e.op != op && e.op != kmsg.ACLOperationAll {
			continue
		}
		literal := b.PatternType == kmsg.ACLResourcePatternTypeLiteral
		switch {
		case !e.allow && literal && b.ResourceName == Wildcard:
			return Denied
		case !e.allow && literal:
			denyLiteral = setAdd(denyLiteral, b.ResourceName)
		case !e.allow:
			denyPrefixed = setAdd(denyPrefixed, b.ResourceName)
		case literal && b.ResourceName == Wildcard:
			allowAll = true
		case literal:
			allowLiteral = append(allowLiteral, b.ResourceName)
		default:
			allowPrefix = append(allowPrefix, b.ResourceName)
		}
	}
	if allowAll {
		return Allowed
	}
	dominated := func(name string) bool {
		for n := 1; n <= len(name); n++ {
			if denyPrefixed[name[:n]] {
				return true
			}
		}
		return false
	}
	for _, name := range allowLiteral {
		if !denyLiteral[name] && !dominated(name) {
			return Allowed
		}
	}
	for _, name := range allowPrefix {
		if !dominated(name) {
			return Allowed
		}
	}
	return Denied
}

func setAdd(s map[string]bool, k string) map[string]bool {
	if s == nil {
		s = map[string]bool{}
	}
	s[k] = true
	return s
}

// AuthorizedOperations is the "authorized operations" bit field of
// Metadata, DescribeGroups, DescribeCluster and ConsumerGroupDescribe for
// one resource, as Kafka's AuthHelper.authorizedOperations computes it:
// bit 1<<code for every operation of SupportedOperations(resourceType) that
// Authorize allows. The callers' own rules (Kafka sends 0 for the cluster
// when DESCRIBE on it is denied, and INT32_MIN when not asked) stay with
// them.
func (a *Authorizer) AuthorizedOperations(principal Principal, host string, resourceType kmsg.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOperations(resourceType) {
		if a.Authorize(principal, host, op, resourceType, name) == Allowed {
			bits |= 1 << op
		}
	}
	return bits
}

// SupportedOperations is the bit field of the operations Kafka reports for
// a resource type (AclEntry.supportedOperations), which is what it answers
// in the authorized-operations fields when no authorizer is configured. 0
// for ANY, UNKNOWN and codes Kafka does not know (Kafka throws).
func SupportedOperations(resourceType kmsg.ACLResourceType) int32 {
	var bits int32
	for _, op := range supportedOperations(resourceType) {
		bits |= 1 << op
	}
	return bits
}

func supportedOperations(rt kmsg.ACLResourceType) []kmsg.ACLOperation {
	switch rt {
	case kmsg.ACLResourceTypeTopic:
		return []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
			kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter,
			kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	case kmsg.ACLResourceTypeGroup:
		return []kmsg.ACLOperation{kmsg.ACLOperationRead, kmsg.ACLOperationDescribe, kmsg.ACLOperationDelete,
			kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs}
	case kmsg.ACLResourceTypeCluster:
		return []kmsg.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationClusterAction,
			kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite,
			kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe}
	case kmsg.ACLResourceTypeTransactionalId:
		return []kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite}
	case kmsg.ACLResourceTypeDelegationToken:
		return []kmsg.ACLOperation{kmsg.ACLOperationDescribe}
	case kmsg.ACLResourceTypeUser:
		return []kmsg.ACLOperation{kmsg.ACLOperationCreateTokens, kmsg.ACLOperationDescribeTokens}
	}
	return nil
}

// Describe is the bindings f matches (DescribeAcls; and, per filter, what
// DeleteAcls deletes), in the order of Kafka's ACL cache: by resource type,
// then resource name descending. Kafka's DescribeAcls answer groups them by
// resource pattern through a hash map, so its order is not defined.
func (a *Authorizer) Describe(f Filter) []Binding {
	var out []Binding
	for _, b := range a.all {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Bindings is every binding, deduplicated, in Describe's order.
func (a *Authorizer) Bindings() []Binding { return slices.Clone(a.all) }

// Len is the number of distinct bindings.
func (a *Authorizer) Len() int { return len(a.all) }

// String is the binding in Kafka's AclBinding.toString form, for logs.
func (b Binding) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "(pattern=ResourcePattern(resourceType=%s, name=%s, patternType=%s), ",
		resourceTypeName(b.ResourceType), b.ResourceName, patternName(b.PatternType))
	fmt.Fprintf(&sb, "entry=(principal=%s, host=%s, operation=%s, permissionType=%s))",
		b.Principal, b.Host, operationName(b.Operation), permissionName(b.Permission))
	return sb.String()
}
