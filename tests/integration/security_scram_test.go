package integration

// AlterUserScramCredentials and DescribeUserScramCredentials through
// franz-go's kadm: a role's password changed through Kafka is the one it
// logs in with next, over SASL (broker/50_*, 51_*, kafgres.scram_alter).

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafgres/kafgres/tests/harness"
)

func TestSecurityScramCredentialsKadm(t *testing.T) {
	a := startAuthCluster(t)
	a.Exec(t, `CREATE ROLE erin LOGIN PASSWORD 'old password' IN ROLE kafka_clients`)
	a.Exec(t, `SELECT kafgres_acl_grant('User:alice', 'ALTER', 'CLUSTER', 'kafka-cluster')`)

	cl, err := kgo.NewClient(kgo.SeedBrokers(a.saslPlain), scramUser("alice", "pencil"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var described kadm.DescribedUserSCRAMs
	harness.Eventually(t, 10*time.Second, func() error { // until the broker has the ACL
		described, err = adm.DescribeUserSCRAMs(ctx, "erin", "nobody")
		return err
	})
	if d := described["erin"]; d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha256 || d.CredInfos[0].Iterations != 4096 {
		t.Fatalf("describe erin: %+v", d)
	}
	if d := described["nobody"]; d.Err == nil {
		t.Fatalf("describe nobody: %+v", d)
	}

	if err := authPing(a.saslPlain, scramUser("erin", "old password")); err != nil {
		t.Fatalf("erin with the old password before the change: %v", err)
	}
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "erin", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "new password"},
		{User: "nobody", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "x"},
		{User: "dave", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := altered["erin"]; r.Err != nil {
		t.Fatalf("alter erin: %v %s", r.Err, r.ErrMessage)
	}
	if r := altered["nobody"]; r.Err == nil {
		t.Errorf("alter nobody (no such role) succeeded")
	}
	if r := altered["dave"]; r.Err == nil {
		t.Errorf("alter dave with SCRAM-SHA-512 succeeded")
	}

	if err := authPing(a.saslPlain, scramUser("erin", "new password")); err != nil {
		t.Fatalf("erin with the new password: %v", err)
	}
	if err := authPing(a.saslSSL, scramUser("erin", "old password"), kgo.DialTLSConfig(a.tlsConfig())); err == nil {
		t.Fatal("erin still logs in with the old password")
	}
	var iterations string
	if err := a.Conn(t).QueryRow(ctx, `SELECT split_part(split_part(rolpassword, '$', 2), ':', 1) FROM pg_authid WHERE rolname = 'erin'`).Scan(&iterations); err != nil || iterations != "8192" {
		t.Fatalf("erin's verifier iterations: %q %v", iterations, err)
	}

	// bob is not allowed ALTER on the cluster.
	a.Exec(t, `ALTER ROLE bob LOGIN`)
	bcl, err := kgo.NewClient(kgo.SeedBrokers(a.saslPlain), scramUser("bob", "pencil"))
	if err != nil {
		t.Fatal(err)
	}
	defer bcl.Close()
	altered, err = kadm.NewClient(bcl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "erin", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob's"}})
	if err == nil && altered["erin"].Err == nil {
		t.Fatal("bob changed erin's password")
	}
	if err := authPing(a.saslPlain, scramUser("erin", "new password")); err != nil {
		t.Fatalf("erin after bob's refused change: %v", err)
	}
}
