package client_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/client"
	"github.com/titan-broker/titan/internal/config"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and its key to dir and returns
// the file paths and a pool trusting it.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
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
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLS(t *testing.T) {
	certFile, keyFile, pool := writeCert(t, t.TempDir())
	tlsAddr := startBroker(t, func(c *config.Config) {
		c.Servers[0].TLS = config.TLS{Enabled: true, CertFile: certFile, KeyFile: keyFile}
	})
	plainAddr := startBroker(t, nil)
	ctx := ctxT(t)

	c := dial(t, tlsAddr, client.WithTLS(&tls.Config{RootCAs: pool}), client.WithLogin("guest", "guest"))
	if _, err := c.Send(ctx, "", "/queue/tls", []byte("secret")); err != nil {
		t.Fatalf("Send over TLS: %v", err)
	}

	cases := []struct {
		name  string
		addr  string
		opts  []client.Option
		step  string
		wants []string
	}{
		{"plain client, TLS port", tlsAddr, nil, "CONNECT", []string{tlsAddr, "expects TLS"}},
		{"TLS client, plain port", plainAddr, []client.Option{client.WithTLS(&tls.Config{RootCAs: pool})}, "tls handshake", []string{plainAddr, "does not speak TLS"}},
		{"untrusted certificate", tlsAddr, []client.Option{client.WithTLS(&tls.Config{RootCAs: x509.NewCertPool()})}, "tls handshake", []string{tlsAddr, "trusted CA"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Dial(ctx, tc.addr, append(tc.opts, client.WithConnectTimeout(3*time.Second))...)
			var ce *client.ConnectError
			if !errors.As(err, &ce) || ce.Step != tc.step {
				t.Fatalf("got %v, want a ConnectError at step %q", err, tc.step)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
