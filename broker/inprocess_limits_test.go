package broker

// In-process tests of the limits on client input at the Kafka port (issue
// #10, findings 5 and 6): hostile frames and batches, built by hand and
// sent over TCP. The broker runs in the test's process, so its memory is
// the process's, measured from a baseline taken just before.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// gzipBomb is a gzip batch of 900 records of 1 MiB of zeros each, every
// one well formed: 900 MiB of records in under 1 MB. Concatenated gzip
// members (a record's small head, then the same compressed megabyte of
// zeros) keep it cheap to build.
func gzipBomb() (batch []byte, inflated int64) {
	const n, valueLen = 900, 1 << 20
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	gz := func(b []byte) []byte {
		buf.Reset()
		w.Reset(&buf)
		w.Write(b)
		w.Close()
		return bytes.Clone(buf.Bytes())
	}
	zeros := gz(append(make([]byte, valueLen), 0)) // the value, then a header count of 0
	var section []byte
	for i := range n {
		head := []byte{0} // attributes
		head = binary.AppendVarint(head, 0)
		head = binary.AppendVarint(head, int64(i))
		head = binary.AppendVarint(head, -1) // null key
		head = binary.AppendVarint(head, valueLen)
		r := append(binary.AppendVarint(nil, int64(len(head)+valueLen+1)), head...)
		section = append(section, gz(r)...)
		section = append(section, zeros...)
		inflated += int64(len(r) + valueLen + 1)
	}
	s := plainSpec(nil)
	s.attributes, s.lastOffsetDelta, s.numRecords, s.records = codecGzip, n-1, n, section
	return s.build(), inflated
}

// produceFrame is a Produce v12 request frame whose one partition carries
// n bytes of zeros as records: as large as a frame may be, and answered
// (MESSAGE_TOO_LARGE or CORRUPT_MESSAGE) rather than stored.
func produceFrame(topic string, correlation int32, n int) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 12, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = make([]byte, n)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return frame(encodeRequest(req, correlation, "m"))
}

// readResponse reads one response frame and returns its correlation id.
func readResponse(r io.Reader) (int32, error) {
	var head [8]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, err
	}
	n := int64(binary.BigEndian.Uint32(head[:4]))
	if n < 4 {
		return 0, fmt.Errorf("response frame of %d bytes", n)
	}
	if _, err := io.CopyN(io.Discard, r, n-4); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(head[4:])), nil
}

// waitClosed waits up to timeout for the broker to close nc.
func waitClosed(t *testing.T, nc net.Conn, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	nc.SetReadDeadline(start.Add(timeout))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", timeout)
	}
	return time.Since(start)
}

// procStatusKB is a field of /proc/self/status (VmRSS, VmHWM) in KiB.
func procStatusKB(t *testing.T, field string) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s in /proc/self/status: %v", field, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// memWatch measures the process's resident memory against a baseline.
type memWatch struct {
	base int64 // KiB resident when the watch began
}

// watchMemory collects what earlier tests left and resets the kernel's
// peak (VmHWM) to what is resident now. It returns nil where that cannot
// be done (not Linux), or where resident memory is not the broker's to
// answer for: the race detector shadows every byte the broker touches.
func watchMemory(t *testing.T) *memWatch {
	t.Helper()
	if raceEnabled {
		t.Log("race detector on: memory not measured")
		return nil
	}
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("memory not measured: reset the peak: %v", err)
		return nil
	}
	return &memWatch{base: procStatusKB(t, "VmRSS")}
}

// peakGrowth is how far above the baseline resident memory went, in KiB.
func (w *memWatch) peakGrowth(t *testing.T) int64 { return procStatusKB(t, "VmHWM") - w.base }

// growth is how far above the baseline resident memory is now, in KiB.
func (w *memWatch) growth(t *testing.T) int64 { return procStatusKB(t, "VmRSS") - w.base }

// TestInProcessGzipBombRefused (finding 5): a 1 MB gzip batch of
// well-formed records that inflates to 900 MiB is refused with
// INVALID_RECORD without the broker holding it, a ListOffsets by
// timestamp stays cheap, and the broker keeps serving.
func TestInProcessGzipBombRefused(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "bomb", 1, nil)

	bomb, inflated := gzipBomb()
	t.Logf("bomb: %d bytes inflating to %d", len(bomb), inflated)
	mem := watchMemory(t)
	start := time.Now()
	p := c.produceAt(12, "bomb", bomb)
	if p.ErrorCode != kerr.InvalidRecord.Code {
		t.Fatalf("bomb answered %v, want INVALID_RECORD", kerr.ErrorForCode(p.ErrorCode))
	}
	t.Logf("refused in %v: %s", time.Since(start).Round(time.Millisecond), deref(p.ErrorMessage))
	if p := tb.listOffset(c, "bomb", 0); p.ErrorCode != 0 || p.Offset != -1 {
		t.Fatalf("ListOffsets by timestamp: %v offset %d, want no record", kerr.ErrorForCode(p.ErrorCode), p.Offset)
	}
	if mem != nil {
		grew := mem.peakGrowth(t)
		t.Logf("peak %d MiB above the baseline", grew>>10)
		if grew > 256<<10 {
			t.Fatalf("broker peaked at %d MiB more for a refused bomb", grew>>10)
		}
	}
	ok := c.produceAt(12, "bomb", plainSpec([]rec{{value: []byte("after")}}).build())
	if ok.ErrorCode != 0 || ok.BaseOffset != 0 {
		t.Fatalf("produce after the bomb: %v offset %d", kerr.ErrorForCode(ok.ErrorCode), ok.BaseOffset)
	}
	if p := tb.listOffset(c, "bomb", 0); p.ErrorCode != 0 || p.Offset != 0 {
		t.Fatalf("ListOffsets by timestamp after: %v offset %d, want 0", kerr.ErrorForCode(p.ErrorCode), p.Offset)
	}
}

// TestInProcessLargeFramesBoundedAndReleased (finding 6): eight
// connections each send a 100 MiB frame at once. The broker reads them
// within its request budget (queued.max.request.bytes, 256 MiB) rather
// than all at once, answers each, and gives the memory back while the
// connections stay open; each connection still works after.
func TestInProcessLargeFramesBoundedAndReleased(t *testing.T) {
	tb := startTestBroker(t)
	c := tb.dial(t)
	tb.createTopic(t, c, "big", 1, nil)
	frame := produceFrame("big", 7, 100<<20-200)
	if len(frame)-4 > 100<<20 {
		t.Fatalf("frame of %d bytes over socket.request.max.bytes", len(frame)-4)
	}
	mem := watchMemory(t) // the frame, which this test holds, is in the baseline
	var (
		wg    sync.WaitGroup
		conns = make([]net.Conn, 8)
		errs  = make([]error, len(conns))
	)
	for i := range conns {
		nc, err := net.Dial("tcp", tb.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns[i] = nc
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc.SetDeadline(time.Now().Add(2 * time.Minute))
			if _, err := nc.Write(frame); err != nil {
				errs[i] = err
				return
			}
			if corr, err := readResponse(nc); err != nil || corr != 7 {
				errs[i] = fmt.Errorf("response: correlation %d, %v", corr, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if mem != nil {
		grew := mem.peakGrowth(t)
		t.Logf("peak %d MiB above the baseline", grew>>10)
		if grew > 512<<10 {
			t.Fatalf("broker peaked at %d MiB more reading 8 frames of 100 MiB", grew>>10)
		}
	}
	// The connections are still open (and idle): their memory must go.
	eventually(t, 20*time.Second, "the request budget and the kept frame buffers released", func() bool {
		tb.frames.mu.Lock()
		held := tb.frames.bigHeld
		tb.frames.mu.Unlock()
		return held == 0 && tb.frameBudget.inUse() == 0
	})
	if mem != nil {
		eventually(t, 20*time.Second, "resident memory back to its baseline", func() bool { return mem.growth(t) < 100<<10 })
	}
	// Each connection still works.
	for _, nc := range conns {
		if _, err := nc.Write(produceFrame("big", 8, 10)); err != nil {
			t.Fatal(err)
		}
		if corr, err := readResponse(nc); err != nil || corr != 8 {
			t.Fatalf("second request: %d %v", corr, err)
		}
	}
}

// apiVersionsFrame is an ApiVersions v0 request.
func apiVersionsFrame(correlation int32) []byte {
	b := []byte{0, 0, 0, 0, 0, 18, 0, 0}
	b = binary.BigEndian.AppendUint32(b, uint32(correlation))
	b = append(b, 0xff, 0xff) // null client id
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// TestInProcessIdleConnectionsClosed (finding 6): connections.max.idle.ms
// closes a connection that sends nothing, before or after a request.
func TestInProcessIdleConnectionsClosed(t *testing.T) {
	tb := startTestBroker(t, func(c *Config) { c.ConnectionsMaxIdle = time.Second })
	silent, err := net.Dial("tcp", tb.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	used, err := net.Dial("tcp", tb.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer used.Close()
	used.Write(apiVersionsFrame(3))
	if corr, err := readResponse(used); err != nil || corr != 3 {
		t.Fatalf("ApiVersions: %d %v", corr, err)
	}
	for name, nc := range map[string]net.Conn{"silent": silent, "after a request": used} {
		took := waitClosed(t, nc, 15*time.Second)
		t.Logf("%s: closed after %v", name, took.Round(100*time.Millisecond))
	}
}

// TestInProcessStalledFrameDropped (finding 6): a frame whose body stops
// arriving is dropped after the request read timeout, and the request
// budget it held (here all of queued.max.request.bytes) goes back to other
// clients, whose requests waited for it meanwhile.
func TestInProcessStalledFrameDropped(t *testing.T) {
	const readTimeout = 2 * time.Second
	tb := startTestBroker(t, func(c *Config) {
		c.RequestReadTimeout = readTimeout
		c.QueuedMaxRequestBytes = 100 << 20
	})
	c := tb.dial(t)
	tb.createTopic(t, c, "stall", 1, nil)
	if p := c.produceAt(12, "stall", plainSpec([]rec{{value: []byte("before")}}).build()); p.ErrorCode != 0 {
		t.Fatalf("produce before: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	staller, err := net.Dial("tcp", tb.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer staller.Close()
	claim := binary.BigEndian.AppendUint32(nil, 100<<20) // all of the budget
	stalled := time.Now()
	staller.Write(append(claim, make([]byte, 1000)...))
	eventually(t, 10*time.Second, "the stalled frame reserving the whole budget", func() bool {
		return tb.frameBudget.inUse() == 100<<20
	})

	start := time.Now()
	p := c.produceAt(12, "stall", plainSpec([]rec{{value: []byte("after")}}).build())
	waited := time.Since(start)
	if p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("produce while stalled: %v offset %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	// The broker starts the read timeout once the budget is reserved,
	// after the frame's size was sent: a produce that did not wait for the
	// stalled frame to be dropped would be answered sooner.
	if since := time.Since(stalled); since < readTimeout {
		t.Fatalf("a request went through %v after a stalled frame took the whole budget, before its %v read timeout", since, readTimeout)
	}
	waitClosed(t, staller, 15*time.Second)
	t.Logf("stalled frame dropped within %v; the produce waited %v", time.Since(stalled).Round(100*time.Millisecond), waited.Round(100*time.Millisecond))
}
