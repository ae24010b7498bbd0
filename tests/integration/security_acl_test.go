package integration

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/acl"
	"github.com/kafgres/kafgres/tests/harness"
)

// TestACLGrantInSQLReachesClients: with the authorizer on, an ACL granted
// in SQL reaches a connected Kafka client within a second (NOTIFY), and
// revoking it takes it away again. Clients are User:ANONYMOUS until the
// SASL listener lands.
func TestACLGrantInSQLReachesClients(t *testing.T) {
	c := harness.Start(t, "kafgres.authorizer = on")
	c.CreateTopic(t, "acl-visible", 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	topicError := func() error {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("acl-visible")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err := topicError(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("before the grant: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	c.Exec(t, `SELECT kafgres_acl_grant('User:ANONYMOUS', 'describe', 'topic', 'acl-visible')`)
	start := time.Now()
	harness.Eventually(t, 5*time.Second, topicError)
	if d := time.Since(start); d > time.Second {
		t.Errorf("grant took %v to reach the client, want within a second", d)
	}
	c.Exec(t, `SELECT kafgres_acl_revoke('User:ANONYMOUS', 'describe', 'topic', 'acl-visible')`)
	harness.Eventually(t, 5*time.Second, func() error {
		if err := topicError(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			return fmt.Errorf("after the revoke: %v", err)
		}
		return nil
	})
}

// TestACLSQLProduceRefused: kafgres_produce needs WRITE on the topic for
// User:<current_user>, and is refused with insufficient_privilege inside
// the caller's transaction.
func TestACLSQLProduceRefused(t *testing.T) {
	c := harness.Start(t, "kafgres.authorizer = on")
	c.CreateTopic(t, "acl-sql", 1)
	c.Exec(t, `CREATE ROLE acl_app LOGIN`)
	c.Exec(t, `GRANT EXECUTE ON FUNCTION kafgres_produce(text, text, text, jsonb, int) TO acl_app`)
	conn := c.Conn(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `SET ROLE acl_app`); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Exec(ctx, `SELECT kafgres_produce('acl-sql', 'k', 'v')`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("produce without WRITE: %v, want insufficient_privilege", err)
	}
	c.Exec(t, `SELECT kafgres_acl_grant('User:acl_app', 'write', 'topic', 'acl-sql')`)
	if _, err := conn.Exec(ctx, `SELECT kafgres_produce('acl-sql', 'k', 'v')`); err != nil {
		t.Fatalf("produce with WRITE: %v", err)
	}
}

// TestACLSQLProduceAutoCreateNeedsCreate: kafgres_produce into a topic
// that does not exist would create it (kafgres.auto_create_topics), which
// takes Kafka's CREATE on the topic or the cluster, as a Kafka client's
// auto-creation does; WRITE alone is refused (issue #42, item 6).
func TestACLSQLProduceAutoCreateNeedsCreate(t *testing.T) {
	c := harness.Start(t, "kafgres.authorizer = on")
	c.Exec(t, `CREATE ROLE acl_new LOGIN`)
	c.Exec(t, `GRANT EXECUTE ON FUNCTION kafgres_produce(text, text, text, jsonb, int) TO acl_new`)
	c.Exec(t, `SELECT kafgres_acl_grant('User:acl_new', 'write', 'topic', 'fresh-' || n) FROM generate_series(1, 3) AS n`)
	conn := c.Conn(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `SET ROLE acl_new`); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Exec(ctx, `SELECT kafgres_produce('fresh-1', 'k', 'v')`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(pgErr.Message, `permission denied to create topic "fresh-1"`) {
		t.Fatalf("auto-creating with WRITE only: %v, want insufficient_privilege", err)
	}
	// CREATE on the topic, or on the cluster
	c.Exec(t, `SELECT kafgres_acl_grant('User:acl_new', 'create', 'topic', 'fresh-2')`)
	if _, err := conn.Exec(ctx, `SELECT kafgres_produce('fresh-2', 'k', 'v')`); err != nil {
		t.Fatalf("auto-creating with CREATE on the topic: %v", err)
	}
	c.Exec(t, `SELECT kafgres_acl_grant('User:acl_new', 'create', 'cluster', 'kafka-cluster')`)
	if _, err := conn.Exec(ctx, `SELECT kafgres_produce('fresh-3', 'k', 'v')`); err != nil {
		t.Fatalf("auto-creating with CREATE on the cluster: %v", err)
	}
	// a topic that exists needs only WRITE
	c.CreateTopic(t, "fresh-1", 1)
	if _, err := conn.Exec(ctx, `SELECT kafgres_produce('fresh-1', 'k', 'v')`); err != nil {
		t.Fatalf("producing to an existing topic with WRITE: %v", err)
	}
}

// TestACLSQLHostIPv6: an ACL host names a client address as Kafka prints
// it ("0:0:0:0:0:0:0:1"), and a SQL session over IPv6 is matched the same
// way (issue #42, item 8): a DENY for that host refuses kafgres_produce
// from ::1. The SQL form and the broker's (acl.HostAddress) agree on
// every kind of address.
func TestACLSQLHostIPv6(t *testing.T) {
	c := harness.Start(t, "kafgres.authorizer = on", "listen_addresses = '127.0.0.1,::1'")
	conn := c.Conn(t)
	ctx := context.Background()
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "::1", "::", "::ffff:10.1.2.3", "::1.2.3.4",
		"2001:db8::8:800:200c:417a", "fe80::1", "2001:db8:0:0:1::", "64:ff9b::192.0.2.33", "1:2:3:4:5:6:7:8"} {
		var got string
		if err := conn.QueryRow(ctx, `SELECT kafgres.kafka_host($1::inet)`, a).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := acl.HostAddress(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: SQL prints %q, the broker %q", a, got, want)
		}
	}

	c.CreateTopic(t, "v6", 1)
	mustExec(t, conn, `CREATE ROLE v6app LOGIN`,
		`GRANT EXECUTE ON FUNCTION kafgres_produce(text, text, text, jsonb, int) TO v6app`,
		`SELECT kafgres_acl_grant('User:v6app', 'write', 'topic', 'v6')`,
		`SELECT kafgres_acl_grant('User:v6app', 'write', 'topic', 'v6', permission => 'deny', host => '0:0:0:0:0:0:0:1')`)
	v6, err := pgx.Connect(ctx, fmt.Sprintf("host=::1 port=%d user=v6app dbname=postgres", c.PGPort))
	if err != nil {
		t.Fatalf("connect over IPv6: %v", err)
	}
	defer v6.Close(ctx)
	_, err = v6.Exec(ctx, `SELECT kafgres_produce('v6', 'k', 'v')`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("produce over ::1 with a DENY for 0:0:0:0:0:0:0:1: %v, want insufficient_privilege", err)
	}
	v4, err := pgx.Connect(ctx, fmt.Sprintf("host=127.0.0.1 port=%d user=v6app dbname=postgres", c.PGPort))
	if err != nil {
		t.Fatal(err)
	}
	defer v4.Close(ctx)
	if _, err := v4.Exec(ctx, `SELECT kafgres_produce('v6', 'k', 'v')`); err != nil {
		t.Fatalf("produce over IPv4, which the DENY does not name: %v", err)
	}
}
