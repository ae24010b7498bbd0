package broker

// DeleteAcls: v1-3 (Kafka 4.x serves 1-3)
//
// Behavior:
//   - ALTER on the cluster first (the dispatcher, apis.go): denied, every
//     filter gets {CLUSTER_AUTHORIZATION_FAILED, "Request ... needs ALTER
//     permission."}
//   - no authorizer configured: every filter {SECURITY_DISABLED, "No
//     Authorizer is configured."}
//   - a code of 0 closes the connection; an unknown type or pattern type
//     fails that filter with INVALID_REQUEST "Unknown patternFilter.", an
//     unknown operation or permission "Unknown entryFilter."
//     (acl.ValidateDeleteFilter)
//   - every filter is matched against the ACLs as they were before the
//     request, so one ACL can be listed under two filters, as in Kafka;
//     the union is deleted from kafgres.acl in one transaction and the
//     authorizer reloaded before the answer
//   - more than 10,000 ACLs matched in all (Kafka's MAX_RECORDS_PER_USER_OP,
//     counted as Kafka does: before each match, an ACL two filters match
//     counted once but checked twice): nothing is deleted, every filter
//     {INVALID_REQUEST, "Cannot remove more than 10000 acls in a single
//     delete operation."}
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

func handleDeleteACLs(ctx context.Context, b *Broker, cc *conn, req *kmsg.DeleteACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	a := b.authz.current()
	if a == nil {
		msg := "No Authorizer is configured."
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = kerr.SecurityDisabled.Code, &msg
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	filters := make([]acl.Filter, len(req.Filters))
	refusals := make([]*acl.Refusal, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = acl.Filter{
			ResourceType: f.ResourceType,
			ResourceName: f.ResourceName,
			PatternType:  f.ResourcePatternType,
			Principal:    f.Principal,
			Host:         f.Host,
			Operation:    f.Operation,
			Permission:   f.PermissionType,
		}
		r := acl.ValidateDeleteFilter(filters[i])
		if r != nil && r.Scope == acl.ScopeConnection {
			return nil, fmt.Errorf("delete acls: %w", r)
		}
		refusals[i] = r
	}
	matched := make([][]acl.Binding, len(filters))
	var doomed []acl.Binding
	seen := make(map[acl.Binding]bool)
	for i, f := range filters {
		if refusals[i] != nil {
			continue
		}
		matched[i] = a.Describe(f)
		for _, bd := range matched[i] {
			// Kafka checks the cap before each match is added, an ACL
			// already matched by an earlier filter included.
			if len(doomed) >= maxDeleteACLs {
				return tooManyDeletedACLs(req), nil
			}
			if !seen[bd] {
				seen[bd] = true
				doomed = append(doomed, bd)
			}
		}
	}
	storeErr := b.meta.DeleteACLs(ctx, doomed)
	if storeErr != nil {
		cc.log.Warn("deleting ACLs", "err", storeErr)
	} else if err := b.authz.load(ctx, b.meta); err != nil {
		cc.log.Warn("reloading ACLs", "err", err)
	}
	for i := range filters {
		res := kmsg.NewDeleteACLsResponseResult()
		switch {
		case refusals[i] != nil:
			msg := refusals[i].Message
			res.ErrorCode, res.ErrorMessage = refusals[i].Err.Code, &msg
		case storeErr != nil:
			res.ErrorCode = kerr.UnknownServerError.Code
		default:
			for _, bd := range matched[i] {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = bd.ResourceType, bd.ResourceName, bd.PatternType
				m.Principal, m.Host, m.Operation, m.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// maxDeleteACLs is Kafka's MAX_RECORDS_PER_USER_OP: the most ACLs one
// DeleteAcls may remove.
const maxDeleteACLs = 10000

// tooManyDeletedACLs is Kafka's answer when the filters match more than
// maxDeleteACLs: the whole request fails, every filter with
// INVALID_REQUEST, and nothing is deleted (AclControlManager.deleteAcls).
func tooManyDeletedACLs(req *kmsg.DeleteACLsRequest) kmsg.Response {
	msg := fmt.Sprintf("Cannot remove more than %d acls in a single delete operation.", maxDeleteACLs)
	return deniedDeleteACLs(req, kerr.InvalidRequest.Code, &msg)
}

// deniedDeleteACLs: every filter fails with the cluster error.
func deniedDeleteACLs(r kmsg.Request, code int16, msg *string) kmsg.Response {
	req := r.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = code, msg
		resp.Results = append(resp.Results, res)
	}
	return resp
}
