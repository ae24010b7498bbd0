package main

// The secure scenarios (PROTOCOL.md "Security"): SASL logins that succeed
// or fail, and the same eight operations with and without ACLs for alice.
// How to connect comes from the runner's flags (protocol.Security).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func init() {
	scenarios["sasl-scram-ok"] = saslOK
	scenarios["sasl-ssl-scram-ok"] = saslOK
	scenarios["sasl-ssl-plain-ok"] = saslOK
	scenarios["sasl-bad-password"] = saslRefused
	scenarios["sasl-unknown-user"] = saslRefused
	scenarios["acl-denied"] = aclOps
	scenarios["acl-allowed"] = aclOps
	scenarios["kafka-acls"] = func(ctx context.Context, r *runner) error {
		r.emit(map[string]any{"skip": "a kafka-acls.sh scenario (java-tools)"})
		return nil
	}
}

// securityOpts are the franz-go options for the runner's security flags;
// none for PLAINTEXT.
func (r *runner) securityOpts() ([]kgo.Opt, error) {
	s := r.Security
	var opts []kgo.Opt
	switch s.Protocol {
	case "", "PLAINTEXT":
		return nil, nil
	case "SASL_SSL":
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading --ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", s.CAFile)
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	case "SASL_PLAINTEXT":
	default:
		return nil, fmt.Errorf("security protocol %q not supported", s.Protocol)
	}
	switch s.Mechanism {
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
	default:
		return nil, fmt.Errorf("SASL mechanism %q not supported", s.Mechanism)
	}
	return opts, nil
}

// saslOK produces one record to partition 0 and reads it back.
func saslOK(ctx context.Context, r *runner) error {
	cl, err := r.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: r.Topic(0), Partition: 0, Key: []byte("k"), Value: []byte("v")})
	if err := res.FirstErr(); err != nil {
		fmt.Fprintf(os.Stderr, "franz: %s: produce: %v\n", r.Scenario, err)
		r.emit(map[string]any{"op": "produce", "error": errName(err)})
		return nil
	}
	r.emit(map[string]any{"op": "produce", "error": nil, "offset": res[0].Record.Offset})
	got, err := r.consume(ctx, r.Topic(0), 1, 1, 15*time.Second)
	for _, rec := range got {
		r.emit(map[string]any{"op": "consume", "offset": rec.Offset, "key": string(rec.Key), "value": string(rec.Value)})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz: %s: consume: %v\n", r.Scenario, err)
		r.emit(map[string]any{"op": "consume", "error": errName(err)})
	}
	return nil
}

// saslRefused lists topics with credentials the broker must refuse.
func saslRefused(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	var name any
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz: %s: %v\n", r.Scenario, err)
		name = errName(err)
	}
	r.emit(map[string]any{"op": "connect", "error": name})
	return nil
}

// aclOps runs the eight operations of acl-denied and acl-allowed in
// PROTOCOL.md's order, one observation each: what alice may do decides
// every outcome.
func aclOps(ctx context.Context, r *runner) error {
	adm, err := r.client()
	if err != nil {
		return err
	}
	defer adm.Close()
	admin := kadm.NewClient(adm)
	op := func(name string, err error) {
		var v any
		if err != nil {
			fmt.Fprintf(os.Stderr, "franz: %s: %s: %v\n", r.Scenario, name, err)
			v = errName(err)
		}
		r.emit(map[string]any{"op": name, "error": v})
	}
	opCtx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 8*time.Second) }

	// produce: one record to partition 0
	func() {
		c, cancel := opCtx()
		defer cancel()
		cl, err := r.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(6*time.Second))
		if err != nil {
			op("produce", err)
			return
		}
		defer cl.Close()
		op("produce", cl.ProduceSync(c, &kgo.Record{Topic: r.Topic(0), Partition: 0, Key: []byte("k"), Value: []byte("v")}).FirstErr())
	}()
	// fetch: partition 0 from offset 0, no group, until a record or an error
	func() {
		c, cancel := opCtx()
		defer cancel()
		_, err := r.consume(c, r.Topic(0), 1, 1, 6*time.Second)
		op("fetch", err)
	}()
	// metadata: topic 0 by name, its error
	func() {
		c, cancel := opCtx()
		defer cancel()
		resp, err := metadata(c, adm, r.Topic(0))
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		}
		op("metadata", err)
	}()
	// group-join: a group member of g on topic 0 until it is assigned
	func() {
		c, cancel := opCtx()
		defer cancel()
		cl, err := r.groupClient()
		if err != nil {
			op("group-join", err)
			return
		}
		defer cl.Close()
		op("group-join", joinGroup(c, cl))
	}()
	// offset-commit: offset 0 of topic 0 p0 in g, as an admin commit
	func() {
		c, cancel := opCtx()
		defer cancel()
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: r.Topic(0), Partition: 0, At: 0, LeaderEpoch: -1})
		resp, err := admin.CommitOffsets(c, r.Group(), offs)
		if err == nil {
			err = resp.Error()
		}
		op("offset-commit", err)
	}()
	// describe-configs: topic 0
	func() {
		c, cancel := opCtx()
		defer cancel()
		rcs, err := admin.DescribeTopicConfigs(c, r.Topic(0))
		if err == nil {
			if len(rcs) != 1 {
				err = fmt.Errorf("describe configs: %d resources in the answer", len(rcs))
			} else {
				err = rcs[0].Err
			}
		}
		op("describe-configs", err)
	}()
	// create-topic: <prefix>-<scenario>-new, 1 partition
	func() {
		c, cancel := opCtx()
		defer cancel()
		name := fmt.Sprintf("%s-%s-new", r.Prefix, r.Scenario)
		resp, err := admin.CreateTopic(c, 1, 1, nil, name)
		if err == nil {
			err = resp.Err
		}
		op("create-topic", err)
	}()
	// delete-topic: topic 0
	func() {
		c, cancel := opCtx()
		defer cancel()
		resp, err := admin.DeleteTopic(c, r.Topic(0))
		if err == nil {
			err = resp.Err
		}
		op("delete-topic", err)
	}()
	return nil
}

// joinGroup polls until the member is assigned, returning the first error
// the client reports on the way (franz-go hands group errors to the poll).
func joinGroup(ctx context.Context, cl *kgo.Client) error {
	for {
		if _, gen := cl.GroupMetadata(); gen > 0 {
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := cl.PollFetches(pctx)
		cancel()
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return fe.Err
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no assignment: %w", ctx.Err())
		}
	}
}
