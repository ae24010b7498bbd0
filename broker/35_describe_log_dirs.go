package broker

// DescribeLogDirs: v1-5
//
// Behavior:
//   - one log directory, kafgres.data_directory, with the size on disk of
//     every requested partition (all partitions when topics is null);
//     unknown topics and partitions are left out, as Kafka does
//   - total and usable bytes come from the file system holding the
//     directory (statfs)
//   - offset lag is 0 and no partition is a future replica: there is no
//     replica movement between directories
//
// Version notes:
//   - v1: same as v0; v2: flexible; v3: top-level error code;
//     v4: total and usable bytes; v5: cordoned flag (never set)

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeLogDirs(ctx context.Context, b *Broker, _ *conn, req *kmsg.DescribeLogDirsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.data.Abs()
	if total, usable, err := b.data.Usage(); err == nil {
		dir.TotalBytes, dir.UsableBytes = total, usable
	}
	add := func(t *topic, indexes []int32) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.name
		for _, i := range indexes {
			p := t.partition(i)
			if p == nil {
				continue
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition, dp.Size = i, p.log.Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	if req.Topics == nil {
		ts := b.catalog.topics()
		sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
		for _, t := range ts {
			add(t, allPartitions(t))
		}
	} else {
		for _, rt := range req.Topics {
			if t := b.catalog.lookup(ctx, rt.Topic); t != nil {
				add(t, rt.Partitions)
			}
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}

func allPartitions(t *topic) []int32 {
	out := make([]int32, len(t.parts))
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// deniedDescribeLogDirs: KafkaApis checks DESCRIBE on the cluster itself
// and answers the error code alone, no message, no results.
func deniedDescribeLogDirs(r kmsg.Request, code int16, _ *string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.ErrorCode = code
	return resp
}
