package broker

// TxnOffsetCommit: v0-6
//
// Behavior:
//   - offsets committed inside the producer's transaction: kept in
//     kafgres.transaction_offset (written before the answer) and moved
//     into kafgres.consumer_offset when the transaction commits, in the
//     Postgres transaction that records the commit; an abort drops them.
//     Until then OffsetFetch answers the group's previous offset, and
//     UNSTABLE_OFFSET_COMMIT to require_stable
//   - the group must have joined the transaction (AddOffsetsToTxn; KIP-890
//     part 1 verification): else TRANSACTION_ABORTABLE (v4+) or
//     INVALID_TXN_STATE; v5+ on transaction.version 2 (KIP-890 part 2)
//     adds the group implicitly. A fenced producer: INVALID_PRODUCER_EPOCH;
//     the wrong producer id: INVALID_PRODUCER_ID_MAPPING;
//     CONCURRENT_TRANSACTIONS while the previous transaction ends
//   - the group's rules as OffsetCommit's (08_offset_commit.go), relaxed
//     as Kafka relaxes them for transactional commits: one without member
//     and generation (v0-2, or Sarama's v3) is accepted whatever the
//     group's state, and the group may be waiting for its assignment; a
//     member's otherwise gets UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
//     ILLEGAL_GENERATION, STALE_MEMBER_EPOCH (consumer groups) as Kafka
//     answers
//   - unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION (v6 by id:
//     UNKNOWN_TOPIC_ID); metadata over 4096 bytes: OFFSET_METADATA_TOO_LARGE
//   - WRITE on the transactional id, else every partition
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else
//     GROUP_AUTHORIZATION_FAILED; READ on each topic, else
//     TOPIC_AUTHORIZATION_FAILED
//
// Version notes:
//   - v2: leader epoch; v3: generation, member and instance id, flexible;
//     v4: TRANSACTION_ABORTABLE; v5: implicit add (transaction version 2);
//     v6: topic ids

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/coordinator"
	"github.com/kafgres/kafgres/broker/coordinator/txn"
)

func handleTxnOffsetCommit(ctx context.Context, b *Broker, cc *conn, req *kmsg.TxnOffsetCommitRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	generation, member, instance := req.Generation, req.MemberID, req.InstanceID
	if req.Version < 3 {
		generation, member, instance = -1, "", nil
	}
	byID := req.Version >= 6
	lookup := func(rt kmsg.TxnOffsetCommitRequestTopic) *topic {
		if byID {
			return b.catalog.lookupID(ctx, rt.TopicID)
		}
		return b.catalog.lookup(ctx, rt.Topic)
	}

	var whole *kerr.Error
	switch {
	case !b.allowed(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID):
		whole = kerr.TransactionalIDAuthorizationFailed
	case !b.allowed(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group):
		whole = kerr.GroupAuthorizationFailed
	case req.Group == "" || len(req.Group) > maxCommitGroupID:
		whole = kerr.InvalidGroupID
	}
	var (
		groupErr   *kerr.Error
		checkGroup func() *kerr.Error
	)
	if whole == nil {
		var parts []coordinator.TopicPartition
		for _, rt := range req.Topics {
			if t := lookup(rt); t != nil {
				for _, rp := range rt.Partitions {
					parts = append(parts, coordinator.TopicPartition{TopicID: t.uuid, Partition: rp.Partition})
				}
			}
		}
		checkGroup = func() *kerr.Error {
			if ok, err := b.groups.ConsumerCommitAllowed(req.Group, member, generation, 10, parts); ok {
				return err
			}
			if err := b.groups.TxnCommitAllowed(req.Group, member, instance, generation); err != kerr.GroupIDNotFound {
				return err
			}
			return kerr.IllegalGeneration
		}
		groupErr = checkGroup()
	}

	type slot struct{ topic, part int }
	var (
		offs  []txn.Offset
		slots []slot
	)
	for ti, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		t := lookup(rt)
		name := rt.Topic
		if t != nil {
			name = t.name
		}
		readable := whole != nil || (t == nil && byID) || b.allowed(cc, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			switch {
			case whole != nil:
				err = whole
			case !readable:
				err = kerr.TopicAuthorizationFailed
			case t == nil && byID:
				err = kerr.UnknownTopicID
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				err = kerr.UnknownTopicOrPartition
			case groupErr != nil:
				err = groupErr
			case rp.Metadata != nil && len(*rp.Metadata) > maxOffsetMetadata:
				err = kerr.OffsetMetadataTooLarge
			default:
				epoch := int32(-1)
				if req.Version >= 2 {
					epoch = rp.LeaderEpoch
				}
				offs = append(offs, txn.Offset{TopicID: t.id, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: epoch, Metadata: rp.Metadata})
				slots = append(slots, slot{ti, len(st.Partitions)})
			}
			sp.ErrorCode = errorCode(err)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(slots) == 0 {
		return resp, nil
	}
	implicit := req.Version >= 5 && b.transactionVersion() >= 2
	// The group is checked again once the offsets are pending: a
	// rebalance that completed in between, without this member, has
	// answered the new owner's OffsetFetch, and the offsets must not
	// become committed behind it (Kafka checks and records them in one
	// step of the group's coordinator).
	err := b.txns.CommitOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, offs, implicit, checkGroup)
	switch {
	case err == kerr.ProducerFenced:
		err = kerr.InvalidProducerEpoch // as Kafka's verification answers it
	case err == kerr.TransactionAbortable && req.Version < 4:
		err = kerr.InvalidTxnState
	}
	if err != nil {
		for _, s := range slots {
			resp.Topics[s.topic].Partitions[s.part].ErrorCode = err.Code
		}
	}
	return resp, nil
}
