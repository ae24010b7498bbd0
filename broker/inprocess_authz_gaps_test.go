package broker

// In-process tests of the authorization points of issue #13 that follow
// Kafka 4.2's newer checks or orders: ConsumerGroupHeartbeat's subscribed
// topics and regex filtering, ConsumerGroupDescribe's assigned topics,
// DescribeProducers' READ, SyncGroup's protocol check before the group
// check, AlterConfigs' broker validation before authorization, the
// DeleteAcls cap, and a request during a v1 SASL exchange.

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/acl"
)

func cgJoin(tb *testBroker, c *testClient, group, member string, names []string, regex string) *kmsg.ConsumerGroupHeartbeatResponse {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, member, 0
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicNames = names
	if regex != "" {
		req.SubscribedTopicRegex = kmsg.StringPtr(regex)
	}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return c.do(tb.latest(req)).(*kmsg.ConsumerGroupHeartbeatResponse)
}

func assignedPartitions(r *kmsg.ConsumerGroupHeartbeatResponse) int {
	n := 0
	if r.Assignment != nil {
		for _, t := range r.Assignment.Topics {
			n += len(t.Partitions)
		}
	}
	return n
}

func TestAuthzConsumerGroupHeartbeatTopics(t *testing.T) {
	tb := startAuthzBroker(t,
		allow("User:alice", kmsg.ACLOperationRead, groupRT, "g"),
		allow("User:alice", kmsg.ACLOperationDescribe, topicRT, "a1"))
	admin := tb.dialAs(t, "User:admin")
	tb.createTopic(t, admin, "a1", 1, nil)
	tb.createTopic(t, admin, "a2", 2, nil)
	alice := tb.dialAs(t, "User:alice")

	r := cgJoin(tb, alice, "g", "m1", []string{"a1", "a2"}, "")
	if r.ErrorCode != kerr.TopicAuthorizationFailed.Code || r.ErrorMessage != nil {
		t.Fatalf("subscribe a1,a2: %v %v, want TOPIC_AUTHORIZATION_FAILED without message", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	// The topic check comes before the request's validation (here: a
	// missing member id at v1).
	r = cgJoin(tb, alice, "g", "", []string{"missing"}, "")
	if r.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("subscribe missing without member id: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(r.ErrorCode))
	}
	if r = cgJoin(tb, alice, "other", "m1", []string{"a1"}, ""); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("group other: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A regex matching a1 and a2 gets only a1, which alice may describe.
	r = cgJoin(tb, alice, "g", "m1", nil, "a.*")
	if r.ErrorCode != 0 {
		t.Fatalf("regex join: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if n := assignedPartitions(r); n != 1 {
		t.Fatalf("regex a.*: %d partitions assigned, want 1 (a1 only)", n)
	}
	// The same regex for the super user gets both topics.
	r = cgJoin(tb, admin, "g2", "m2", nil, "a.*")
	if n := assignedPartitions(r); r.ErrorCode != 0 || n != 3 {
		t.Fatalf("admin regex a.*: %v, %d partitions, want 3", kerr.ErrorForCode(r.ErrorCode), n)
	}
}

func TestAuthzConsumerGroupDescribeTopics(t *testing.T) {
	tb := startAuthzBroker(t,
		allow("User:alice", kmsg.ACLOperationDescribe, groupRT, "g"),
		allow("User:bob", kmsg.ACLOperationDescribe, groupRT, "g"),
		allow("User:bob", kmsg.ACLOperationDescribe, topicRT, "t"))
	admin := tb.dialAs(t, "User:admin")
	tb.createTopic(t, admin, "t", 1, nil)
	if r := cgJoin(tb, admin, "g", "m1", []string{"t"}, ""); r.ErrorCode != 0 {
		t.Fatalf("admin join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	describe := func(c *testClient) kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups, req.IncludeAuthorizedOperations = []string{"g"}, true
		return c.do(tb.latest(req)).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	}
	g := describe(tb.dialAs(t, "User:alice"))
	const msg = "The group has described topic(s) that the client is not authorized to describe."
	if g.ErrorCode != kerr.TopicAuthorizationFailed.Code || g.ErrorMessage == nil || *g.ErrorMessage != msg || len(g.Members) != 0 || g.AuthorizedOperations != -2147483648 {
		t.Fatalf("alice: %+v", g)
	}
	if g = describe(tb.dialAs(t, "User:bob")); g.ErrorCode != 0 || len(g.Members) != 1 {
		t.Fatalf("bob: %v, %d members", kerr.ErrorForCode(g.ErrorCode), len(g.Members))
	}
}

func TestAuthzDescribeProducers(t *testing.T) {
	tb := startAuthzBroker(t,
		allow("User:alice", kmsg.ACLOperationDescribe, topicRT, "t"),
		allow("User:bob", kmsg.ACLOperationRead, topicRT, "t"),
		allow("User:bob", kmsg.ACLOperationRead, topicRT, "missing"))
	admin := tb.dialAs(t, "User:admin")
	tb.createTopic(t, admin, "t", 1, nil)
	describe := func(c *testClient, topic string) kmsg.DescribeProducersResponseTopicPartition {
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		return c.do(tb.latest(req)).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
	}
	alice, bob := tb.dialAs(t, "User:alice"), tb.dialAs(t, "User:bob")
	for _, c := range []struct {
		who   *testClient
		topic string
		code  int16
		msg   string
	}{
		{alice, "t", kerr.TopicAuthorizationFailed.Code, "Topic authorization failed."},
		{alice, "missing", kerr.TopicAuthorizationFailed.Code, "Topic authorization failed."},
		{alice, "bad/name", kerr.InvalidTopicException.Code, "Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"},
		{bob, "t", 0, ""},
		{bob, "missing", kerr.UnknownTopicOrPartition.Code, "This server does not host this topic-partition."},
	} {
		p := describe(c.who, c.topic)
		got := ""
		if p.ErrorMessage != nil {
			got = *p.ErrorMessage
		}
		if p.ErrorCode != c.code || got != c.msg {
			t.Errorf("%s: %v %q, want %v %q", c.topic, kerr.ErrorForCode(p.ErrorCode), got, kerr.ErrorForCode(c.code), c.msg)
		}
	}
}

func TestAuthzSyncGroupProtocolCheckFirst(t *testing.T) {
	tb := startAuthzBroker(t)
	bob := tb.dialAs(t, "User:bob")
	sync := func(protocolType *string) int16 {
		req := kmsg.NewPtrSyncGroupRequest()
		req.SetVersion(5)
		req.Group, req.MemberID, req.Generation = "g", "m", 1
		req.ProtocolType, req.Protocol = protocolType, kmsg.StringPtr("range")
		return bob.do(req).(*kmsg.SyncGroupResponse).ErrorCode
	}
	if code := sync(nil); code != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("v5 without protocol type: %v, want INCONSISTENT_GROUP_PROTOCOL before the group check", kerr.ErrorForCode(code))
	}
	if code := sync(kmsg.StringPtr("consumer")); code != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("v5 with protocol type: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
}

func TestAuthzAlterConfigsBrokerValidatedFirst(t *testing.T) {
	tb := startAuthzBroker(t)
	bob := tb.dialAs(t, "User:bob")
	alter := func(name, key, value string) kmsg.AlterConfigsResponseResource {
		req := kmsg.NewPtrAlterConfigsRequest()
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
		r.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: key, Value: kmsg.StringPtr(value)}}
		req.Resources = append(req.Resources, r)
		return bob.do(tb.latest(req)).(*kmsg.AlterConfigsResponse).Resources[0]
	}
	if r := alter("77", "log.retention.ms", "1000"); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("another broker's id: %v, want INVALID_REQUEST before authorization", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := alter(fmt.Sprint(tb.cfg.NodeID), "log.retention.ms", "not-a-number"); r.ErrorCode != kerr.InvalidConfig.Code && r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("invalid value: %v, want the validation error before authorization", kerr.ErrorForCode(r.ErrorCode))
	}
	r := alter(fmt.Sprint(tb.cfg.NodeID), "log.retention.ms", "1000")
	if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Cluster authorization failed." {
		t.Errorf("valid change: %v %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(r.ErrorCode), *r.ErrorMessage)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ConfigNames = kmsg.ConfigResourceTypeBroker, []string{"log.retention.ms"}
	dc.Resources = append(dc.Resources, dr)
	for _, c := range tb.dialAs(t, "User:admin").do(tb.latest(dc)).(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
		if c.Value != nil && *c.Value == "1000" {
			t.Errorf("the refused alter was applied")
		}
	}
}

func TestAuthzDeleteACLsCap(t *testing.T) {
	tb := startAuthzBroker(t)
	bindings := make([]acl.Binding, maxDeleteACLs)
	for i := range bindings {
		bindings[i] = allow("User:bob", kmsg.ACLOperationRead, topicRT, fmt.Sprintf("t-%d", i))
	}
	if err := tb.meta.CreateACLs(t.Context(), bindings); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5e9, "ACLs loaded", func() bool { return tb.authz.current().Len() == maxDeleteACLs })
	admin := tb.dialAs(t, "User:admin")
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = topicRT, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny

	// Two filters matching the same 10,000: Kafka checks the cap before
	// each match, so the second filter's first match fails the request.
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = []kmsg.DeleteACLsRequestFilter{f, f}
	const msg = "Cannot remove more than 10000 acls in a single delete operation."
	for i, r := range admin.do(tb.latest(del)).(*kmsg.DeleteACLsResponse).Results {
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || *r.ErrorMessage != msg || len(r.MatchingACLs) != 0 {
			t.Fatalf("filter %d: %v %v, %d matches", i, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, len(r.MatchingACLs))
		}
	}
	if n := tb.authz.current().Len(); n != maxDeleteACLs {
		t.Fatalf("%d ACLs left after the refused delete, want all", n)
	}
	del.Filters = []kmsg.DeleteACLsRequestFilter{f}
	r := admin.do(tb.latest(del)).(*kmsg.DeleteACLsResponse).Results[0]
	if r.ErrorCode != 0 || len(r.MatchingACLs) != maxDeleteACLs {
		t.Fatalf("one filter, 10000 ACLs: %v, %d matches", kerr.ErrorForCode(r.ErrorCode), len(r.MatchingACLs))
	}
}

func TestSASLProduceDuringAuthentication(t *testing.T) {
	lb := startListenerBroker(t, saslListener(), memWithAlice(), nil, nil)
	c := lb.dialListener(t, "SASL_PLAINTEXT")
	handshake(t, c, 1, "SCRAM-SHA-256")
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 3, producerBatch(-1, -1, -1, 1, "a")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.roundTrip(req)
	if err != nil {
		t.Fatalf("Produce during the exchange was not answered: %v", err)
	}
	p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	const msg = "Unexpected Kafka request of type PRODUCE during SASL authentication."
	if p.Partition != 3 || p.ErrorCode != kerr.IllegalSaslState.Code || p.ErrorMessage == nil || *p.ErrorMessage != msg || p.BaseOffset != -1 {
		t.Fatalf("produce during authentication: %+v", p)
	}
	expectClosed(t, c)
}

func TestKafkaAPIName(t *testing.T) {
	for key, want := range map[int16]string{0: "PRODUCE", 17: "SASL_HANDSHAKE", 22: "INIT_PRODUCER_ID", 29: "DESCRIBE_ACLS", 50: "DESCRIBE_USER_SCRAM_CREDENTIALS", 18: "API_VERSIONS"} {
		if got := kafkaAPIName(key); got != want {
			t.Errorf("key %d: %s, want %s", key, got, want)
		}
	}
}
