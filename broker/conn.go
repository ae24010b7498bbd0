package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxInFlight bounds the responses a connection may have waiting for
// durability before the broker stops reading from it.
const maxInFlight = 16

// conn is one client connection. Requests are read and handled strictly in
// order by one goroutine, as Kafka does; a handler may hand back a response
// that still waits for an fsync (produce), and the writer goroutine releases
// responses in request order once each is ready. That lets a client's
// pipelined produces share one group commit instead of one fsync each.
type conn struct {
	nc       net.Conn
	log      *slog.Logger
	clientID string

	// wait is set by a handler whose response must not be written before
	// the channel closes; the dispatcher moves it onto the response.
	wait <-chan struct{}
}

// request is one decoded frame.
type request struct {
	key, version int16
	correlation  int32
	clientID     string
	body         kmsg.Request
}

type response struct {
	correlation int32
	resp        kmsg.Response
	wait        <-chan struct{}
}

// errFrame is returned for frames that cannot be a Kafka request; the
// connection is closed, nothing else is affected.
var errFrame = errors.New("malformed frame")

// readFrame reads one size-prefixed frame. The size is checked against max
// before any allocation, and the body buffer grows only as bytes arrive, so
// a peer announcing a huge frame cannot make us allocate it up front.
//
// The buffer is reused for the connection's next frame (a fresh 1 MiB
// allocation per produce request halves throughput), and decoded requests
// alias it: a handler that keeps request bytes beyond its own run — a
// member's protocol metadata, a leader's assignments — must copy them.
func readFrame(r io.Reader, max int32, buf *bytes.Buffer) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > max {
		return nil, fmt.Errorf("%w: size %d outside [8, %d]", errFrame, n, max)
	}
	buf.Reset()
	if _, err := io.CopyN(buf, r, int64(n)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %d-byte frame: %w", n, err)
	}
	return buf.Bytes(), nil
}

// parseRequest decodes a frame's header and, for a served key and version,
// its body. An unknown key or version returns the header with a nil body
// and the reason.
func parseRequest(frame []byte, apis apiTable) (request, error) {
	r := kbin.Reader{Src: frame}
	req := request{key: r.Int16(), version: r.Int16(), correlation: r.Int32()}
	if cid := r.NullableString(); cid != nil {
		req.clientID = *cid
	}
	if !r.Ok() {
		return req, fmt.Errorf("%w: short header", errFrame)
	}
	a, ok := apis.lookup(req.key)
	if !ok {
		return req, fmt.Errorf("%w: unknown api key %d", errFrame, req.key)
	}
	body := kmsg.RequestForKey(req.key)
	if req.version < a.min || req.version > a.max {
		// ApiVersions answers any version (see 18_api_versions.go), so
		// it is returned without a body; all others close the
		// connection, as Kafka does.
		if req.key == 18 {
			return req, nil
		}
		return req, fmt.Errorf("%w: api key %d version %d unsupported", errFrame, req.key, req.version)
	}
	body.SetVersion(req.version)
	if body.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() {
		return req, fmt.Errorf("%w: short header", errFrame)
	}
	if err := body.ReadFrom(r.Src); err != nil {
		return req, fmt.Errorf("%w: decode key %d v%d: %v", errFrame, req.key, req.version, err)
	}
	req.body = body
	return req, nil
}

// appendResponse encodes a response frame: size, correlation id, header tags
// for flexible responses (ApiVersions always uses response header v0), body.
func appendResponse(dst []byte, correlation int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlation))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// serveConn runs one connection until the peer goes away, a frame is
// malformed, or ctx ends.
func (b *Broker) serveConn(ctx context.Context, nc net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc := &conn{nc: nc, log: b.log.With("remote", nc.RemoteAddr().String())}

	out := make(chan response, maxInFlight)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		defer cancel()
		if err := cc.writeResponses(ctx, out); err != nil && ctx.Err() == nil {
			cc.log.Debug("write failed", "err", err)
		}
	}()
	go func() { // unblock reads when the broker shuts down
		<-ctx.Done()
		nc.Close()
	}()

	err := b.readRequests(ctx, cc, out)
	close(out)
	<-writerDone
	nc.Close()
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		cc.log.Info("closing connection", "client_id", cc.clientID, "err", err)
	}
}

func (b *Broker) readRequests(ctx context.Context, cc *conn, out chan<- response) error {
	br := bufio.NewReaderSize(cc.nc, 64<<10)
	var buf bytes.Buffer
	for {
		frame, err := readFrame(br, b.cfg.MaxRequestBytes, &buf)
		if err != nil {
			return err
		}
		req, err := parseRequest(frame, b.apis)
		if err != nil {
			return err
		}
		cc.clientID = req.clientID
		var resp kmsg.Response
		if req.body == nil {
			resp = b.apiVersionsUnsupported()
		} else if resp, err = b.dispatch(ctx, cc, req); err != nil {
			return err
		}
		wait := cc.wait
		cc.wait = nil
		if resp == nil { // acks=0 produce: Kafka sends nothing back
			continue
		}
		select {
		case out <- response{correlation: req.correlation, resp: resp, wait: wait}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *Broker) dispatch(ctx context.Context, cc *conn, req request) (resp kmsg.Response, err error) {
	defer func() {
		// A handler bug must cost one connection, never the broker.
		if r := recover(); r != nil {
			cc.log.Error("handler panic", "api_key", req.key, "version", req.version, "panic", r)
			resp, err = nil, fmt.Errorf("handler panic on key %d: %v", req.key, r)
		}
	}()
	a, _ := b.apis.lookup(req.key)
	return a.handle(ctx, b, cc, req.body)
}

func (cc *conn) writeResponses(ctx context.Context, in <-chan response) error {
	bw := bufio.NewWriterSize(cc.nc, 64<<10)
	var buf []byte
	for r := range in {
		if r.wait != nil {
			select {
			case <-r.wait:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		buf = appendResponse(buf[:0], r.correlation, r.resp)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
		// Flush only when nothing else is ready, so pipelined responses
		// leave in one write.
		if len(in) == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// errorCode is kerr's code for err, 0 for nil.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
