package config

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"
)

// The issue-29/30 options: defaults, and every bad value reported by Validate.
func TestLivenessAndAdmissionOptions(t *testing.T) {
	c, err := Parse([]byte("titan:\n  servers:\n    - {name: s, port: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, l := c.Servers[0].ProtocolOptions, c.Limits
	if p.ConnectionTTL != 0 || p.FrameTimeout != 60000 || p.ConnectTimeout != 10000 || c.Servers[0].TransportOptions.TCPKeepAlive != 0 {
		t.Errorf("defaults: connection-ttl %d, frame-timeout %d, connect-timeout %d, tcp-keepalive %d",
			p.ConnectionTTL, p.FrameTimeout, p.ConnectTimeout, c.Servers[0].TransportOptions.TCPKeepAlive)
	}
	if l.MaxConnections != 100000 || l.MaxConnectionsPerAddress != 1000 || l.LoginBackoff != 100 || l.LoginBackoffMax != 10000 {
		t.Errorf("limit defaults: %+v", l)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	ids, err := CipherSuiteIDs(nil)
	if err != nil || slices.Contains(ids, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA) || len(ids) == 0 {
		t.Errorf("default suites %v (%v): want AEAD only", ids, err)
	}
	bad, err := Parse([]byte(`titan:
  servers:
    - {name: s, port: 0, protocol-options: {frame-timeout: -5}, tls: {min-version: "1.1", cipher-suites: [TLS_RSA_WITH_RC4_128_SHA]}}
  limits: {max-connections-per-address: -2}
`))
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Validate()
	for _, want := range []string{"frame-timeout", "min-version", "TLS_RSA_WITH_RC4_128_SHA", "max-connections-per-address"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
}
