package broker

// In-process tests of DescribeUserScramCredentials and
// AlterUserScramCredentials over metadata.Memory's roles.

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/security/sasl"
)

func startScramBroker(t *testing.T) *testBroker {
	tb := startAuthzBroker(t, allow("User:carol", kmsg.ACLOperationAlter, clusterRT, "kafka-cluster"))
	tb.meta.SetRole("alice", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true})
	tb.meta.SetRole("nologin", metadata.MemoryRole{Verifier: pencilVerifier})
	tb.meta.SetRole("md5user", metadata.MemoryRole{Verifier: "md5c7a0e6b1ab6b8ae1ce7b18b5a1d0ba93", CanLogin: true})
	tb.meta.SetRole("pgsuper", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true})
	tb.meta.SetSuperuserRoles("pgsuper")
	return tb
}

func describeScram(tb *testBroker, c *testClient, users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range users {
		r := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		r.Name = u
		req.Users = append(req.Users, r)
	}
	return c.do(tb.latest(req)).(*kmsg.DescribeUserSCRAMCredentialsResponse)
}

func TestScramDescribe(t *testing.T) {
	tb := startScramBroker(t)
	admin, bob := tb.dialAs(t, "User:admin"), tb.dialAs(t, "User:bob")

	r := describeScram(tb, bob, "alice", "ghost")
	if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.ErrorMessage != nil || len(r.Results) != 2 ||
		r.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.Results[0].User != "" {
		t.Fatalf("bob: %+v", r)
	}

	r = describeScram(tb, admin)
	var names []string
	for _, res := range r.Results {
		names = append(names, res.User)
		if len(res.CredentialInfos) != 1 || res.CredentialInfos[0].Mechanism != 1 || res.CredentialInfos[0].Iterations != 4096 {
			t.Errorf("%s: %+v", res.User, res.CredentialInfos)
		}
	}
	if want := []string{"alice", "nologin", "pgsuper"}; !slicesEqual(names, want) {
		t.Fatalf("describe all: %v, want %v (no md5 verifier)", names, want)
	}

	r = describeScram(tb, admin, "alice", "ghost", "alice", "md5user")
	want := []struct {
		user string
		code int16
		msg  string
	}{
		{"alice", kerr.DuplicateResource.Code, "Cannot describe SCRAM credentials for the same user twice in a single request: alice"},
		{"ghost", kerr.ResourceNotFound.Code, "Attempt to describe a user credential that does not exist: ghost"},
		{"md5user", kerr.ResourceNotFound.Code, "Attempt to describe a user credential that does not exist: md5user"},
	}
	if len(r.Results) != len(want) {
		t.Fatalf("results: %+v", r.Results)
	}
	for i, w := range want {
		got := r.Results[i]
		if got.User != w.user || got.ErrorCode != w.code || got.ErrorMessage == nil || *got.ErrorMessage != w.msg {
			t.Errorf("result %d: %s %v %v, want %s %q", i, got.User, kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage, w.user, w.msg)
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func upsertion(t *testing.T, user, password string, mechanism int8, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, mechanism, iterations
	u.Salt = []byte("0123456789abcdef")
	salted, err := pbkdf2.Key(sha256.New, password, u.Salt, int(max(iterations, 1)), 32)
	if err != nil {
		t.Fatal(err)
	}
	u.SaltedPassword = salted
	return u
}

func deletion(user string, mechanism int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mechanism
	return d
}

type scramResult struct {
	code int16
	msg  string
}

func alterScram(tb *testBroker, c *testClient, dels []kmsg.AlterUserSCRAMCredentialsRequestDeletion, ups []kmsg.AlterUserSCRAMCredentialsRequestUpsertion) (order []string, res map[string]scramResult) {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions, req.Upsertions = dels, ups
	res = map[string]scramResult{}
	for _, r := range c.do(tb.latest(req)).(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		order = append(order, r.User)
		m := ""
		if r.ErrorMessage != nil {
			m = *r.ErrorMessage
		}
		res[r.User] = scramResult{r.ErrorCode, m}
	}
	return order, res
}

func verifierOf(t *testing.T, tb *testBroker, role string) string {
	creds, err := tb.meta.RoleCredentials(t.Context(), []string{role}, "")
	if err != nil {
		t.Fatal(err)
	}
	return creds[role].Verifier
}

func TestScramAlter(t *testing.T) {
	tb := startScramBroker(t)
	bob, carol := tb.dialAs(t, "User:bob"), tb.dialAs(t, "User:carol")

	order, res := alterScram(tb, bob, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("zed", 1)},
		[]kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion(t, "alice", "x", 1, 4096)})
	if !slicesEqual(order, []string{"alice", "zed"}) || res["alice"].code != kerr.ClusterAuthorizationFailed.Code || len(res["alice"].msg) < 20 {
		t.Fatalf("bob: %v %+v", order, res)
	}
	if verifierOf(t, tb, "alice") != pencilVerifier {
		t.Fatal("bob's refused upsertion changed alice")
	}

	// carol has ALTER on the cluster.
	up := upsertion(t, "alice", "new password", 1, 8192)
	order, res = alterScram(tb, carol, nil, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		up,
		upsertion(t, "ghost", "x", 1, 4096),
		upsertion(t, "nologin", "x", 1, 4096),
		upsertion(t, "pgsuper", "x", 1, 4096),
		upsertion(t, "sha512", "x", 2, 4096),
		upsertion(t, "bad", "x", 3, 4096),
		upsertion(t, "few", "x", 1, 1000),
		upsertion(t, "many", "x", 1, 20000),
		upsertion(t, "", "x", 1, 4096),
	})
	want := map[string]int16{
		"alice": 0, "ghost": kerr.ResourceNotFound.Code, "nologin": kerr.ResourceNotFound.Code,
		"pgsuper": kerr.ClusterAuthorizationFailed.Code, "sha512": kerr.UnsupportedSaslMechanism.Code,
		"bad": kerr.UnsupportedSaslMechanism.Code, "few": kerr.UnacceptableCredential.Code,
		"many": kerr.UnacceptableCredential.Code, "": kerr.UnacceptableCredential.Code,
	}
	for user, code := range want {
		if res[user].code != code {
			t.Errorf("%q: %v %q, want %v", user, kerr.ErrorForCode(res[user].code), res[user].msg, kerr.ErrorForCode(code))
		}
	}
	if order[0] != "alice" {
		t.Errorf("order %v: the successes come first", order)
	}
	if res["few"].msg != "Too few iterations" || res["bad"].msg != "Unknown SCRAM mechanism" {
		t.Errorf("messages: %+v", res)
	}
	wantV, _ := sasl.VerifierFromSaltedPassword(up.SaltedPassword, up.Salt, 8192)
	if got := verifierOf(t, tb, "alice"); got != wantV {
		t.Fatalf("alice's verifier %q, want %q", got, wantV)
	}
	// ALTER implies DESCRIBE.
	if r := describeScram(tb, carol, "alice"); r.ErrorCode != 0 || r.Results[0].CredentialInfos[0].Iterations != 8192 {
		t.Errorf("described iterations: %+v", r.Results[0])
	}

	// A user deleted and upserted in one request; then deletions.
	_, res = alterScram(tb, carol, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("alice", 1)},
		[]kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion(t, "alice", "x", 1, 4096)})
	if res["alice"].code != kerr.DuplicateResource.Code {
		t.Errorf("delete and upsert alice: %+v", res)
	}
	_, res = alterScram(tb, carol, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("alice", 1), deletion("md5user", 1)}, nil)
	if res["alice"].code != 0 || res["md5user"].code != kerr.ResourceNotFound.Code || res["md5user"].msg != "Attempt to delete a user credential that does not exist" {
		t.Errorf("deletions: %+v", res)
	}
	if v := verifierOf(t, tb, "alice"); v != "" {
		t.Errorf("alice's verifier after deletion: %q", v)
	}
}

func TestScramAlterWithoutAuthorizer(t *testing.T) {
	tb := startTestBroker(t)
	tb.meta.SetRole("alice", metadata.MemoryRole{Verifier: pencilVerifier, CanLogin: true})
	_, res := alterScram(tb, tb.dial(t), nil, []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion(t, "alice", "x", 1, 4096)})
	if res["alice"].code != kerr.SecurityDisabled.Code {
		t.Fatalf("without an authorizer: %+v", res)
	}
	if verifierOf(t, tb, "alice") != pencilVerifier {
		t.Fatal("changed without an authorizer")
	}
}
