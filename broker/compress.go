package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec numbers of a batch's attributes bits 0-2.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// xerialMagic opens the framed snappy that the Java client writes; other
// clients send raw snappy blocks.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns the records section of a compressed batch, for the few
// places the broker must look inside one (timestamp lookups). Batches are
// stored and served as sent, so produce and fetch never call it.
func decompress(codec int8, in []byte) ([]byte, error) {
	switch codec {
	case codecNone:
		return in, nil
	case codecGzip:
		r, err := gzip.NewReader(bytes.NewReader(in))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return io.ReadAll(r)
	case codecSnappy:
		return unsnappy(in)
	case codecLZ4:
		return io.ReadAll(lz4.NewReader(bytes.NewReader(in)))
	case codecZstd:
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.DecodeAll(in, nil)
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

func unsnappy(in []byte) ([]byte, error) {
	if !bytes.HasPrefix(in, xerialMagic) {
		return s2.Decode(nil, in)
	}
	// Header: magic (8), version (4), compatible version (4); then chunks
	// of a 4-byte big-endian length and a raw snappy block.
	if len(in) < 16 {
		return nil, errors.New("snappy: truncated xerial header")
	}
	in = in[16:]
	var out []byte
	for len(in) > 0 {
		if len(in) < 4 {
			return nil, errors.New("snappy: truncated xerial chunk header")
		}
		n := int(binary.BigEndian.Uint32(in))
		in = in[4:]
		if n > len(in) {
			return nil, errors.New("snappy: truncated xerial chunk")
		}
		chunk, err := s2.Decode(nil, in[:n])
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		out = append(out, chunk...)
		in = in[n:]
	}
	return out, nil
}
