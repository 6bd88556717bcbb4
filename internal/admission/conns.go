package admission

import (
	"net"
	"sync"
	"sync/atomic"
)

// Conns bounds the connections held at once: at most Max in total and PerAddress from one
// IP address (zero or negative: no bound). The zero value bounds nothing. Safe for
// concurrent use.
type Conns struct {
	max, perAddress int

	mu     sync.Mutex
	total  int            // guarded by mu
	byAddr map[string]int // connections per IP address; guarded by mu

	// RefusedTotal and RefusedAddress count the connections refused by each bound.
	RefusedTotal, RefusedAddress atomic.Uint64
}

// NewConns returns a Conns with the two bounds (<= 0: none).
func NewConns(max, perAddress int) *Conns {
	return &Conns{max: max, perAddress: perAddress, byAddr: map[string]int{}}
}

// Acquire counts one more connection from remote ("ip:port" or an IP) and returns the
// function that gives it back (call it once, when the connection closes), or ErrTotalLimit
// or ErrAddressLimit, counting nothing.
func (c *Conns) Acquire(remote string) (release func(), err error) {
	ip := HostOf(remote)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max > 0 && c.total >= c.max {
		c.RefusedTotal.Add(1)
		return nil, ErrTotalLimit
	}
	if c.perAddress > 0 && c.byAddr[ip] >= c.perAddress {
		c.RefusedAddress.Add(1)
		return nil, ErrAddressLimit
	}
	c.total++
	c.byAddr[ip]++
	var once sync.Once
	return func() { once.Do(func() { c.release(ip) }) }, nil
}

func (c *Conns) release(ip string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if n := c.byAddr[ip] - 1; n > 0 {
		c.byAddr[ip] = n
	} else {
		delete(c.byAddr, ip)
	}
}

// Count returns the connections held now.
func (c *Conns) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// HostOf returns the IP address of a peer address "host:port" (remote itself when it has no
// port).
func HostOf(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}
