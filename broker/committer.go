package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/kafgres/kafgres/broker/storage/segment"
)

// pass is one group commit: done closes once every partition that was dirty
// when the pass started is durable.
type pass struct {
	done chan struct{}
}

// committer fsyncs every partition written since the last pass, once per
// pass, and then releases every produce that waited on that pass. Waiting
// producers therefore share fsyncs however many connections they use.
type committer struct {
	onFatal   func(error)
	onDurable func(*partition)

	mu    sync.Mutex
	dirty map[*partition]struct{}
	next  *pass
	kick  chan struct{}
}

func newCommitter(onFatal func(error), onDurable func(*partition)) *committer {
	return &committer{
		onFatal:   onFatal,
		onDurable: onDurable,
		dirty:     map[*partition]struct{}{},
		next:      &pass{done: make(chan struct{})},
		kick:      make(chan struct{}, 1),
	}
}

// enqueue marks p as written and returns the pass that will make the write
// durable. Call it after the write.
func (c *committer) enqueue(p *partition) *pass {
	c.mu.Lock()
	c.dirty[p] = struct{}{}
	ps := c.next
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return ps
}

func (c *committer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			c.commit() // acknowledge nothing that is not durable, but leave nothing unsynced
			return
		case <-c.kick:
		}
		if err := c.commit(); err != nil {
			c.onFatal(err)
			return
		}
	}
}

func (c *committer) commit() error {
	c.mu.Lock()
	dirty := c.dirty
	ps := c.next
	c.dirty = map[*partition]struct{}{}
	c.next = &pass{done: make(chan struct{})}
	c.mu.Unlock()
	if len(dirty) == 0 {
		close(ps.done)
		return nil
	}

	var (
		emu  sync.Mutex
		ferr error
	)
	sync1 := func(p *partition) {
		end, err := p.log.Sync()
		if errors.Is(err, segment.ErrClosed) {
			return // dropped meanwhile; its producers get errors, not acks
		}
		if err != nil {
			emu.Lock()
			ferr = fmt.Errorf("fsync %s-%d: %w", p.topic.name, p.index, err)
			emu.Unlock()
			return
		}
		p.publish(end)
		c.onDurable(p)
	}
	// The partitions' fsyncs run in parallel; a pass over one partition
	// (the common case) starts no goroutine, which would cost a handoff
	// per pass.
	inParallel(maxParallelSyncs, len(dirty), maps.Keys(dirty), sync1)
	if ferr != nil {
		return ferr // ps stays open: nobody is acknowledged
	}
	close(ps.done)
	return nil
}
