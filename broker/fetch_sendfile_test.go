package broker

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestWriteFileFetch: a Fetch response whose records are sent from the
// segment files is, byte for byte, the frame kmsg encodes with the records
// in memory, for every version served (the length prefixes of flexible
// and older versions differ), over a real TCP connection (sendfile) and
// over one that is not a socket (copied).
func TestWriteFileFetch(t *testing.T) {
	l := archiveLog(t, t.TempDir()) // ten batches in four segments
	defer l.Close()
	nonce := make([]byte, markerNonceLen)
	rand.Read(nonce)

	// build makes the same response twice: records as markers of files
	// (files set), or in memory.
	build := func(version int16, files *fetchFiles) *kmsg.FetchResponse {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = version
		resp.SessionID = 7
		reads := []struct {
			from     int64
			maxBytes int
		}{{0, 1 << 20}, {4, 1}, {9, 1 << 20}}
		for ti, name := range []string{"t\x00" + string(nonce[:6]), "other"} {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = name
			rt.TopicID[0] = byte(ti + 1)
			for pi, rd := range reads {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = int32(pi), 10, 10, 0
				if pi == 1 {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = 3, 4
					sp.AbortedTransactions = append(sp.AbortedTransactions, at)
				}
				recs, ok, err := l.ReadFile(rd.from, rd.maxBytes, 10)
				if err != nil || !ok || recs.Len() == 0 {
					t.Fatalf("ReadFile(%d): %v, %v", rd.from, ok, err)
				}
				if files != nil && (ti+pi)%2 == 0 {
					sp.RecordBatches = files.add(recs)
				} else {
					if sp.RecordBatches, err = recs.AppendTo(nil); err != nil {
						t.Fatal(err)
					}
					recs.Release()
				}
				rt.Partitions = append(rt.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for v := int16(4); v <= 18; v++ {
		want := appendResponse(nil, 42, build(v, nil))
		for _, overTCP := range []bool{true, false} {
			files := &fetchFiles{nonce: nonce}
			r := &fileFetchResponse{FetchResponse: build(v, files), files: files}
			if len(files.recs) < 3 {
				t.Fatalf("v%d: %d partitions from files", v, len(files.recs))
			}
			var server, client net.Conn
			if overTCP {
				accepted := make(chan net.Conn)
				go func() {
					c, _ := ln.Accept()
					accepted <- c
				}()
				if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
					t.Fatal(err)
				}
				server = <-accepted
			} else {
				server, client = net.Pipe()
			}
			got := make(chan []byte)
			go func() {
				b, _ := io.ReadAll(client)
				got <- b
			}()
			w := bufio.NewWriterSize(server, 64)
			err := writeFileFetch(w, server, appendResponse(nil, 42, r), r)
			if err == nil {
				err = w.Flush()
			}
			files.release()
			server.Close()
			b := <-got
			client.Close()
			if err != nil {
				t.Fatalf("v%d (tcp %v): %v", v, overTCP, err)
			}
			if !bytes.Equal(b, want) {
				t.Fatalf("v%d (tcp %v): %d bytes written, kmsg encodes %d; first difference at %d", v, overTCP, len(b), len(want), firstDiff(b, want))
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFileRecordsOutliveSegment: records handed out in their files are
// still sent whole after their segment is deleted (DeleteRecords) and the
// log closed.
func TestFileRecordsOutliveSegment(t *testing.T) {
	l := archiveLog(t, t.TempDir())
	recs, ok, err := l.ReadFile(0, 1<<20, 10)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	want, err := recs.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecordsBefore(9); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, reg := range recs.Regions() {
		b := make([]byte, reg.Len)
		if _, err := syscall.Pread(int(reg.Fd), b, reg.Pos); err != nil {
			t.Fatalf("read the region %+v after the delete: %v", reg, err)
		}
		got = append(got, b...)
	}
	recs.Release()
	if !bytes.Equal(got, want) {
		t.Fatal("the records changed after their segments were deleted")
	}
}
