package broker

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// Fetches without copies (issue #16): on a plaintext listener the records
// of a segment topic go from the page cache to the socket with sendfile(2),
// as Kafka sends them (FileRecords.writeTo); they never pass through a Go
// buffer. TLS listeners copy, as Kafka's do; so do table topics, whose
// batches come from Postgres.
//
// The response is still encoded by kmsg, with a 16-byte marker in place of
// each partition's records: a nonce of the broker's, which no client can
// know, and the records' index. The writer finds the markers in the
// encoded frame, writes what is between them, and for each one the
// records' real length prefix and the records themselves from their files.
// The segments stay open (FileRecords holds them) until the response is
// written or dropped, so a segment deleted or cleaned meanwhile is still
// read whole from its unlinked file.

// recordsFromFile is the part of a segment log that hands out records in
// its files (segment.Log.ReadFile).
type recordsFromFile interface {
	ReadFile(offset int64, maxBytes int, limit int64) (*segment.FileRecords, bool, error)
}

const (
	markerNonceLen = 12
	markerLen      = markerNonceLen + 4

	// sendfileMinBytes: a partition's records below this are copied into
	// the response instead. Sending them from the file takes a write of
	// the frame before them, the sendfile and a write after: three
	// syscalls (and a small packet) where a copy of a few KiB takes
	// none. A consumer that keeps up gets responses of a few records,
	// and spent a sixth of the broker's CPU there (performance.md).
	sendfileMinBytes = 32 << 10
)

// fetchFiles collects the records one fetch leaves in files.
type fetchFiles struct {
	nonce []byte
	recs  []*segment.FileRecords
}

// add holds r and returns the marker that stands for it in the response.
func (f *fetchFiles) add(r *segment.FileRecords) []byte {
	m := make([]byte, markerLen)
	copy(m, f.nonce)
	binary.BigEndian.PutUint32(m[markerNonceLen:], uint32(len(f.recs)))
	f.recs = append(f.recs, r)
	return m
}

// len is the bytes of records held.
func (f *fetchFiles) len() int {
	n := 0
	for _, r := range f.recs {
		n += r.Len()
	}
	return n
}

// release lets every segment go; f may collect again.
func (f *fetchFiles) release() {
	if f == nil {
		return
	}
	for _, r := range f.recs {
		r.Release()
	}
	f.recs = f.recs[:0]
}

// fileFetchResponse is a Fetch response some of whose records are in
// files; the connection's writer sends it with writeFileFetch and then
// releases it.
type fileFetchResponse struct {
	*kmsg.FetchResponse
	files *fetchFiles
}

// releaseResponse lets go of what r holds: a fetch's pooled buffers and
// segments. Called once r is written, or when it never will be.
func (cc *conn) releaseResponse(r response) {
	switch resp := r.resp.(type) {
	case *kmsg.FetchResponse:
		if cc.fetchBufs != nil {
			cc.fetchBufs.release(resp)
		}
	case *fileFetchResponse:
		resp.files.release()
		if cc.fetchBufs != nil {
			cc.fetchBufs.release(resp.FetchResponse)
		}
	}
}

// writeFileFetch writes frame, the encoded response r with its markers,
// to w and nc: the bytes between the markers through w, each marker's
// records with sendfile (w flushed first).
func writeFileFetch(w *bufio.Writer, nc net.Conn, frame []byte, r *fileFetchResponse) error {
	flexible := r.IsFlexible()
	// The frame's size changes by what replaces the markers.
	size := int64(binary.BigEndian.Uint32(frame))
	type hit struct {
		at, prefix int // the marker's position, its length prefix's size
		recs       *segment.FileRecords
	}
	var hits []hit
	for from := 4; ; {
		i := bytes.Index(frame[from:], r.files.nonce)
		if i < 0 {
			break
		}
		at := from + i
		from = at + 1
		if at+markerLen > len(frame) {
			break
		}
		k := binary.BigEndian.Uint32(frame[at+markerNonceLen:])
		prefix := 4
		if flexible {
			prefix = 1 // the uvarint of 17
		}
		if int(k) >= len(r.files.recs) || at < prefix || !bytes.Equal(frame[at-prefix:at], recordsPrefix(nil, markerLen, flexible)) {
			continue
		}
		rec := r.files.recs[k]
		hits = append(hits, hit{at, prefix, rec})
		size += int64(len(recordsPrefix(nil, rec.Len(), flexible))-prefix) + int64(rec.Len()-markerLen)
		from = at + markerLen
	}
	if size > 1<<31-1 {
		return fmt.Errorf("fetch response of %d bytes", size)
	}
	binary.BigEndian.PutUint32(frame, uint32(size))
	sc, _ := nc.(syscall.Conn)
	var rc syscall.RawConn
	if sc != nil {
		rc, _ = sc.SyscallConn()
	}
	var prefix [5]byte
	from := 0
	for _, h := range hits {
		if _, err := w.Write(frame[from : h.at-h.prefix]); err != nil {
			return err
		}
		if _, err := w.Write(recordsPrefix(prefix[:0], h.recs.Len(), flexible)); err != nil {
			return err
		}
		from = h.at + markerLen
		if rc == nil {
			// No socket to send to (a wrapped connection): copy.
			b, err := h.recs.AppendTo(nil)
			if err != nil {
				return err
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			continue
		}
		if err := w.Flush(); err != nil {
			return err
		}
		for _, reg := range h.recs.Regions() {
			if err := sendFile(rc, reg); err != nil {
				return err
			}
		}
	}
	_, err := w.Write(frame[from:])
	return err
}

// recordsPrefix appends the length prefix of n bytes of records: nullable
// bytes, an int32 before flexible versions and a uvarint of n+1 after.
func recordsPrefix(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

// errShortFile is a segment file that ended before the region it was to
// send: the writer cannot make up the bytes the frame promised.
var errShortFile = errors.New("segment file ended inside the records being sent")

// sendFile writes reg to the socket behind rc with sendfile(2), waiting
// for the socket (and its write deadline) when it is full. The explicit
// offset leaves the file's own position alone, which other connections
// sending from the same segment share.
func sendFile(rc syscall.RawConn, reg segment.FileRegion) error {
	pos, left := reg.Pos, reg.Len
	var serr error
	err := rc.Write(func(fd uintptr) bool {
		for left > 0 {
			n, err := syscall.Sendfile(int(fd), int(reg.Fd), &pos, int(min(left, 1<<30)))
			if n > 0 {
				left -= int64(n)
			}
			switch {
			case err == syscall.EAGAIN:
				return false // wait until the socket can take more
			case err == syscall.EINTR:
			case err != nil:
				serr = fmt.Errorf("sendfile: %w", err)
				return true
			case n == 0:
				serr = errShortFile
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	if left > 0 {
		return io.ErrShortWrite
	}
	return nil
}
