package broker

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// retain deletes segments past their topic's retention.ms/retention.bytes
// every RetentionCheckInterval, as Kafka's log cleaner thread does for
// cleanup.policy=delete.
//
// Transactions change nothing here, as in Kafka: UnifiedLog.deletableSegments
// only asks that a segment end at or below the high watermark, whatever
// transactions are open, and deleteSegments removes each segment's
// .txnindex with its log (segment.removeSegmentFiles). An open transaction
// whose first batches are deleted keeps the last stable offset at the new
// log start offset (lastStableOffset clamps it there).
func (b *Broker) retain(ctx context.Context) {
	every(ctx, b.cfg.RetentionCheckInterval, b.applyRetention)
}

func (b *Broker) applyRetention(now time.Time) {
	for _, t := range b.catalog.topics() {
		s := b.topicSettings(t)
		if !strings.Contains(s.CleanupPolicy, "delete") {
			continue
		}
		for _, p := range t.parts {
			n, err := p.log.ApplyRetention(segment.Retention{Ms: s.RetentionMs, Bytes: s.RetentionBytes}, now)
			switch {
			case errors.Is(err, segment.ErrClosed): // dropped meanwhile
			case err != nil:
				// Nothing acknowledged is at risk: the next check retries.
				b.log.Error("apply retention", "topic", t.name, "partition", p.index, "err", err)
			case n > 0:
				b.log.Info("retention deleted segments", "topic", t.name, "partition", p.index, "segments", n, "log_start_offset", p.log.LogStartOffset())
				b.mirror.mark(p)
			}
		}
	}
}

// applySegmentLimits gives every open segmented log its topic's
// segment.bytes and segment.ms; called after each catalog reload, so an
// altered config takes effect at the next append.
func (b *Broker) applySegmentLimits(topics []*topic) {
	for _, t := range topics {
		s := b.topicSettings(t)
		for _, p := range t.parts {
			if l, ok := p.log.(segmentedLog); ok {
				l.SetSegmentLimits(s.SegmentBytes, s.SegmentMs)
			}
		}
	}
}
