package segment

// The log's use of the operating system's page cache
// (kafgres.log_cached_tail, Options.DropBehind).
//
// Kafka leaves every byte it writes in the page cache until the kernel
// needs the memory, and so do logs by default. kafgres shares its machine
// with a database that relies on the same cache, so, as Postgres does with
// its own WAL segments, a log with DropBehind lets the kernel drop what it
// no longer needs: once a Sync has made bytes durable, everything but the
// newest CachedTail bytes of the active segment is dropped (clean pages,
// so nothing is written), and a fetch that reads further back than that
// tail reads ahead of itself and drops what it read some way behind it.
// Consumers that keep up read the tail from memory; the ones catching up
// read from the disk, ahead of where they are.
//
// Writing into pages the kernel just freed is also much cheaper than into
// memory it has not used for a while, which on a virtual machine may have to
// come back from the host first (docs/performance.md, "The log's page
// cache").
//
// Only with fsync: without it the bytes behind the tail are still dirty,
// and dropping them would start their writeback in the append path.

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

const (
	// readAhead is how far a read behind the cached tail has the kernel
	// read ahead of itself, readChunk at a time.
	readAhead = 16 << 20
	readChunk = 4 << 20
	// readBehind is how far behind such a read its pages are dropped, so
	// that reads a little behind it (another consumer, a retry) still find
	// them.
	readBehind = 8 << 20

	// dropChunk is what the log drops at a time behind its tail.
	dropChunk = 2 << 20

	pageSize = 4096
)

const (
	fadvWillNeed = 3 // POSIX_FADV_WILLNEED
	fadvDontNeed = 4 // POSIX_FADV_DONTNEED
)

// fadvise passes advice on [off, off+n) of f to the kernel if f is an
// operating system file; a hint, so its errors are of no interest.
func fadvise(f any, off, n int64, advice int) {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok || n <= 0 || off < 0 {
		return
	}
	_, _, _ = syscall.Syscall6(syscall.SYS_FADVISE64, fd.Fd(), uintptr(off), uintptr(n), uintptr(advice), 0, 0)
}

// dropDurable lets the kernel drop seg's pages behind the cached tail, now
// that a Sync made its first size bytes durable. Callers hold syncMu, which
// guards seg.dropped.
func (l *Log) dropDurable(seg *segment, size int64) {
	if !l.opts.DropBehind || !l.opts.Fsync {
		return
	}
	// Whole dropChunks: the kernel drops only whole folios inside the range
	// (up to 2 MiB, aligned to their size), and when one across its end
	// cannot go it drains the page lists of every CPU, which a Sync of a
	// few hundred bytes must not pay each time.
	upto := (size - l.opts.CachedTail) &^ (dropChunk - 1)
	if upto <= seg.dropped {
		return
	}
	fadvise(seg.log, seg.dropped, upto-seg.dropped, fadvDontNeed)
	seg.dropped = upto
}

// hintRead is told of each run of batches a read found: when the run lies
// behind the cached tail (or in a sealed segment), the reader is catching
// up. Each time it crosses a multiple of readChunk, the kernel is asked to
// read the chunk readAhead ahead of it and to drop the one readBehind
// behind it, so that every chunk is asked for once per reader passing, not
// once per fetch (each ask walks the range's pages).
func (l *Log) hintRead(v *segView, run span, active bool) {
	if !l.opts.DropBehind || !l.opts.Fsync {
		return
	}
	end := run.pos + run.n
	if active && end > v.size-l.opts.CachedTail {
		return
	}
	for b := (run.pos/readChunk + 1) * readChunk; b <= end; b += readChunk {
		if ahead := b + readAhead - readChunk; ahead < v.size {
			fadvise(run.f, ahead, min(readChunk, v.size-ahead), fadvWillNeed)
		}
		if behind := b - readBehind - readChunk; behind >= 0 {
			fadvise(run.f, behind, readChunk, fadvDontNeed)
		}
	}
}

// CachedPages counts the pages of [from, to) of the file name that are in
// the page cache (mincore(2)): what a DropBehind log left there.
func CachedPages(name string, from, to int64) (int, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	to = min(to, size)
	if from >= to {
		return 0, nil
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("mmap %s: %w", name, err)
	}
	defer func() { _ = syscall.Munmap(m) }()
	vec := make([]byte, (size+pageSize-1)/pageSize)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, fmt.Errorf("mincore %s: %w", name, errno)
	}
	n := 0
	for _, v := range vec[from/pageSize : to/pageSize] {
		n += int(v & 1)
	}
	return n, nil
}

// DropsCache is whether the file system under dir drops written and synced
// pages when told to (tmpfs keeps them): where it does not, DropBehind has
// nothing to show.
func DropsCache(dir string) (bool, error) {
	f, err := os.CreateTemp(dir, "dropscache")
	if err != nil {
		return false, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		return false, err
	}
	if err := f.Sync(); err != nil {
		return false, err
	}
	fadvise(f, 0, 1<<20, fadvDontNeed)
	n, err := CachedPages(f.Name(), 0, 1<<20)
	return n == 0, err
}
