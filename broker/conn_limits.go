package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
)

// connLimits enforces max.connections and max.connections.per.ip, the two
// connection quotas Kafka lets operators change at runtime. Kafka's
// acceptor holds back new connections while the broker-wide limit is
// reached and closes those over the per-address limit; kafgres closes both
// at once, which clients see the same way (a connection closed before any
// answer, retried with backoff).
type connLimits struct {
	mu    sync.Mutex
	total int
	perIP map[string]int
}

// admit counts a new connection from ip, or refuses it when a limit is
// reached.
func (l *connLimits) admit(ip string, maxTotal, maxPerIP int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= maxTotal || l.perIP[ip] >= maxPerIP {
		return false
	}
	if l.perIP == nil {
		l.perIP = map[string]int{}
	}
	l.total++
	l.perIP[ip]++
	return true
}

func (l *connLimits) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

func remoteIP(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// budget is a broker-wide allowance of bytes (queued.max.request.bytes for
// request frames, decompression working memory for codecs). Waiters are
// served first come, first served, so a large frame is not starved by a
// stream of small ones. A size of zero or less means unlimited.
//
// No one holding a decompression reservation ever waits for frame budget,
// so a connection that holds its frame while it waits to decompress cannot
// deadlock with another.
type budget struct {
	size int64

	mu      sync.Mutex
	used    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newBudget(size int64) *budget { return &budget{size: size} }

// errOverBudget: a single reservation larger than the whole budget.
var errOverBudget = errors.New("larger than the whole budget")

// acquire reserves n bytes, waiting until they are free or ctx ends.
func (b *budget) acquire(ctx context.Context, n int64) error {
	if b.size <= 0 || n <= 0 {
		return nil
	}
	if n > b.size {
		return fmt.Errorf("reserve %d bytes: %w of %d", n, errOverBudget, b.size)
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready:
			// Granted while we gave up: hand it back.
			b.used -= n
		default:
			for i, o := range b.waiters {
				if o == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
		}
		b.grant()
		b.mu.Unlock()
		return ctx.Err()
	}
}

// release returns n bytes reserved by acquire.
func (b *budget) release(n int64) {
	if b.size <= 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grant()
	b.mu.Unlock()
}

// grant wakes waiters, in order, while the first one fits. b.mu is held.
func (b *budget) grant() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}

// inUse is the bytes reserved right now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
