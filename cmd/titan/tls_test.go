package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/config"
)

// selfSigned writes a self-signed CA certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "titan test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestClientCommandsOverTLS(t *testing.T) {
	cert, key := selfSigned(t, t.TempDir())
	b, _ := startBroker(t, func(c *config.Config) {
		c.Servers[0].TLS = config.TLS{Enabled: true, CertFile: cert, KeyFile: key}
	})
	stomp := b.Addrs()[0]
	run(t, "send", "--stomp", stomp, "--ca", cert, "--login", "app", "--passcode-file", secretFile(t, "pw"), "/queue/tls", "over tls").requireOK(t)
	r := run(t, "subscribe", "--stomp", stomp, "--tls", "--ca", cert, "/queue/tls", "-n", "1", "-o", "json").requireOK(t)
	requireContains(t, r.stdout, `"body":"over tls"`)

	r = run(t, "send", "--stomp", stomp, "/queue/tls", "plain")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot connect to "+stomp) || !strings.Contains(r.stderr, "expects TLS") {
		t.Fatalf("plain STOMP against the TLS port: %+v", r)
	}
	r = run(t, "send", "--stomp", stomp, "--tls", "/queue/tls", "untrusted")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot connect to "+stomp+": tls handshake") || !strings.Contains(r.stderr, "trusted CA") {
		t.Fatalf("untrusted certificate: %+v", r)
	}
}
