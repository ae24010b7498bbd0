package main

// The internal-topics scenario: what Metadata, DescribeTopicPartitions,
// DescribeConfigs, Produce, DeleteRecords and ListOffsets answer for
// Kafka's internal topics (issue #14).

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var internalTopics = []string{"__consumer_offsets", "__transaction_state"}

// internalTopicsScenario looks up a group and a transaction coordinator,
// which creates __consumer_offsets and __transaction_state where they do
// not exist yet (Kafka answers COORDINATOR_NOT_AVAILABLE meanwhile, so the
// lookups are retried and only their final answer printed), waits until
// Metadata lists both, and prints what the APIs answer on them. Nothing
// printed depends on what other scenarios did to the cluster: not the
// logs' offsets (Kafka's hold the offsets other groups committed).
func internalTopicsScenario(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	for typ, key := range []string{r.Group(), r.Prefix + "-internal-topics-txn"} {
		code, err := findCoordinatorUntilReady(ctx, cl, int8(typ), key)
		if err != nil {
			return err
		}
		obs := map[string]any{"op": "find-coordinator", "type": typ}
		if code != 0 {
			obs["error"] = errName(kerr.ErrorForCode(code))
		}
		r.emit(obs)
	}

	// Metadata for every topic: the internal ones and this scenario's.
	var all *kmsg.MetadataResponse
	for {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = nil
		if all, err = req.RequestWith(ctx, cl); err != nil {
			return err
		}
		if listed(all, internalTopics...) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the internal topics never appeared: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	sort.Slice(all.Topics, func(i, j int) bool { return *all.Topics[i].Topic < *all.Topics[j].Topic })
	for _, t := range all.Topics {
		if !strings.HasPrefix(*t.Topic, "__") && *t.Topic != r.Topic(0) {
			continue
		}
		r.emit(map[string]any{"op": "metadata-all", "topic": r.shown(*t.Topic), "internal": t.IsInternal,
			"partitions": len(t.Partitions), "error": errCode(t.ErrorCode)})
	}

	// Named: the internal topics, __share_group_state (internal, never
	// created: no share groups here) and this scenario's topic.
	named := append(append([]string{}, internalTopics...), "__share_group_state", r.Topic(0))
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range named {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	md, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	sort.Slice(md.Topics, func(i, j int) bool { return *md.Topics[i].Topic < *md.Topics[j].Topic })
	for _, t := range md.Topics {
		r.emit(map[string]any{"op": "metadata", "topic": r.shown(*t.Topic), "internal": t.IsInternal,
			"partitions": len(t.Partitions), "error": errCode(t.ErrorCode)})
	}

	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, n := range named {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = n
		dtp.Topics = append(dtp.Topics, rt)
	}
	dresp, err := dtp.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range dresp.Topics {
		leaders := map[int32]bool{}
		for _, p := range t.Partitions {
			leaders[p.LeaderID] = true
		}
		r.emit(map[string]any{"op": "describe-topic-partitions", "topic": r.shown(*t.Topic), "internal": t.IsInternal,
			"partitions": len(t.Partitions), "leaders": len(leaders), "error": errCode(t.ErrorCode)})
	}

	dc := kmsg.NewPtrDescribeConfigsRequest()
	for _, n := range internalTopics {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, n
		dc.Resources = append(dc.Resources, rr)
	}
	cresp, err := dc.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	sort.Slice(cresp.Resources, func(i, j int) bool { return cresp.Resources[i].ResourceName < cresp.Resources[j].ResourceName })
	for _, res := range cresp.Resources {
		sort.Slice(res.Configs, func(i, j int) bool { return res.Configs[i].Name < res.Configs[j].Name })
		for _, c := range res.Configs {
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				continue
			}
			r.emit(map[string]any{"op": "topic-config", "topic": res.ResourceName, "name": c.Name, "value": c.Value})
		}
	}

	// Produce (not from the admin client id) and DeleteRecords are refused.
	perr := produce(ctx, cl, &kgo.Record{Topic: "__consumer_offsets", Partition: 0, Value: []byte("v")})
	r.emit(map[string]any{"op": "produce", "error": errName(perr)})
	dr := kmsg.NewPtrDeleteRecordsRequest()
	drt := kmsg.NewDeleteRecordsRequestTopic()
	drt.Topic = "__consumer_offsets"
	drp := kmsg.NewDeleteRecordsRequestTopicPartition()
	drp.Partition, drp.Offset = 0, 0
	drt.Partitions = append(drt.Partitions, drp)
	dr.Topics, dr.TimeoutMillis = append(dr.Topics, drt), 10000
	drresp, err := dr.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	r.emit(map[string]any{"op": "delete-records", "error": errCode(drresp.Topics[0].Partitions[0].ErrorCode)})

	// ListOffsets answers (the offsets themselves depend on the groups
	// other scenarios ran).
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	for _, n := range internalTopics {
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = n
		for _, p := range []int32{0, 49} {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = p, -2, -1
			lt.Partitions = append(lt.Partitions, lp)
		}
		lo.Topics = append(lo.Topics, lt)
	}
	loresp, err := lo.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	sort.Slice(loresp.Topics, func(i, j int) bool { return loresp.Topics[i].Topic < loresp.Topics[j].Topic })
	for _, t := range loresp.Topics {
		sort.Slice(t.Partitions, func(i, j int) bool { return t.Partitions[i].Partition < t.Partitions[j].Partition })
		for _, p := range t.Partitions {
			r.emit(map[string]any{"op": "list-offsets-earliest", "topic": t.Topic, "partition": p.Partition, "error": errCode(p.ErrorCode)})
		}
	}
	return nil
}

// findCoordinatorUntilReady asks for the coordinator of key until the
// answer is no longer COORDINATOR_NOT_AVAILABLE (Kafka's answer while it
// creates the internal topic) and returns the final error code.
func findCoordinatorUntilReady(ctx context.Context, cl *kgo.Client, typ int8, key string) (int16, error) {
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = typ, key, []string{key}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		code := resp.ErrorCode
		if len(resp.Coordinators) > 0 {
			code = resp.Coordinators[0].ErrorCode
		}
		if code != kerr.CoordinatorNotAvailable.Code && code != kerr.CoordinatorLoadInProgress.Code {
			return code, nil
		}
		select {
		case <-ctx.Done():
			return code, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// listed reports whether every one of names is in resp with partitions.
func listed(resp *kmsg.MetadataResponse, names ...string) bool {
	have := map[string]bool{}
	for _, t := range resp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 && len(t.Partitions) > 0 {
			have[*t.Topic] = true
		}
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}

// errCode is a response's error code as its protocol name, "" for none.
func errCode(code int16) string {
	if code == 0 {
		return ""
	}
	return errName(kerr.ErrorForCode(code))
}

// shown is a topic's name as printed: this scenario's own topic as
// "<topic>", the others as they are.
func (r *runner) shown(name string) string {
	if name == r.Topic(0) {
		return "<topic>"
	}
	return name
}
