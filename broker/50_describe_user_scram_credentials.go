package broker

// DescribeUserScramCredentials: v0 (Kafka 4.4 serves 0)
//
// Behavior:
//   - Kafka users are Postgres roles (docs/security.md, "SASL"): a user's
//     credential is its role's SCRAM-SHA-256 verifier, described as
//     mechanism SCRAM_SHA_256 (1) with the verifier's iteration count;
//     roles outside kafgres.client_role are not Kafka users
//   - no users (null or empty): every role with such a verifier, by name
//   - a user named twice: {DUPLICATE_RESOURCE, "Cannot describe SCRAM
//     credentials for the same user twice in a single request: <user>"};
//     a role without a SCRAM-SHA-256 verifier, or no such role:
//     {RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does
//     not exist: <user>"}, as Kafka's ScramImage.describe
//   - results in request order (Kafka's follow a hash map)
//
//   - DESCRIBE on the cluster first (the dispatcher, apis.go): denied, the
//     top level and one result per requested user {CLUSTER_AUTHORIZATION_FAILED,
//     no message, no user name}, as Kafka's getErrorResponse
//
// Version notes:
//   - v0: flexible

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/metadata"
)

// scramSHA256 is Kafka's ScramMechanism.SCRAM_SHA_256 type; SCRAM_SHA_512
// is 2.
const (
	scramSHA256 int8 = 1
	scramSHA512 int8 = 2
)

func handleDescribeUserScramCredentials(ctx context.Context, b *Broker, cc *conn, req *kmsg.DescribeUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if req.Version > 0 {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	var names []string
	twice := map[string]bool{}
	if len(req.Users) > 0 {
		seen := map[string]bool{}
		for _, u := range req.Users {
			if seen[u.Name] {
				twice[u.Name] = true
				continue
			}
			seen[u.Name] = true
			names = append(names, u.Name)
		}
	}
	creds, err := b.meta.ScramCredentials(ctx, names, b.cfg.ClientRole)
	if err != nil {
		cc.log.Warn("describing SCRAM credentials", "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil
	}
	found := make(map[string]metadata.ScramCredential, len(creds))
	for _, c := range creds {
		found[c.Role] = c
	}
	if names == nil {
		for _, c := range creds {
			names = append(names, c.Role)
		}
	}
	for _, name := range names {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = name
		c, ok := found[name]
		switch {
		case twice[name]:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + name)
		case !ok:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + name)
		default:
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = scramSHA256, c.Iterations
			r.CredentialInfos = append(r.CredentialInfos, info)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// deniedDescribeUserScramCredentials: the code at the top and on one
// nameless result per requested user, no messages (Kafka authorizes with
// authorize, not authorizeClusterOperation).
func deniedDescribeUserScramCredentials(r kmsg.Request, code int16, _ *string) kmsg.Response {
	req := r.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	resp.ErrorCode = code
	for range req.Users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.ErrorCode = code
		resp.Results = append(resp.Results, res)
	}
	return resp
}
