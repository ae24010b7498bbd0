package broker

import (
	"iter"
	"sync"
)

// maxParallelSyncs bounds the partitions whose files are fsynced at once
// (a group commit pass, a clean stop): each fsync blocks a thread in the
// kernel, and thousands of partitions must not ask the runtime for
// thousands of threads (it dies at 10,000).
const maxParallelSyncs = 64

// maxParallelOpens bounds the partition logs opened at once. Opening one
// is mostly reading (recovery reads the active segment after a crash), and
// more readers than this only queue on two cores and one disk.
const maxParallelOpens = 8

// inParallel calls f for each of the count items, at most limit at once,
// and returns when every call has. The last item runs on the calling
// goroutine, so a single item starts no goroutine (the common group commit
// pass: one partition).
func inParallel[T any](limit, count int, items iter.Seq[T], f func(T)) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, limit)
	n := 0
	for it := range items {
		if n++; n == count {
			f(it)
			break
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			f(it)
		})
	}
	wg.Wait()
}
