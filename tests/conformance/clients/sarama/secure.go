package main

// The secure scenarios (PROTOCOL.md "Security"): SASL logins that succeed
// or fail, and the same eight operations with and without ACLs for alice.
// How to connect comes from the runner's flags (protocol.Security). Sarama
// has no SCRAM implementation of its own; franz-go's drives its
// SCRAMClient interface (scramClient).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafgres/kafgres/tests/conformance/clients/protocol"
)

func init() {
	scenarios["sasl-scram-ok"] = saslOK
	scenarios["sasl-ssl-scram-ok"] = saslOK
	scenarios["sasl-ssl-plain-ok"] = saslOK
	scenarios["sasl-bad-password"] = saslRefused
	scenarios["sasl-unknown-user"] = saslRefused
	scenarios["acl-denied"] = aclOps
	scenarios["acl-allowed"] = aclOps
	scenarios["kafka-acls"] = func(r *runner, emit emitFunc) error {
		emit(map[string]any{"skip": "a kafka-acls.sh scenario (java-tools)"})
		return nil
	}
}

// secureConfig is config() with the runner's security flags applied.
func (r *runner) secureConfig() (*sarama.Config, error) {
	c := config()
	s := r.Security
	switch s.Protocol {
	case "", "PLAINTEXT":
		return c, nil
	case "SASL_SSL":
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading --ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", s.CAFile)
		}
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	case "SASL_PLAINTEXT":
	default:
		return nil, fmt.Errorf("security protocol %q not supported", s.Protocol)
	}
	c.Net.SASL.Enable = true
	c.Net.SASL.User, c.Net.SASL.Password = s.Username, s.Password
	switch s.Mechanism {
	case "SCRAM-SHA-256":
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{} }
	case "PLAIN":
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	default:
		return nil, fmt.Errorf("SASL mechanism %q not supported", s.Mechanism)
	}
	return c, nil
}

// scramClient is Sarama's SCRAMClient on franz-go's SCRAM-SHA-256: Step("")
// is the client-first message, each later Step answers the server.
type scramClient struct {
	mech sasl.Mechanism
	sess sasl.Session
	done bool
}

func (s *scramClient) Begin(user, password, authzID string) error {
	s.mech = scram.Auth{User: user, Pass: password, Zid: authzID}.AsSha256Mechanism()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) {
	if s.sess == nil {
		sess, first, err := s.mech.Authenticate(context.Background(), "")
		if err != nil {
			return "", fmt.Errorf("scram client-first: %w", err)
		}
		s.sess = sess
		return string(first), nil
	}
	done, out, err := s.sess.Challenge([]byte(challenge))
	if err != nil {
		return "", fmt.Errorf("scram: %w", err)
	}
	s.done = done
	return string(out), nil
}

func (s *scramClient) Done() bool { return s.done }

// produceOne sends one record key k value v to partition 0 of topic 0
// with Sarama's SyncProducer: its offset or the error.
func (r *runner) produceOne(c *sarama.Config) (int64, error) {
	c.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{r.Bootstrap}, c)
	if err != nil {
		return 0, fmt.Errorf("creating producer: %w", err)
	}
	defer p.Close()
	_, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: r.Topic(0), Partition: 0,
		Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("v")})
	if err != nil {
		return 0, fmt.Errorf("producing to %s[0]: %w", r.Topic(0), err)
	}
	return off, nil
}

// fetchFirst reads partition 0 of topic 0 from offset 0, without a group,
// until a record or an error.
func (r *runner) fetchFirst(c *sarama.Config, wait time.Duration) (*sarama.ConsumerMessage, error) {
	cons, err := sarama.NewConsumer([]string{r.Bootstrap}, c)
	if err != nil {
		return nil, fmt.Errorf("creating consumer: %w", err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(r.Topic(0), 0, 0)
	if err != nil {
		return nil, fmt.Errorf("consuming %s[0]: %w", r.Topic(0), err)
	}
	defer pc.AsyncClose()
	select {
	case m := <-pc.Messages():
		return m, nil
	case e := <-pc.Errors():
		return nil, fmt.Errorf("consuming %s[0]: %w", r.Topic(0), e)
	case <-time.After(wait):
		return nil, fmt.Errorf("no record from %s[0] in %v: %w", r.Topic(0), wait, context.DeadlineExceeded)
	}
}

// saslOK produces one record to partition 0 and reads it back.
func saslOK(r *runner, emit emitFunc) error {
	c, err := r.secureConfig()
	if err != nil {
		return err
	}
	off, err := r.produceOne(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sarama: %s: produce: %v\n", r.Scenario, err)
		emit(map[string]any{"op": "produce", "error": secureErrName(err)})
		return nil
	}
	emit(map[string]any{"op": "produce", "error": nil, "offset": off})
	if c, err = r.secureConfig(); err != nil {
		return err
	}
	m, err := r.fetchFirst(c, 15*time.Second)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sarama: %s: consume: %v\n", r.Scenario, err)
		emit(map[string]any{"op": "consume", "error": secureErrName(err)})
		return nil
	}
	emit(map[string]any{"op": "consume", "offset": m.Offset, "key": protocol.Printable(m.Key), "value": protocol.Printable(m.Value)})
	return nil
}

// saslRefused lists topics (Metadata) with credentials the broker must
// refuse. Sarama fails the client's creation: every bootstrap broker's
// login failed, and errors.As finds the broker's code among them.
func saslRefused(r *runner, emit emitFunc) error {
	c, err := r.secureConfig()
	if err != nil {
		return err
	}
	c.Metadata.Retry.Max = 0
	var name any
	cl, err := sarama.NewClient([]string{r.Bootstrap}, c)
	if err == nil {
		defer cl.Close()
		_, err = cl.Topics()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sarama: %s: %v\n", r.Scenario, err)
		name = secureErrName(err)
	}
	emit(map[string]any{"op": "connect", "error": name})
	return nil
}

// aclOps runs the eight operations of acl-denied and acl-allowed in
// PROTOCOL.md's order, one {op, error} each.
func aclOps(r *runner, emit emitFunc) error {
	if _, err := r.secureConfig(); err != nil {
		return err
	}
	cfg := func() *sarama.Config {
		c, _ := r.secureConfig() // checked above
		c.Metadata.Retry.Max = 1 // a denied topic stays denied
		return c
	}
	op := func(name string, err error) {
		var v any
		if err != nil {
			fmt.Fprintf(os.Stderr, "sarama: %s: %s: %v\n", r.Scenario, name, err)
			v = secureErrName(err)
		}
		emit(map[string]any{"op": name, "error": v})
	}

	// produce: one record to partition 0 (Sarama's default producer)
	_, err := r.produceOne(cfg())
	op("produce", err)
	// fetch: partition 0 from offset 0, no group
	_, err = r.fetchFirst(cfg(), 6*time.Second)
	op("fetch", err)
	// metadata: topic 0 by name (the admin's request, never auto-creating)
	op("metadata", r.withAdmin(cfg(), func(a sarama.ClusterAdmin) error {
		tms, err := a.DescribeTopics([]string{r.Topic(0)})
		if err != nil {
			return err
		}
		if len(tms) != 1 {
			return fmt.Errorf("describing %s: %d topics in the response", r.Topic(0), len(tms))
		}
		if tms[0].Err != sarama.ErrNoError {
			return tms[0].Err
		}
		return nil
	}))
	// group-join: a member of the group on topic 0 until it is assigned
	op("group-join", r.joinGroup(cfg(), 6*time.Second))
	// offset-commit: offset 0 of topic 0 partition 0 in the group
	op("offset-commit", r.commitOffset(cfg()))
	// describe-configs: topic 0
	op("describe-configs", r.withAdmin(cfg(), func(a sarama.ClusterAdmin) error {
		_, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: r.Topic(0)})
		return err
	}))
	// create-topic: <prefix>-<scenario>-new, 1 partition, replication 1
	op("create-topic", r.withAdmin(cfg(), func(a sarama.ClusterAdmin) error {
		return a.CreateTopic(fmt.Sprintf("%s-%s-new", r.Prefix, r.Scenario), &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
	}))
	// delete-topic: topic 0
	op("delete-topic", r.withAdmin(cfg(), func(a sarama.ClusterAdmin) error {
		return a.DeleteTopic(r.Topic(0))
	}))
	return nil
}

// secureErrName is errName, also for the broker errors Sarama wraps with
// its Wrap (a refused SASL login: Wrap(KError, message)), whose Unwrap
// yields only the message, so that errors.As misses the KError while
// errors.Is still matches it.
func secureErrName(err error) string {
	var ke sarama.KError
	if errors.As(err, &ke) {
		return errName(err)
	}
	for code := int16(-1); code < 200; code++ {
		if code != 0 && errors.Is(err, sarama.KError(code)) {
			return errName(sarama.KError(code))
		}
	}
	return errName(err)
}

// withAdmin runs fn with a ClusterAdmin made from c.
func (r *runner) withAdmin(c *sarama.Config, fn func(sarama.ClusterAdmin) error) error {
	a, err := sarama.NewClusterAdmin([]string{r.Bootstrap}, c)
	if err != nil {
		return fmt.Errorf("creating admin: %w", err)
	}
	defer a.Close()
	return fn(a)
}

// joinGroup starts a member of the scenario's group on topic 0 and waits
// until it is assigned: nil, or the first error Sarama reports (from
// Consume or on the group's error channel).
func (r *runner) joinGroup(c *sarama.Config, wait time.Duration) error {
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	g, err := sarama.NewConsumerGroup([]string{r.Bootstrap}, r.Group(), c)
	if err != nil {
		return fmt.Errorf("creating consumer group: %w", err)
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	h := newHandler(0)
	failed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{r.Topic(0)}, h); err != nil {
				failed <- err
				return
			}
		}
	}()
	select {
	case <-h.assigned:
		return nil
	case err := <-failed:
		return fmt.Errorf("joining %s: %w", r.Group(), err)
	case err := <-g.Errors():
		return fmt.Errorf("joining %s: %w", r.Group(), err)
	case <-ctx.Done():
		return fmt.Errorf("no assignment in %s in %v: %w", r.Group(), wait, ctx.Err())
	}
}

// commitOffset commits offset 0 of topic 0 partition 0 in the scenario's
// group as a member of no generation, the OffsetCommit Sarama's offset
// manager would send (version 8 for this Kafka version), to the group's
// coordinator. Sarama's offset manager itself first fetches the committed
// offset and only commits what a partition consumer marked.
func (r *runner) commitOffset(c *sarama.Config) error {
	cl, err := r.client(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	coord, err := cl.Coordinator(r.Group())
	if err != nil {
		return fmt.Errorf("coordinator of %s: %w", r.Group(), err)
	}
	req := &sarama.OffsetCommitRequest{Version: 8, ConsumerGroup: r.Group(), ConsumerGroupGeneration: -1}
	req.AddBlock(r.Topic(0), 0, 0, 0, "")
	resp, err := coord.CommitOffset(req)
	if err != nil {
		return fmt.Errorf("offset commit: %w", err)
	}
	code, ok := resp.Errors[r.Topic(0)][0]
	if !ok {
		return errors.New("offset commit: partition missing from the response")
	}
	if code != sarama.ErrNoError {
		return code
	}
	return nil
}
