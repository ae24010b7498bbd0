package broker

// CreateAcls: v1-3 (Kafka 4.x serves 1-3)
//
// Behavior:
//   - ALTER on the cluster first (the dispatcher, apis.go): denied, every
//     creation gets {CLUSTER_AUTHORIZATION_FAILED, "Request ... needs
//     ALTER permission."}
//   - no authorizer configured: every creation {SECURITY_DISABLED, "No
//     Authorizer is configured."}
//   - each creation is checked as Kafka does (acl.CheckCreations): a code
//     of 0 closes the connection; ANY/MATCH fails every creation with
//     UNKNOWN_SERVER_ERROR; a bad CLUSTER name, an empty name, an unknown
//     code or a principal without a colon fail that creation with
//     INVALID_REQUEST and Kafka's message
//   - the valid ones are stored in kafgres.acl in one transaction (one that
//     exists already succeeds and changes nothing), and the authorizer is
//     reloaded before the answer, so this connection's next request sees
//     them; other brokers' connections through NOTIFY
//
// Version notes:
//   - v2: flexible; v3: USER resources (nothing changes here)

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/acl"
)

func handleCreateACLs(ctx context.Context, b *Broker, cc *conn, req *kmsg.CreateACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	if b.authz.current() == nil {
		msg := "No Authorizer is configured."
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = kerr.SecurityDisabled.Code, &msg
			resp.Results = append(resp.Results, r)
		}
		return resp, nil
	}
	creations := make([]acl.Binding, len(req.Creations))
	for i, c := range req.Creations {
		creations[i] = acl.Binding{
			ResourceType: c.ResourceType,
			ResourceName: c.ResourceName,
			PatternType:  c.ResourcePatternType,
			Principal:    c.Principal,
			Host:         c.Host,
			Operation:    c.Operation,
			Permission:   c.PermissionType,
		}
	}
	refusals, closeConn := acl.CheckCreations(creations)
	if closeConn {
		return nil, errors.New("create acls: CreatableAcls contain unknown elements")
	}
	var store []acl.Binding
	for i, r := range refusals {
		if r == nil {
			store = append(store, creations[i])
		}
	}
	var storeErr error
	if err := b.meta.CreateACLs(ctx, store); err != nil {
		cc.log.Warn("storing ACLs", "err", err)
		storeErr = err
	} else if err := b.authz.load(ctx, b.meta); err != nil {
		cc.log.Warn("reloading ACLs", "err", err)
	}
	for _, r := range refusals {
		res := kmsg.NewCreateACLsResponseResult()
		switch {
		case r != nil:
			res.ErrorCode = r.Err.Code
			if r.Message != "" {
				msg := r.Message
				res.ErrorMessage = &msg
			}
		case storeErr != nil:
			res.ErrorCode = kerr.UnknownServerError.Code
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// deniedCreateACLs: every creation fails with the cluster error.
func deniedCreateACLs(r kmsg.Request, code int16, msg *string) kmsg.Response {
	req := r.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = code, msg
		resp.Results = append(resp.Results, res)
	}
	return resp
}
