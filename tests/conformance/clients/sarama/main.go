// Command sarama is the IBM Sarama client of the conformance gate: it runs
// the scenarios of tests/conformance/scenarios.json against one broker and
// prints what Sarama observes, in the format of
// tests/conformance/PROTOCOL.md.
//
//	sarama --bootstrap HOST:PORT --prefix PREFIX --scenarios a,b,c
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/tests/conformance/clients/protocol"
)

// runner is what every scenario gets: the names of its topics and group,
// and where its observations go.
type runner struct {
	protocol.Names
	out *protocol.Output
}

func main() {
	protocol.Main("sarama", func(n protocol.Names, out *protocol.Output) { (&runner{Names: n, out: out}).run() })
}

// run executes one scenario. Sarama's calls take no context, so the time
// bound is enforced here: a scenario still running after the budget is
// reported as timed out and abandoned (its goroutine may linger until the
// process exits, which the next scenario does not depend on).
func (r *runner) run() {
	name := r.Scenario
	fn, ok := scenarios[name]
	if !ok {
		r.emit(map[string]any{"skip": "unknown scenario"})
		return
	}
	// Observations go through a per-scenario sink so that an abandoned
	// scenario cannot interleave late lines with the next one. (Each
	// scenario has its own runner, so an abandoned one keeps naming its own
	// topics.)
	sk := &sink{}
	done := make(chan error, 1)
	go func() { done <- fn(r, sk.emit) }()

	var err error
	select {
	case err = <-done:
	case <-time.After(protocol.ScenarioBudget):
		err = fmt.Errorf("scenario did not finish in %v: %w", protocol.ScenarioBudget, context.DeadlineExceeded)
	}
	for _, obs := range sk.close() {
		r.emit(obs)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sarama: %s: %v\n", name, err)
		r.emit(map[string]any{"op": "scenario", "error": errName(err)})
	}
}

// emit prints one observation line of the scenario.
func (r *runner) emit(obs map[string]any) { r.out.Emit(r.Scenario, obs) }

// emitFunc is how a scenario reports an observation.
type emitFunc func(map[string]any)

// sink collects one scenario's observations until it is closed; later
// ones (from a scenario abandoned after its time ran out) are dropped.
type sink struct {
	mu     sync.Mutex
	lines  []map[string]any
	closed bool
}

func (s *sink) emit(obs map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.lines = append(s.lines, obs)
	}
}

func (s *sink) close() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.lines
}

// config is the Sarama configuration every scenario starts from.
func config() *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "kafgres-conformance-sarama"
	// The newest Kafka version Sarama knows, so that it picks modern
	// request versions (it does not negotiate above what this implies).
	c.Version = sarama.MaxVersion
	c.Net.DialTimeout = 5 * time.Second
	c.Net.ReadTimeout = 10 * time.Second
	c.Net.WriteTimeout = 10 * time.Second
	c.Metadata.Retry.Max = 5
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	c.Producer.Return.Successes = true // required by the SyncProducer
	c.Producer.Return.Errors = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Timeout = 10 * time.Second
	c.Producer.Retry.Max = 3
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Consumer.MaxWaitTime = 500 * time.Millisecond
	return c
}

func (r *runner) client(c *sarama.Config) (sarama.Client, error) {
	cl, err := sarama.NewClient([]string{r.Bootstrap}, c)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return cl, nil
}

// errName maps an error to the Kafka protocol error name. Sarama hands
// broker errors back as sarama.KError, the protocol's numeric code, whose
// text is Sarama's own prose; franz-go's kerr table knows the protocol
// name for each code. Anything else is a local client failure; its text
// goes to stderr and the observation gets a fixed placeholder.
func errName(err error) string {
	var ke sarama.KError
	if errors.As(err, &ke) {
		if e, ok := kerr.ErrorForCode(int16(ke)).(*kerr.Error); ok {
			return e.Message
		}
		return fmt.Sprintf("UNKNOWN_ERROR_CODE_%d", int16(ke))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "CLIENT_TIMEOUT"
	}
	return "CLIENT_ERROR"
}

// kerrorName names a KError carried in a response, with null for "no
// error".
func kerrorName(code sarama.KError) any {
	if code == sarama.ErrNoError {
		return nil
	}
	return errName(code)
}

// produce sends the messages through a SyncProducer and returns the first
// error. SendMessages keeps per-partition order, so offsets are
// deterministic.
func (r *runner) produce(c *sarama.Config, msgs ...*sarama.ProducerMessage) error {
	p, err := sarama.NewSyncProducer([]string{r.Bootstrap}, c)
	if err != nil {
		return fmt.Errorf("creating producer: %w", err)
	}
	defer p.Close()
	if err := p.SendMessages(msgs); err != nil {
		var perrs sarama.ProducerErrors
		if errors.As(err, &perrs) && len(perrs) > 0 {
			return fmt.Errorf("producing to %s[%d]: %w", perrs[0].Msg.Topic, perrs[0].Msg.Partition, perrs[0].Err)
		}
		return fmt.Errorf("producing: %w", err)
	}
	return nil
}

// valueMessages builds n unkeyed messages with values <stem><i>.
func valueMessages(topic, stem string, n int) []*sarama.ProducerMessage {
	var msgs []*sarama.ProducerMessage
	for i := 0; i < n; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprintf("%s%d", stem, i))})
	}
	return msgs
}

// consume reads partitions 0..partitions-1 of topic from the oldest offset
// until want records arrived or wait elapsed, and returns them sorted by
// (partition, offset). want < 0 means "read for the whole wait".
func (r *runner) consume(c *sarama.Config, topic string, partitions int32, want int, wait time.Duration) ([]*sarama.ConsumerMessage, error) {
	cons, err := sarama.NewConsumer([]string{r.Bootstrap}, c)
	if err != nil {
		return nil, fmt.Errorf("creating consumer: %w", err)
	}
	defer cons.Close()

	msgs := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, partitions)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for p := int32(0); p < partitions; p++ {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("consuming %s[%d]: %w", topic, p, err)
		}
		defer pc.AsyncClose()
		wg.Add(1)
		go func() { // fan the partition's messages and errors into one place
			defer wg.Done()
			for {
				select {
				case m := <-pc.Messages():
					select {
					case msgs <- m:
					case <-stop:
						return
					}
				case e := <-pc.Errors():
					errs <- e
					return
				case <-stop:
					return
				}
			}
		}()
	}

	var recs []*sarama.ConsumerMessage
	timer := time.NewTimer(wait)
	defer timer.Stop()
loop:
	for want < 0 || len(recs) < want {
		select {
		case m := <-msgs:
			recs = append(recs, m)
		case e := <-errs:
			err = fmt.Errorf("consuming %s: %w", topic, e)
			break loop
		case <-timer.C:
			break loop
		}
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

// rawFetch sends one sessionless Fetch for partition 0 of topic at offset
// to the partition leader, bypassing Sarama's consumer, which checks the
// offset against ListOffsets itself and would never ask the broker.
func (r *runner) rawFetch(topic string, offset int64) (*sarama.FetchResponseBlock, error) {
	c := config()
	cl, err := r.client(c)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	leader, err := cl.Leader(topic, 0)
	if err != nil {
		return nil, fmt.Errorf("leader of %s[0]: %w", topic, err)
	}
	req := &sarama.FetchRequest{
		Version:      12, // what Sarama's consumer uses for Kafka >= 2.7
		MaxWaitTime:  500,
		MinBytes:     1,
		MaxBytes:     4_000_000,
		SessionID:    0,
		SessionEpoch: -1, // no fetch session: a one-off full fetch
	}
	req.AddBlock(topic, 0, offset, 2_000_000, -1)
	resp, err := leader.Fetch(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s[0]@%d: %w", topic, offset, err)
	}
	block := resp.GetBlock(topic, 0)
	if block == nil {
		return nil, fmt.Errorf("fetch %s[0]@%d: partition missing from the response", topic, offset)
	}
	return block, nil
}

var scenarios = map[string]func(*runner, emitFunc) error{
	"metadata-topic":             metadataTopic,
	"produce-consume-none":       produceConsume(sarama.CompressionNone),
	"produce-consume-gzip":       produceConsume(sarama.CompressionGZIP),
	"produce-consume-snappy":     produceConsume(sarama.CompressionSnappy),
	"produce-consume-lz4":        produceConsume(sarama.CompressionLZ4),
	"produce-consume-zstd":       produceConsume(sarama.CompressionZSTD),
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
}

// describe fetches topic metadata through the admin client, which asks
// without auto-creating the topic.
func (r *runner) describe(topic string) (*sarama.TopicMetadata, error) {
	c := config()
	c.Metadata.AllowAutoTopicCreation = false
	adm, err := sarama.NewClusterAdmin([]string{r.Bootstrap}, c)
	if err != nil {
		return nil, fmt.Errorf("creating admin: %w", err)
	}
	defer adm.Close()
	tms, err := adm.DescribeTopics([]string{topic})
	if err != nil {
		return nil, fmt.Errorf("describing %s: %w", topic, err)
	}
	if len(tms) != 1 {
		return nil, fmt.Errorf("describing %s: %d topics in the response", topic, len(tms))
	}
	return tms[0], nil
}

func int32s(v []int32) []int32 {
	out := append([]int32{}, v...) // non-nil so an empty list prints [] not null
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func metadataTopic(r *runner, emit emitFunc) error {
	tm, err := r.describe(r.Topic(0))
	if err != nil {
		return err
	}
	if tm.Err != sarama.ErrNoError {
		return fmt.Errorf("describing %s: %w", r.Topic(0), tm.Err)
	}
	parts := tm.Partitions
	sort.Slice(parts, func(i, j int) bool { return parts[i].ID < parts[j].ID })
	for _, p := range parts {
		obs := map[string]any{"partition": p.ID, "leader": p.Leader, "replicas": int32s(p.Replicas), "isr": int32s(p.Isr)}
		if p.Err != sarama.ErrNoError {
			obs["error"] = errName(p.Err)
		}
		emit(obs)
	}
	emit(map[string]any{"topic": r.Topic(0), "partitions": len(parts)})
	return nil
}

// produceConsume produces 20 keyed records with the given codec and reads
// them back from all three partitions. Sarama's default partitioner hashes
// keys with FNV-1a (not murmur2 like the Java client), so the spread
// differs from other clients but is the same against every broker.
func produceConsume(codec sarama.CompressionCodec) func(*runner, emitFunc) error {
	return func(r *runner, emit emitFunc) error {
		const n = 20
		c := config()
		c.Producer.Compression = codec
		var msgs []*sarama.ProducerMessage
		for i := 0; i < n; i++ {
			msgs = append(msgs, &sarama.ProducerMessage{
				Topic: r.Topic(0),
				Key:   sarama.StringEncoder(fmt.Sprintf("k%d", i)),
				Value: sarama.StringEncoder(fmt.Sprintf("v%d", i)),
			})
		}
		if err := r.produce(c, msgs...); err != nil {
			return err
		}
		got, err := r.consume(config(), r.Topic(0), 3, n, 15*time.Second)
		for _, m := range got {
			emit(map[string]any{"partition": m.Partition, "offset": m.Offset, "key": protocol.Printable(m.Key), "value": protocol.Printable(m.Value)})
		}
		return err
	}
}

func nullKeys(r *runner, emit emitFunc) error {
	msgs := valueMessages(r.Topic(0), "n", 5) // Key left nil: a null key
	if err := r.produce(config(), msgs...); err != nil {
		return err
	}
	got, err := r.consume(config(), r.Topic(0), 1, len(msgs), 15*time.Second)
	for _, m := range got {
		emit(map[string]any{"offset": m.Offset, "key": protocol.Printable(m.Key), "value": protocol.Printable(m.Value)})
	}
	return err
}

func headers(r *runner, emit emitFunc) error {
	sets := [][]sarama.RecordHeader{
		{{Key: []byte("h1"), Value: []byte("a")}},
		{{Key: []byte("h2"), Value: nil}}, // a null header value, not an empty one
		{{Key: []byte("h1"), Value: []byte("x")}, {Key: []byte("h1"), Value: []byte("y")}},
	}
	msgs := valueMessages(r.Topic(0), "v", len(sets))
	for i, hs := range sets {
		msgs[i].Headers = hs
	}
	if err := r.produce(config(), msgs...); err != nil {
		return err
	}
	got, err := r.consume(config(), r.Topic(0), 1, len(msgs), 15*time.Second)
	for _, m := range got {
		hs := [][]any{} // print [] rather than null for a record without headers
		for _, h := range m.Headers {
			hs = append(hs, []any{protocol.Printable(h.Key), protocol.Printable(h.Value)})
		}
		emit(map[string]any{"offset": m.Offset, "value": protocol.Printable(m.Value), "headers": hs})
	}
	return err
}

// timestamps reads the records back with a raw Fetch: Sarama's
// ConsumerMessage carries the timestamp but not its type (CreateTime or
// LogAppendTime), which only the record batch attributes tell.
func timestamps(r *runner, emit emitFunc) error {
	msgs := valueMessages(r.Topic(0), "v", 3)
	for i, ms := range []int64{1700000000000, 1700000000500, 1700000001000} {
		msgs[i].Timestamp = time.UnixMilli(ms)
	}
	if err := r.produce(config(), msgs...); err != nil {
		return err
	}
	block, err := r.rawFetch(r.Topic(0), 0)
	if err != nil {
		return err
	}
	if block.Err != sarama.ErrNoError {
		return fmt.Errorf("fetch %s[0]: %w", r.Topic(0), block.Err)
	}
	for _, set := range block.RecordsSet {
		b := set.RecordBatch
		if b == nil {
			return errors.New("fetch returned a legacy message set, not a record batch")
		}
		for _, rec := range b.Records {
			ts, kind := b.FirstTimestamp.Add(rec.TimestampDelta), "CreateTime"
			if b.LogAppendTime {
				ts, kind = b.MaxTimestamp, "LogAppendTime" // the broker's time applies to the whole batch
			}
			emit(map[string]any{"offset": b.FirstOffset + rec.OffsetDelta, "timestamp": ts.UnixMilli(), "timestamp_type": kind})
		}
	}
	return nil
}

// bigConfig lifts Sarama's own message limit (default 1,000,000 bytes) to
// 2,000,000 so that the broker, not the client, judges record size.
// sarama.MaxRequestSize already defaults to 100 MiB, well above it.
func bigConfig() *sarama.Config {
	c := config()
	c.Producer.MaxMessageBytes = 2_000_000
	c.Consumer.Fetch.Default = 2_000_000
	return c
}

func largeRecord(r *runner, emit emitFunc) error {
	msg := &sarama.ProducerMessage{Topic: r.Topic(0), Value: sarama.ByteEncoder(bytes.Repeat([]byte("x"), 1_000_000))}
	if err := r.produce(bigConfig(), msg); err != nil {
		return err
	}
	got, err := r.consume(bigConfig(), r.Topic(0), 1, 1, 15*time.Second)
	for _, m := range got {
		emit(map[string]any{"offset": m.Offset, "value_len": len(m.Value)})
	}
	return err
}

func tooLargeRecord(r *runner, emit emitFunc) error {
	msg := &sarama.ProducerMessage{Topic: r.Topic(0), Value: sarama.ByteEncoder(bytes.Repeat([]byte("x"), 1_100_000))}
	err := r.produce(bigConfig(), msg)
	if err == nil {
		emit(map[string]any{"op": "produce", "error": nil})
		return nil
	}
	fmt.Fprintf(os.Stderr, "sarama: too-large-record: %v\n", err)
	emit(map[string]any{"op": "produce", "error": errName(err)})
	return nil
}

// produceAt writes one record per timestamp (value v<i>) to the topic.
func (r *runner) produceAt(topic string, millis []int64) error {
	msgs := valueMessages(topic, "v", len(millis))
	for i, ms := range millis {
		msgs[i].Timestamp = time.UnixMilli(ms)
	}
	return r.produce(config(), msgs...)
}

func listOffsets(r *runner, emit emitFunc) error {
	var millis []int64
	for i := int64(0); i < 5; i++ {
		millis = append(millis, 1700000000000+1000*i)
	}
	if err := r.produceAt(r.Topic(0), millis); err != nil {
		return err
	}
	cl, err := r.client(config())
	if err != nil {
		return err
	}
	defer cl.Close()
	queries := []struct {
		name      string
		timestamp int64
	}{
		{"earliest", sarama.OffsetOldest},
		{"latest", sarama.OffsetNewest},
		{"timestamp:1700000002500", 1700000002500},
		{"timestamp:1800000000000", 1800000000000},
	}
	for _, q := range queries {
		off, err := cl.GetOffset(r.Topic(0), 0, q.timestamp)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sarama: list-offsets %s: %v\n", q.name, err)
			emit(map[string]any{"query": q.name, "error": errName(err)})
			continue
		}
		emit(map[string]any{"query": q.name, "offset": off})
	}
	return nil
}

// listOffsetsMaxTimestamp: MAX_TIMESTAMP (-3) needs ListOffsets v7, and
// Sarama's OffsetRequest stops at v6.
func listOffsetsMaxTimestamp(r *runner, emit emitFunc) error {
	emit(map[string]any{"skip": "Sarama's ListOffsets request stops at v6; MAX_TIMESTAMP needs v7"})
	return nil
}

func unknownTopicMetadata(r *runner, emit emitFunc) error {
	tm, err := r.describe(r.MissingTopic())
	if err != nil {
		return err
	}
	emit(map[string]any{"op": "metadata", "error": kerrorName(tm.Err)})
	return nil
}

// unknownTopicListOffsets sends ListOffsets straight to a broker: Sarama's
// GetOffset would first look the topic up in metadata and fail there,
// never asking the broker's ListOffsets handler.
func unknownTopicListOffsets(r *runner, emit emitFunc) error {
	c := config()
	cl, err := r.client(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	broker, err := cl.Controller() // any broker will do; this one is connected
	if err != nil {
		return fmt.Errorf("finding a broker: %w", err)
	}
	req := sarama.NewOffsetRequest(c.Version)
	req.AddBlock(r.MissingTopic(), 0, sarama.OffsetNewest, 1)
	resp, err := broker.GetAvailableOffsets(req)
	if err != nil {
		return fmt.Errorf("list offsets: %w", err)
	}
	block := resp.GetBlock(r.MissingTopic(), 0)
	if block == nil {
		return errors.New("list offsets: partition missing from the response")
	}
	emit(map[string]any{"op": "list_offsets", "error": kerrorName(block.Err)})
	return nil
}

// unknownPartition uses the manual partitioner: Sarama refuses a partition
// its metadata does not know before sending anything (ErrInvalidPartition,
// a plain error), which PROTOCOL.md maps to UNKNOWN_TOPIC_OR_PARTITION, the
// error a broker gives for that request.
func unknownPartition(r *runner, emit emitFunc) error {
	c := config()
	c.Producer.Partitioner = sarama.NewManualPartitioner
	err := r.produce(c, &sarama.ProducerMessage{Topic: r.Topic(0), Partition: 5, Value: sarama.StringEncoder("v0")})
	var name any
	switch {
	case err == nil:
	case errors.Is(err, sarama.ErrInvalidPartition):
		fmt.Fprintf(os.Stderr, "sarama: unknown-partition: %v\n", err)
		name = kerr.UnknownTopicOrPartition.Message
	default:
		fmt.Fprintf(os.Stderr, "sarama: unknown-partition: %v\n", err)
		name = errName(err)
	}
	emit(map[string]any{"op": "produce", "error": name})
	return nil
}

func idempotentProducer(r *runner, emit emitFunc) error {
	c := config()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1 // Sarama insists on it for idempotence
	msgs := valueMessages(r.Topic(0), "v", 50)
	if err := r.produce(c, msgs...); err != nil {
		return err
	}
	got, err := r.consume(config(), r.Topic(0), 1, len(msgs), 15*time.Second)
	for _, m := range got {
		emit(map[string]any{"offset": m.Offset, "value": protocol.Printable(m.Value)})
	}
	return err
}

func autoCreate(r *runner, emit emitFunc) error {
	topic := r.Prefix + "-auto-create-new"
	c := config()
	c.Metadata.AllowAutoTopicCreation = true // Sarama's default, stated because it is the point
	if err := r.produce(c, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("v0")}); err != nil {
		return err
	}
	tm, err := r.describe(topic)
	if err != nil {
		return err
	}
	if tm.Err != sarama.ErrNoError {
		return fmt.Errorf("describing %s: %w", topic, tm.Err)
	}
	n := int32(len(tm.Partitions))
	emit(map[string]any{"topic_partitions": n})
	got, err := r.consume(config(), topic, n, 1, 15*time.Second)
	for _, m := range got {
		emit(map[string]any{"offset": m.Offset, "value": protocol.Printable(m.Value)})
	}
	return err
}

// offsetOutOfRange uses a raw Fetch at offset 100: Sarama's consumer would
// compare 100 with the ListOffsets answers and fail locally with the same
// name, without the broker's Fetch handler ever seeing the offset.
func offsetOutOfRange(r *runner, emit emitFunc) error {
	if err := r.produce(config(), valueMessages(r.Topic(0), "v", 5)...); err != nil {
		return err
	}
	block, err := r.rawFetch(r.Topic(0), 100)
	if err != nil {
		return err
	}
	emit(map[string]any{"op": "fetch", "error": kerrorName(block.Err)})
	return nil
}

func emptyTopic(r *runner, emit emitFunc) error {
	got, err := r.consume(config(), r.Topic(0), 1, -1, 2*time.Second)
	if err != nil {
		return err
	}
	emit(map[string]any{"records": len(got)})
	cl, err := r.client(config())
	if err != nil {
		return err
	}
	defer cl.Close()
	off, err := cl.GetOffset(r.Topic(0), 0, sarama.OffsetNewest)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sarama: empty-topic: %v\n", err)
		emit(map[string]any{"query": "latest", "error": errName(err)})
		return nil
	}
	emit(map[string]any{"query": "latest", "offset": off})
	return nil
}
