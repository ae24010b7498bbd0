package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedRequests are requests as clients send them: one of every served key
// at its lowest and highest version, and some with content.
func seedRequests() []kmsg.Request {
	var out []kmsg.Request
	for _, a := range servedAPIs() {
		for _, v := range []int16{a.min, a.max} {
			r := kmsg.RequestForKey(a.key)
			r.SetVersion(v)
			out = append(out, r)
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("payments")}, {TopicID: [16]byte{1, 2, 3}}}
	out = append(out, md)

	prod := kmsg.NewPtrProduceRequest()
	prod.Version, prod.Acks, prod.TimeoutMillis = 12, -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "payments"
	for i, b := range seedBatches() {
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = int32(i), b
		pt.Partitions = append(pt.Partitions, pp)
	}
	prod.Topics = append(prod.Topics, pt)
	out = append(out, prod)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxWaitMillis, fetch.MaxBytes = 16, 500, 50<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = [16]byte{9}
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 42, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	out = append(out, fetch)

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 9, "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 45000, 60000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 3, 0, 0, 0, 1, 0, 1, 't'}}}
	out = append(out, join)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation, commit.MemberID = 9, "g", 3, "m-1"
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "payments"
	ct.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 10, Metadata: kmsg.StringPtr("m")}}
	commit.Topics = append(commit.Topics, ct)
	out = append(out, commit)

	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.Version = 1
	alter.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "payments",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}}}
	out = append(out, alter)
	return out
}

// FuzzReadFrame: whatever bytes a peer sends, the frame reader returns
// frames of exactly the announced size within [8, max], or an error, and
// never holds more than the frame.
func FuzzReadFrame(f *testing.F) {
	var pipelined []byte
	for i, r := range seedRequests() {
		fr := frame(encodeRequest(r, int32(i), "fuzz"))
		f.Add(fr)
		pipelined = append(pipelined, fr...)
	}
	f.Add(pipelined)
	f.Add([]byte{0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0})
	f.Add([]byte{0, 0x10, 0, 0, 1, 2})
	f.Add(binary.BigEndian.AppendUint32(nil, 64<<10))

	// Small, so that mutated sizes cost no large buffers; the code paths
	// are the same at any cap (frames above the pooled size: TestFrameBuffers).
	const max = 64 << 10
	var bufs frameBuffers
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		consumed := 0
		for {
			frame, lent, err := readFrame(r, max, &bufs)
			if err != nil {
				bufs.release(frame, lent)
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errFrame) {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			n := int(binary.BigEndian.Uint32(in[consumed:]))
			if len(frame) != n || n < 8 || n > max || !bytes.Equal(frame, in[consumed+4:consumed+4+n]) {
				t.Fatalf("frame of %d bytes for an announced %d", len(frame), n)
			}
			consumed += 4 + n
			bufs.release(frame, lent)
		}
	})
}

// FuzzParseRequest: the path from frame bytes to the kmsg request a
// handler is dispatched with. Whatever the frame, parsing returns a served
// key and version with its decoded body (which encodes and decodes again
// to the same bytes), an ApiVersions to answer, or errFrame.
func FuzzParseRequest(f *testing.F) {
	for i, r := range seedRequests() {
		f.Add(encodeRequest(r, int32(i), "fuzz"))
	}
	f.Add([]byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 1, 0, 1, 'x', 0})
	apis := servedAPIs()
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := parseRequest(in, apis)
		if err != nil {
			if !errors.Is(err, errFrame) {
				t.Fatalf("error not errFrame: %v", err)
			}
			return
		}
		a, ok := apis.lookup(req.key)
		if !ok {
			t.Fatalf("parsed unserved key %d", req.key)
		}
		if req.body == nil {
			if req.key != 18 {
				t.Fatalf("key %d v%d parsed without a body", req.key, req.version)
			}
			return
		}
		if req.version < a.min || req.version > a.max || req.body.Key() != req.key || req.body.GetVersion() != req.version {
			t.Fatalf("key %d v%d outside [%d, %d] or body %d v%d", req.key, req.version, a.min, a.max, req.body.Key(), req.body.GetVersion())
		}
		// Re-encoding is canonical (unknown tags and varint widths
		// normalised), so compare two round trips rather than the input.
		once := encodeRequest(req.body, req.correlation, req.clientID)
		again, err := parseRequest(once, apis)
		if err != nil {
			t.Fatalf("re-encoded request does not parse: %v", err)
		}
		if twice := encodeRequest(again.body, again.correlation, again.clientID); !bytes.Equal(once, twice) {
			t.Fatalf("round trip differs")
		}
	})
}
