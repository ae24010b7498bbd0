package segment

// TEMPORARY: removed when wt-storage is merged.

import "time"


type Retention struct{ Ms, Bytes int64 }

func (l *Log) DeleteRecordsBefore(offset int64) (int64, error)             { return l.LogStartOffset(), nil }
func (l *Log) ApplyRetention(r Retention, now time.Time) (int, error)      { return 0, nil }
func (l *Log) SetSegmentLimits(segmentBytes, segmentMs int64)              {}
func (l *Log) Size() int64                                                 { return 0 }
func SetLogAppendTime(batch []byte, ts int64) error                        { return nil }
