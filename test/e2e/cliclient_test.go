package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTestCert writes a self-signed CA certificate for 127.0.0.1 and its key into dir.
func writeTestCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	requireNoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "titan e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	requireNoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	requireNoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	requireNoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	requireNoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return certFile, keyFile
}

// runTitan runs the titan binary with args and env (added to a clean TITAN_* environment).
func runTitan(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, titanBin, args...)
	base := []string{"NO_COLOR=1", "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TITAN_") && !strings.HasPrefix(kv, "GORACE=") {
			base = append(base, kv)
		}
	}
	cmd.Env = append(base, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running titan %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// TestCLIClientCommandsAgainstTitan drives titan send, subscribe, bench and version (the
// built binary) against a titan process with a plain and a TLS listener: addresses from
// TITAN_STOMP, credentials from TITAN_LOGIN/TITAN_PASSCODE, TLS with --ca, and the errors a
// person meets: plain STOMP against the TLS port, a body over max-body-length, and no
// address configured at all.
func TestCLIClientCommandsAgainstTitan(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeTestCert(t, dir)
	n := newTitanNode(t, fmt.Sprintf(`titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: 0, protocol-options: {max-body-length: 4096}}
    - {name: stomp-tls, host: 127.0.0.1, port: 0, tls: {enabled: true, cert-file: %q, key-file: %q}}
  monitor: {host: 127.0.0.1, port: 0}
  store: {type: memory}
`, cert, key))
	p := n.start()
	defer n.stop()
	b := p.broker()
	tls := p.stompAddrs[1]
	env := []string{"TITAN_STOMP=" + b.stompAddr, "TITAN_LOGIN=app", "TITAN_PASSCODE=secret"}

	r := runTitan(t, env, "send", "/queue/cli-e2e", "hello")
	if r.code != 0 || r.stdout != "sent 5 bytes to /queue/cli-e2e\n" || r.stderr != "" {
		t.Fatalf("send via TITAN_STOMP: %v", r)
	}
	r = runTitan(t, nil, "send", "--stomp", tls, "--ca", cert, "-o", "json", "/queue/cli-e2e", "over tls")
	var sent struct {
		Destination string `json:"destination"`
		Bytes       int    `json:"bytes"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &sent) != nil || sent.Bytes != 8 {
		t.Fatalf("send over TLS: %v", r)
	}
	r = runTitan(t, env, "subscribe", "/queue/cli-e2e", "-n", "2", "--ack", "client-individual", "-o", "json")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, `"body":"hello"`) || !strings.Contains(r.stdout, `"body":"over tls"`) {
		t.Fatalf("subscribe: %v", r)
	}

	r = runTitan(t, nil, "send", "--stomp", tls, "/queue/cli-e2e", "plain")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot connect to "+tls) || !strings.Contains(r.stderr, "expects TLS") {
		t.Fatalf("plain STOMP against the TLS port: %v", r)
	}
	r = runTitan(t, nil, "send", "--stomp", b.stompAddr, "--tls", "--ca", cert, "/queue/cli-e2e", "tls to plain")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot connect to "+b.stompAddr+": tls handshake") || !strings.Contains(r.stderr, "does not speak TLS") {
		t.Fatalf("TLS against the plain port: %v", r)
	}
	r = runTitan(t, env, "send", "/queue/cli-e2e", strings.Repeat("x", 5000))
	if r.code != 1 || !strings.Contains(r.stderr, "body of 5000 bytes is over the broker's limit (max-body-length)") {
		t.Fatalf("body over the limit: %v", r)
	}

	r = runTitan(t, env, "bench", "--destination", "/queue/cli-e2e-bench", "-p", "2", "-c", "2", "-n", "400", "--size", "64", "-o", "json")
	var bench struct {
		Sent, Received int64
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &bench) != nil || bench.Sent != 400 || bench.Received != 400 {
		t.Fatalf("bench: %v", r)
	}

	// Nothing configured: the documented default, and a line saying so.
	r = runTitan(t, nil, "send", "--timeout", "2s", "/queue/x", "x")
	if !strings.HasPrefix(r.stderr, "titan: using the default STOMP address localhost:61613 (set --stomp or TITAN_STOMP)\n") {
		t.Fatalf("default STOMP address: %v", r)
	}
	r = runTitan(t, nil, "--timeout", "2s", "queue", "list")
	if !strings.HasPrefix(r.stderr, "titan: using the default monitor API address http://localhost:7777 (set --addr or TITAN_ADDR)\n") {
		t.Fatalf("default monitor address: %v", r)
	}
	r = runTitan(t, []string{"TITAN_ADDR=" + b.monitorAddr}, "queue", "list", "-o", "json")
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "/queue/cli-e2e") {
		t.Fatalf("queue list via TITAN_ADDR: %v", r)
	}

	r = runTitan(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "titan ") || !strings.Contains(r.stdout, "(commit ") {
		t.Fatalf("version: %v", r)
	}
	if v := runTitan(t, nil, "--version"); v.stdout != r.stdout {
		t.Fatalf("--version %q differs from version %q", v.stdout, r.stdout)
	}
}
