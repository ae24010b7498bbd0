// Package hostile builds the inputs an attacker sends a broker, for the
// tests and benchmarks that check kafgres survives them (docs/security.md):
// raw frames of any size, and compressed batches that inflate far beyond
// their size on the wire.
package hostile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Recrc fixes a v2 batch's length and CRC after it was built or edited.
func Recrc(b []byte) []byte {
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// Gzip is b as one gzip member.
func Gzip(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// GzipBomb is a gzip batch of 900 records of 1 MiB of zeros each, every
// one well formed: 900 MiB of records in under 1 MB. Concatenated gzip
// members (a record's small head, then the same compressed megabyte of
// zeros) keep it cheap to build.
func GzipBomb() (batch []byte, inflated int64) {
	const n, valueLen = 900, 1 << 20
	zeros := Gzip(append(make([]byte, valueLen), 0)) // the value, then a header count of 0
	var section []byte
	for i := range n {
		head := []byte{0} // attributes
		head = binary.AppendVarint(head, 0)
		head = binary.AppendVarint(head, int64(i))
		head = binary.AppendVarint(head, -1) // null key
		head = binary.AppendVarint(head, valueLen)
		rec := append(binary.AppendVarint(nil, int64(len(head)+valueLen+1)), head...)
		section = append(section, Gzip(rec)...)
		section = append(section, zeros...)
		inflated += int64(len(rec) + valueLen + 1)
	}
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 1, LastOffsetDelta: n - 1,
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: n, Records: section}
	return Recrc(rb.AppendTo(nil)), inflated
}

// ProduceFrame is a Produce v12 request frame whose one partition carries
// n bytes of zeros as records: as large as a frame may be, and answered
// (MESSAGE_TOO_LARGE or CORRUPT_MESSAGE) rather than stored.
func ProduceFrame(topic string, correlation int32, n int) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 12, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rt.Partitions = append(rt.Partitions, kmsg.NewProduceRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	head := []byte{0, 0, 0, 0, 0, 0, 0, 12}
	head = binary.BigEndian.AppendUint32(head, uint32(correlation))
	head = append(head, 0, 1, 'm', 0) // client id "m", no header tags
	body := req.AppendTo(head)
	// The records field is last but the partition's, topic's and
	// request's tag sections: widen it from empty (one byte) to n bytes.
	frame := append([]byte{}, body[:len(body)-4]...)
	frame = binary.AppendUvarint(frame, uint64(n)+1)
	frame = append(frame, make([]byte, n)...)
	frame = append(frame, 0, 0, 0)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}

// ReadResponse reads one response frame and returns its correlation id.
func ReadResponse(r io.Reader) (int32, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return 0, err
	}
	var corr [4]byte
	n := int64(binary.BigEndian.Uint32(size[:]))
	if n < 4 {
		return 0, fmt.Errorf("response frame of %d bytes", n)
	}
	if _, err := io.ReadFull(r, corr[:]); err != nil {
		return 0, err
	}
	if _, err := io.CopyN(io.Discard, r, n-4); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(corr[:])), nil
}

// StatusKB is a field of /proc/PID/status in KiB (VmRSS, VmHWM).
func StatusKB(pid int, field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// ProduceRequest is a Produce request (acks=all) carrying records, as
// sent, to partition 0 of topic: for batches no client library would build.
func ProduceRequest(topic string, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
