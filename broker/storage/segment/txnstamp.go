package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// SetTransactional makes a batch built without a producer (the SQL
// producer's) part of a Kafka transaction: producerID and epoch, sequences
// from baseSequence, the transactional attribute, and the CRC recomputed.
// The records are untouched.
func SetTransactional(batch []byte, producerID int64, epoch int16, baseSequence int32) error {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return fmt.Errorf("set transactional: %w", err)
	}
	if int(h.Length) != len(batch) {
		return fmt.Errorf("set transactional: %w: header says %d bytes, got %d", ErrCorruptBatch, h.Length, len(batch))
	}
	if h.IsControl() {
		return fmt.Errorf("set transactional: %w: a control batch", ErrCorruptBatch)
	}
	be := binary.BigEndian
	be.PutUint16(batch[offAttributes:], uint16(h.Attributes&attrKnown|attrTransactional))
	be.PutUint64(batch[offProducerID:], uint64(producerID))
	be.PutUint16(batch[offProducerEpoch:], uint16(epoch))
	be.PutUint32(batch[offBaseSequence:], uint32(baseSequence))
	be.PutUint32(batch[offCRC:], crc32.Checksum(batch[offAttributes:], castagnoli))
	return nil
}
