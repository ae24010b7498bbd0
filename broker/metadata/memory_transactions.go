package metadata

import (
	"context"
	"slices"

	"github.com/kafgres/kafgres/broker/coordinator/txn"
)

// memoryTxns is Memory's kafgres.transaction and kafgres.transaction_offset.
type memoryTxns struct {
	txns    map[string]txn.Txn
	pending map[string][]txn.PendingOffset // by transactional id
}

func (m *Memory) txnTables() *memoryTxns {
	if m.txn == nil {
		m.txn = &memoryTxns{txns: map[string]txn.Txn{}, pending: map[string][]txn.PendingOffset{}}
	}
	return m.txn
}

func cloneTxn(t txn.Txn) txn.Txn {
	t.Partitions = slices.Clone(t.Partitions)
	t.Groups = slices.Clone(t.Groups)
	return t
}

func (m *Memory) LoadTransactions(context.Context) ([]txn.Txn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []txn.Txn
	for _, t := range m.txnTables().txns {
		out = append(out, cloneTxn(t))
	}
	return out, nil
}

func (m *Memory) LoadTxnOffsets(context.Context) ([]txn.PendingOffset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []txn.PendingOffset
	for _, offs := range m.txnTables().pending {
		out = append(out, offs...)
	}
	return out, nil
}

func (m *Memory) SaveTransaction(_ context.Context, t txn.Txn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.txnTables().txns[t.ID] = cloneTxn(t)
	return nil
}

func (m *Memory) SaveTxnOffsets(_ context.Context, id string, producerID int64, offs []txn.Offset) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	tt := m.txnTables()
	for _, o := range offs {
		if m.topicByID(o.TopicID) == nil {
			continue
		}
		p := txn.PendingOffset{TransactionalID: id, ProducerID: producerID, Offset: o}
		i := slices.IndexFunc(tt.pending[id], func(q txn.PendingOffset) bool {
			return q.Group == o.Group && q.TopicID == o.TopicID && q.Partition == o.Partition
		})
		if i >= 0 {
			tt.pending[id][i] = p
		} else {
			tt.pending[id] = append(tt.pending[id], p)
		}
	}
	return nil
}

func (m *Memory) CompleteTransaction(_ context.Context, t txn.Txn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	tt := m.txnTables()
	if t.State == txn.CompleteCommit {
		for _, o := range tt.pending[t.ID] {
			if m.offsets[o.Group] == nil {
				m.offsets[o.Group] = map[TopicPartition]CommittedOffset{}
			}
			m.offsets[o.Group][TopicPartition{o.TopicID, o.Partition}] = CommittedOffset{
				TopicID: o.TopicID, Partition: o.Partition, Offset: o.Offset.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
		}
	}
	delete(tt.pending, t.ID)
	tt.txns[t.ID] = cloneTxn(t)
	return nil
}

func (m *Memory) DeleteTransaction(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	tt := m.txnTables()
	delete(tt.txns, id)
	delete(tt.pending, id)
	return nil
}

var _ txn.Store = (*Memory)(nil)
