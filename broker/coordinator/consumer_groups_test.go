package coordinator

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testConsumerGroups(session time.Duration) (*Groups, *fakeClock) {
	clk := &fakeClock{}
	return New(Config{
		MaxSize:                1 << 30,
		ConsumerSessionTimeout: session,
		Topics:                 func() []Topic { return []Topic{{Name: "t", ID: [16]byte{9}, Partitions: 4}} },
		Clock:                  clk,
	}, slog.New(slog.NewTextHandler(io.Discard, nil))), clk
}

func heartbeat848(gs *Groups, member string, epoch int32, instance *string) *kmsg.ConsumerGroupHeartbeatResponse {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = "g", member, epoch, instance
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 60_000
		req.SubscribedTopicNames = []string{"t"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	gs.ConsumerHeartbeat(ConsumerHeartbeatRequest{ConsumerGroupHeartbeatRequest: req, ClientID: "c", ClientHost: "/127.0.0.1"}, resp)
	return resp
}

func assignedCount(resp *kmsg.ConsumerGroupHeartbeatResponse) int {
	if resp.Assignment == nil {
		return -1
	}
	n := 0
	for _, t := range resp.Assignment.Topics {
		n += len(t.Partitions)
	}
	return n
}

// A KIP-848 member that stops heartbeating is removed after the session
// timeout (group.consumer.session.timeout.ms).
func TestConsumerMemberSessionExpiry(t *testing.T) {
	const session = 50 * time.Millisecond
	gs, clk := testConsumerGroups(session)
	r := heartbeat848(gs, "m1", 0, nil)
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || assignedCount(r) != 4 {
		t.Fatalf("join: error %d epoch %d assigned %d", r.ErrorCode, r.MemberEpoch, assignedCount(r))
	}
	clk.Advance(session - time.Millisecond)
	var d kmsg.ConsumerGroupDescribeResponseGroup
	if !gs.DescribeConsumer("g", func([16]byte) string { return "t" }, &d) || len(d.Members) != 1 {
		t.Fatalf("member gone before its session timeout: %+v", d)
	}
	clk.Advance(time.Millisecond)
	if r := heartbeat848(gs, "m1", 1, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after the session expired: error %d", r.ErrorCode)
	}
}

// A static member that leaves with epoch -2 keeps its partitions for its
// replacement with the same instance id; while it is still there, another
// member with that instance id is refused.
func TestConsumerStaticMemberTakeover(t *testing.T) {
	gs, _ := testConsumerGroups(time.Minute)
	inst := kmsg.StringPtr("instance-1")
	r := heartbeat848(gs, "m1", 0, inst)
	if r.ErrorCode != 0 || assignedCount(r) != 4 {
		t.Fatalf("join: error %d assigned %d", r.ErrorCode, assignedCount(r))
	}
	if r := heartbeat848(gs, "m2", 0, inst); r.ErrorCode != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("second member with a live instance id: error %d", r.ErrorCode)
	}
	if r := heartbeat848(gs, "m1", -2, inst); r.ErrorCode != 0 {
		t.Fatalf("static leave: error %d", r.ErrorCode)
	}
	r = heartbeat848(gs, "m3", 0, inst)
	if r.ErrorCode != 0 || assignedCount(r) != 4 {
		t.Fatalf("replacement: error %d assigned %d, want the 4 partitions back", r.ErrorCode, assignedCount(r))
	}
}
