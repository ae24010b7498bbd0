package integration

// Client bytes that PostgreSQL text cannot hold (issue #10, item 10).
// Kafka strings are whatever bytes a client puts on the wire: a NUL byte
// ("metadata\0" is in librdkafka's own tests) or invalid UTF-8 is legal in a
// group id, member id, client id or commit metadata, while a Postgres text
// value can hold neither. Everything kafgres keeps in Postgres for a client
// must come back byte for byte, also after a broker restart, or be refused
// with the error Kafka gives for a bad value — never answered with a
// retriable error the client retries forever.

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/harness"
)

// Hostile strings: a NUL byte, bytes that are not UTF-8, a lone NUL, and
// valid multi-byte UTF-8 as the control.
var (
	bytesGroups = []string{"g-nul\x00inside", "g-bad\xff\xfeutf8", "\x00", "g-\u00fc\u00df"}
	bytesMetas  = []string{"metadata\x00", "\xff\xfe", "nul\x00and\xc3(", "", "\u00e9t\u00e9"}
)

func mustCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var wantCode int16
	if want != nil {
		wantCode = want.Code
	}
	if got != wantCode {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// commitSimple commits offset of every partition of topic for group,
// outside any generation, with the given metadata per partition.
func commitSimple(t *testing.T, cl *kgo.Client, group, topic string, offset int64, metas []string) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID(t, cl, topic)
	for p, m := range metas {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = int32(p), offset+int64(p), &m
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := raw[*kmsg.OffsetCommitResponse](t, cl, req)
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			mustCode(t, "commit "+strconv.Quote(group), sp.ErrorCode, nil)
		}
	}
}

// fetchCommitted is OffsetFetch of one group: partition → (offset, metadata).
func fetchCommitted(t *testing.T, cl *kgo.Client, group string) map[int32]struct {
	off  int64
	meta string
} {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = append(req.Groups, rg)
	resp := raw[*kmsg.OffsetFetchResponse](t, cl, req)
	if len(resp.Groups) != 1 || resp.Groups[0].Group != group {
		t.Fatalf("OffsetFetch %s answered %+v", strconv.Quote(group), resp.Groups)
	}
	mustCode(t, "fetch "+strconv.Quote(group), resp.Groups[0].ErrorCode, nil)
	out := map[int32]struct {
		off  int64
		meta string
	}{}
	for _, st := range resp.Groups[0].Topics {
		for _, sp := range st.Partitions {
			mustCode(t, "fetch partition", sp.ErrorCode, nil)
			m := "<null>"
			if sp.Metadata != nil {
				m = *sp.Metadata
			}
			out[sp.Partition] = struct {
				off  int64
				meta string
			}{sp.Offset, m}
		}
	}
	return out
}

func wantCommitted(t *testing.T, cl *kgo.Client, group string, offset int64, metas []string) {
	t.Helper()
	got := fetchCommitted(t, cl, group)
	if len(got) != len(metas) {
		t.Fatalf("group %s: %d partitions committed, want %d", strconv.Quote(group), len(got), len(metas))
	}
	for p, m := range metas {
		c := got[int32(p)]
		if c.off != offset+int64(p) || c.meta != m {
			t.Fatalf("group %s partition %d: offset %d metadata %s, want %d %s", strconv.Quote(group), p, c.off, strconv.Quote(c.meta), offset+int64(p), strconv.Quote(m))
		}
	}
}

func listGroupNames(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	resp := raw[*kmsg.ListGroupsResponse](t, cl, kmsg.NewPtrListGroupsRequest())
	mustCode(t, "ListGroups", resp.ErrorCode, nil)
	var out []string
	for _, g := range resp.Groups {
		out = append(out, g.Group)
	}
	slices.Sort(out)
	return out
}

// TestClientBytesRoundTrip: commit metadata and group ids with NUL bytes
// and invalid UTF-8 (simple commits, a classic member and a KIP-848
// member), member, instance and client ids and protocol metadata come back
// byte for byte from OffsetFetch, ListGroups, DescribeGroups and
// ConsumerGroupDescribe, also after the broker restarts; DeleteGroups
// removes them.
func TestClientBytesRoundTrip(t *testing.T) {
	c := harness.Start(t, "kafgres.group_initial_rebalance_delay = 0")
	const topic = "client-bytes"
	c.CreateTopic(t, topic, len(bytesMetas))
	cl := newMemberClient(t, c.Addr)

	// Simple commits (no member): every hostile group id with every
	// hostile metadata.
	for i, g := range bytesGroups {
		commitSimple(t, cl, g, topic, int64(10*i), bytesMetas)
	}
	for i, g := range bytesGroups {
		wantCommitted(t, cl, g, int64(10*i), bytesMetas)
	}

	// A group id is part of the offsets' primary key: up to 2048 bytes of
	// anything are kept, a longer one is refused (not retried forever).
	long := make([]byte, 2049)
	rand.NewChaCha8([32]byte{1}).Read(long)
	commitSimple(t, cl, string(long[:2048]), topic, 3, bytesMetas[:1])
	wantCommitted(t, cl, string(long[:2048]), 3, bytesMetas[:1])
	lreq0 := kmsg.NewPtrOffsetCommitRequest()
	lreq0.Group, lreq0.Generation = string(long), -1
	lt := kmsg.NewOffsetCommitRequestTopic()
	lt.Topic, lt.TopicID = topic, topicID(t, cl, topic)
	lt.Partitions = append(lt.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	lreq0.Topics = append(lreq0.Topics, lt)
	mustCode(t, "commit with a 2049-byte group id", raw[*kmsg.OffsetCommitResponse](t, cl, lreq0).Topics[0].Partitions[0].ErrorCode, kerr.InvalidGroupID)

	// A classic member whose client id, group id, instance id, protocol
	// metadata and assignment all carry NUL and invalid UTF-8.
	const (
		clientID   = "client\x00id\xff"
		classic    = "classic\x00\xfe"
		instanceID = "instance\x00\xc3("
	)
	protoMeta := []byte{0, 0xff, 0xfe, 0, 'x'}
	assignment := []byte{0xc3, 0x28, 0}
	mcl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr), kgo.ClientID(clientID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mcl.Close)
	inst := instanceID
	jreq := joinReq(classic, "", &inst, 30000)
	jreq.Protocols[0].Metadata = protoMeta
	jresp := raw[*kmsg.JoinGroupResponse](t, mcl, jreq)
	mustCode(t, "JoinGroup", jresp.ErrorCode, nil)
	member := jresp.MemberID
	if !bytes.HasPrefix([]byte(member), []byte(instanceID+"-")) { // Kafka: a static member's id starts with its instance id
		t.Fatalf("member id %s does not start with the instance id", strconv.Quote(member))
	}
	sresp := raw[*kmsg.SyncGroupResponse](t, mcl, syncReq(classic, member, &inst, jresp.Generation, map[string]string{member: string(assignment)}))
	mustCode(t, "SyncGroup", sresp.ErrorCode, nil)
	if !bytes.Equal(sresp.MemberAssignment, assignment) {
		t.Fatalf("SyncGroup assignment %x, want %x", sresp.MemberAssignment, assignment)
	}
	creq := kmsg.NewPtrOffsetCommitRequest()
	creq.Group, creq.MemberID, creq.InstanceID, creq.Generation = classic, member, &inst, jresp.Generation
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = topic, topicID(t, mcl, topic)
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset, cp.Metadata = 42, &bytesMetas[0]
	ct.Partitions = append(ct.Partitions, cp)
	creq.Topics = append(creq.Topics, ct)
	for _, st := range raw[*kmsg.OffsetCommitResponse](t, mcl, creq).Topics {
		for _, sp := range st.Partitions {
			mustCode(t, "member commit", sp.ErrorCode, nil)
		}
	}
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{classic}
	dresp := raw[*kmsg.DescribeGroupsResponse](t, mcl, dreq)
	if len(dresp.Groups) != 1 || len(dresp.Groups[0].Members) != 1 {
		t.Fatalf("DescribeGroups: %+v", dresp.Groups)
	}
	dg := dresp.Groups[0]
	mustCode(t, "DescribeGroups", dg.ErrorCode, nil)
	dm := dg.Members[0]
	if dg.Group != classic || dm.MemberID != member || dm.ClientID != clientID || dm.InstanceID == nil || *dm.InstanceID != instanceID ||
		!bytes.Equal(dm.ProtocolMetadata, protoMeta) || !bytes.Equal(dm.MemberAssignment, assignment) {
		t.Fatalf("DescribeGroups member: group %s member %s client %s instance %v metadata %x assignment %x",
			strconv.Quote(dg.Group), strconv.Quote(dm.MemberID), strconv.Quote(dm.ClientID), dm.InstanceID, dm.ProtocolMetadata, dm.MemberAssignment)
	}
	lreq := kmsg.NewPtrLeaveGroupRequest()
	lreq.Group = classic
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = member, &inst
	lreq.Members = append(lreq.Members, lm)
	mustCode(t, "LeaveGroup", raw[*kmsg.LeaveGroupResponse](t, mcl, lreq).ErrorCode, nil)

	// A KIP-848 member: the member id is the client's (v1), and so are
	// the instance and rack ids.
	const (
		consumer848 = "kip848\x00\xff"
		member848   = "m848\x00\xfe"
		rack        = "rack\x00\xc3("
	)
	hb := newHB848(t, mcl, consumer848, member848)
	hreq := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hreq.MemberEpoch, hreq.RebalanceTimeoutMillis = 0, 30000
	hreq.SubscribedTopicNames = []string{topic}
	inst848, rack848 := instanceID+"848", rack
	hreq.InstanceID, hreq.RackID = &inst848, &rack848
	hreq.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	must848(t, hb.apply(hb.send(hreq)))
	cg := describe848(t, mcl, consumer848)
	mustCode(t, "ConsumerGroupDescribe", cg.ErrorCode, nil)
	if cg.Group != consumer848 || len(cg.Members) != 1 {
		t.Fatalf("ConsumerGroupDescribe: %+v", cg)
	}
	if m := cg.Members[0]; m.MemberID != member848 || m.ClientID != clientID || m.InstanceID == nil || *m.InstanceID != inst848 || m.RackID == nil || *m.RackID != rack848 {
		t.Fatalf("ConsumerGroupDescribe member: id %s client %s instance %v rack %v", strconv.Quote(m.MemberID), strconv.Quote(m.ClientID), m.InstanceID, m.RackID)
	}
	c848 := kmsg.NewPtrOffsetCommitRequest()
	c848.Group, c848.MemberID, c848.Generation = consumer848, member848, hb.epoch
	c848.Topics = append(c848.Topics, ct)
	c848.Topics[0].Partitions = nil
	for p := range hb.parts(topicID(t, mcl, topic)) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = int32(p), 7, &bytesMetas[1]
		c848.Topics[0].Partitions = append(c848.Topics[0].Partitions, rp)
	}
	for _, st := range raw[*kmsg.OffsetCommitResponse](t, mcl, c848).Topics {
		for _, sp := range st.Partitions {
			mustCode(t, "KIP-848 commit", sp.ErrorCode, nil)
		}
	}
	if resp := hb.leave(); resp.ErrorCode != 0 {
		t.Fatalf("KIP-848 leave: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	all := append(slices.Clone(bytesGroups), classic, consumer848)
	slices.Sort(all)
	if got := listGroupNames(t, cl); !slices.Contains(got, classic) || !containsAll(got, bytesGroups) {
		t.Fatalf("ListGroups %q, want %q", got, all)
	}

	// After a restart the groups live on in their committed offsets.
	c.WaitBroker(t, c.KillBroker(t), 60*time.Second)
	cl2 := newMemberClient(t, c.Addr)
	for i, g := range bytesGroups {
		wantCommitted(t, cl2, g, int64(10*i), bytesMetas)
	}
	if got := fetchCommitted(t, cl2, classic)[0]; got.off != 42 || got.meta != bytesMetas[0] {
		t.Fatalf("classic group after restart: %d %s", got.off, strconv.Quote(got.meta))
	}
	if got := listGroupNames(t, cl2); !containsAll(got, append(slices.Clone(bytesGroups), classic)) {
		t.Fatalf("ListGroups after restart %q, want %q", got, all)
	}
	dreq = kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = slices.Clone(bytesGroups)
	for _, dg := range raw[*kmsg.DescribeGroupsResponse](t, cl2, dreq).Groups {
		mustCode(t, "DescribeGroups "+strconv.Quote(dg.Group), dg.ErrorCode, nil)
		if !slices.Contains(bytesGroups, dg.Group) || dg.State != "Empty" {
			t.Fatalf("DescribeGroups after restart: group %s state %s", strconv.Quote(dg.Group), dg.State)
		}
	}

	// The readable view: valid UTF-8 shows as itself, the rest shows
	// escaped (never an error for the whole view).
	conn := c.Conn(t)
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM kafgres.consumer_lag WHERE group_id = $1`, "g-\u00fc\u00df").Scan(&n); err != nil || n != len(bytesMetas) {
		t.Fatalf("consumer_lag of a UTF-8 group: %d rows, %v", n, err)
	}
	if err := conn.QueryRow(context.Background(), `SELECT count(DISTINCT group_id) FROM kafgres.consumer_lag`).Scan(&n); err != nil || n != len(bytesGroups)+3 {
		t.Fatalf("consumer_lag groups: %d, %v; want %d", n, err, len(bytesGroups)+3)
	}

	dgreq := kmsg.NewPtrDeleteGroupsRequest()
	dgreq.Groups = slices.Clone(bytesGroups)
	for _, r := range raw[*kmsg.DeleteGroupsResponse](t, cl2, dgreq).Groups {
		mustCode(t, "DeleteGroups "+strconv.Quote(r.Group), r.ErrorCode, nil)
	}
	for _, g := range bytesGroups {
		if got := fetchCommitted(t, cl2, g); len(got) != 0 {
			t.Fatalf("group %s still has offsets after DeleteGroups: %v", strconv.Quote(g), got)
		}
	}
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// TestClientBytesRefusedConfigs: config names and values, client quota
// entity names and feature names are kept in Postgres text (people read
// and write them in SQL), so ones with a NUL byte or invalid UTF-8 are
// refused with the error Kafka gives for a bad value of that kind —
// INVALID_REQUEST — instead of failing in Postgres; valid UTF-8 is stored
// and described byte for byte. Names that never reach Postgres (topics,
// unknown features being disabled) get their ordinary answers.
func TestClientBytesRefusedConfigs(t *testing.T) {
	c := harness.Start(t)
	adm, cl := newAdmin(t, c.Addr)
	hostile := []string{"v\x00nul", "v\xff\xfe", "\x00"}

	alterBroker := func(key, value string) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "" // the cluster default
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = key, &value
		rr.Configs = append(rr.Configs, rc)
		req.Resources = append(req.Resources, rr)
		resp := raw[*kmsg.IncrementalAlterConfigsResponse](t, cl, req)
		return resp.Resources[0].ErrorCode, deref(resp.Resources[0].ErrorMessage)
	}
	alterBrokerLegacy := func(key, value string) int16 {
		t.Helper()
		req := kmsg.NewPtrAlterConfigsRequest()
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		rc := kmsg.NewAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value = key, &value
		rr.Configs = append(rr.Configs, rc)
		req.Resources = append(req.Resources, rr)
		return raw[*kmsg.AlterConfigsResponse](t, cl, req).Resources[0].ErrorCode
	}
	for _, h := range hostile {
		for _, kv := range [][2]string{{"kafgres.custom.key", h}, {"kafgres.custom" + h, "value"}} {
			code, msg := alterBroker(kv[0], kv[1])
			mustCode(t, "IncrementalAlterConfigs "+strconv.Quote(kv[0])+"="+strconv.Quote(kv[1]), code, kerr.InvalidRequest)
			if msg == "" {
				t.Fatalf("IncrementalAlterConfigs %q=%q: no error message", kv[0], kv[1])
			}
			mustCode(t, "AlterConfigs "+strconv.Quote(kv[0])+"="+strconv.Quote(kv[1]), alterBrokerLegacy(kv[0], kv[1]), kerr.InvalidRequest)
		}
	}
	const custom = "kafgres.custom.key"
	utf := "gr\u00fc\u00dfe"
	code, msg := alterBroker(custom, utf)
	mustCode(t, "IncrementalAlterConfigs "+msg, code, nil)
	// Kafka describes a custom key as sensitive (null), so read the row.
	var stored string
	if err := c.Conn(t).QueryRow(context.Background(), `SELECT value FROM kafgres.broker_config WHERE name = $1`, custom).Scan(&stored); err != nil || stored != utf {
		t.Fatalf("custom broker config stored as %s, %v", strconv.Quote(stored), err)
	}

	// Topic configs are validated against Kafka's keys and types; a bad
	// value is INVALID_CONFIG as in Kafka, never a server error.
	for _, h := range hostile {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "configs-"+strconv.Itoa(len(h)), 1, 1
		// (Inside the value: Kafka, like String.trim, ignores control
		// characters around it.)
		for _, kv := range [][2]string{{"cleanup.policy", "del" + h + "ete"}, {"compression.type", "gz" + h + "ip"}} {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = kv[0], &kv[1]
			rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{cfg}
			req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
			resp := raw[*kmsg.CreateTopicsResponse](t, cl, req)
			mustCode(t, "CreateTopics "+kv[0]+"="+strconv.Quote(kv[1]), resp.Topics[0].ErrorCode, kerr.InvalidConfig)
		}
		for _, name := range []string{"topic" + h} {
			req := kmsg.NewPtrCreateTopicsRequest()
			rt.Topic, rt.Configs = name, nil
			req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
			mustCode(t, "CreateTopics "+strconv.Quote(name), raw[*kmsg.CreateTopicsResponse](t, cl, req).Topics[0].ErrorCode, kerr.InvalidTopicException)
			dreq := kmsg.NewPtrDeleteTopicsRequest()
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.Topic = &name
			dreq.Topics, dreq.TopicNames = append(dreq.Topics, dt), []string{name}
			mustCode(t, "DeleteTopics "+strconv.Quote(name), raw[*kmsg.DeleteTopicsResponse](t, cl, dreq).Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)
		}
	}

	// Client quota entity names.
	alterQuota := func(typ, name string) int16 {
		t.Helper()
		req := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		ee := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ee.Type, ee.Name = typ, &name
		e.Entity = append(e.Entity, ee)
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = "producer_byte_rate", 1024
		e.Ops = append(e.Ops, op)
		req.Entries = append(req.Entries, e)
		return raw[*kmsg.AlterClientQuotasResponse](t, cl, req).Entries[0].ErrorCode
	}
	for _, h := range hostile {
		for _, typ := range []string{"client-id", "user"} {
			mustCode(t, "AlterClientQuotas "+typ+"="+strconv.Quote(h), alterQuota(typ, h), kerr.InvalidRequest)
		}
	}
	mustCode(t, "AlterClientQuotas client-id="+utf, alterQuota("client-id", utf), nil)
	dq := raw[*kmsg.DescribeClientQuotasResponse](t, cl, kmsg.NewPtrDescribeClientQuotasRequest())
	mustCode(t, "DescribeClientQuotas", dq.ErrorCode, nil)
	if len(dq.Entries) != 1 || len(dq.Entries[0].Entity) != 1 || dq.Entries[0].Entity[0].Name == nil || *dq.Entries[0].Entity[0].Name != utf {
		t.Fatalf("DescribeClientQuotas: %+v", dq.Entries)
	}

	// Disabling a feature that does not exist changes nothing: answered
	// NONE, whatever its name.
	for _, h := range hostile {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		fu.Feature, fu.MaxVersionLevel, fu.UpgradeType = "feature"+h, 0, 2
		req.FeatureUpdates = append(req.FeatureUpdates, fu)
		mustCode(t, "UpdateFeatures "+strconv.Quote(fu.Feature), raw[*kmsg.UpdateFeaturesResponse](t, cl, req).ErrorCode, nil)
	}

	// Nothing failed inside Postgres, and the broker still serves.
	if strings.Contains(c.LogTail(), "SQLSTATE 22") {
		t.Fatalf("a client value reached Postgres and failed there:\n%s", c.LogTail())
	}
	if _, err := adm.ListTopics(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestClientBytesMigration: updating to 0.3.0 keeps every committed offset
// (group ids and metadata become their UTF-8 bytes, NULL stays NULL), the
// grants on kafgres.consumer_lag and views built on it.
func TestClientBytesMigration(t *testing.T) {
	c := harness.Start(t)
	ctx := ctxT(t)
	c.Exec(t, `CREATE DATABASE updated`)
	cfg, err := pgx.ParseConfig(c.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "updated"
	up, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close(ctx)
	for _, sql := range []string{
		`CREATE EXTENSION kafgres VERSION '0.2.0'`,
		`SELECT kafgres_create_topic('t', 2)`,
		`INSERT INTO kafgres.consumer_offset (group_id, topic_id, partition, committed_offset, metadata)
		 VALUES ('gr` + "\u00fc\u00df" + `e', 1, 0, 5, 'meta'), ('plain', 1, 1, 7, NULL)`,
		`CREATE ROLE lag_reader`,
		`GRANT USAGE ON SCHEMA kafgres TO lag_reader`,
		`GRANT SELECT ON kafgres.consumer_lag TO lag_reader`,
		`CREATE VIEW public.my_lag AS SELECT group_id, partition, lag FROM kafgres.consumer_lag`,
		`GRANT SELECT ON public.my_lag TO lag_reader`,
		`ALTER EXTENSION kafgres UPDATE`,
	} {
		if _, err := up.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var (
		group, meta []byte
		n           int
	)
	if err := up.QueryRow(ctx, `SELECT group_id, metadata FROM kafgres.consumer_offset WHERE partition = 0`).Scan(&group, &meta); err != nil {
		t.Fatal(err)
	}
	if string(group) != "gr\u00fc\u00dfe" || string(meta) != "meta" {
		t.Fatalf("migrated row: group %q metadata %q", group, meta)
	}
	if err := up.QueryRow(ctx, `SELECT count(*) FROM kafgres.consumer_offset WHERE group_id = 'plain'::bytea AND metadata IS NULL`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("NULL metadata: %d rows, %v", n, err)
	}
	for _, sql := range []string{`SET ROLE lag_reader`,
		`SELECT count(*) FROM kafgres.consumer_lag WHERE group_id = 'gr` + "\u00fc\u00df" + `e'`,
		`SELECT count(*) FROM public.my_lag WHERE group_id = 'plain'`} {
		if strings.HasPrefix(sql, "SET") {
			if _, err := up.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := up.QueryRow(ctx, sql).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s: %d, %v", sql, n, err)
		}
	}
}
