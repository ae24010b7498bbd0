package metadata

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/kafgres/kafgres/security/acl"
)

// Memory is the metadata store held in memory: the twin of Postgres for
// tests of the broker's handlers, which need Kafka semantics but not
// Postgres's. It keeps the same rows and answers with the same errors;
// what the extension's SQL functions check (topic names, partition
// bounds) the broker checks before calling, so Memory does not repeat it.
// Nothing survives the value.
type Memory struct {
	mu         sync.Mutex
	topics     []Topic // in id order
	nextTopic  int64
	dropped    map[int64][16]byte
	brokerNode map[int32]map[string]string
	cluster    map[string]string
	offsets    map[string]map[TopicPartition]CommittedOffset
	groups     map[string][]byte // kafgres.consumer_group
	features   map[string]int16
	quotas     map[string]Quota // by entity and key
	producerID int64
	logEnds    map[TopicPartition]LogEnd
	archive    map[TopicPartition]ArchiveStatus // ReportArchiveStatus
	acls       []acl.Binding
	superRoles []string
	txn        *memoryTxns // memory_transactions.go

	// The source guard (source_guard.go).
	walInsert   uint64
	guard       *SourceGuard
	guardRebase *uint64

	// aclsChanged: Postgres's NOTIFY kafgres_acls.
	aclsChanged chan struct{}
	roles       map[string]MemoryRole // SetRole

	// changed has a value when a change has not been seen by
	// WatchCatalog yet: Postgres's NOTIFY kafgres_topics.
	changed chan struct{}
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{
		dropped:    map[int64][16]byte{},
		brokerNode: map[int32]map[string]string{},
		cluster:    map[string]string{},
		offsets:    map[string]map[TopicPartition]CommittedOffset{},
		features:   map[string]int16{},
		quotas:     map[string]Quota{},
		logEnds:    map[TopicPartition]LogEnd{},
		changed:    make(chan struct{}, 1),

		aclsChanged: make(chan struct{}, 1),
	}
}

func (m *Memory) notify() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// ClusterID is fixed: one Memory is one cluster.
func (m *Memory) ClusterID(context.Context) (string, error) { return clusterID(0x6b6166), nil }

func (m *Memory) NextProducerID(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.producerID++
	return m.producerID, nil
}

func (m *Memory) Close() {}

func (m *Memory) BumpLeaderEpochs(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.topics {
		for p := range m.topics[i].Epochs {
			m.topics[i].Epochs[p]++
		}
	}
	return nil
}

func (m *Memory) LoadCatalog(_ context.Context, nodeID int32) (Catalog, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := Catalog{BrokerNode: maps.Clone(m.brokerNode[nodeID]), BrokerCluster: maps.Clone(m.cluster)}
	if out.BrokerNode == nil {
		out.BrokerNode = map[string]string{}
	}
	for _, t := range m.topics {
		c := t
		c.Epochs = append([]int32(nil), t.Epochs...)
		if len(t.Configs) > 0 {
			c.Configs = maps.Clone(t.Configs)
		} else {
			c.Configs = nil
		}
		out.Topics = append(out.Topics, c)
	}
	return out, nil
}

// WatchCatalog calls changed once, then after every change, until ctx ends.
func (m *Memory) WatchCatalog(ctx context.Context, changed func(context.Context) error) {
	for {
		_ = changed(ctx)
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
		}
	}
}

func (m *Memory) topic(name string) *Topic {
	for i := range m.topics {
		if m.topics[i].Name == name {
			return &m.topics[i]
		}
	}
	return nil
}

func (m *Memory) topicByID(id int64) *Topic {
	for i := range m.topics {
		if m.topics[i].ID == id {
			return &m.topics[i]
		}
	}
	return nil
}

func (m *Memory) CreateTopic(_ context.Context, name string, partitions int32, configs map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.topic(name) != nil {
		return ErrTopicExists
	}
	m.nextTopic++
	t := Topic{ID: m.nextTopic, Name: name, Epochs: make([]int32, partitions), Configs: maps.Clone(configs)}
	_, _ = rand.Read(t.UUID[:])
	m.topics = append(m.topics, t)
	m.notify()
	return nil
}

func (m *Memory) DropTopic(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, t := range m.topics {
		if t.Name == name {
			m.dropped[t.ID] = t.UUID
			m.topics = append(m.topics[:i], m.topics[i+1:]...)
			for g := range m.offsets {
				for tp := range m.offsets[g] {
					if tp.TopicID == t.ID {
						delete(m.offsets[g], tp)
					}
				}
			}
			m.notify()
			return nil
		}
	}
	return ErrUnknownTopic
}

func (m *Memory) CreatePartitions(_ context.Context, name string, count int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.topic(name)
	switch {
	case t == nil:
		return ErrUnknownTopic
	case int(count) < len(t.Epochs):
		return ErrPartitionsChanged
	}
	for len(t.Epochs) < int(count) {
		t.Epochs = append(t.Epochs, 0)
	}
	m.notify()
	return nil
}

func (m *Memory) DroppedTopics(_ context.Context, ids []int64) ([]DroppedTopic, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DroppedTopic
	for _, id := range ids {
		if u, ok := m.dropped[id]; ok {
			out = append(out, DroppedTopic{ID: id, UUID: u})
		}
	}
	return out, nil
}

func (m *Memory) TopicIDSequence(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nextTopic, nil
}

func (m *Memory) AlterTopicConfigs(_ context.Context, topicID int64, commit bool,
	next func(current map[string]string) (map[string]string, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.topicByID(topicID)
	if t == nil {
		return ErrUnknownTopic
	}
	current := maps.Clone(t.Configs)
	if current == nil {
		current = map[string]string{}
	}
	configs, err := next(current)
	if err != nil || !commit {
		return err
	}
	t.Configs = maps.Clone(configs)
	m.notify()
	return nil
}

func (m *Memory) AlterBrokerConfigs(_ context.Context, nodeID int32, cluster, commit bool,
	next func(node, cluster map[string]string) (map[string]string, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	node := maps.Clone(m.brokerNode[nodeID])
	if node == nil {
		node = map[string]string{}
	}
	configs, err := next(node, maps.Clone(m.cluster))
	if err != nil || !commit {
		return err
	}
	if cluster {
		m.cluster = maps.Clone(configs)
	} else {
		m.brokerNode[nodeID] = maps.Clone(configs)
	}
	m.notify()
	return nil
}

func (m *Memory) OffsetGroups(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for g, offs := range m.offsets {
		if len(offs) > 0 {
			out = append(out, g)
		}
	}
	return out, nil
}

func (m *Memory) CommitOffsets(_ context.Context, group string, offs []CommittedOffset) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	if m.offsets[group] == nil {
		m.offsets[group] = map[TopicPartition]CommittedOffset{}
	}
	for _, o := range offs {
		m.offsets[group][TopicPartition{o.TopicID, o.Partition}] = o
	}
	return nil
}

func (m *Memory) FetchOffsets(_ context.Context, group string) (map[TopicPartition]CommittedOffset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.offsets[group]), nil
}

func (m *Memory) DeleteGroupOffsets(_ context.Context, group string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.offsets, group)
	return nil
}

func (m *Memory) DeleteOffsets(_ context.Context, group string, tps []TopicPartition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tp := range tps {
		delete(m.offsets[group], tp)
	}
	return nil
}

func (m *Memory) HasOffsets(_ context.Context, group string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.offsets[group]) > 0, nil
}

func (m *Memory) LoadFeatures(context.Context) (map[string]int16, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.features), nil
}

func (m *Memory) StoreFeatures(_ context.Context, levels map[string]int16) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	maps.Copy(m.features, levels)
	return nil
}

func (m *Memory) LoadQuotas(context.Context) ([]Quota, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Quota, 0, len(m.quotas))
	for _, q := range m.quotas {
		out = append(out, q)
	}
	return out, nil
}

func (m *Memory) AlterQuotas(_ context.Context, e QuotaEntity, ops []QuotaOp) error {
	key, err := json.Marshal(e)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range ops {
		k := string(key) + "\x00" + op.Key
		if op.Remove {
			delete(m.quotas, k)
		} else {
			m.quotas[k] = Quota{Entity: maps.Clone(e), Key: op.Key, Value: op.Value}
		}
	}
	return nil
}

// MirrorDelivered accepts the delivered LSN and keeps nothing: only SQL
// (kafgres_wait_delivered) reads it back, and Memory has no SQL.
func (m *Memory) MirrorDelivered(context.Context, uint64) error { return nil }

func (m *Memory) MirrorLogEnds(_ context.Context, ends []LogEnd) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range ends {
		m.logEnds[TopicPartition{e.TopicID, e.Partition}] = e
	}
	return nil
}

// LogEnd is what the mirror last wrote for a partition (tests).
func (m *Memory) LogEnd(topicID int64, partition int32) (LogEnd, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.logEnds[TopicPartition{topicID, partition}]
	return e, ok
}

// LoadACLs returns the stored ACLs and the superuser roles SetSuperuserRoles
// set.
func (m *Memory) LoadACLs(context.Context) (ACLs, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return ACLs{Bindings: slices.Clone(m.acls), SuperuserRoles: slices.Clone(m.superRoles)}, nil
}

// WatchACLs calls changed once, then after every change, until ctx ends.
func (m *Memory) WatchACLs(ctx context.Context, changed func(context.Context) error) {
	for {
		_ = changed(ctx)
		select {
		case <-ctx.Done():
			return
		case <-m.aclsChanged:
		}
	}
}

// CreateACLs stores the bindings not stored yet.
func (m *Memory) CreateACLs(_ context.Context, bindings []acl.Binding) error {
	m.mu.Lock()
	for _, b := range bindings {
		if !slices.Contains(m.acls, b) {
			m.acls = append(m.acls, b)
		}
	}
	m.mu.Unlock()
	m.notifyACLs()
	return nil
}

// DeleteACLs removes the bindings.
func (m *Memory) DeleteACLs(_ context.Context, bindings []acl.Binding) error {
	m.mu.Lock()
	m.acls = slices.DeleteFunc(m.acls, func(b acl.Binding) bool { return slices.Contains(bindings, b) })
	m.mu.Unlock()
	m.notifyACLs()
	return nil
}

// SetSuperuserRoles stands in for pg_roles.rolsuper in tests.
func (m *Memory) SetSuperuserRoles(roles ...string) {
	m.mu.Lock()
	m.superRoles = roles
	m.mu.Unlock()
	m.notifyACLs()
}

func (m *Memory) notifyACLs() {
	select {
	case m.aclsChanged <- struct{}{}:
	default:
	}
}
