package broker

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler serves one request. A non-nil error closes the connection; every
// client-visible failure is a Kafka error code inside the response.
type handler func(ctx context.Context, b *Broker, cc *conn, req kmsg.Request) (kmsg.Response, error)

// api is one served API key. The table below is the single source of truth:
// dispatch looks handlers up here and ApiVersions advertises exactly these
// ranges, so nothing is advertised without a handler.
type api struct {
	key      int16
	min, max int16
	handle   handler
	// cluster, if set, is the whole-request check Kafka makes before the
	// handler runs (authorizeClusterOperation); the dispatcher applies
	// it. Per-item checks are the handler's (authz.go).
	cluster  *clusterCheck
	resource *resourceCheck
	// precheck, if set, is a refusal Kafka answers before its
	// authorization (SyncGroup's mandatory protocol fields): the answer,
	// or nil to go on.
	precheck func(req kmsg.Request) kmsg.Response
}

// serve adapts a typed handler to the table's signature.
func serve[Req kmsg.Request](f func(ctx context.Context, b *Broker, cc *conn, req Req) (kmsg.Response, error)) handler {
	return func(ctx context.Context, b *Broker, cc *conn, req kmsg.Request) (kmsg.Response, error) {
		return f(ctx, b, cc, req.(Req))
	}
}

// servedAPIs lists every API key with the versions Apache Kafka 4.x serves
// that kafgres also serves. Produce is advertised from v0 as Kafka does
// (librdkafka refuses a broker whose Produce minimum is above 0), though
// v0-v2 requests are answered with UNSUPPORTED_VERSION per partition.
func servedAPIs() apiTable {
	return sortedAPIs([]api{
		{key: 0, min: 0, max: 13, handle: serve(handleProduce)},
		{key: 1, min: 4, max: 18, handle: serve(handleFetch)},
		{key: 2, min: 1, max: 11, handle: serve(handleListOffsets)},
		{key: 3, min: 0, max: 13, handle: serve(handleMetadata)},
		{key: 8, min: 2, max: 10, handle: serve(handleOffsetCommit),
			resource: &resourceCheck{kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, offsetCommitGroupID, deniedOffsetCommit}},
		{key: 9, min: 1, max: 10, handle: serve(handleOffsetFetch)},
		{key: 10, min: 0, max: 6, handle: serve(handleFindCoordinator)},
		{key: 11, min: 0, max: 9, handle: serve(handleJoinGroup),
			resource: &resourceCheck{kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, joinGroupID, deniedJoinGroup}},
		{key: 12, min: 0, max: 4, handle: serve(handleHeartbeat),
			resource: &resourceCheck{kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, heartbeatGroupID, deniedHeartbeat}},
		{key: 13, min: 0, max: 5, handle: serve(handleLeaveGroup),
			resource: &resourceCheck{kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, leaveGroupID, deniedLeaveGroup}},
		{key: 14, min: 0, max: 5, handle: serve(handleSyncGroup), precheck: syncGroupProtocolMissing,
			resource: &resourceCheck{kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, syncGroupID, deniedSyncGroup}},
		{key: 15, min: 0, max: 6, handle: serve(handleDescribeGroups)},
		{key: 16, min: 0, max: 5, handle: serve(handleListGroups)},
		{key: 17, min: 0, max: 1, handle: serve(handleSaslHandshake)},
		{key: 18, min: 0, max: 5, handle: serve(handleApiVersions)},
		{key: 19, min: 2, max: 7, handle: serve(handleCreateTopics)},
		{key: 20, min: 1, max: 6, handle: serve(handleDeleteTopics)},
		{key: 21, min: 0, max: 2, handle: serve(handleDeleteRecords)},
		{key: 22, min: 0, max: 5, handle: serve(handleInitProducerID)},
		{key: 23, min: 2, max: 4, handle: serve(handleOffsetForLeaderEpoch)},
		{key: 24, min: 0, max: 5, handle: serve(handleAddPartitionsToTxn)},
		{key: 25, min: 0, max: 4, handle: serve(handleAddOffsetsToTxn)},
		{key: 26, min: 0, max: 5, handle: serve(handleEndTxn)},
		{key: 27, min: 1, max: 2, handle: serve(handleWriteTxnMarkers)},
		{key: 28, min: 0, max: 6, handle: serve(handleTxnOffsetCommit)},
		{key: 29, min: 1, max: 3, handle: serve(handleDescribeACLs), cluster: &clusterCheck{kmsg.ACLOperationDescribe, deniedDescribeACLs}},
		{key: 30, min: 1, max: 3, handle: serve(handleCreateACLs), cluster: &clusterCheck{kmsg.ACLOperationAlter, deniedCreateACLs}},
		{key: 31, min: 1, max: 3, handle: serve(handleDeleteACLs), cluster: &clusterCheck{kmsg.ACLOperationAlter, deniedDeleteACLs}},
		{key: 32, min: 1, max: 4, handle: serve(handleDescribeConfigs)},
		{key: 33, min: 0, max: 2, handle: serve(handleAlterConfigs)},
		{key: 35, min: 1, max: 5, handle: serve(handleDescribeLogDirs), cluster: &clusterCheck{kmsg.ACLOperationDescribe, deniedDescribeLogDirs}},
		{key: 36, min: 0, max: 2, handle: serve(handleSaslAuthenticate)},
		{key: 37, min: 0, max: 3, handle: serve(handleCreatePartitions)},
		{key: 42, min: 0, max: 3, handle: serve(handleDeleteGroups)},
		{key: 43, min: 0, max: 2, handle: serve(handleElectLeaders), cluster: &clusterCheck{kmsg.ACLOperationAlter, deniedElectLeaders}},
		{key: 44, min: 0, max: 1, handle: serve(handleIncrementalAlterConfigs)},
		{key: 45, min: 0, max: 1, handle: serve(handleAlterPartitionReassignments), cluster: &clusterCheck{kmsg.ACLOperationAlter, deniedAlterPartitionReassignments}},
		{key: 46, min: 0, max: 0, handle: serve(handleListPartitionReassignments), cluster: &clusterCheck{kmsg.ACLOperationDescribe, deniedListPartitionReassignments}},
		{key: 47, min: 0, max: 0, handle: serve(handleOffsetDelete),
			resource: &resourceCheck{kmsg.ACLOperationDelete, kmsg.ACLResourceTypeGroup, offsetDeleteGroupID, deniedOffsetDelete}},
		{key: 48, min: 0, max: 1, handle: serve(handleDescribeClientQuotas), cluster: &clusterCheck{kmsg.ACLOperationDescribeConfigs, deniedDescribeClientQuotas}},
		{key: 49, min: 0, max: 1, handle: serve(handleAlterClientQuotas), cluster: &clusterCheck{kmsg.ACLOperationAlterConfigs, deniedAlterClientQuotas}},
		{key: 50, min: 0, max: 0, handle: serve(handleDescribeUserScramCredentials), cluster: &clusterCheck{kmsg.ACLOperationDescribe, deniedDescribeUserScramCredentials}},
		{key: 51, min: 0, max: 0, handle: serve(handleAlterUserScramCredentials), cluster: &clusterCheck{kmsg.ACLOperationAlter, deniedAlterUserScramCredentials}},
		{key: 57, min: 0, max: 2, handle: serve(handleUpdateFeatures), cluster: &clusterCheck{kmsg.ACLOperationAlter, deniedUpdateFeatures}},
		{key: 60, min: 0, max: 2, handle: serve(handleDescribeCluster)},
		{key: 61, min: 0, max: 0, handle: serve(handleDescribeProducers)},
		{key: 65, min: 0, max: 0, handle: serve(handleDescribeTransactions)},
		{key: 66, min: 0, max: 2, handle: serve(handleListTransactions)},
		{key: 68, min: 0, max: 1, handle: serve(handleConsumerGroupHeartbeat),
			resource: &resourceCheck{kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, consumerGroupHeartbeatGroupID, deniedConsumerGroupHeartbeat}},
		{key: 69, min: 0, max: 1, handle: serve(handleConsumerGroupDescribe)},
		{key: 75, min: 0, max: 0, handle: serve(handleDescribeTopicPartitions)},
	})
}

// apiTable is sorted by key.
type apiTable []api

func sortedAPIs(apis []api) apiTable {
	sort.Slice(apis, func(i, j int) bool { return apis[i].key < apis[j].key })
	return apis
}

// lookup returns the served entry for key, or false.
func (t apiTable) lookup(key int16) (api, bool) {
	i := sort.Search(len(t), func(i int) bool { return t[i].key >= key })
	if i < len(t) && t[i].key == key {
		return t[i], true
	}
	return api{}, false
}
