package broker

// DescribeAcls: v1-3 (Kafka 4.x serves 1-3; v0 was removed by KIP-896)
//
// Behavior:
//   - DESCRIBE on the cluster first (checked by the dispatcher, apis.go):
//     denied is {CLUSTER_AUTHORIZATION_FAILED, "Request ... needs DESCRIBE
//     permission.", no resources}
//   - no authorizer configured: {SECURITY_DISABLED, "No Authorizer is
//     configured on the broker"}, as Kafka's AclApis answers
//   - a filter with a code of 0 (UNKNOWN) closes the connection; any other
//     code Kafka does not know matches nothing (an empty answer)
//   - the bindings the filter matches (acl.Filter, Kafka's
//     AclBindingFilter.matches), grouped by resource pattern
//
// Version notes:
//   - v2: flexible; v3: USER resources (nothing changes here)

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/acl"
)

func handleDescribeACLs(_ context.Context, b *Broker, _ *conn, req *kmsg.DescribeACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	a := b.authz.current()
	if a == nil {
		msg := "No Authorizer is configured on the broker"
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, &msg
		return resp, nil
	}
	f := acl.Filter{
		ResourceType: req.ResourceType,
		ResourceName: req.ResourceName,
		PatternType:  req.ResourcePatternType,
		Principal:    req.Principal,
		Host:         req.Host,
		Operation:    req.Operation,
		Permission:   req.PermissionType,
	}
	if r := acl.ValidateDescribeFilter(f); r != nil {
		return nil, fmt.Errorf("describe acls: %w", r)
	}
	type pattern struct {
		rt   kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
	}
	index := map[pattern]int{}
	for _, bd := range a.Describe(f) {
		p := pattern{bd.ResourceType, bd.ResourceName, bd.PatternType}
		i, ok := index[p]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = p.rt, p.name, p.pt
			resp.Resources = append(resp.Resources, r)
			i = len(resp.Resources) - 1
			index[p] = i
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, e)
	}
	return resp, nil
}

// deniedDescribeACLs is DescribeAclsRequest.getErrorResponse.
func deniedDescribeACLs(r kmsg.Request, code int16, msg *string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode, resp.ErrorMessage = code, msg
	return resp
}
