package broker

// Authorization: the broker side of issue #13. The decision rules are
// security/acl's (Kafka's StandardAuthorizer); this file holds the current
// authorizer, reloads it when kafgres.acl changes, and gives handlers the
// checks Kafka's AuthHelper gives KafkaApis. Whole-request cluster checks
// are declared in the served-API table (apis.go) and applied by the
// dispatcher; per-item checks (topics, groups, transactional ids) are made
// by the handlers through allowed and allowedNames, because where a denied
// item goes in the response is each API's own shape
// (docs/kafka-authorization.md, docs/security.md "Authorization").

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/acl"
)

// Authorizer modes (--authorizer, kafgres.authorizer).
const (
	AuthorizerAuto = "auto"
	AuthorizerOn   = "on"
	AuthorizerOff  = "off"
)

// anonymous is the principal of a connection that did not authenticate.
var anonymous = acl.Principal{Type: acl.UserType, Name: "ANONYMOUS"}

// aclRefreshEvery is how often the ACLs are reloaded without a NOTIFY:
// who is a Postgres superuser (a super user) changes without one.
const aclRefreshEvery = 5 * time.Second

// authorizerEnabled resolves c.Authorizer. "auto" is on when a listener is
// not PLAINTEXT: only then can clients be told apart (on a PLAINTEXT-only
// broker every client is User:ANONYMOUS). outputplugin/kafgres.c resolves
// it the same way for the SQL side.
func (c *Config) authorizerEnabled() bool {
	switch c.Authorizer {
	case AuthorizerOn:
		return true
	case AuthorizerOff:
		return false
	}
	for _, l := range c.Listeners {
		if l.Protocol != Plaintext {
			return true
		}
	}
	return false
}

func (c *Config) validateAuthorizer() error {
	switch c.Authorizer {
	case "", AuthorizerAuto, AuthorizerOn, AuthorizerOff:
	default:
		return fmt.Errorf("authorizer %q: must be auto, on or off", c.Authorizer)
	}
	if _, err := acl.ParseSuperUsers(c.SuperUsers); err != nil {
		return fmt.Errorf("super users: %w", err)
	}
	return nil
}

// authz holds the authorizer in force. An acl.Authorizer is immutable: a
// reload builds a new one and swaps it in, and a request finishes on the
// one it started with.
type authz struct {
	enabled bool
	cfg     acl.Config // from the configuration; the superuser roles are added per load
	cur     atomic.Pointer[acl.Authorizer]
	log     *slog.Logger
}

func newAuthz(cfg Config, log *slog.Logger) *authz {
	supers, _ := acl.ParseSuperUsers(cfg.SuperUsers) // validated
	return &authz{
		enabled: cfg.authorizerEnabled(),
		cfg:     acl.Config{SuperUsers: supers, AllowIfNoACL: cfg.AllowEveryoneIfNoACLFound},
		log:     log.With("component", "authorizer"),
	}
}

// load builds an authorizer from the store and swaps it in. On failure the
// previous one stays.
func (z *authz) load(ctx context.Context, meta aclStore) error {
	acls, err := meta.LoadACLs(ctx)
	if err != nil {
		return err
	}
	cfg := z.cfg
	cfg.SuperUsers = append([]string(nil), z.cfg.SuperUsers...)
	for _, r := range acls.SuperuserRoles {
		cfg.SuperUsers = append(cfg.SuperUsers, acl.UserType+":"+r)
	}
	a, err := acl.New(cfg, acls.Bindings)
	if err != nil {
		return fmt.Errorf("build authorizer: %w", err)
	}
	if old := z.cur.Swap(a); old == nil || old.Len() != a.Len() {
		z.log.Debug("ACLs loaded", "acls", a.Len())
	}
	return nil
}

// follow reloads on every change of kafgres.acl, and every aclRefreshEvery
// for the superusers, until ctx ends.
func (z *authz) follow(ctx context.Context, meta aclStore) {
	if !z.enabled {
		return
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every(ctx, aclRefreshEvery, func(time.Time) {
			if err := z.load(ctx, meta); err != nil && ctx.Err() == nil {
				z.log.Warn("reloading ACLs", "err", err)
			}
		})
	}()
	meta.WatchACLs(ctx, func(ctx context.Context) error { return z.load(ctx, meta) })
	wg.Wait()
}

// current is the authorizer in force, nil when authorization is off.
func (z *authz) current() *acl.Authorizer {
	if !z.enabled {
		return nil
	}
	return z.cur.Load()
}

// allowed is Kafka's AuthHelper.authorize: may cc do op on the resource?
// Always, when no authorizer is configured.
func (b *Broker) allowed(cc *conn, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	a := b.authz.current()
	if a == nil {
		return true
	}
	return a.Authorize(cc.principal, cc.host, op, rt, name) == acl.Allowed
}

// allowedCluster is allowed on the CLUSTER resource.
func (b *Broker) allowedCluster(cc *conn, op kmsg.ACLOperation) bool {
	return b.allowed(cc, op, kmsg.ACLResourceTypeCluster, acl.ClusterName)
}

// allowedNames is Kafka's filterByAuthorized: the names of resources of
// type rt that cc may do op on, asked once per distinct name.
func (b *Broker) allowedNames(cc *conn, op kmsg.ACLOperation, rt kmsg.ACLResourceType, names []string) map[string]bool {
	ok := make(map[string]bool, len(names))
	for _, n := range names {
		if _, seen := ok[n]; !seen {
			ok[n] = b.allowed(cc, op, rt, n)
		}
	}
	return ok
}

// allowedByResourceType is Kafka's authorizeByResourceType: may cc do op
// on at least one resource of type rt?
func (b *Broker) allowedByResourceType(cc *conn, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	a := b.authz.current()
	if a == nil {
		return true
	}
	return a.AuthorizeByResourceType(cc.principal, cc.host, op, rt) == acl.Allowed
}

// authorizedOps is the authorized-operations bit field of a resource
// (AuthHelper.authorizedOperations): every supported operation without an
// authorizer.
func (b *Broker) authorizedOps(cc *conn, rt kmsg.ACLResourceType, name string) int32 {
	a := b.authz.current()
	if a == nil {
		return acl.SupportedOperations(rt)
	}
	return a.AuthorizedOperations(cc.principal, cc.host, rt, name)
}

// clusterCheck is a whole-request authorization a served API declares in
// the table: op on the CLUSTER, and the API's own error response when it
// is denied (the request's getErrorResponse in Kafka).
type clusterCheck struct {
	op     kmsg.ACLOperation
	denied func(req kmsg.Request, code int16, msg *string) kmsg.Response
}

// clusterDeniedMessage is the text of Kafka's ClusterAuthorizationException
// from authorizeClusterOperation: "Request <request> needs <OP>
// permission.", where Kafka prints its RequestChannel.Request, processor,
// connection id and session object included. No client can depend on those
// parts; the shape is Kafka's.
func clusterDeniedMessage(cc *conn, op kmsg.ACLOperation) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Request Request(processor=0, connectionId=%s, session=Session(principal=%s, clientAddress=/%s), listenerName=ListenerName(PLAINTEXT), securityProtocol=PLAINTEXT, buffer=null, envelope=None) needs %s permission.",
		cc.connectionID(), cc.principal, cc.host, op)
	return sb.String()
}

// connectionID is Kafka's "local-remote-index" connection id.
func (cc *conn) connectionID() string {
	if cc.nc == nil {
		return ""
	}
	return cc.nc.LocalAddr().String() + "-" + cc.nc.RemoteAddr().String() + "-0"
}

// resourceCheck is a whole-request check on one resource the request
// names (the group of JoinGroup, ...), declared in the table like
// clusterCheck: op on the resource named by name(req), and the API's error
// response with the resource type's code (GROUP_AUTHORIZATION_FAILED, ...)
// and a null message when denied.
type resourceCheck struct {
	op     kmsg.ACLOperation
	rt     kmsg.ACLResourceType
	name   func(req kmsg.Request) string
	denied func(req kmsg.Request, code int16, msg *string) kmsg.Response
}

// deniedCode is the authorization error of a resource type.
func deniedCode(rt kmsg.ACLResourceType) int16 {
	switch rt {
	case kmsg.ACLResourceTypeTopic:
		return kerr.TopicAuthorizationFailed.Code
	case kmsg.ACLResourceTypeGroup:
		return kerr.GroupAuthorizationFailed.Code
	case kmsg.ACLResourceTypeTransactionalId:
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	return kerr.ClusterAuthorizationFailed.Code
}

// checkRequest applies the table's whole-request checks of a (its
// precheck first, which Kafka answers before authorizing), returning the
// refusal to answer, or nil.
func (b *Broker) checkRequest(cc *conn, a api, req kmsg.Request) kmsg.Response {
	if a.precheck != nil {
		if resp := a.precheck(req); resp != nil {
			return resp
		}
	}
	if c := a.cluster; c != nil && !b.allowedCluster(cc, c.op) {
		msg := clusterDeniedMessage(cc, c.op)
		return c.denied(req, kerr.ClusterAuthorizationFailed.Code, &msg)
	}
	if c := a.resource; c != nil && !b.allowed(cc, c.op, c.rt, c.name(req)) {
		return c.denied(req, deniedCode(c.rt), nil)
	}
	return nil
}
