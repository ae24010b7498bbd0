package broker

import (
	"context"

	"github.com/kafgres/kafgres/broker/coordinator"
	"github.com/kafgres/kafgres/broker/coordinator/txn"
	"github.com/kafgres/kafgres/broker/metadata"
	"github.com/kafgres/kafgres/security/acl"
)

// metadataStore is everything the broker keeps in Postgres:
// metadata.Postgres in a running broker, metadata.Memory in handler tests.
// The broker declares it so that no handler depends on how it is stored.
type metadataStore interface {
	catalogStore
	offsetStore
	groupStore
	aclStore
	txn.Store // the transaction coordinator's state (metadata/transactions.go)
	ClusterID(ctx context.Context) (string, error)
	NextProducerID(ctx context.Context) (int64, error)
	LoadFeatures(ctx context.Context) (map[string]int16, error)
	StoreFeatures(ctx context.Context, levels map[string]int16) error
	LoadQuotas(ctx context.Context) ([]metadata.Quota, error)
	AlterQuotas(ctx context.Context, e metadata.QuotaEntity, ops []metadata.QuotaOp) error
	// The log-end mirror: SQL's view of the log, written behind it.
	MirrorDelivered(ctx context.Context, lsn uint64) error
	MirrorLogEnds(ctx context.Context, ends []metadata.LogEnd) error
	archiveStore
	sourceGuardStore
	// RoleCredentials reads the Postgres roles SASL clients log in as
	// (kafgres.role_credential): verifier, LOGIN, VALID UNTIL and
	// membership in clientRole ("" for none). A role that does not exist
	// is missing from the map.
	RoleCredentials(ctx context.Context, names []string, clientRole string) (map[string]metadata.RoleCredential, error)
	// ScramCredentials lists the SCRAM-SHA-256 credentials of the roles
	// that are members of clientRole, by name (kafgres.scram_credentials);
	// names nil: all of them.
	ScramCredentials(ctx context.Context, names []string, clientRole string) ([]metadata.ScramCredential, error)
	// AlterScramCredentials sets or deletes roles' verifiers for a
	// principal from host, in one transaction (kafgres.scram_alter).
	AlterScramCredentials(ctx context.Context, principal, host, clientRole string, changes []metadata.ScramAlter) ([]metadata.ScramOutcome, error)
	Close()
}

// catalogStore holds topics, their configs and the dynamic broker configs.
type catalogStore interface {
	BumpLeaderEpochs(ctx context.Context) error
	LoadCatalog(ctx context.Context, nodeID int32) (metadata.Catalog, error)
	// WatchCatalog calls changed after every change and reconnection
	// until ctx ends.
	WatchCatalog(ctx context.Context, changed func(context.Context) error)
	CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) error
	DropTopic(ctx context.Context, name string) error
	CreatePartitions(ctx context.Context, name string, count int32) error
	DroppedTopics(ctx context.Context, ids []int64) ([]metadata.DroppedTopic, error)
	TopicIDSequence(ctx context.Context) (int64, error)
	AlterTopicConfigs(ctx context.Context, topicID int64, commit bool,
		next func(current map[string]string) (map[string]string, error)) error
	AlterBrokerConfigs(ctx context.Context, nodeID int32, cluster, commit bool,
		next func(node, cluster map[string]string) (map[string]string, error)) error
}

// sourceGuardStore is the WAL position the log's source positions are
// checked against, and the refusal shown in SQL (source_guard.go).
type sourceGuardStore interface {
	WALInsertLSN(ctx context.Context) (uint64, error)
	ReportSourceGuard(ctx context.Context, g metadata.SourceGuard) error
	SourceGuardRebase(ctx context.Context) (keep uint64, ok bool, err error)
	ClearSourceGuard(ctx context.Context) error
}

// aclStore holds the Kafka ACLs (kafgres.acl).
type aclStore interface {
	// LoadACLs reads the ACLs and the Postgres superusers.
	LoadACLs(ctx context.Context) (metadata.ACLs, error)
	// WatchACLs calls changed after every change and reconnection until
	// ctx ends.
	WatchACLs(ctx context.Context, changed func(context.Context) error)
	CreateACLs(ctx context.Context, bindings []acl.Binding) error
	DeleteACLs(ctx context.Context, bindings []acl.Binding) error
}

// groupStore holds the classic groups' records (kafgres.consumer_group),
// which the group coordinator writes and the broker restores at start.
type groupStore interface {
	coordinator.Store
	LoadGroups(ctx context.Context) (map[string][]byte, error)
}

// offsetStore holds the offsets groups commit.
type offsetStore interface {
	OffsetGroups(ctx context.Context) ([]string, error)
	CommitOffsets(ctx context.Context, group string, offs []metadata.CommittedOffset) error
	FetchOffsets(ctx context.Context, group string) (map[metadata.TopicPartition]metadata.CommittedOffset, error)
	DeleteGroupOffsets(ctx context.Context, group string) error
	DeleteOffsets(ctx context.Context, group string, tps []metadata.TopicPartition) error
	HasOffsets(ctx context.Context, group string) (bool, error)
}

var _ metadataStore = (*metadata.Postgres)(nil)

var _ metadataStore = (*metadata.Memory)(nil)
