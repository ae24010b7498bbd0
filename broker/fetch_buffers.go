package broker

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxPooledFetchBuffer is the largest buffer kept for reuse: a fetch of a
// larger response allocates its own, so that one big fetch does not pin
// its memory in the pool.
const maxPooledFetchBuffer = 8 << 20

// minPooledFetchBuffer is the smallest kept: not worth a pool slot (and
// not the markers of fetch_sendfile.go).
const minPooledFetchBuffer = 4 << 10

// fetchBuffers recycles the buffers fetches read records into. A fetch's
// records are copied into its response frame when it is encoded, and from
// then on its buffers are free; taking the next fetch's from here instead
// of allocating saves zeroing them and the garbage collector's work, which
// at hundreds of MB/s cost more than the copies themselves. (sync.Pool
// drops what it holds at garbage collections, so the pool bounds nothing
// and pins nothing for long.)
type fetchBuffers struct{ pool sync.Pool }

func (f *fetchBuffers) get() []byte {
	if b, ok := f.pool.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

func (f *fetchBuffers) put(b []byte) {
	if cap(b) < minPooledFetchBuffer || cap(b) > maxPooledFetchBuffer {
		return
	}
	b = b[:0]
	f.pool.Put(&b)
}

// release gives back the records of resp, which nothing reads any more:
// it was encoded, or replaced by a later read.
func (f *fetchBuffers) release(resp *kmsg.FetchResponse) {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			f.put(p.RecordBatches)
			p.RecordBatches = nil
		}
	}
}

// appendReader is a log that can read into a buffer it is given
// (segment.Log.ReadAppend).
type appendReader interface {
	ReadAppend(dst []byte, offset int64, maxBytes int, limit int64) ([]byte, error)
}
