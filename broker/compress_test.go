package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

func gzipData(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func lz4Data(b []byte) []byte {
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func zstdData(b []byte, opts ...zstd.EOption) []byte {
	enc, _ := zstd.NewWriter(nil, opts...)
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// xerialData frames b as the Java client's snappy stream does, in chunks.
func xerialData(b []byte, chunk int) []byte {
	out := append([]byte{}, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	for len(b) > 0 {
		n := min(chunk, len(b))
		block := snappy.Encode(nil, b[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		b = b[n:]
	}
	return out
}

var codecs = map[string]struct {
	codec    int8
	compress func([]byte) []byte
}{
	"gzip":          {codecGzip, gzipData},
	"snappy":        {codecSnappy, func(b []byte) []byte { return s2.EncodeSnappy(nil, b) }},
	"snappy xerial": {codecSnappy, func(b []byte) []byte { return xerialData(b, 32<<10) }},
	"lz4":           {codecLZ4, lz4Data},
	"zstd":          {codecZstd, func(b []byte) []byte { return zstdData(b) }},
}

func readAll(d *decoders, codec int8, in []byte, limit int64) ([]byte, error) {
	var out []byte
	err := d.open(context.Background(), codec, in, limit, func(r io.Reader) error {
		var err error
		out, err = io.ReadAll(r)
		return err
	})
	return out, err
}

// Every codec decodes what real encoders make, and stops with
// ErrRecordsTooLarge one byte past the limit, with its decoders reused.
func TestDecodersLimit(t *testing.T) {
	plain := bytes.Repeat([]byte("kafgres records "), 40<<10) // 640 KiB
	d := newDecoders(64 << 20)
	for name, c := range codecs {
		in := c.compress(plain)
		for range 3 {
			got, err := readAll(d, c.codec, in, int64(len(plain)))
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("%s: %d bytes, %v", name, len(got), err)
			}
			if _, err := readAll(d, c.codec, in, int64(len(plain)-1)); !errors.Is(err, segment.ErrRecordsTooLarge) {
				t.Fatalf("%s over the limit: %v", name, err)
			}
		}
		corrupt := bytes.Clone(in)
		for i := len(corrupt) / 3; i < len(corrupt)/2; i++ {
			corrupt[i] ^= 0x5a
		}
		if _, err := readAll(d, c.codec, corrupt, 1<<30); !errors.Is(err, errCorruptCompression) {
			t.Errorf("%s corrupt: %v", name, err)
		}
		if used := d.mem.inUse(); used != 0 {
			t.Fatalf("%s: %d bytes of decompression memory still reserved", name, used)
		}
	}
	if _, err := readAll(d, 6, []byte("x"), 100); !errors.Is(err, errCorruptCompression) {
		t.Fatalf("codec 6: %v", err)
	}
}

// Input that declares more than it can be is refused before anything of
// that size is allocated.
func TestDecodersRefuseBeforeAllocating(t *testing.T) {
	d := newDecoders(64 << 20)
	// A raw snappy block claiming 1 GiB (the s2 extensions could make it).
	claim := binary.AppendUvarint(nil, 1<<30)
	claim = append(claim, 0, 0, 0, 0)
	ms1 := allocs()
	_, err := readAll(d, codecSnappy, claim, 2<<30)
	ms2 := allocs()
	if !errors.Is(err, errCorruptCompression) || ms2-ms1 > 1<<20 {
		t.Fatalf("snappy claim: %v, allocated %d", err, ms2-ms1)
	}
	// Over the limit by its declared length.
	if _, err := readAll(d, codecSnappy, s2.EncodeSnappy(nil, make([]byte, 4096)), 4095); !errors.Is(err, segment.ErrRecordsTooLarge) {
		t.Fatalf("snappy over the limit: %v", err)
	}
	// A zstd frame asking for a window larger than accepted: magic, a
	// frame header with a window descriptor of 2^26 (64 MiB), an empty
	// raw block.
	hdr := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (26 - 10) << 3, 0, 0, 0}
	if _, err := readAll(d, codecZstd, hdr, 1<<30); !errors.Is(err, segment.ErrRecordsTooLarge) {
		t.Fatalf("zstd 64 MiB window: %v", err)
	}
	// A decompression needing more working memory than the broker has.
	small := newDecoders(1 << 20)
	if _, err := readAll(small, codecZstd, zstdData(make([]byte, 4<<20)), 8<<20); !errors.Is(err, segment.ErrRecordsTooLarge) {
		t.Fatalf("over the memory budget: %v", err)
	}
}

func allocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// Decompressions beyond the memory budget wait for it, and a waiter whose
// request ends gives up without taking any.
func TestDecodersShareMemory(t *testing.T) {
	d := newDecoders(3 * (decodeOverhead + 1<<10))
	in := gzipData([]byte("x"))
	hold := make(chan struct{})
	var started, done sync.WaitGroup
	for range 3 {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			d.open(context.Background(), codecGzip, in, 10, func(io.Reader) error {
				started.Done()
				<-hold
				return nil
			})
		}()
	}
	started.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := readAllCtx(ctx, d, codecGzip, in); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fourth decompression: %v, want to wait", err)
	}
	close(hold)
	done.Wait()
	if got, err := readAllCtx(context.Background(), d, codecGzip, in); err != nil || string(got) != "x" {
		t.Fatalf("after: %q %v", got, err)
	}
	if d.mem.inUse() != 0 {
		t.Fatalf("%d bytes still reserved", d.mem.inUse())
	}
}

func readAllCtx(ctx context.Context, d *decoders, codec int8, in []byte) ([]byte, error) {
	var out []byte
	err := d.open(ctx, codec, in, 1<<20, func(r io.Reader) error {
		var err error
		out, err = io.ReadAll(r)
		return err
	})
	return out, err
}

func TestBudget(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	if err := b.acquire(ctx, 101); !errors.Is(err, errOverBudget) {
		t.Fatalf("over the whole budget: %v", err)
	}
	if err := b.acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	// First come, first served: a large waiter is not overtaken by a small
	// one that would fit.
	order := make(chan int64, 2)
	go func() { b.acquire(ctx, 80); order <- 80 }()
	time.Sleep(20 * time.Millisecond)
	go func() { b.acquire(ctx, 30); order <- 30 }()
	time.Sleep(20 * time.Millisecond)
	select {
	case n := <-order:
		t.Fatalf("%d granted while 60 of 100 are held and 80 waits first", n)
	default:
	}
	b.release(60)
	if n := <-order; n != 80 {
		t.Fatalf("granted %d first", n)
	}
	b.release(80)
	if n := <-order; n != 30 {
		t.Fatalf("granted %d second", n)
	}
	// A waiter that gives up leaves the budget as it was.
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.acquire(cctx, 80); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("gave up: %v", err)
	}
	b.release(30)
	if b.inUse() != 0 {
		t.Fatalf("%d in use", b.inUse())
	}
	unlimited := newBudget(-1)
	if err := unlimited.acquire(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
}
