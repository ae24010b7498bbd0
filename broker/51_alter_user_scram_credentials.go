package broker

// AlterUserScramCredentials: v0 (Kafka 4.4 serves 0)
//
// Behavior:
//   - Kafka users are Postgres roles: an upsertion sets the role's
//     SCRAM-SHA-256 verifier, computed from the client's salt, iterations
//     and salted password (StoredKey = H(HMAC(SaltedPassword, "Client
//     Key")), ServerKey = HMAC(SaltedPassword, "Server Key")), with ALTER
//     ROLE ... PASSWORD; a deletion removes it (ALTER ROLE ... PASSWORD
//     NULL); all changes in one transaction, through the SECURITY DEFINER
//     kafgres.scram_alter, which repeats the ACL check
//   - Kafka's validation (ScramControlManager), deletions first, then
//     upsertions: a user altered twice, {DUPLICATE_RESOURCE, "A user
//     credential cannot be altered twice in the same request"}; an empty
//     name, {UNACCEPTABLE_CREDENTIAL, "Username must not be empty"}; an
//     unknown mechanism, {UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM
//     mechanism"}; iterations below 4096 or above 16384,
//     {UNACCEPTABLE_CREDENTIAL, "Too few iterations" / "Too many
//     iterations"}; deleting a credential that does not exist,
//     {RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does
//     not exist"}
//   - what does not map to Postgres: SCRAM-SHA-512 (Postgres keeps only
//     SCRAM-SHA-256 verifiers), UNSUPPORTED_SASL_MECHANISM; a role that
//     does not exist or is not a member of kafgres.client_role (Kafka
//     creates the user, kafgres creates no roles) or has NOLOGIN,
//     RESOURCE_NOT_FOUND saying so; a superuser role, unless the principal
//     is User:<a superuser role>, CLUSTER_AUTHORIZATION_FAILED
//   - results: deletions done, upsertions done, then the failures, each in
//     request order (Kafka's follow hash maps)
//
//   - ALTER on the cluster first (the dispatcher, apis.go): denied, one
//     result per distinct user, by name, {CLUSTER_AUTHORIZATION_FAILED,
//     "Request ... needs ALTER permission."}
//   - without an authorizer (a PLAINTEXT-only broker) every user gets
//     {SECURITY_DISABLED, ...}: Kafka would let anyone change credentials
//     there, and these are Postgres passwords
//
// Version notes:
//   - v0: flexible

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/security/sasl"
)

// Kafka's bounds on SCRAM iterations (ScramMechanism.minIterations for
// SHA-256, ScramControlManager.MAX_ITERATIONS).
const (
	scramMinIterations = 4096
	scramMaxIterations = 16384
)

var errScramAlteredTwice = apierr.New(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")

func handleAlterUserScramCredentials(ctx context.Context, b *Broker, cc *conn, req *kmsg.AlterUserSCRAMCredentialsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if req.Version > 0 {
		return deniedAlterUserScramCredentials(req, kerr.UnsupportedVersion.Code, nil), nil
	}
	if b.authz.current() == nil {
		msg := "No Authorizer is configured: kafgres changes Postgres role passwords through Kafka only with the authorizer on."
		return deniedAlterUserScramCredentials(req, kerr.SecurityDisabled.Code, &msg), nil
	}
	type change struct {
		user   string
		alter  metadata.ScramAlter
		delete bool
	}
	var changes []change
	failed := map[string]*apierr.Error{}
	var failedOrder []string
	fail := func(user string, e *apierr.Error) {
		if _, ok := failed[user]; !ok {
			failedOrder = append(failedOrder, user)
		}
		failed[user] = e
	}
	pending := func(user string) int {
		return slices.IndexFunc(changes, func(c change) bool { return c.user == user })
	}
	for _, d := range req.Deletions {
		if failed[d.Name] != nil {
			continue
		}
		if i := pending(d.Name); i >= 0 {
			changes = slices.Delete(changes, i, i+1)
			fail(d.Name, errScramAlteredTwice)
			continue
		}
		if e := scramNameAndMechanism(d.Name, d.Mechanism); e != nil {
			fail(d.Name, e)
			continue
		}
		changes = append(changes, change{user: d.Name, alter: metadata.ScramAlter{Role: d.Name}, delete: true})
	}
	for _, u := range req.Upsertions {
		if failed[u.Name] != nil {
			continue
		}
		if i := pending(u.Name); i >= 0 {
			changes = slices.Delete(changes, i, i+1)
			fail(u.Name, errScramAlteredTwice)
			continue
		}
		e := scramNameAndMechanism(u.Name, u.Mechanism)
		switch {
		case e != nil:
		case u.Iterations < scramMinIterations:
			e = apierr.New(kerr.UnacceptableCredential, "Too few iterations")
		case u.Iterations > scramMaxIterations:
			e = apierr.New(kerr.UnacceptableCredential, "Too many iterations")
		}
		if e != nil {
			fail(u.Name, e)
			continue
		}
		verifier, err := sasl.VerifierFromSaltedPassword(u.SaltedPassword, u.Salt, int(u.Iterations))
		if err != nil {
			fail(u.Name, apierr.New(kerr.UnacceptableCredential, "%s", err.Error()))
			continue
		}
		changes = append(changes, change{user: u.Name, alter: metadata.ScramAlter{Role: u.Name, Verifier: verifier}})
	}

	alters := make([]metadata.ScramAlter, len(changes))
	for i, c := range changes {
		alters[i] = c.alter
	}
	var outcomes []metadata.ScramOutcome
	if len(alters) > 0 {
		var err error
		outcomes, err = b.meta.AlterScramCredentials(ctx, cc.principal.String(), cc.host, b.cfg.ClientRole, alters)
		if err != nil {
			cc.log.Warn("altering SCRAM credentials", "err", err)
			outcomes = nil
			for _, c := range changes {
				fail(c.user, apierr.WithoutMessage(kerr.UnknownServerError))
			}
			changes = nil
		}
	}
	var deleted, upserted []string
	for i, c := range changes {
		if e := scramOutcomeError(cc, c.user, c.delete, outcomes[i]); e != nil {
			fail(c.user, e)
			continue
		}
		if c.delete {
			deleted = append(deleted, c.user)
		} else {
			upserted = append(upserted, c.user)
		}
	}
	if len(deleted)+len(upserted) > 0 {
		cc.log.Info("SCRAM credentials altered", "principal", cc.principal, "deleted", deleted, "upserted", upserted)
	}
	for _, user := range slices.Concat(deleted, upserted) {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		resp.Results = append(resp.Results, r)
	}
	for _, user := range failedOrder {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = user
		r.ErrorCode, r.ErrorMessage = failed[user].Code(), failed[user].NullableMessage()
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// scramNameAndMechanism is Kafka's validateScramUsernameAndMechanism, and
// the refusal of SCRAM-SHA-512, which Postgres does not keep.
func scramNameAndMechanism(name string, mechanism int8) *apierr.Error {
	switch {
	case name == "":
		return apierr.New(kerr.UnacceptableCredential, "Username must not be empty")
	case mechanism == scramSHA512:
		return apierr.New(kerr.UnsupportedSaslMechanism, "SCRAM-SHA-512 is not supported: Kafka users are Postgres roles, whose verifiers are SCRAM-SHA-256")
	case mechanism != scramSHA256:
		return apierr.New(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
	}
	return nil
}

// scramOutcomeError is Kafka's nearest error for what kafgres.scram_alter
// did, nil when it was done.
func scramOutcomeError(cc *conn, user string, deletion bool, o metadata.ScramOutcome) *apierr.Error {
	switch o {
	case metadata.ScramOK:
		return nil
	case metadata.ScramNoCredential:
		return apierr.New(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
	case metadata.ScramUnknown:
		if deletion {
			return apierr.New(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
		}
		return apierr.New(kerr.ResourceNotFound, "No Postgres role %s that Kafka clients may log in as: kafgres does not create users (CREATE ROLE %s LOGIN, as a member of kafgres.client_role if set, first)", user, user)
	case metadata.ScramNoLogin:
		return apierr.New(kerr.ResourceNotFound, "Postgres role %s has NOLOGIN: kafgres sets credentials only for roles that may log in", user)
	case metadata.ScramSuperuser:
		return apierr.New(kerr.ClusterAuthorizationFailed, "Postgres role %s is a superuser: only a superuser principal may change its credentials", user)
	case metadata.ScramDenied:
		return apierr.New(kerr.ClusterAuthorizationFailed, "%s", clusterDeniedMessage(cc, kmsg.ACLOperationAlter))
	}
	return apierr.New(kerr.UnknownServerError, "%s", fmt.Sprintf("unexpected outcome %q", o))
}

// deniedAlterUserScramCredentials: one result per distinct user, by name,
// as Kafka's getErrorResponse.
func deniedAlterUserScramCredentials(r kmsg.Request, code int16, msg *string) kmsg.Response {
	req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var users []string
	for _, d := range req.Deletions {
		users = append(users, d.Name)
	}
	for _, u := range req.Upsertions {
		users = append(users, u.Name)
	}
	slices.Sort(users)
	for _, user := range slices.Compact(users) {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode, res.ErrorMessage = user, code, msg
		resp.Results = append(resp.Results, res)
	}
	return resp
}
