package broker

import "context"

// txnPartition is txncoord's (broker/txn_produce.go); this stub lets every
// transactional batch in until the branches are merged.
func (b *Broker) txnPartition(ctx context.Context, txnID string, producerID int64, epoch int16, p *partition, produceVersion int16) error {
	return nil
}
