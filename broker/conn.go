package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/security/acl"
)

// maxInFlight bounds the responses a connection may have waiting for
// durability before the broker stops reading from it.
const maxInFlight = 16

// maxKeptResponseBuffer: a connection keeps its response encoding buffer
// between responses only up to this size.
const maxKeptResponseBuffer = 1 << 20

// conn is one client connection. Requests are read and handled strictly in
// order by one goroutine, as Kafka does; a handler may hand back a response
// that still waits for an fsync (produce), and the writer goroutine releases
// responses in request order once each is ready. That lets a client's
// pipelined produces share one group commit instead of one fsync each.
type conn struct {
	nc       net.Conn
	log      *slog.Logger
	clientID string

	// fetchBufs takes back a fetch's record buffers once its response is
	// encoded (the broker's; nil in tests that build a conn by hand).
	fetchBufs *fetchBuffers

	// listener is the listener the client connected through; principal
	// is who the client is (User:ANONYMOUS until it authenticates, and on
	// listeners that do not authenticate; a client certificate's mapped
	// subject; the SASL role), host its address as Kafka prints it
	// (acl.HostAddress), both matched by ACLs; sasl the SASL state on a
	// SASL listener (sasl_conn.go). Only the connection's reading
	// goroutine, which runs the handlers, touches them.
	listener  *boundListener
	principal acl.Principal
	host      string
	sasl      *saslSession

	// sendfile: fetches leave segment records in their files for the
	// writer to send with sendfile(2) (fetch_sendfile.go): a plaintext
	// TCP connection, unless Config.FetchCopy.
	sendfile bool

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

	// token, with isToken set, is a SASL token after a v0 handshake: a
	// bare size-prefixed frame, no Kafka header.
	token   []byte
	isToken bool
	// closeAfter ends the connection once Config.FailedAuthDelay has
	// passed and this response (if any) is written, as Kafka answers and
	// closes after a failed authentication.
	closeAfter bool
}

// errFrame is returned for frames that cannot be a Kafka request; the
// connection is closed, nothing else is affected.
var errFrame = errors.New("malformed frame")

// readFrameSize reads a frame's 4-byte size prefix and checks it against
// max (socket.request.max.bytes) before anything is allocated for it.
func readFrameSize(r io.Reader, max int32) (int, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return 0, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > max {
		return 0, fmt.Errorf("%w: size %d outside [8, %d]", errFrame, n, max)
	}
	return int(n), nil
}

// readFrame reads one size-prefixed frame into a buffer lent by f, which
// the caller gives back with f.release once nothing uses the frame.
func readFrame(r io.Reader, max int32, f *frameBuffers) (frame []byte, lent *[]byte, err error) {
	n, err := readFrameSize(r, max)
	if err != nil {
		return nil, nil, err
	}
	return f.read(r, n)
}

// Frame buffer sizes: pooled size classes from minFrameBuffer up to
// maxPooledFrame, each twice the one before.
const (
	minFrameBuffer   = 4 << 10
	maxPooledFrame   = 8 << 20
	frameSizeClasses = 12 // 4 KiB << 11 = 8 MiB
)

// frameBuffers lends the buffers request frames are read into. Buffers up
// to maxPooledFrame come from size-class pools shared by every connection,
// so an idle connection holds none (a fresh 1 MiB allocation per produce
// request halves throughput, keeping one per connection costs memory
// forever). A larger frame gets a buffer only once its first
// maxPooledFrame bytes have arrived; large buffers are kept for the next
// large frames, up to bigMax bytes, rather than left for the collector
// (a burst of 100 MiB frames would otherwise pile up garbage faster than
// it is collected) and dropped by reclaim once large frames stop.
//
// Decoded requests alias the buffer: a handler that keeps request bytes
// beyond its own run — a member's protocol metadata, a leader's
// assignments — must copy them.
type frameBuffers struct {
	classes [frameSizeClasses]sync.Pool // *[]byte of cap minFrameBuffer<<i

	mu      sync.Mutex
	big     [][]byte // large buffers kept for reuse
	bigHeld int64    // their capacity
	bigMax  int64
	// bigReleased, if set, is called after a large frame is done with.
	bigReleased func()
}

func frameClass(n int) int {
	c := 0
	for minFrameBuffer<<c < n {
		c++
	}
	return c
}

func (f *frameBuffers) get(n int) *[]byte {
	c := frameClass(n)
	if b, ok := f.classes[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, minFrameBuffer<<c)
	return &b
}

// getBig is a buffer of n bytes: the smallest kept one that fits, if it is
// not more than twice too large, else a new one.
func (f *frameBuffers) getBig(n int) []byte {
	f.mu.Lock()
	best := -1
	for i, b := range f.big {
		if cap(b) >= n && cap(b) <= 2*n && (best < 0 || cap(b) < cap(f.big[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := f.big[best]
		f.big[best] = f.big[len(f.big)-1]
		f.big = f.big[:len(f.big)-1]
		f.bigHeld -= int64(cap(b))
		f.mu.Unlock()
		return b[:n]
	}
	f.mu.Unlock()
	return make([]byte, n)
}

func (f *frameBuffers) putBig(b []byte) {
	f.mu.Lock()
	if f.bigHeld+int64(cap(b)) <= f.bigMax {
		f.big = append(f.big, b)
		f.bigHeld += int64(cap(b))
	}
	f.mu.Unlock()
	if f.bigReleased != nil {
		f.bigReleased()
	}
}

// dropBig lets the kept large buffers go.
func (f *frameBuffers) dropBig() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.big)
	f.big, f.bigHeld = nil, 0
}

// read reads an n-byte frame body from r.
func (f *frameBuffers) read(r io.Reader, n int) (frame []byte, lent *[]byte, err error) {
	first := min(n, maxPooledFrame)
	lent = f.get(first)
	frame = (*lent)[:first]
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, lent, frameErr(n, err)
	}
	if n == first {
		return frame, lent, nil
	}
	big := f.getBig(n)
	copy(big, frame)
	f.release(nil, lent)
	if _, err := io.ReadFull(r, big[first:]); err != nil {
		f.release(big, nil)
		return nil, nil, frameErr(n, err)
	}
	return big, nil, nil
}

func frameErr(n int, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read %d-byte frame: %w", n, err)
}

// release gives back what read returned.
func (f *frameBuffers) release(frame []byte, lent *[]byte) {
	if lent != nil {
		f.classes[frameClass(cap(*lent))].Put(lent)
		return
	}
	if len(frame) > maxPooledFrame {
		f.putBig(frame)
	}
}

// reclaimer gives memory back to the OS after large frames: the Go runtime
// returns freed heap lazily, so a broker that read a few 100 MiB requests
// would keep that much resident long after. Once no large frame has been
// released for delay, the kept large buffers are dropped and one forced
// collection hands their memory back.
type reclaimer struct {
	delay time.Duration
	drop  func()
	mu    sync.Mutex
	timer *time.Timer
}

func (r *reclaimer) bigFreed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer == nil {
		r.timer = time.AfterFunc(r.delay, func() {
			r.drop()
			debug.FreeOSMemory()
		})
		return
	}
	r.timer.Reset(r.delay)
}

func (r *reclaimer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
	}
}

// isTimeout reports a deadline set on the connection passing.
func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
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

// serveConn runs one connection of listener l until the peer goes away, a
// frame is malformed, or ctx ends.
func (b *Broker) serveConn(ctx context.Context, nc net.Conn, l *boundListener) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc := &conn{nc: nc, log: b.log.With("remote", nc.RemoteAddr().String()), listener: l, principal: anonymous, host: hostOf(nc),
		fetchBufs: &b.fetchBufs}
	if len(b.listeners) > 1 {
		cc.log = cc.log.With("listener", l.Name)
	}
	if l.tls != nil {
		tc, p, err := b.startTLS(ctx, nc, l)
		if err != nil {
			cc.log.Info("closing connection", "err", err)
			nc.Close()
			return
		}
		cc.nc, cc.principal = tc, p
	}
	if _, tcp := cc.nc.(*net.TCPConn); tcp && !b.cfg.FetchCopy {
		cc.sendfile = true
	}
	if l.Protocol.SASL() {
		cc.sasl = &saslSession{mechs: l.mechs}
		defer b.sessions.remove(cc)
	}

	out := make(chan response, maxInFlight)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		defer cancel()
		if err := cc.writeResponses(ctx, out, b.cfg.ConnectionsMaxIdle, b.cfg.FailedAuthDelay); err != nil && ctx.Err() == nil {
			cc.log.Debug("write failed", "err", err)
		}
	}()
	go func() { // unblock reads when the broker shuts down
		<-ctx.Done()
		cc.nc.Close()
	}()

	err := b.readRequests(ctx, cc, out)
	close(out)
	<-writerDone
	for r := range out { // what the writer left when it failed
		cc.releaseResponse(r)
	}
	cc.nc.Close()
	switch {
	case err == nil || ctx.Err() != nil || errors.Is(err, io.EOF):
	case errors.Is(err, errIdle):
		cc.log.Debug("closing idle connection", "client_id", cc.clientID, "idle", b.cfg.ConnectionsMaxIdle)
	case errors.Is(err, errAuthClose):
		cc.log.Debug("closing connection after failed authentication", "client_id", cc.clientID)
	default:
		cc.log.Info("closing connection", "client_id", cc.clientID, "principal", cc.principal, "err", err)
	}
}

// errIdle ends a connection that sent nothing for connections.max.idle.ms.
var errIdle = errors.New("idle connection")

// readRequests reads and handles frames until the connection ends. Between
// frames the connection may be silent for connections.max.idle.ms; once a
// frame's size has arrived, its body must follow within the request read
// timeout. A frame's bytes are reserved from queued.max.request.bytes
// before its body is read, and held until its handler is done.
func (b *Broker) readRequests(ctx context.Context, cc *conn, out chan<- response) error {
	br := bufio.NewReaderSize(cc.nc, 64<<10)
	for {
		if err := cc.nc.SetReadDeadline(time.Now().Add(b.cfg.ConnectionsMaxIdle)); err != nil {
			return err
		}
		n, err := readFrameSize(br, b.cfg.MaxRequestBytes)
		if err != nil {
			if isTimeout(err) {
				return errIdle
			}
			return err
		}
		r, err := b.serveFrame(ctx, cc, br, n)
		if err != nil {
			return err
		}
		if r.resp == nil && !r.isToken && !r.closeAfter { // acks=0 produce: Kafka sends nothing back
			continue
		}
		select {
		case out <- r:
		case <-ctx.Done():
			cc.releaseResponse(r)
			return ctx.Err()
		}
		if r.closeAfter {
			return errAuthClose
		}
	}
}

// serveFrame reads the n-byte body of a frame whose size was just read and
// handles the request.
func (b *Broker) serveFrame(ctx context.Context, cc *conn, r io.Reader, n int) (response, error) {
	if cc.sasl != nil && cc.sasl.state != saslComplete && n > saslMaxReceiveSize {
		return response{}, fmt.Errorf("%w: %d-byte frame before authentication (sasl.server.max.receive.size %d)", errFrame, n, saslMaxReceiveSize)
	}
	if err := b.frameBudget.acquire(ctx, int64(n)); err != nil {
		return response{}, err
	}
	defer b.frameBudget.release(int64(n))
	if err := cc.nc.SetReadDeadline(time.Now().Add(b.cfg.RequestReadTimeout)); err != nil {
		return response{}, err
	}
	frame, lent, err := b.frames.read(r, n)
	defer b.frames.release(frame, lent)
	if err != nil {
		if isTimeout(err) {
			return response{}, fmt.Errorf("frame of %d bytes not received within %v: %w", n, b.cfg.RequestReadTimeout, err)
		}
		return response{}, err
	}
	if cc.sasl != nil {
		if r, handled, err := b.saslFrame(ctx, cc, frame); handled || err != nil {
			return r, err
		}
	}
	req, err := parseRequest(frame, b.apis)
	if err != nil {
		return response{}, err
	}
	cc.clientID = req.clientID
	var resp kmsg.Response
	if req.body == nil {
		resp = b.apiVersionsUnsupported()
	} else if resp, err = b.dispatch(ctx, cc, req); err != nil {
		return response{}, err
	}
	wait := cc.wait
	cc.wait = nil
	return response{correlation: req.correlation, resp: resp, wait: wait}, nil
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
	if b.testPrincipal != nil {
		if p, ok := b.testPrincipal(cc.nc.RemoteAddr().String()); ok {
			cc.principal = p
		}
	}
	if denied := b.checkRequest(cc, a, req.body); denied != nil {
		return denied, nil
	}
	return a.handle(ctx, b, cc, req.body)
}

// writeResponses writes responses in order. A peer that reads nothing for
// idle (connections.max.idle.ms) while a response waits is dropped. A
// response that closes the connection (a failed authentication) is held
// for closeDelay, then written, and the connection ends: Kafka sends the
// failure's answer when its delayed close comes due, so a client learns of
// a wrong password no sooner than connection.failed.authentication.delay.ms.
func (cc *conn) writeResponses(ctx context.Context, in <-chan response, idle, closeDelay time.Duration) error {
	bw := bufio.NewWriterSize(cc.nc, 64<<10)
	var buf []byte
	for r := range in {
		var err error
		if r.wait != nil {
			err = flushAndWait(ctx, bw, r.wait)
		}
		if err == nil && r.closeAfter {
			err = flushAndWait(ctx, bw, time.After(closeDelay))
		}
		if err != nil {
			cc.releaseResponse(r)
			return err
		}
		if err := cc.nc.SetWriteDeadline(time.Now().Add(idle)); err != nil {
			cc.releaseResponse(r)
			return err
		}
		switch ff, files := r.resp.(*fileFetchResponse); {
		case r.isToken:
			buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(r.token)))
			buf = append(buf, r.token...)
			_, err = bw.Write(buf)
		case files:
			buf = appendResponse(buf[:0], r.correlation, r.resp)
			err = writeFileFetch(bw, cc.nc, buf, ff)
			cc.releaseResponse(r)
		case r.resp != nil:
			buf = appendResponse(buf[:0], r.correlation, r.resp)
			cc.releaseResponse(r) // a fetch's records are in buf now
			_, err = bw.Write(buf)
		}
		if err != nil {
			return err
		}
		if r.closeAfter {
			return bw.Flush()
		}
		if cap(buf) > maxKeptResponseBuffer {
			buf = nil // one large response must not pin its buffer for the connection's life
		}
		// Flush only when nothing else is queued, so pipelined responses
		// leave in one write; one that is queued but not ready flushes
		// the rest before it waits (above).
		if len(in) == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// flushAndWait waits until ready is closed or sends, writing out first
// what bw holds when it is not ready yet: the responses before this one must
// not wait for its fsync (or its delay) as well.
func flushAndWait[T any](ctx context.Context, bw *bufio.Writer, ready <-chan T) error {
	select {
	case <-ready:
		return nil
	default:
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// codeOf is err's Kafka code, 0 for nil. (errorCode would see a nil
// *kerr.Error as a non-nil error.)
func codeOf(err *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	return err.Code
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

// hostOf is the client's address as Kafka matches ACL hosts against it.
func hostOf(nc net.Conn) string {
	ap, err := netip.ParseAddrPort(nc.RemoteAddr().String())
	if err != nil {
		return ""
	}
	return acl.HostAddress(ap.Addr())
}
