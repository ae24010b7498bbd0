package main

// Consumer-group scenarios: a franz-go group consumer, kadm for the admin
// side, and raw kmsg requests for the error cases.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	scenarios["group-consume-commit"] = groupConsumeCommit
	scenarios["group-describe"] = groupDescribe
	scenarios["group-list"] = groupList
	scenarios["group-errors"] = groupErrors
}

// groupClient is a group member of r.Group() on topic 0, reading from the
// earliest offset, committing only when told to.
func (r *runner) groupClient(opts ...kgo.Opt) (*kgo.Client, error) {
	return r.client(append([]kgo.Opt{
		kgo.ConsumerGroup(r.Group()),
		kgo.ConsumeTopics(r.Topic(0)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	}, opts...)...)
}

// waitAssigned polls until the member has an assignment (a poll drives the
// join and sync in franz-go).
func waitAssigned(ctx context.Context, cl *kgo.Client) error {
	for {
		if _, gen := cl.GroupMetadata(); gen > 0 {
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("no assignment: %w", ctx.Err())
		}
	}
}

func groupConsumeCommit(ctx context.Context, r *runner) error {
	pcl, err := r.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	var recs []*kgo.Record
	for i := 0; i < 6; i++ {
		recs = append(recs, &kgo.Record{Topic: r.Topic(0), Partition: int32(i % 3),
			Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	err = produce(ctx, pcl, recs...)
	pcl.Close()
	if err != nil {
		return err
	}

	cl, err := r.groupClient()
	if err != nil {
		return err
	}
	n := 0
	for n < 6 && ctx.Err() == nil {
		f := cl.PollFetches(ctx)
		if errs := f.Errors(); len(errs) > 0 && ctx.Err() == nil {
			cl.Close()
			return errs[0].Err
		}
		n += len(f.Records())
	}
	err = cl.CommitUncommittedOffsets(ctx)
	cl.Close() // leaves the group
	if err != nil {
		return err
	}
	r.emit(map[string]any{"consumed": n})

	adm, err := r.client()
	if err != nil {
		return err
	}
	defer adm.Close()
	offs, err := kadm.NewClient(adm).FetchOffsets(ctx, r.Group())
	if err != nil {
		return err
	}
	if err := offs.Error(); err != nil {
		return err
	}
	for p := int32(0); p < 3; p++ {
		o, ok := offs.Lookup(r.Topic(0), p)
		committed := int64(-1)
		if ok {
			committed = o.At
		}
		r.emit(map[string]any{"partition": p, "committed": committed})
	}

	cl2, err := r.groupClient()
	if err != nil {
		return err
	}
	defer cl2.Close()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	after := 0
	for wctx.Err() == nil {
		after += len(cl2.PollFetches(wctx).Records())
	}
	r.emit(map[string]any{"records_after_restart": after})
	return nil
}

func groupDescribe(ctx context.Context, r *runner) error {
	cl, err := r.groupClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := waitAssigned(ctx, cl); err != nil {
		return err
	}
	adm, err := r.client()
	if err != nil {
		return err
	}
	defer adm.Close()
	groups, err := kadm.NewClient(adm).DescribeGroups(ctx, r.Group())
	if err != nil {
		return err
	}
	g, ok := groups[r.Group()]
	if !ok {
		return fmt.Errorf("group %s not in the DescribeGroups answer", r.Group())
	}
	if g.Err != nil {
		return g.Err
	}
	r.emit(map[string]any{"state": g.State, "protocol_type": g.ProtocolType, "protocol": g.Protocol, "members": len(g.Members)})
	var assigned [][]int32
	for _, m := range g.Members {
		var ps []int32
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				if t.Topic == r.Topic(0) {
					ps = append(ps, t.Partitions...)
				}
			}
		}
		assigned = append(assigned, int32s(ps))
	}
	sort.Slice(assigned, func(i, j int) bool { return fmt.Sprint(assigned[i]) < fmt.Sprint(assigned[j]) })
	for i, ps := range assigned {
		r.emit(map[string]any{"member": i, "assigned": ps})
	}
	return nil
}

func groupList(ctx context.Context, r *runner) error {
	cl, err := r.groupClient()
	if err != nil {
		return err
	}
	if err := waitAssigned(ctx, cl); err != nil {
		cl.Close()
		return err
	}
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{r.Topic(0): {0: {Epoch: -1, Offset: 0}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, cerr error) {
			err = cerr
			if err == nil {
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
							err = e
						}
					}
				}
			}
		})
	cl.Close()
	if err != nil {
		return err
	}
	adm, err := r.client()
	if err != nil {
		return err
	}
	defer adm.Close()
	listed, err := kadm.NewClient(adm).ListGroups(ctx)
	if err != nil {
		return err
	}
	g, ok := listed[r.Group()]
	obs := map[string]any{"present": ok}
	if ok {
		obs["state"] = g.State
		obs["protocol_type"] = g.ProtocolType
	}
	r.emit(obs)
	return nil
}

// errorCode prints an error code's name, NONE for 0.
func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return errName(err)
	}
	return fmt.Sprintf("CODE_%d", code)
}

func groupErrors(ctx context.Context, r *runner) error {
	member, err := r.groupClient()
	if err != nil {
		return err
	}
	defer member.Close()
	if err := waitAssigned(ctx, member); err != nil {
		return err
	}
	memberID, gen := member.GroupMetadata()

	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	unknown := func(op string) string { return r.Group() + "-" + op } // a group nobody made
	md, err := metadata(ctx, cl, r.Topic(0))
	if err != nil {
		return err
	}
	topicID := md.Topics[0].TopicID // OffsetCommit v10 names topics by id

	commit := func(op, member string, generation int32) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group = r.Group()
		req.MemberID = member
		req.Generation = generation
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = r.Topic(0)
		rt.TopicID = topicID
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = 0
		rp.Offset = 0
		rp.LeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("offset commit: %d topics in the answer", len(resp.Topics))
		}
		r.emit(map[string]any{"op": op, "error": codeName(resp.Topics[0].Partitions[0].ErrorCode)})
		return nil
	}
	if err := commit("offset_commit_unknown_member", "no-such-member", gen); err != nil {
		return err
	}
	if err := commit("offset_commit_wrong_generation", memberID, gen+5); err != nil {
		return err
	}
	if err := commit("offset_commit_ok", memberID, gen); err != nil {
		return err
	}

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = unknown("hb"), "no-such-member", 1
	hbr, err := hb.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	r.emit(map[string]any{"op": "heartbeat_unknown_group", "error": codeName(hbr.ErrorCode)})

	hb2 := kmsg.NewPtrHeartbeatRequest()
	hb2.Group, hb2.MemberID, hb2.Generation = r.Group(), "no-such-member", gen
	hbr2, err := hb2.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	r.emit(map[string]any{"op": "heartbeat_unknown_member", "error": codeName(hbr2.ErrorCode)})

	sy := kmsg.NewPtrSyncGroupRequest()
	sy.Group, sy.MemberID, sy.Generation = unknown("sync"), "no-such-member", 1
	sy.ProtocolType, sy.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	syr, err := sy.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	r.emit(map[string]any{"op": "sync_unknown_group", "error": codeName(syr.ErrorCode)})

	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = unknown("join"), "consumer", 10000, 10000
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name = "range"
	jp.Metadata = (&kmsg.ConsumerMemberMetadata{Topics: []string{r.Topic(0)}}).AppendTo(nil)
	jg.Protocols = append(jg.Protocols, jp)
	jgr, err := jg.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	r.emit(map[string]any{"op": "join_empty_member_id", "error": codeName(jgr.ErrorCode)})

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{unknown("describe")}
	dgr, err := dg.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(dgr.Groups) != 1 {
		return fmt.Errorf("describe groups: %d groups in the answer", len(dgr.Groups))
	}
	r.emit(map[string]any{"op": "describe_unknown_group", "error": codeName(dgr.Groups[0].ErrorCode), "state": dgr.Groups[0].State})

	del := func(op, group string) error {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Groups) != 1 {
			return fmt.Errorf("delete groups: %d groups in the answer", len(resp.Groups))
		}
		r.emit(map[string]any{"op": op, "error": codeName(resp.Groups[0].ErrorCode)})
		return nil
	}
	if err := del("delete_non_empty_group", r.Group()); err != nil {
		return err
	}
	if err := del("delete_unknown_group", unknown("delete")); err != nil {
		return err
	}

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = unknown("fetch")
	oft := kmsg.NewOffsetFetchRequestTopic()
	oft.Topic = r.Topic(0)
	oft.Partitions = []int32{0}
	of.Topics = append(of.Topics, oft)
	ofr, err := of.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	obs := map[string]any{"op": "offset_fetch_unknown_group"}
	if err := kerr.ErrorForCode(ofr.ErrorCode); err != nil {
		obs["error"] = codeName(ofr.ErrorCode)
	} else if len(ofr.Groups) == 1 && ofr.Groups[0].ErrorCode != 0 {
		obs["error"] = codeName(ofr.Groups[0].ErrorCode)
	} else {
		obs["error"] = "NONE"
		for _, g := range ofr.Groups {
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					obs["offset"] = p.Offset
				}
			}
		}
		for _, t := range ofr.Topics {
			for _, p := range t.Partitions {
				obs["offset"] = p.Offset
			}
		}
	}
	r.emit(obs)
	return nil
}
