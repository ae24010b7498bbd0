package broker

// In-process Metadata tests: what clients that describe topics rely on.

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInProcessMetadataAuthorizedOperations: asked for (v8+), a topic's
// authorized operations are every topic operation, as Kafka without an
// authorizer answers; kafka-python's describe_topics fails on the "not
// provided" value, which is what the broker answers when not asked.
func TestInProcessMetadataAuthorizedOperations(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "ops", 1, nil)
	for _, asked := range []bool{true, false} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 8
		req.IncludeTopicAuthorizedOperations = asked
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("ops")
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.MetadataResponse)
		want := int32(-2147483648)
		if asked {
			want = 3576 // READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
		}
		if got := resp.Topics[0].AuthorizedOperations; got != want {
			t.Fatalf("asked=%v: authorized operations %d, want %d", asked, got, want)
		}
	}
}

// TestInProcessMetadataByTopicIDWithEmptyName: the Java Admin's
// describeTopics by id sends each id with Name "" (the field's default),
// not null. Kafka looks such topics up by id; answering for the name ""
// instead leaves a zero id in the response, which the Java client rejects.
// An unknown id is UNKNOWN_TOPIC_ID, echoing the id.
func TestInProcessMetadataByTopicIDWithEmptyName(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "byid", 2, nil)
	id := tb.metadata(c, "byid").Topics[0].TopicID
	unknown := [16]byte{1, 2, 3}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	for _, want := range [][16]byte{id, unknown} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic, rt.TopicID = kmsg.StringPtr(""), want
		req.Topics = append(req.Topics, rt)
	}
	resp := c.do(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics in the response, want 2", len(resp.Topics))
	}
	known, missing := resp.Topics[0], resp.Topics[1]
	if known.ErrorCode != 0 || known.TopicID != id || known.Topic == nil || *known.Topic != "byid" || len(known.Partitions) != 2 {
		t.Fatalf("by id: error %d, id %x, name %v, %d partitions; want byid with 2 partitions",
			known.ErrorCode, known.TopicID, known.Topic, len(known.Partitions))
	}
	if missing.ErrorCode != kerr.UnknownTopicID.Code || missing.TopicID != unknown {
		t.Fatalf("unknown id: error %d, id %x; want UNKNOWN_TOPIC_ID for %x", missing.ErrorCode, missing.TopicID, unknown)
	}
}
