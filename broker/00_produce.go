package broker

// Produce: v0-13
//
// Behavior:
//   - acks 0, 1 and -1; anything else is INVALID_REQUIRED_ACKS. acks=1 and
//     acks=-1 are both answered only once the batch is fsynced (group
//     commit); acks=0 gets no response, and the connection is closed if a
//     partition failed, as Kafka does, so the client notices
//   - exactly one v2 batch per partition, validated as Kafka's
//     ProduceRequest.validateRecords, UnifiedLog and LogValidator do, then
//     stored byte for byte (any codec); only baseOffset and
//     partitionLeaderEpoch are stamped. No batch, another magic, more than
//     one batch, a base offset other than 0, an offset range that does not
//     match the record count, the control bit, a producer id without a
//     sequence, records that do not parse or number other than declared,
//     offset deltas other than 0, 1, 2, ..., a null key on a compacted
//     topic: INVALID_RECORD. Bad CRC, an unknown codec (bits 5-7), data
//     the codec cannot decode: CORRUPT_MESSAGE. zstd before v7:
//     UNSUPPORTED_COMPRESSION_TYPE. Compressed records are read as a
//     stream and must inflate to at most socket.request.max.bytes
//     (INVALID_RECORD); v8+ answers carry Kafka's error message and, for
//     per-record errors, the records' indexes
//   - topics with message.timestamp.type=LogAppendTime get the broker's
//     clock as batch timestamp (CRC recomputed), also in the answer;
//     CreateTime records (and the batch's first and max timestamps) more
//     than message.timestamp.after.max.ms (1 h) ahead of the broker's
//     clock, or before.max.ms behind, get INVALID_TIMESTAMP
//   - batches over the topic's max.message.bytes: MESSAGE_TOO_LARGE
//   - idempotent producers: a duplicate of one of the last 5 batches is
//     answered with its original offset, a gap with OUT_OF_ORDER_SEQUENCE_NUMBER,
//     an old epoch with INVALID_PRODUCER_EPOCH
//   - WRITE on each topic (docs/security.md, "Authorization"): denied is
//     TOPIC_AUTHORIZATION_FAILED on its partitions, whether or not the
//     topic exists; an unknown topic id (v13) is answered first
//   - transactional batches (the attribute bit): the request must carry a
//     transactional id the client may WRITE (TRANSACTIONAL_ID), else every
//     partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; more than one
//     producer id/epoch among them: every partition
//     INVALID_PRODUCER_ID_MAPPING (Kafka's whole-request errors). A
//     transactional batch with a producer id is then checked with the
//     transaction coordinator (txnPartition: added to the transaction,
//     INVALID_TXN_STATE and the like) after validation and before it is
//     appended, and opens the producer's transaction in the partition; one
//     without a producer id is stored as a plain batch, as Kafka does. A
//     non-transactional batch of a producer whose transaction is open here:
//     INVALID_TXN_STATE
//   - internal topics (internal_topics.go): INVALID_TOPIC_EXCEPTION with no
//     message, once the checks above the batch's own have passed, unless
//     the client id is __admin_client, as Kafka's ReplicaManager answers
//   - v0-v2 (message formats v0/v1, gone from Kafka 4): UNSUPPORTED_VERSION
//     per partition
//
// Version notes:
//   - v5: log start offset; v7: zstd; v8: error message and record errors;
//     v9: flexible; v13: topics by id (UNKNOWN_TOPIC_ID)

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/kafgres/kafgres/broker/storage/segment"
)

func handleProduce(ctx context.Context, b *Broker, cc *conn, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if err := b.produceTxnCheck(cc, req); err != nil {
		// acks=0 gets no answer: closing tells the client.
		if req.Acks == 0 {
			return nil, fmt.Errorf("acks=0 produce refused: %w; closing so the client notices", err)
		}
		return produceRefused(req, err), nil
	}
	var (
		last   *pass
		failed bool
	)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t *topic
		if req.Version >= 13 {
			t = b.catalog.lookupID(ctx, rt.TopicID)
		} else {
			t = b.catalog.lookup(ctx, rt.Topic)
		}
		// WRITE on the topic, asked by name before its existence is
		// looked at (an unknown topic id is not sensitive: it is answered
		// first).
		name := rt.Topic
		if t != nil {
			name = t.name
		}
		writable := (t == nil && req.Version >= 13) || b.allowed(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, name)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			var (
				p   *appended
				err error
			)
			if internalAppendRefused(req, t, writable, rp, cc.clientID) {
				err = kerr.InvalidTopicException
			} else {
				p, err = b.producePartition(ctx, req, t, writable, rp)
			}
			if err == nil && p != nil {
				sp.BaseOffset, sp.LogAppendTime = p.base, p.logAppendTime
				sp.LogStartOffset = p.part.log.LogStartOffset()
				if req.Acks != 0 {
					last = b.committer.enqueue(p.part)
				} else {
					b.committer.enqueue(p.part)
				}
			}
			if err != nil {
				failed = true
				sp.ErrorCode = errorCode(err)
				var pe *produceError
				if errors.As(err, &pe) {
					sp.ErrorMessage = &pe.msg
					sp.ErrorRecords = pe.records
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.Acks == 0 {
		if failed {
			return nil, errors.New("acks=0 produce failed; closing so the client notices")
		}
		return nil, nil
	}
	if last != nil {
		// Passes complete in order, so the last one covers every partition.
		cc.wait = last.done
	}
	return resp, nil
}

// produceTxnCheck applies Kafka's whole-request checks of transactional
// records (KafkaApis.handleProduceRequest, ReplicaManager.handleProduceAppend):
// WRITE on the request's transactional id, which must be there, and a
// single producer id and epoch among the transactional batches.
func (b *Broker) produceTxnCheck(cc *conn, req *kmsg.ProduceRequest) *kerr.Error {
	type producer struct {
		id    int64
		epoch int16
	}
	var (
		txn       bool
		producers = map[producer]bool{}
	)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			h, err := segment.ParseBatchHeader(rp.Records)
			if err != nil || !h.IsTransactional() {
				continue
			}
			txn = true
			if h.ProducerID >= 0 {
				producers[producer{h.ProducerID, h.ProducerEpoch}] = true
			}
		}
	}
	if !txn {
		return nil
	}
	if req.TransactionID == nil || !b.allowed(cc, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionID) {
		return kerr.TransactionalIDAuthorizationFailed
	}
	if len(producers) > 1 {
		return kerr.InvalidProducerIDMapping
	}
	return nil
}

// produceRefused answers every partition of req with err, as Kafka's
// ProduceRequest.getErrorResponse does.
func produceRefused(req *kmsg.ProduceRequest, err *kerr.Error) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, err.Code
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// stampTimestamps applies the topic's timestamp rules as Kafka's
// LogValidator does and returns the log append time (-1 for CreateTime
// topics). LogAppendTime: the broker's clock becomes the batch's timestamp
// (the records keep theirs, but readers use the batch's), and a client may
// not claim LogAppendTime itself. CreateTime: the batch's timestamps must lie
// within message.timestamp.before.max.ms / after.max.ms of now; the first
// timestamp stands in for the oldest record.
func stampTimestamps(batch []byte, h *segment.BatchHeader, s kconfig.TopicSettings, now int64) (int64, error) {
	const logAppendTimeBit = 0x08
	if s.LogAppendTime {
		if h.Attributes&logAppendTimeBit != 0 {
			return -1, kerr.InvalidTimestamp
		}
		if err := segment.SetLogAppendTime(batch, now); err != nil {
			return -1, kerr.CorruptMessage
		}
		h.Attributes |= logAppendTimeBit
		h.MaxTimestamp = now
		return now, nil
	}
	if h.MaxTimestamp-now > s.TimestampAfterMaxMs || now-h.BaseTimestamp > s.TimestampBeforeMaxMs {
		return -1, kerr.InvalidTimestamp
	}
	return -1, nil
}

type appended struct {
	part          *partition
	base          int64
	logAppendTime int64 // -1 unless the topic uses LogAppendTime
}

// producePartition validates and appends one partition's records. Errors are
// *kerr.Error values for the client (perhaps in a *produceError); a storage
// failure also stops the broker.
func (b *Broker) producePartition(ctx context.Context, req *kmsg.ProduceRequest, t *topic, writable bool, rp kmsg.ProduceRequestTopicPartition) (*appended, error) {
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		return nil, kerr.InvalidRequiredAcks
	case req.Version < 3:
		return nil, kerr.UnsupportedVersion
	case t == nil && req.Version >= 13:
		return nil, kerr.UnknownTopicID
	case !writable:
		return nil, kerr.TopicAuthorizationFailed
	case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
		return nil, kerr.UnknownTopicOrPartition
	}
	settings := b.topicSettings(t)
	now := time.Now().UnixMilli()
	v := batchValidation{
		version:  req.Version,
		tp:       fmt.Sprintf("%s-%d", t.name, rp.Partition),
		settings: settings,
		now:      now,
		limit:    b.cfg.maxDecompressedBytes(),
		decoders: b.decoders,
	}
	h, err := v.validate(ctx, rp.Records)
	if err != nil {
		return nil, err
	}
	appendTime, err := stampTimestamps(rp.Records, &h, settings, now)
	if err != nil {
		return nil, err
	}
	p := t.parts[rp.Partition]
	if h.IsTransactional() && h.ProducerID >= 0 {
		// produceTxnCheck made sure the request has a transactional id.
		if err := b.txnPartition(ctx, *req.TransactionID, h.ProducerID, h.ProducerEpoch, p, req.Version); err != nil {
			return nil, err
		}
	}
	res := p.append(rp.Records, h)
	var ke *kerr.Error
	if res.err != nil && !errors.As(res.err, &ke) {
		b.stop(res.err) // the log may be inconsistent; recovery will mend it
		return nil, kerr.KafkaStorageError
	}
	if res.err != nil {
		return nil, res.err
	}
	return &appended{part: p, base: res.baseOffset, logAppendTime: appendTime}, nil
}

// produceError is a refused partition with Kafka's error message and, for
// errors in individual records, their indexes in the batch.
type produceError struct {
	err     *kerr.Error
	msg     string
	records []kmsg.ProduceResponseTopicPartitionErrorRecord
}

func (e *produceError) Error() string { return e.err.Message + ": " + e.msg }
func (e *produceError) Unwrap() error { return e.err }

func refuse(err *kerr.Error, format string, args ...any) error {
	return &produceError{err: err, msg: fmt.Sprintf(format, args...)}
}

// maxRecordErrors caps the per-record errors of one answer; Kafka lists
// them all, which for a batch of a million bad records is a response
// larger than the request.
const maxRecordErrors = 100

// batchValidation is what validating one partition's records needs.
type batchValidation struct {
	version  int16
	tp       string // topic-partition, for messages
	settings kconfig.TopicSettings
	now      int64
	limit    int64 // what the records may inflate to
	decoders *decoders
}

// validate checks a partition's records as Kafka does before appending
// them and returns the batch's header. It never changes the batch: kafgres
// stores it as sent, so what Kafka would rewrite (offsets, max timestamp)
// must already be right. Compressed records are read as a stream, bounded
// by v.limit and the broker's decompression memory.
func (v *batchValidation) validate(ctx context.Context, records []byte) (segment.BatchHeader, error) {
	var none segment.BatchHeader
	// ProduceRequest.validateRecords: exactly one whole v2 batch.
	const logOverhead = 12
	if len(records) < logOverhead {
		return none, refuse(kerr.InvalidRecord, "Produce requests with version %d must have at least one record batch per partition", v.version)
	}
	// The smallest record Kafka's batch reader takes (a v0 message) is 14
	// bytes; anything shorter is corrupt rather than missing.
	if size := int32(binary.BigEndian.Uint32(records[8:])); size < 14 {
		return none, refuse(kerr.CorruptMessage, "Record size %d is less than the minimum record overhead (14)", size)
	} else if int64(size)+logOverhead > int64(len(records)) {
		return none, refuse(kerr.InvalidRecord, "Produce requests with version %d must have at least one record batch per partition", v.version)
	}
	if len(records) > 16 && records[16] != 2 {
		return none, refuse(kerr.InvalidRecord, "Produce requests with version %d are only allowed to contain record batches with magic version 2", v.version)
	}
	h, err := segment.ParseBatchHeader(records)
	if err != nil {
		return none, refuse(kerr.CorruptMessage, "Record batch in topic partition %s is corrupt: %v", v.tp, err)
	}
	if h.Compression() == codecZstd && v.version < 7 {
		return none, refuse(kerr.UnsupportedCompressionType, "Produce requests with version %d are not allowed to use ZStandard compression", v.version)
	}
	if int(h.Length) < len(records) {
		return none, refuse(kerr.InvalidRecord, "Produce requests with version %d are only allowed to contain exactly one record batch per partition", v.version)
	}
	// UnifiedLog.analyzeAndValidateRecords.
	if h.BaseOffset != 0 {
		return none, refuse(kerr.InvalidRecord, "The baseOffset of the record batch in the append to %s should be 0, but it is %d", v.tp, h.BaseOffset)
	}
	if len(records) > int(v.settings.MaxMessageBytes) {
		return none, refuse(kerr.MessageTooLarge, "The record batch size in the append to %s is %d bytes which exceeds the maximum configured value of %d.", v.tp, len(records), v.settings.MaxMessageBytes)
	}
	if !h.CRCValid(records) {
		return none, refuse(kerr.CorruptMessage, "Record is corrupt (stored crc = %d) in topic partition %s.", h.CRC, v.tp)
	}
	codec := h.Compression()
	if codec > codecZstd {
		// Kafka fails these with UNKNOWN_SERVER_ERROR (an exception it does
		// not map); the batch is what is wrong.
		return none, refuse(kerr.CorruptMessage, "Unknown compression type id %d in topic partition %s", codec, v.tp)
	}
	// LogValidator.validateBatch.
	if count := int64(h.LastOffsetDelta) + 1; count <= 0 {
		return none, refuse(kerr.InvalidRecord, "Batch has an invalid offset range: [0, %d] in topic partition %s", h.LastOffsetDelta, v.tp)
	} else if h.NumRecords <= 0 {
		return none, refuse(kerr.InvalidRecord, "Invalid reported count for record batch: %d in topic partition %s", h.NumRecords, v.tp)
	} else if count != int64(h.NumRecords) {
		return none, refuse(kerr.InvalidRecord, "Inconsistent batch offset range [0, %d] and count of records %d in topic partition %s", h.LastOffsetDelta, h.NumRecords, v.tp)
	}
	if h.IsControl() {
		return none, refuse(kerr.InvalidRecord, "Clients are not allowed to write control records in topic partition %s", v.tp)
	}
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return none, refuse(kerr.InvalidRecord, "Invalid sequence number %d in record batch with producerId %d in topic partition %s", h.BaseSequence, h.ProducerID, v.tp)
	}
	// Every record is at least 7 bytes (its length and six one-byte
	// fields), so a count the bytes cannot hold is refused unread.
	if section := int64(len(records) - segment.HeaderSize); (codec == codecNone && 7*int64(h.NumRecords) > section) || 7*int64(h.NumRecords) > v.limit {
		return none, refuse(kerr.InvalidRecord, "Record batch in topic partition %s declares %d records, more than its records section can hold", v.tp, h.NumRecords)
	}
	if err := v.records(ctx, h, records[segment.HeaderSize:]); err != nil {
		return none, err
	}
	return h, nil
}

// records reads every record of the batch h (LogValidator.validateRecord
// and the batch iterators' checks).
func (v *batchValidation) records(ctx context.Context, h segment.BatchHeader, section []byte) error {
	compacted := v.settings.Compacted()
	checkTime := !v.settings.LogAppendTime && !h.HasLogAppendTime()
	var (
		errs        []kmsg.ProduceResponseTopicPartitionErrorRecord
		badTime     bool
		recordFails int
	)
	recordErr := func(i int32, msg string) {
		if recordFails++; len(errs) < maxRecordErrors {
			e := kmsg.NewProduceResponseTopicPartitionErrorRecord()
			e.RelativeOffset, e.ErrorMessage = i, &msg
			errs = append(errs, e)
		}
	}
	walk := func(r *segment.RecordReader) error {
		for i := int32(0); i < h.NumRecords; i++ {
			rec, err := r.Next()
			if err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
			if rec.OffsetDelta != i {
				// Kafka rewrites such a batch; kafgres serves batches as
				// sent, where the deltas are the records' offsets.
				return fmt.Errorf("%w: record %d has offset delta %d", segment.ErrInvalidRecord, i, rec.OffsetDelta)
			}
			if compacted && rec.KeyLen < 0 {
				recordErr(i, "Compacted topic cannot accept message without key in topic partition "+v.tp+".")
				continue
			}
			if ts := h.BaseTimestamp + rec.TimestampDelta; checkTime && ts != -1 &&
				(v.now-ts > v.settings.TimestampBeforeMaxMs || ts-v.now > v.settings.TimestampAfterMaxMs) {
				badTime = true
				recordErr(i, fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
					ts, i, v.now-v.settings.TimestampBeforeMaxMs, v.now+v.settings.TimestampAfterMaxMs))
			}
		}
		if err := r.End(); err != nil {
			return fmt.Errorf("after %d records: %w", h.NumRecords, err)
		}
		return nil
	}
	var err error
	if codec := h.Compression(); codec == codecNone {
		var r segment.RecordReader
		r.ResetBytes(section)
		err = walk(&r)
	} else {
		r := v.decoders.reader()
		err = v.decoders.open(ctx, codec, section, v.limit, func(src io.Reader) error {
			r.ResetReader(src)
			return walk(r)
		})
		v.decoders.putReader(r)
	}
	switch {
	case err == nil:
	case errors.Is(err, segment.ErrInvalidRecord), errors.Is(err, segment.ErrRecordsTooLarge):
		return refuse(kerr.InvalidRecord, "Invalid record batch in topic partition %s: %v", v.tp, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut
	default:
		return refuse(kerr.CorruptMessage, "Record batch in topic partition %s cannot be decompressed: %v", v.tp, err)
	}
	if recordFails == 0 {
		return nil
	}
	if badTime {
		return &produceError{err: kerr.InvalidTimestamp, msg: "One or more records have been rejected due to invalid timestamp", records: errs}
	}
	return &produceError{err: kerr.InvalidRecord, records: errs,
		msg: fmt.Sprintf("One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: %s", recordFails, firstMessages(errs, 3))}
}

func firstMessages(errs []kmsg.ProduceResponseTopicPartitionErrorRecord, n int) string {
	var msgs []string
	for _, e := range errs[:min(n, len(errs))] {
		msgs = append(msgs, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", e.RelativeOffset, *e.ErrorMessage))
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}
