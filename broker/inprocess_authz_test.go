package broker

// In-process tests of authorization: each API family against ACLs held in
// metadata.Memory, with principals given to connections by dialAs (the
// SASL listener will set them for real).

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/acl"
)

// dialAs connects as principal ("User:alice").
func (tb *testBroker) dialAs(t *testing.T, principal string) *testClient {
	t.Helper()
	p, err := acl.ParsePrincipal(principal)
	if err != nil {
		t.Fatal(err)
	}
	c := tb.dial(t)
	tb.principals.Store(c.nc.LocalAddr().String(), p)
	return c
}

func startAuthzBroker(t *testing.T, bindings ...acl.Binding) *testBroker {
	t.Helper()
	tb := startTestBroker(t, func(c *Config) {
		c.Authorizer = AuthorizerOn
		c.SuperUsers = "User:admin"
		c.AutoCreateTopics = true
	})
	if len(bindings) > 0 {
		tb.grant(t, bindings...)
	}
	return tb
}

// grant stores ACLs and waits for the broker to have them.
func (tb *testBroker) grant(t *testing.T, bindings ...acl.Binding) {
	t.Helper()
	if err := tb.meta.CreateACLs(t.Context(), bindings); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2e9, "ACLs loaded", func() bool {
		a := tb.authz.current()
		for _, b := range bindings {
			if !slices.Contains(a.Bindings(), b) {
				return false
			}
		}
		return true
	})
}

func allow(principal string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) acl.Binding {
	pt := kmsg.ACLResourcePatternTypeLiteral
	return acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
}

func deny(principal string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) acl.Binding {
	b := allow(principal, op, rt, name)
	b.Permission = kmsg.ACLPermissionTypeDeny
	return b
}

const (
	topicRT   = kmsg.ACLResourceTypeTopic
	groupRT   = kmsg.ACLResourceTypeGroup
	clusterRT = kmsg.ACLResourceTypeCluster
)

func TestAuthzProduceFetch(t *testing.T) {
	tb := startAuthzBroker(t,
		allow("User:alice", kmsg.ACLOperationWrite, topicRT, "orders"),
		allow("User:bob", kmsg.ACLOperationRead, topicRT, "orders"),
		deny("User:alice", kmsg.ACLOperationAll, topicRT, "secret"))
	admin := tb.dialAs(t, "User:admin")
	tb.createTopic(t, admin, "orders", 1, nil)
	tb.createTopic(t, admin, "secret", 1, nil)

	alice := tb.dialAs(t, "User:alice")
	if p := alice.produceAt(12, "orders", producerBatch(-1, -1, -1, 1, "a")); p.ErrorCode != 0 {
		t.Fatalf("alice produce orders: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	for _, topic := range []string{"secret", "missing"} {
		if p := alice.produceAt(12, topic, producerBatch(-1, -1, -1, 1, "a")); p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Errorf("alice produce %s: %v, want TOPIC_AUTHORIZATION_FAILED", topic, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	anon := tb.dial(t)
	if p := anon.produceAt(12, "orders", producerBatch(-1, -1, -1, 1, "a")); p.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("anonymous produce: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	fetch := func(c *testClient, topic string) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.do(req).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
	}
	bob := tb.dialAs(t, "User:bob")
	if code := fetch(bob, "orders"); code != 0 {
		t.Errorf("bob fetch orders: %v", kerr.ErrorForCode(code))
	}
	if code := fetch(alice, "orders"); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alice fetch orders (WRITE only): %v", kerr.ErrorForCode(code))
	}
	if code := fetch(bob, "missing"); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("bob fetch missing: %v, want existence hidden", kerr.ErrorForCode(code))
	}
}

func TestAuthzMetadata(t *testing.T) {
	tb := startAuthzBroker(t,
		allow("User:alice", kmsg.ACLOperationRead, topicRT, "orders"), // implies DESCRIBE
		allow("User:alice", kmsg.ACLOperationDescribe, clusterRT, acl.ClusterName))
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe} {
		tb.grant(t, acl.Binding{ResourceType: topicRT, ResourceName: "new-", PatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: "User:alice", Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow})
	}
	admin := tb.dialAs(t, "User:admin")
	tb.createTopic(t, admin, "orders", 1, nil)
	tb.createTopic(t, admin, "secret", 1, nil)
	alice := tb.dialAs(t, "User:alice")

	all := kmsg.NewPtrMetadataRequest()
	all.IncludeTopicAuthorizedOperations = true
	resp := alice.do(tb.latest(all)).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "orders" {
		t.Fatalf("all topics: %d topics, want only orders", len(resp.Topics))
	}
	if ops := resp.Topics[0].AuthorizedOperations; ops != 1<<3|1<<8 {
		t.Errorf("orders authorized operations %b, want READ|DESCRIBE", ops)
	}

	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, n := range []string{"secret", "orders", "nothing", "new-topic"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp = alice.do(tb.latest(req)).(*kmsg.MetadataResponse)
	got := map[string]int16{}
	var order []string
	for _, mt := range resp.Topics {
		got[*mt.Topic] = mt.ErrorCode
		order = append(order, *mt.Topic)
	}
	want := map[string]int16{"orders": 0, "new-topic": 0, "nothing": kerr.TopicAuthorizationFailed.Code, "secret": kerr.TopicAuthorizationFailed.Code}
	for n, code := range want {
		if got[n] != code {
			t.Errorf("%s: %v, want %v", n, kerr.ErrorForCode(got[n]), kerr.ErrorForCode(code))
		}
	}
	// Kafka's order: described topics, then those denied DESCRIBE
	if !slices.Equal(order, []string{"orders", "new-topic", "secret", "nothing"}) {
		t.Errorf("order %v", order)
	}
}

func TestAuthzGroups(t *testing.T) {
	tb := startAuthzBroker(t,
		allow("User:alice", kmsg.ACLOperationRead, groupRT, "g1"))
	alice := tb.dialAs(t, "User:alice")

	join := func(group string) int16 {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.ProtocolType, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = group, "consumer", 10000, 10000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
		return alice.do(tb.latest(req)).(*kmsg.JoinGroupResponse).ErrorCode
	}
	if code := join("g2"); code != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("join g2: %v, want GROUP_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if code := join("g1"); code == kerr.GroupAuthorizationFailed.Code {
		t.Errorf("join g1: %v", kerr.ErrorForCode(code))
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"g1", "g2"}
	fr := alice.do(tb.latest(fc)).(*kmsg.FindCoordinatorResponse)
	if fr.Coordinators[0].ErrorCode != 0 || fr.Coordinators[1].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("find coordinator: %d %d", fr.Coordinators[0].ErrorCode, fr.Coordinators[1].ErrorCode)
	}

	// before v4 the answer has a message: Kafka's Errors.message(), which
	// librdkafka shows ("FindCoordinator response error: <message>")
	fc3 := kmsg.NewPtrFindCoordinatorRequest()
	fc3.Version, fc3.CoordinatorKey = 3, "g2"
	fr3 := alice.do(fc3).(*kmsg.FindCoordinatorResponse)
	if fr3.ErrorCode != kerr.GroupAuthorizationFailed.Code || fr3.ErrorMessage == nil || *fr3.ErrorMessage != "Group authorization failed." {
		t.Errorf("find coordinator v3: %d %v, want GROUP_AUTHORIZATION_FAILED \"Group authorization failed.\"", fr3.ErrorCode, fr3.ErrorMessage)
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g1", "g2"}, true
	dr := alice.do(tb.latest(dg)).(*kmsg.DescribeGroupsResponse)
	if dr.Groups[0].Group != "g2" || dr.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("describe groups: first %s %d, want g2 denied first", dr.Groups[0].Group, dr.Groups[0].ErrorCode)
	}

	lr := alice.do(tb.latest(kmsg.NewPtrListGroupsRequest())).(*kmsg.ListGroupsResponse)
	for _, g := range lr.Groups {
		if g.Group != "g1" {
			t.Errorf("list groups shows %s", g.Group)
		}
	}

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g1"}
	if code := alice.do(tb.latest(del)).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("delete g1 without DELETE: %v", kerr.ErrorForCode(code))
	}
}

func TestAuthzTopicAdmin(t *testing.T) {
	tb := startAuthzBroker(t,
		allow("User:alice", kmsg.ACLOperationCreate, topicRT, "mine"),
		allow("User:alice", kmsg.ACLOperationDelete, topicRT, "mine"),
		allow("User:alice", kmsg.ACLOperationDescribe, topicRT, "theirs"))
	admin := tb.dialAs(t, "User:admin")
	tb.createTopic(t, admin, "theirs", 1, nil)
	tb.createTopic(t, admin, "hidden", 1, nil)
	alice := tb.dialAs(t, "User:alice")

	ct := kmsg.NewPtrCreateTopicsRequest()
	for _, n := range []string{"mine", "hidden"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, -1
		ct.Topics = append(ct.Topics, rt)
	}
	cr := alice.do(tb.latest(ct)).(*kmsg.CreateTopicsResponse)
	if cr.Topics[0].Topic != "mine" || cr.Topics[0].ErrorCode != 0 {
		t.Errorf("create mine: %s %v", cr.Topics[0].Topic, kerr.ErrorForCode(cr.Topics[0].ErrorCode))
	}
	if cr.Topics[0].ConfigErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("create mine: config error %d, want TOPIC_AUTHORIZATION_FAILED (no DESCRIBE_CONFIGS)", cr.Topics[0].ConfigErrorCode)
	}
	if cr.Topics[1].ErrorCode != kerr.TopicAuthorizationFailed.Code || cr.Topics[1].ErrorMessage == nil || *cr.Topics[1].ErrorMessage != "Authorization failed." {
		t.Errorf("create hidden: %v, want TOPIC_AUTHORIZATION_FAILED without TOPIC_ALREADY_EXISTS", kerr.ErrorForCode(cr.Topics[1].ErrorCode))
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	dcr := kmsg.NewDescribeConfigsRequestResource()
	dcr.ResourceType, dcr.ResourceName = kmsg.ConfigResourceTypeTopic, "hidden"
	dc.Resources = append(dc.Resources, dcr)
	dcres := alice.do(tb.latest(dc)).(*kmsg.DescribeConfigsResponse).Resources[0]
	if dcres.ErrorCode != kerr.TopicAuthorizationFailed.Code || dcres.ErrorMessage == nil || *dcres.ErrorMessage != "Topic authorization failed." {
		t.Errorf("describe configs hidden: %d %v, want TOPIC_AUTHORIZATION_FAILED \"Topic authorization failed.\"", dcres.ErrorCode, dcres.ErrorMessage)
	}

	dt := kmsg.NewPtrDeleteTopicsRequest()
	for _, n := range []string{"theirs", "hidden", "absent", "mine"} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		dt.Topics = append(dt.Topics, rt)
	}
	dr := alice.do(tb.latest(dt)).(*kmsg.DeleteTopicsResponse)
	want := map[string]int16{"theirs": kerr.TopicAuthorizationFailed.Code, "hidden": kerr.TopicAuthorizationFailed.Code,
		"absent": kerr.TopicAuthorizationFailed.Code, "mine": 0}
	for _, r := range dr.Topics {
		if r.ErrorCode != want[*r.Topic] {
			t.Errorf("delete %s: %v, want %v", *r.Topic, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(want[*r.Topic]))
		}
	}
}

func TestAuthzClusterAndProducerIDs(t *testing.T) {
	tb := startAuthzBroker(t, allow("User:alice", kmsg.ACLOperationWrite, topicRT, "orders"))
	alice, bob := tb.dialAs(t, "User:alice"), tb.dialAs(t, "User:bob")

	ipid := func(c *testClient) int16 {
		return c.do(tb.latest(kmsg.NewPtrInitProducerIDRequest())).(*kmsg.InitProducerIDResponse).ErrorCode
	}
	if code := ipid(alice); code != 0 {
		t.Errorf("alice (WRITE on a topic) InitProducerId: %v", kerr.ErrorForCode(code))
	}
	if code := ipid(bob); code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("bob InitProducerId: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}

	el := kmsg.NewPtrElectLeadersRequest()
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
	er := bob.do(tb.latest(el)).(*kmsg.ElectLeadersResponse)
	if er.ErrorCode != kerr.ClusterAuthorizationFailed.Code || er.Topics[0].Partitions[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("elect leaders: %d", er.ErrorCode)
	}
	if msg := er.Topics[0].Partitions[0].ErrorMessage; msg == nil || !slices.Contains([]bool{true}, len(*msg) > 0) {
		t.Errorf("elect leaders: no message")
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if ops := bob.do(tb.latest(dc)).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops != 0 {
		t.Errorf("bob cluster operations %b, want 0 (no DESCRIBE)", ops)
	}
	admin := tb.dialAs(t, "User:admin")
	if ops := admin.do(tb.latest(dc)).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations; ops != acl.SupportedOperations(clusterRT) {
		t.Errorf("admin cluster operations %b", ops)
	}
}

func TestAuthzACLAPIs(t *testing.T) {
	tb := startAuthzBroker(t)
	admin, bob := tb.dialAs(t, "User:admin"), tb.dialAs(t, "User:bob")

	create := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = topicRT, "orders", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:bob", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	bad := c
	bad.ResourceType, bad.ResourceName = clusterRT, "other"
	create.Creations = []kmsg.CreateACLsRequestCreation{c, bad}

	r := bob.do(tb.latest(create)).(*kmsg.CreateACLsResponse)
	if r.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob create acls: %v", kerr.ErrorForCode(r.Results[0].ErrorCode))
	}
	r = admin.do(tb.latest(create)).(*kmsg.CreateACLsResponse)
	if r.Results[0].ErrorCode != 0 || r.Results[1].ErrorCode != kerr.InvalidRequest.Code ||
		*r.Results[1].ErrorMessage != "The only valid name for the CLUSTER resource is kafka-cluster" {
		t.Fatalf("admin create acls: %v %v", kerr.ErrorForCode(r.Results[0].ErrorCode), kerr.ErrorForCode(r.Results[1].ErrorCode))
	}
	// visible at once on the same connection and others
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr := admin.do(tb.latest(describe)).(*kmsg.DescribeACLsResponse)
	if len(dr.Resources) != 1 || dr.Resources[0].ResourceName != "orders" || len(dr.Resources[0].ACLs) != 1 {
		t.Fatalf("describe acls: %+v", dr.Resources)
	}
	if !tb.allowed(&conn{principal: acl.Principal{Type: "User", Name: "bob"}, host: "127.0.0.1"}, kmsg.ACLOperationRead, topicRT, "orders") {
		t.Errorf("bob may not read orders after CreateAcls")
	}
	if code := bob.do(tb.latest(describe)).(*kmsg.DescribeACLsResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Errorf("bob describe acls: %v", kerr.ErrorForCode(code))
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = topicRT, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = []kmsg.DeleteACLsRequestFilter{f, f}
	dl := admin.do(tb.latest(del)).(*kmsg.DeleteACLsResponse)
	if len(dl.Results[0].MatchingACLs) != 1 || len(dl.Results[1].MatchingACLs) != 1 {
		t.Errorf("delete acls: matched %d and %d, want 1 and 1 (as before the request)", len(dl.Results[0].MatchingACLs), len(dl.Results[1].MatchingACLs))
	}
	if n := tb.authz.current().Len(); n != 0 {
		t.Errorf("%d ACLs left", n)
	}
}

func TestAuthzSecurityDisabled(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	describe := kmsg.NewPtrDescribeACLsRequest()
	describe.ResourceType, describe.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	describe.Operation, describe.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr := c.do(tb.latest(describe)).(*kmsg.DescribeACLsResponse)
	if dr.ErrorCode != kerr.SecurityDisabled.Code || *dr.ErrorMessage != "No Authorizer is configured on the broker" {
		t.Errorf("describe acls: %v", kerr.ErrorForCode(dr.ErrorCode))
	}
	create := kmsg.NewPtrCreateACLsRequest()
	create.Creations = []kmsg.CreateACLsRequestCreation{kmsg.NewCreateACLsRequestCreation()}
	cr := c.do(tb.latest(create)).(*kmsg.CreateACLsResponse)
	if cr.Results[0].ErrorCode != kerr.SecurityDisabled.Code || *cr.Results[0].ErrorMessage != "No Authorizer is configured." {
		t.Errorf("create acls: %v", kerr.ErrorForCode(cr.Results[0].ErrorCode))
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	del.Filters = []kmsg.DeleteACLsRequestFilter{kmsg.NewDeleteACLsRequestFilter()}
	if code := c.do(tb.latest(del)).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode; code != kerr.SecurityDisabled.Code {
		t.Errorf("delete acls: %v", kerr.ErrorForCode(code))
	}
	// and everything else is allowed
	tb.createTopic(t, c, "open", 1, nil)
}

func TestAuthzSuperuserRolesAndReload(t *testing.T) {
	tb := startAuthzBroker(t)
	carol := tb.dialAs(t, "User:carol")
	if code := carol.do(tb.latest(kmsg.NewPtrInitProducerIDRequest())).(*kmsg.InitProducerIDResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("carol: %v", kerr.ErrorForCode(code))
	}
	tb.meta.SetSuperuserRoles("carol") // a Postgres superuser
	eventually(t, 2e9, "carol a super user", func() bool {
		return carol.do(tb.latest(kmsg.NewPtrInitProducerIDRequest())).(*kmsg.InitProducerIDResponse).ErrorCode == 0
	})
}
