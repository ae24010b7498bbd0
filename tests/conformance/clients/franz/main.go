// Command franz is the franz-go client of the conformance gate: it runs the
// scenarios of tests/conformance/scenarios.json against one broker and
// prints what franz-go observes, in the format of
// tests/conformance/PROTOCOL.md.
//
//	franz --bootstrap HOST:PORT --prefix PREFIX --scenarios a,b,c
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/tests/conformance/clients/protocol"
)

// runner is what every scenario gets: the names of its topics and group,
// and where its observations go.
type runner struct {
	protocol.Names
	out *protocol.Output
}

func main() {
	protocol.Main("franz", func(n protocol.Names, out *protocol.Output) { (&runner{Names: n, out: out}).run() })
}

// run executes one scenario. A scenario that fails unexpectedly prints an
// observation naming the error instead of aborting the program, so the
// remaining scenarios still run and the diff shows where it went wrong.
func (r *runner) run() {
	name := r.Scenario
	fn, ok := scenarios[name]
	if !ok {
		r.emit(map[string]any{"skip": "unknown scenario"})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), protocol.ScenarioBudget)
	defer cancel()
	if err := fn(ctx, r); err != nil {
		fmt.Fprintf(os.Stderr, "franz: %s: %v\n", name, err)
		r.emit(map[string]any{"op": "scenario", "error": errName(err)})
	}
}

// emit prints one observation line of the scenario.
func (r *runner) emit(obs map[string]any) { r.out.Emit(r.Scenario, obs) }

// client builds a franz-go client for this broker. Idempotence is off by
// default so that only the idempotent-producer scenario depends on
// InitProducerId; acks stay at "all" in every case.
func (r *runner) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return r.newClient(append([]kgo.Opt{kgo.DisableIdempotentWrite()}, opts...)...)
}

// newClient is client without turning idempotence off (franz-go's default
// is on, and there is no option to turn it back on once disabled).
func (r *runner) newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(r.Bootstrap),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// franz-go compresses with snappy by default; plain batches keep
		// compression out of every scenario that is not about it (and keep
		// the too-large record too large). Later options override this.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.RetryTimeout(10 * time.Second),
	}
	sec, err := r.securityOpts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(append(base, sec...), opts...)...)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return cl, nil
}

// errName maps an error to the Kafka protocol error name. franz-go hands
// broker errors back as *kerr.Error whose Message is exactly that name.
// Anything else is a local client failure; its text goes to stderr and the
// observation gets a fixed placeholder so the output stays comparable.
func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "CLIENT_TIMEOUT"
	}
	return "CLIENT_ERROR"
}

// produce writes the records synchronously and returns the first error.
func produce(ctx context.Context, cl *kgo.Client, recs ...*kgo.Record) error {
	for _, res := range cl.ProduceSync(ctx, recs...) {
		if res.Err != nil {
			return fmt.Errorf("producing to %s[%d]: %w", res.Record.Topic, res.Record.Partition, res.Err)
		}
	}
	return nil
}

// consume reads partitions 0..partitions-1 of topic from the start until
// want records arrived or wait elapsed, and returns them sorted by
// (partition, offset). want < 0 means "read for the whole wait".
func (r *runner) consume(ctx context.Context, topic string, partitions int32, want int, wait time.Duration, opts ...kgo.Opt) ([]*kgo.Record, error) {
	start := make(map[int32]kgo.Offset, partitions)
	for p := int32(0); p < partitions; p++ {
		start[p] = kgo.NewOffset().AtStart()
	}
	opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))
	cl, err := r.client(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var recs []*kgo.Record
	for want < 0 || len(recs) < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			err = fmt.Errorf("fetching %s[%d]: %w", errs[0].Topic, errs[0].Partition, errs[0].Err)
			break
		}
		recs = append(recs, fetches.Records()...)
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	if err == nil && want >= 0 && len(recs) < want {
		err = fmt.Errorf("consumed %d of %d records from %s: %w", len(recs), want, topic, context.DeadlineExceeded)
	}
	return recs, err
}

// listOffset asks the partition leader (franz-go routes ListOffsets) for
// the offset matching timestamp, which may be one of the special values
// -2 (earliest), -1 (latest) or -3 (max timestamp).
func listOffset(ctx context.Context, cl *kgo.Client, topic string, partition int32, timestamp int64) (kmsg.ListOffsetsResponseTopicPartition, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return sendListOffsets(ctx, cl, req)
}

func sendListOffsets(ctx context.Context, r interface {
	Request(context.Context, kmsg.Request) (kmsg.Response, error)
}, req *kmsg.ListOffsetsRequest) (kmsg.ListOffsetsResponseTopicPartition, error) {
	var none kmsg.ListOffsetsResponseTopicPartition
	resp, err := r.Request(ctx, req)
	if err != nil {
		return none, fmt.Errorf("list offsets: %w", err)
	}
	lr := resp.(*kmsg.ListOffsetsResponse)
	if len(lr.Topics) != 1 || len(lr.Topics[0].Partitions) != 1 {
		return none, fmt.Errorf("list offsets: expected one partition in the response, got %d topics", len(lr.Topics))
	}
	p := lr.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return p, fmt.Errorf("list offsets %s[%d]: %w", lr.Topics[0].Topic, p.Partition, err)
	}
	return p, nil
}

// metadata asks for one topic without auto-creating it.
func metadata(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata for %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("metadata for %s: %d topics in the response", topic, len(resp.Topics))
	}
	return resp, nil
}

func int32s(v []int32) []int32 {
	out := append([]int32{}, v...) // non-nil so an empty list prints [] not null
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

var scenarios = map[string]func(context.Context, *runner) error{
	"api-versions":               apiVersions,
	"metadata-topic":             metadataTopic,
	"produce-consume-none":       produceConsume(kgo.NoCompression()),
	"produce-consume-gzip":       produceConsume(kgo.GzipCompression()),
	"produce-consume-snappy":     produceConsume(kgo.SnappyCompression()),
	"produce-consume-lz4":        produceConsume(kgo.Lz4Compression()),
	"produce-consume-zstd":       produceConsume(kgo.ZstdCompression()),
	"null-keys":                  nullKeys,
	"headers":                    headers,
	"timestamps":                 timestamps,
	"large-record":               largeRecord,
	"too-large-record":           tooLargeRecord,
	"list-offsets":               listOffsets,
	"list-offsets-max-timestamp": listOffsetsMaxTimestamp,
	"unknown-topic-metadata":     unknownTopicMetadata,
	"unknown-topic-list-offsets": unknownTopicListOffsets,
	"unknown-partition":          unknownPartition,
	"idempotent-producer":        idempotentProducer,
	"auto-create":                autoCreate,
	"offset-out-of-range":        offsetOutOfRange,
	"empty-topic":                emptyTopic,
	"internal-topics":            internalTopicsScenario,
	"compaction":                 compaction,
}

// apiVersions prints the broker's advertised API ranges.
func apiVersions(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if resp.ErrorCode != 0 {
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	keys := resp.ApiKeys
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	for _, k := range keys {
		r.emit(map[string]any{"api_key": k.ApiKey, "min": k.MinVersion, "max": k.MaxVersion})
	}
	return nil
}

func metadataTopic(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := metadata(ctx, cl, r.Topic(0))
	if err != nil {
		return err
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return fmt.Errorf("metadata for %s: %w", r.Topic(0), err)
	}
	parts := t.Partitions
	sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
	for _, p := range parts {
		obs := map[string]any{"partition": p.Partition, "leader": p.Leader, "replicas": int32s(p.Replicas), "isr": int32s(p.ISR)}
		if p.ErrorCode != 0 {
			obs["error"] = errName(kerr.ErrorForCode(p.ErrorCode))
		}
		r.emit(obs)
	}
	r.emit(map[string]any{"topic": r.Topic(0), "partitions": len(parts)})
	return nil
}

// produceConsume produces 20 keyed records with the given codec and reads
// them back from all three partitions; the default partitioner hashes keys
// (murmur2, like the Java client), so the spread is deterministic.
func produceConsume(codec kgo.CompressionCodec) func(context.Context, *runner) error {
	return func(ctx context.Context, r *runner) error {
		const n = 20
		cl, err := r.client(kgo.ProducerBatchCompression(codec))
		if err != nil {
			return err
		}
		defer cl.Close()
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: r.Topic(0), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
		}
		if err := produce(ctx, cl, recs...); err != nil {
			return err
		}
		got, err := r.consume(ctx, r.Topic(0), 3, n, 15*time.Second)
		for _, rec := range got {
			r.emit(map[string]any{"partition": rec.Partition, "offset": rec.Offset, "key": protocol.Printable(rec.Key), "value": protocol.Printable(rec.Value)})
		}
		return err
	}
}

func nullKeys(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < 5; i++ {
		recs = append(recs, &kgo.Record{Topic: r.Topic(0), Value: fmt.Appendf(nil, "n%d", i)})
	}
	if err := produce(ctx, cl, recs...); err != nil {
		return err
	}
	got, err := r.consume(ctx, r.Topic(0), 1, len(recs), 15*time.Second)
	for _, rec := range got {
		r.emit(map[string]any{"offset": rec.Offset, "key": protocol.Printable(rec.Key), "value": protocol.Printable(rec.Value)})
	}
	return err
}

func headers(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	sets := [][]kgo.RecordHeader{
		{{Key: "h1", Value: []byte("a")}},
		{{Key: "h2", Value: nil}}, // a null header value, not an empty one
		{{Key: "h1", Value: []byte("x")}, {Key: "h1", Value: []byte("y")}},
	}
	var recs []*kgo.Record
	for i, hs := range sets {
		recs = append(recs, &kgo.Record{Topic: r.Topic(0), Value: fmt.Appendf(nil, "v%d", i), Headers: hs})
	}
	if err := produce(ctx, cl, recs...); err != nil {
		return err
	}
	got, err := r.consume(ctx, r.Topic(0), 1, len(recs), 15*time.Second)
	for _, rec := range got {
		hs := [][]any{} // print [] rather than null for a record without headers
		for _, h := range rec.Headers {
			hs = append(hs, []any{h.Key, protocol.Printable(h.Value)})
		}
		r.emit(map[string]any{"offset": rec.Offset, "value": protocol.Printable(rec.Value), "headers": hs})
	}
	return err
}

// timestampTypeName uses the names of the Java client's TimestampType.
func timestampTypeName(rec *kgo.Record) string {
	switch rec.Attrs.TimestampType() {
	case 0:
		return "CreateTime"
	case 1:
		return "LogAppendTime"
	default:
		return "NoTimestampType"
	}
}

func timestamps(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i, ms := range []int64{1700000000000, 1700000000500, 1700000001000} {
		recs = append(recs, &kgo.Record{Topic: r.Topic(0), Value: fmt.Appendf(nil, "v%d", i), Timestamp: time.UnixMilli(ms)})
	}
	if err := produce(ctx, cl, recs...); err != nil {
		return err
	}
	got, err := r.consume(ctx, r.Topic(0), 1, len(recs), 15*time.Second)
	for _, rec := range got {
		r.emit(map[string]any{"offset": rec.Offset, "timestamp": rec.Timestamp.UnixMilli(), "timestamp_type": timestampTypeName(rec)})
	}
	return err
}

// bigClient lifts franz-go's own batch limit (default ~1 MB) to 2,000,000
// bytes so that the broker, not the client, judges record size.
func (r *runner) bigClient() (*kgo.Client, error) {
	return r.client(kgo.ProducerBatchMaxBytes(2_000_000), kgo.BrokerMaxWriteBytes(4_000_000))
}

func largeRecord(ctx context.Context, r *runner) error {
	cl, err := r.bigClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := produce(ctx, cl, &kgo.Record{Topic: r.Topic(0), Value: bytes.Repeat([]byte("x"), 1_000_000)}); err != nil {
		return err
	}
	got, err := r.consume(ctx, r.Topic(0), 1, 1, 15*time.Second, kgo.FetchMaxPartitionBytes(2_000_000))
	for _, rec := range got {
		r.emit(map[string]any{"offset": rec.Offset, "value_len": len(rec.Value)})
	}
	return err
}

func tooLargeRecord(ctx context.Context, r *runner) error {
	cl, err := r.bigClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	err = produce(ctx, cl, &kgo.Record{Topic: r.Topic(0), Value: bytes.Repeat([]byte("x"), 1_100_000)})
	if err == nil {
		r.emit(map[string]any{"op": "produce", "error": nil})
		return nil
	}
	fmt.Fprintf(os.Stderr, "franz: too-large-record: %v\n", err)
	r.emit(map[string]any{"op": "produce", "error": errName(err)})
	return nil
}

// produceAt writes one record per timestamp (value v<i>) to partition 0.
func produceAt(ctx context.Context, cl *kgo.Client, topic string, millis []int64) error {
	var recs []*kgo.Record
	for i, ms := range millis {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i), Timestamp: time.UnixMilli(ms)})
	}
	return produce(ctx, cl, recs...)
}

func listOffsets(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	var millis []int64
	for i := int64(0); i < 5; i++ {
		millis = append(millis, 1700000000000+1000*i)
	}
	if err := produceAt(ctx, cl, r.Topic(0), millis); err != nil {
		return err
	}
	queries := []struct {
		name      string
		timestamp int64
	}{
		{"earliest", -2},
		{"latest", -1},
		{"timestamp:1700000002500", 1700000002500},
		{"timestamp:1800000000000", 1800000000000},
	}
	for _, q := range queries {
		p, err := listOffset(ctx, cl, r.Topic(0), 0, q.timestamp)
		if err != nil {
			fmt.Fprintf(os.Stderr, "franz: list-offsets %s: %v\n", q.name, err)
			r.emit(map[string]any{"query": q.name, "error": errName(err)})
			continue
		}
		r.emit(map[string]any{"query": q.name, "offset": p.Offset})
	}
	return nil
}

func listOffsetsMaxTimestamp(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	base := int64(1700000000000)
	if err := produceAt(ctx, cl, r.Topic(0), []int64{base + 5000, base + 9000, base + 7000}); err != nil {
		return err
	}
	// franz-go negotiates ListOffsets v7+ when the broker offers it, which
	// is what MAX_TIMESTAMP (-3) needs.
	p, err := listOffset(ctx, cl, r.Topic(0), 0, -3)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz: list-offsets-max-timestamp: %v\n", err)
		r.emit(map[string]any{"query": "max", "error": errName(err)})
		return nil
	}
	r.emit(map[string]any{"query": "max", "offset": p.Offset, "timestamp": p.Timestamp})
	return nil
}

func unknownTopicMetadata(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := metadata(ctx, cl, r.MissingTopic())
	if err != nil {
		return err
	}
	r.emit(map[string]any{"op": "metadata", "error": errorCodeName(resp.Topics[0].ErrorCode)})
	return nil
}

// errorCodeName names a protocol error code, with null for "no error".
func errorCodeName(code int16) any {
	if err := kerr.ErrorForCode(code); err != nil {
		return errName(err)
	}
	return nil
}

// unknownTopicListOffsets sends ListOffsets straight to a broker: letting
// franz-go route it would answer from metadata without ever asking the
// broker's ListOffsets handler, which is what this scenario is about.
func unknownTopicListOffsets(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	// An empty-topic-list metadata request just learns the broker ids.
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Topics = []kmsg.MetadataRequestTopic{}
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if len(mresp.Brokers) == 0 {
		return errors.New("metadata: no brokers")
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = r.MissingTopic()
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = 0
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	_, err = sendListOffsets(ctx, cl.Broker(int(mresp.Brokers[0].NodeID)), req)
	var name any
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz: unknown-topic-list-offsets: %v\n", err)
		name = errName(err)
	}
	r.emit(map[string]any{"op": "list_offsets", "error": name})
	return nil
}

// unknownPartition relies on the manual partitioner: franz-go refuses a
// partition its metadata does not know before sending anything (a plain
// error, "invalid record partitioning choice"), which PROTOCOL.md maps to
// UNKNOWN_TOPIC_OR_PARTITION, the error a broker gives for that request.
func unknownPartition(ctx context.Context, r *runner) error {
	cl, err := r.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	err = produce(ctx, cl, &kgo.Record{Topic: r.Topic(0), Partition: 5, Value: []byte("v0")})
	var name any
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz: unknown-partition: %v\n", err)
		var ke *kerr.Error
		if errors.As(err, &ke) {
			name = ke.Message
		} else {
			name = kerr.UnknownTopicOrPartition.Message
		}
	}
	r.emit(map[string]any{"op": "produce", "error": name})
	return nil
}

func idempotentProducer(ctx context.Context, r *runner) error {
	cl, err := r.newClient() // franz-go's default: idempotent, acks=all
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Topic: r.Topic(0), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := produce(ctx, cl, recs...); err != nil {
		return err
	}
	got, err := r.consume(ctx, r.Topic(0), 1, len(recs), 15*time.Second)
	for _, rec := range got {
		r.emit(map[string]any{"offset": rec.Offset, "value": protocol.Printable(rec.Value)})
	}
	return err
}

func autoCreate(ctx context.Context, r *runner) error {
	topic := r.Prefix + "-auto-create-new"
	cl, err := r.client(kgo.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := produce(ctx, cl, &kgo.Record{Topic: topic, Value: []byte("v0")}); err != nil {
		return err
	}
	resp, err := metadata(ctx, cl, topic)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("metadata for %s: %w", topic, err)
	}
	n := int32(len(resp.Topics[0].Partitions))
	r.emit(map[string]any{"topic_partitions": n})
	got, err := r.consume(ctx, topic, n, 1, 15*time.Second)
	for _, rec := range got {
		r.emit(map[string]any{"offset": rec.Offset, "value": protocol.Printable(rec.Value)})
	}
	return err
}

// offsetOutOfRange starts consuming at offset 100 with no reset policy:
// franz-go then hands the broker's OFFSET_OUT_OF_RANGE to the poller
// instead of silently jumping to the start or end.
func offsetOutOfRange(ctx context.Context, r *runner) error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < 5; i++ {
		recs = append(recs, &kgo.Record{Topic: r.Topic(0), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := produce(ctx, cl, recs...); err != nil {
		return err
	}
	cons, err := r.client(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.Topic(0): {0: kgo.NewOffset().At(100)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)
	if err != nil {
		return err
	}
	defer cons.Close()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		fetches := cons.PollFetches(pctx)
		if pctx.Err() != nil {
			r.emit(map[string]any{"op": "fetch", "error": nil})
			return nil
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			fmt.Fprintf(os.Stderr, "franz: offset-out-of-range: %v\n", errs[0].Err)
			r.emit(map[string]any{"op": "fetch", "error": errName(errs[0].Err)})
			return nil
		}
		if n := fetches.NumRecords(); n > 0 {
			return fmt.Errorf("fetch from offset 100 returned %d records", n)
		}
	}
}

func emptyTopic(ctx context.Context, r *runner) error {
	got, err := r.consume(ctx, r.Topic(0), 1, -1, 2*time.Second)
	if err != nil {
		return err
	}
	r.emit(map[string]any{"records": len(got)})
	cl, err := r.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := listOffset(ctx, cl, r.Topic(0), 0, -1)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz: empty-topic: %v\n", err)
		r.emit(map[string]any{"query": "latest", "error": errName(err)})
		return nil
	}
	r.emit(map[string]any{"query": "latest", "offset": p.Offset})
	return nil
}
