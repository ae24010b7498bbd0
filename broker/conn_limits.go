package broker

import (
	"math"
	"net"
	"strconv"
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

// connectionLimits are the current max.connections and
// max.connections.per.ip (dynamic broker configs, else Kafka's defaults).
func (bc *brokerConfigs) connectionLimits() (total, perIP int) {
	value := func(name string) int {
		v, _ := bc.resolve(name)
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return math.MaxInt32
		}
		return n
	}
	return value("max.connections"), value("max.connections.per.ip")
}

func remoteIP(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}
