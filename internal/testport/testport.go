// Package testport hands tests loopback TCP ports to write into a configuration before the
// process that listens on them starts: a cluster's route seeds, a restarted node's fixed
// ports. It is test support: only _test.go files import it.
//
// A port taken with net.Listen("127.0.0.1:0") comes from the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), the same range every outgoing connection's local
// port comes from. Between closing that probe and the real bind, any client connection on
// the machine (a nats route dialling, a test client) may take it, and the server then fails
// with "address already in use" (CI saw it). Free picks below the ephemeral range instead,
// where no outgoing connection takes a port, and never hands the same port twice in one
// process.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
)

// lowest is the lowest port Free hands out: above the registered services that a test
// machine may run (databases, brokers, 1024–9999).
const lowest = 10000

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Free returns a loopback TCP port below the ephemeral range that was free a moment ago and
// that Free has not returned before in this process. Safe for concurrent use. It fails tb
// when no such port is found after 1,000 tries, or when the ephemeral range leaves fewer
// than 1,000 ports below it (then it says so rather than pick a port that may be taken).
func Free(tb testing.TB) int {
	tb.Helper()
	hi, err := ephemeralLow()
	if err != nil {
		tb.Fatalf("testport: %v", err)
	}
	if hi-lowest < 1000 {
		tb.Fatalf("testport: the ephemeral range starts at %d, leaving no room below it above %d", hi, lowest)
	}
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		p := lowest + rand.IntN(hi-lowest)
		if given[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		given[p] = true
		return p
	}
	tb.Fatalf("testport: no free port in [%d, %d) after 1000 tries", lowest, hi)
	return 0
}

// ephemeralLow returns the first port of the kernel's ephemeral range, or Linux's default
// (32768) where the range cannot be read (other systems).
func ephemeralLow() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if os.IsNotExist(err) {
		return 32768, nil
	}
	if err != nil {
		return 0, err
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 0, fmt.Errorf("ip_local_port_range %q: %w", b, err)
	}
	return lo, nil
}
