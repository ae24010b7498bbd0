package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// Codec numbers of a batch's attributes bits 0-2.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// Bounds on decompression. Batches are stored and served as sent, so the
// broker only decompresses to validate a produced batch and to find a
// record by timestamp; both read the records as a stream and keep none of
// them, so what a batch costs is the codec's working memory, reserved from
// decoders.mem before any of it is allocated.
const (
	// zstdMaxWindow is the largest zstd window accepted: a frame may ask
	// the decoder to keep this much history. zstd levels up to 20 stay
	// within it; an ultra-level frame asking for more is refused.
	zstdMaxWindow = 32 << 20
	// zstdPooledWindow: a decoder that held a larger window is dropped
	// after use rather than kept with that much memory.
	zstdPooledWindow = 8 << 20
	// snappyMaxRatio bounds how far a standard snappy block can inflate (a
	// 3-byte copy yields at most 64 bytes); a block declaring more is not
	// snappy, and its declared size is never allocated.
	snappyMaxRatio = 22
	// decodeOverhead is what every decompression holds besides its codec
	// window: the record reader's buffer, a gzip or flate state.
	decodeOverhead = 64 << 10
	// scratchPooled: snappy output buffers up to this size are reused.
	scratchPooled = 1 << 20
)

// xerialMagic opens the framed snappy that the Java client writes; other
// clients send raw snappy blocks.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// errCorruptCompression marks input a codec cannot decode.
var errCorruptCompression = errors.New("corrupt compressed records")

// decoders decompresses record sections: reusable codec state (zstd
// decoders are costly to make) and a broker-wide bound on the memory all
// decompressions in progress may use.
type decoders struct {
	mem     *budget
	gzip    sync.Pool // *gzip.Reader
	lz4     sync.Pool // *lz4.Reader
	zstd    sync.Pool // *zstd.Decoder
	scratch sync.Pool // *[]byte, snappy output
	readers sync.Pool // *segment.RecordReader
}

// newDecoders bounds the working memory of concurrent decompressions to
// memory bytes (0: unbounded).
func newDecoders(memory int64) *decoders {
	return &decoders{mem: newBudget(memory)}
}

// decompressStored is the segment log's Decompress, for timestamp lookups
// in stored batches: the same bounds as produce validation.
func (b *Broker) decompressStored(codec int8, in []byte, fn func(io.Reader) error) error {
	return b.decoders.open(context.Background(), codec, in, b.cfg.maxDecompressedBytes(), fn)
}

// reader lends a RecordReader (its stream buffer is worth reusing).
func (d *decoders) reader() *segment.RecordReader {
	if r, ok := d.readers.Get().(*segment.RecordReader); ok {
		return r
	}
	return new(segment.RecordReader)
}

func (d *decoders) putReader(r *segment.RecordReader) {
	r.ResetBytes(nil) // drop the reference to the stream
	d.readers.Put(r)
}

// open calls fn with a reader of the plain records of the compressed
// records section in. Reading more than limit bytes from it fails with
// segment.ErrRecordsTooLarge; input the codec cannot decode fails with
// errCorruptCompression. The codec's working memory is reserved first,
// waiting while other decompressions hold the budget.
func (d *decoders) open(ctx context.Context, codec int8, in []byte, limit int64, fn func(io.Reader) error) error {
	switch codec {
	case codecGzip:
		return d.gunzip(ctx, in, limit, fn)
	case codecSnappy:
		return d.unsnappy(ctx, in, limit, fn)
	case codecLZ4:
		return d.unlz4(ctx, in, limit, fn)
	case codecZstd:
		return d.unzstd(ctx, in, limit, fn)
	}
	return fmt.Errorf("%w: unknown compression codec %d", errCorruptCompression, codec)
}

// reserve takes n bytes of decompression memory; a batch needing more than
// the whole budget is too large.
func (d *decoders) reserve(ctx context.Context, n int64) (release func(), err error) {
	n += decodeOverhead
	if err := d.mem.acquire(ctx, n); err != nil {
		if errors.Is(err, errOverBudget) {
			return nil, fmt.Errorf("%w: decompressing needs %d bytes of working memory, more than the %d the broker allows", segment.ErrRecordsTooLarge, n, d.mem.size)
		}
		return nil, err
	}
	return func() { d.mem.release(n) }, nil
}

// corrupt marks err, from codec, as corrupt compressed input, unless it is
// already classified (a malformed record, the size limit).
func corrupt(codec string, err error) error {
	if errors.Is(err, segment.ErrRecordsTooLarge) || errors.Is(err, segment.ErrInvalidRecord) ||
		errors.Is(err, errCorruptCompression) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", errCorruptCompression, codec, err)
}

func (d *decoders) gunzip(ctx context.Context, in []byte, limit int64, fn func(io.Reader) error) error {
	release, err := d.reserve(ctx, 0)
	if err != nil {
		return err
	}
	defer release()
	zr, _ := d.gzip.Get().(*gzip.Reader)
	src := bytes.NewReader(in)
	if zr == nil {
		zr, err = gzip.NewReader(src)
	} else {
		err = zr.Reset(src)
	}
	if err != nil {
		return corrupt("gzip", err)
	}
	defer d.gzip.Put(zr)
	// Concatenated gzip members are one stream, as Java's GZIPInputStream
	// reads them.
	return wrapCodecErr("gzip", fn(&limitedReader{r: zr, left: limit, limit: limit}))
}

// lz4BlockMax is the largest block an LZ4 frame may declare (BD byte) and
// the legacy format's block size.
const (
	lz4BlockMax       = 4 << 20
	lz4LegacyBlockMax = 8 << 20
)

// lz4Memory is what reading an LZ4 frame takes: its block size, read from
// the frame descriptor, for the compressed and the decompressed block.
func lz4Memory(in []byte) int64 {
	if len(in) >= 6 && binary.LittleEndian.Uint32(in) == 0x184D2204 {
		if id := (in[5] >> 4) & 0x7; id >= 4 {
			return 2 << (8 + 2*int64(id))
		}
	}
	return 2 * lz4LegacyBlockMax
}

func (d *decoders) unlz4(ctx context.Context, in []byte, limit int64, fn func(io.Reader) error) error {
	release, err := d.reserve(ctx, lz4Memory(in))
	if err != nil {
		return err
	}
	defer release()
	zr, _ := d.lz4.Get().(*lz4.Reader)
	src := bytes.NewReader(in)
	if zr == nil {
		zr = lz4.NewReader(src)
	} else {
		zr.Reset(src)
	}
	defer d.lz4.Put(zr)
	return wrapCodecErr("lz4", fn(&limitedReader{r: zr, left: limit, limit: limit}))
}

// zstdWindow is the history the first frame of in asks the decoder to keep.
func zstdWindow(in []byte) (uint64, error) {
	var h zstd.Header
	if err := h.Decode(in); err != nil {
		return 0, err
	}
	switch {
	case h.Skippable:
		return zstdMaxWindow, nil
	case h.SingleSegment:
		return max(h.FrameContentSize, zstd.MinWindowSize), nil
	}
	return max(h.WindowSize, zstd.MinWindowSize), nil
}

func (d *decoders) unzstd(ctx context.Context, in []byte, limit int64, fn func(io.Reader) error) error {
	window, err := zstdWindow(in)
	if err != nil {
		return corrupt("zstd", err)
	}
	if window > zstdMaxWindow {
		return fmt.Errorf("%w: zstd frame asks for a %d-byte window, more than the %d accepted", segment.ErrRecordsTooLarge, window, zstdMaxWindow)
	}
	// The decoder keeps the window plus room for two blocks.
	release, err := d.reserve(ctx, int64(window)+2*(min(int64(window), 128<<10)+64<<10))
	if err != nil {
		return err
	}
	defer release()
	dec, _ := d.zstd.Get().(*zstd.Decoder)
	if dec == nil {
		dec, err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // decode in this goroutine
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecoderMaxMemory(zstdMaxWindow))
		if err != nil {
			return fmt.Errorf("zstd decoder: %w", err)
		}
	}
	// Later frames may not ask for more than the first: that is what was
	// reserved. (A bytes.Reader, not a bytes.Buffer, keeps the decoder
	// streaming instead of decoding all of in at once.)
	if err := dec.ResetWithOptions(bytes.NewReader(in), zstd.WithDecoderMaxWindow(window), zstd.WithDecoderMaxMemory(window)); err != nil {
		dec.Close()
		return corrupt("zstd", err)
	}
	defer func() {
		dec.Reset(nil) // drop the reference to in
		if window > zstdPooledWindow {
			dec.Close()
			return
		}
		d.zstd.Put(dec)
	}()
	return wrapCodecErr("zstd", fn(&limitedReader{r: dec, left: limit, limit: limit}))
}

func (d *decoders) unsnappy(ctx context.Context, in []byte, limit int64, fn func(io.Reader) error) error {
	if !bytes.HasPrefix(in, xerialMagic) {
		n, err := snappyLen(in, limit)
		if err != nil {
			return err
		}
		release, err := d.reserve(ctx, int64(n))
		if err != nil {
			return err
		}
		defer release()
		buf := d.getScratch(n)
		defer d.putScratch(buf)
		out, err := snappy.DecodeStrict(*buf, in)
		if err != nil {
			return corrupt("snappy", err)
		}
		return wrapCodecErr("snappy", fn(bytes.NewReader(out)))
	}
	// Java's framing: magic (8), version (4), compatible version (4); then
	// chunks of a 4-byte big-endian length and a raw snappy block. Every
	// chunk's size is checked before any is decoded.
	if len(in) < 16 {
		return fmt.Errorf("%w: snappy: truncated xerial header", errCorruptCompression)
	}
	chunks := in[16:]
	var total int64
	largest := 0
	for rest := chunks; len(rest) > 0; {
		if len(rest) < 4 {
			return fmt.Errorf("%w: snappy: truncated xerial chunk header", errCorruptCompression)
		}
		c := int(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if c > len(rest) {
			return fmt.Errorf("%w: snappy: truncated xerial chunk", errCorruptCompression)
		}
		n, err := snappyLen(rest[:c], limit-total)
		if err != nil {
			return err
		}
		total += int64(n)
		largest = max(largest, n)
		rest = rest[c:]
	}
	release, err := d.reserve(ctx, int64(largest))
	if err != nil {
		return err
	}
	defer release()
	buf := d.getScratch(largest)
	defer d.putScratch(buf)
	return wrapCodecErr("snappy", fn(&xerialReader{chunks: chunks, buf: *buf}))
}

// snappyLen is the decoded length a snappy block declares, checked against
// limit and against what snappy can produce from that many bytes.
func snappyLen(block []byte, limit int64) (int, error) {
	n, err := snappy.DecodedLen(block)
	switch {
	case err != nil:
		return 0, corrupt("snappy", err)
	case int64(n) > limit:
		return 0, fmt.Errorf("%w: snappy block inflates to %d bytes, over the limit of %d", segment.ErrRecordsTooLarge, n, limit)
	case int64(n) > snappyMaxRatio*int64(len(block)):
		return 0, fmt.Errorf("%w: snappy: a %d-byte block cannot hold %d bytes", errCorruptCompression, len(block), n)
	}
	return n, nil
}

func (d *decoders) getScratch(n int) *[]byte {
	if n <= scratchPooled {
		if b, ok := d.scratch.Get().(*[]byte); ok {
			return b
		}
		b := make([]byte, 0, scratchPooled)
		return &b
	}
	b := make([]byte, 0, n)
	return &b
}

func (d *decoders) putScratch(b *[]byte) {
	if cap(*b) <= scratchPooled {
		d.scratch.Put(b)
	}
}

// xerialReader decodes Java-framed snappy one chunk at a time into buf.
type xerialReader struct {
	chunks []byte // undecoded chunks, sizes already checked
	buf    []byte // decode target
	cur    []byte // decoded, not yet read
}

func (x *xerialReader) Read(p []byte) (int, error) {
	for len(x.cur) == 0 {
		if len(x.chunks) == 0 {
			return 0, io.EOF
		}
		c := int(binary.BigEndian.Uint32(x.chunks))
		out, err := snappy.DecodeStrict(x.buf, x.chunks[4:4+c])
		if err != nil {
			return 0, corrupt("snappy", err)
		}
		x.cur, x.chunks = out, x.chunks[4+c:]
	}
	n := copy(p, x.cur)
	x.cur = x.cur[n:]
	return n, nil
}

// limitedReader fails with segment.ErrRecordsTooLarge once more than limit
// bytes have come out of r.
type limitedReader struct {
	r           io.Reader
	left, limit int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, l.tooLarge()
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	if l.left -= int64(n); l.left < 0 {
		return n, l.tooLarge()
	}
	return n, err
}

func (l *limitedReader) tooLarge() error {
	return fmt.Errorf("%w: the records inflate to more than %d bytes", segment.ErrRecordsTooLarge, l.limit)
}

// wrapCodecErr marks what a codec's reader failed with (as opposed to a
// malformed record or the size limit) as corrupt compressed input.
func wrapCodecErr(codec string, err error) error {
	if err == nil {
		return nil
	}
	return corrupt(codec, err)
}

// xerialBlock is the chunk size of the framed snappy the Java client (and
// Kafka's broker when it recompresses) writes.
const xerialBlock = 32 << 10

// compressRecords compresses a records section with codec, for the log
// cleaner, which rewrites a batch in its own codec as Kafka does: gzip,
// snappy in the Java client's xerial framing (every client reads it), an
// lz4 frame, a zstd frame.
func compressRecords(codec int8, plain []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch codec {
	case codecGzip:
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(plain); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
	case codecSnappy:
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1}) // version 1, compatible version 1
		for len(plain) > 0 {
			n := min(len(plain), xerialBlock)
			block := snappy.Encode(nil, plain[:n])
			var size [4]byte
			binary.BigEndian.PutUint32(size[:], uint32(len(block)))
			buf.Write(size[:])
			buf.Write(block)
			plain = plain[n:]
		}
	case codecLZ4:
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(plain); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
	case codecZstd:
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		defer enc.Close()
		return enc.EncodeAll(plain, nil), nil
	default:
		return nil, fmt.Errorf("unknown codec %d", codec)
	}
	return buf.Bytes(), nil
}
