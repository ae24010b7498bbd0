package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/broker/coordinator/txn"
)

// txnPartition is asked before a transactional batch of producerID/epoch
// is appended to p by a Produce request of produceVersion carrying
// transactional id txnID (the contract with the log side, shared plan of
// session 9).
//
// On transaction version 2 (produce v12+ while transaction.version is 2,
// KIP-890 part 2) it adds p to the producer's transaction, starting one if
// none is ongoing, and the addition is stored before it returns, as
// Kafka's partition leader has the coordinator write it before appending.
// Otherwise it verifies that AddPartitionsToTxn added p (KIP-890 part 1).
//
// Errors as Kafka's produce answers them: PRODUCER_FENCED becomes
// INVALID_PRODUCER_EPOCH (producers expect it there); a partition not in
// the transaction is TRANSACTION_ABORTABLE for produce v11+, which knows
// it, INVALID_TXN_STATE before ("Partition was not added to the
// transaction"); INVALID_PRODUCER_ID_MAPPING as it is; the retriable
// coordinator errors (CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE,
// ...) as NOT_ENOUGH_REPLICAS with the underlying error in the message, as
// Kafka's ReplicaManager translates them.
func (b *Broker) txnPartition(ctx context.Context, txnID string, producerID int64, epoch int16, p *partition, produceVersion int16) error {
	if b.testSkipTxnCheck != nil && b.testSkipTxnCheck() {
		return nil
	}
	tp := txn.Partition{TopicID: p.topic.id, Partition: p.index}
	var err *kerr.Error
	if produceVersion >= 12 && b.transactionVersion() >= 2 {
		err = b.txns.AddPartitions(ctx, txnID, producerID, epoch, []txn.Partition{tp}, 2)
	} else {
		var res map[txn.Partition]*kerr.Error
		res, err = b.txns.VerifyPartitions(txnID, producerID, epoch, []txn.Partition{tp})
		if err == nil {
			err = res[tp]
		}
	}
	switch {
	case err == nil:
		return nil
	case err == kerr.ProducerFenced:
		return kerr.InvalidProducerEpoch
	case err == kerr.TransactionAbortable && produceVersion < 11:
		return kerr.InvalidTxnState
	case err == kerr.InvalidRequest, err == kerr.InvalidTxnState:
		return refuse(kerr.InvalidTxnState, "Partition was not added to the transaction")
	case err == kerr.ConcurrentTransactions, err == kerr.CoordinatorNotAvailable, err == kerr.CoordinatorLoadInProgress,
		err == kerr.NotCoordinator, err == kerr.NetworkException:
		// As Kafka's ReplicaManager: older clients may not retry these
		// on a produce; NOT_ENOUGH_REPLICAS they all retry, without a
		// metadata refresh.
		return refuse(kerr.NotEnoughReplicas, "Unable to verify the partition has been added to the transaction. Underlying error: %s", err.Message)
	}
	return err
}
