package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/crypto/bcrypt"

	"github.com/titan-broker/titan/internal/auth"
)

// Security (issue 12, DESIGN §8): authentication at CONNECT, per-destination authorization,
// client certificates and hot reload, against a real titan process with a users file.

// securityUsers are the users of the security tests: name → password, roles.
var securityUsers = []struct {
	name, password string
	roles          []string
}{
	{"admin", "admin-pw", []string{"admins"}},
	{"producer", "producer-pw", []string{"producers"}},
	{"consumer", "consumer-pw", []string{"consumers"}},
	{"watcher", "watcher-pw", []string{"watchers"}},
	{"app1", "", []string{"apps"}}, // certificate login only (certificates: ["cn:app1"])
}

// securityRules: admins may do everything; producers send to (and create) sec.# queues,
// consumers consume them; watchers consume prices.# events only; apps use apps.# queues.
var securityRules = []auth.Rule{
	{Channel: "#", Send: []string{"admins"}, Consume: []string{"admins"}, Browse: []string{"admins"}, Create: []string{"admins"}, Manage: []string{"admins"}},
	// The most specific rule wins, so each narrower rule names admins too (#29: the monitor's
	// browse and manage are per destination).
	{Pattern: "queues", Channel: "sec.#", Send: []string{"producers", "admins"}, Create: []string{"producers", "admins"}, Consume: []string{"consumers", "admins"}, Browse: []string{"consumers", "admins"}, Manage: []string{"admins"}},
	{Pattern: "events", Channel: "prices.#", Send: []string{"admins"}, Consume: []string{"watchers", "admins"}, Browse: []string{"admins"}, Manage: []string{"admins"}},
	{Pattern: "queues", Channel: "apps.#", Send: []string{"apps", "admins"}, Consume: []string{"apps", "admins"}, Create: []string{"apps", "admins"}, Browse: []string{"admins"}, Manage: []string{"admins"}},
}

// writeUsersFile writes a users file with securityUsers and rules and returns its path.
func writeUsersFile(t *testing.T, dir string, rules []auth.Rule) string {
	t.Helper()
	f := &auth.File{Users: map[string]*auth.User{}, Permissions: rules}
	for _, u := range securityUsers {
		requireNoError(t, f.AddUser(u.name, nil, u.roles), "adding user %s", u.name)
		if u.password != "" {
			// bcrypt at the minimum cost: the broker checks it the same way, faster.
			h, err := bcrypt.GenerateFromPassword([]byte(u.password), bcrypt.MinCost)
			requireNoError(t, err)
			f.Users[u.name].Password = string(h)
		}
	}
	f.Users["app1"].Certificates = []string{"cn:app1"} // certificate login is explicit (issue #29)
	path := filepath.Join(dir, "users.yml")
	requireNoError(t, f.Save(path), "writing the users file")
	return path
}

// startSecureBroker runs titan with a users file (and extra YAML under titan:).
func startSecureBroker(t *testing.T, extra string) (*broker, string) {
	t.Helper()
	users := writeUsersFile(t, t.TempDir(), securityRules)
	return startBroker(t, yamlConfigWith("", fmt.Sprintf("  security: {users-file: %q}\n", users)+extra)), users
}

type authConnectOut struct {
	Connected    bool     `json:"connected"`
	Errors       []string `json:"errors"`
	Disconnected bool     `json:"disconnected"`
	ElapsedMs    int      `json:"elapsed_ms"`
	Error        string   `json:"error"`
}

func TestSecurityPasswordLogin(t *testing.T) {
	b, _ := startSecureBroker(t, "")
	forEachClient(t, func(t *testing.T, c stompClient) {
		var ok authConnectOut
		c.run(t, b, "auth_connect", map[string]any{"login": "admin", "passcode": "admin-pw"}, &ok)
		if !ok.Connected || len(ok.Errors) != 0 || ok.Error != "" {
			t.Fatalf("good password: %+v", ok)
		}
		// stompjs: "should not connect with invalid credentials". A wrong password, an unknown
		// user and no login at all (anonymous is not configured) get the same answer.
		for _, creds := range []map[string]any{
			{"login": "admin", "passcode": "wrong"},
			{"login": "nobody", "passcode": "admin-pw"},
			{},
		} {
			var bad authConnectOut
			c.run(t, b, "auth_connect", creds, &bad)
			if bad.Connected || bad.Error != "" || !bad.Disconnected {
				t.Fatalf("%v: %+v, want refused and closed", creds, bad)
			}
			requireEqual(t, 1, len(bad.Errors), "%v: ERROR frames", creds)
			requireEqual(t, "access refused", bad.Errors[0], "%v: ERROR message", creds)
			if bad.ElapsedMs < 400 {
				t.Errorf("%v: refused after %d ms, before the constant delay", creds, bad.ElapsedMs)
			}
		}
	})
	// Failures are counted per reason on /metrics (two clients: two bad passwords or
	// logins each, one CONNECT without login each).
	req, _ := http.NewRequest("GET", monitorURL(b)+"/metrics", nil)
	req.SetBasicAuth("admin", "admin-pw")
	resp, err := httpClient.Do(req)
	requireNoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`titan_auth_failures_total{reason="bad-credentials"} 4`, `titan_auth_failures_total{reason="anonymous-disabled"} 2`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Failures are logged with the remote address, never with the passcode.
	logs := b.stderr.String()
	if !strings.Contains(logs, "access refused") || !strings.Contains(logs, "remote=127.0.0.1:") {
		t.Errorf("refusals not logged with the remote address")
	}
	if strings.Contains(logs, "wrong") || strings.Contains(logs, "admin-pw") {
		t.Errorf("a passcode reached the log")
	}
}

type authOpsOut struct {
	Results []string `json:"results"`
	Error   string   `json:"error"`
}

func runOps(t *testing.T, c stompClient, b *broker, login, pass string, ops ...map[string]any) []string {
	t.Helper()
	var out authOpsOut
	c.run(t, b, "auth_ops", map[string]any{"login": login, "passcode": pass, "ops": ops}, &out)
	if out.Error != "" {
		t.Fatalf("%s: %s (results so far %v)", login, out.Error, out.Results)
	}
	return out.Results
}

func op(kind, dest string) map[string]any {
	return map[string]any{"op": kind, "dest": dest, "body": "from-" + kind}
}

// A user allowed to send but not consume, and one allowed to consume but not send: each
// refused frame gets ERROR message:access refused with its receipt-id and the connection
// closes; a refused SEND stores nothing.
func TestSecuritySendButNotConsume(t *testing.T) {
	b, _ := startSecureBroker(t, "")
	forEachClient(t, func(t *testing.T, c stompClient) {
		q := "/queue/sec.orders-" + c.short
		got := runOps(t, c, b, "producer", "producer-pw", op("send", q), op("subscribe", q))
		requireEqual(t, "ok", got[0], "producer SEND")
		if !strings.HasPrefix(got[1], "access refused receipt-id=subscribe-") {
			t.Fatalf("producer SUBSCRIBE: %q, want access refused with its receipt-id", got[1])
		}
		got = runOps(t, c, b, "consumer", "consumer-pw", op("send", q))
		if !strings.HasPrefix(got[0], "access refused receipt-id=send-") {
			t.Fatalf("consumer SEND: %q, want access refused", got[0])
		}
		var l queueList
		status := monitorCall(t, b, "GET", "/titan/monitor/queues?destination="+q, "admin", "admin-pw", "", &l)
		requireEqual(t, 200, status, "GET queues as admin")
		requireEqual(t, 1, len(l.Queues), "queues named %s", q)
		requireEqual(t, 1, l.Queues[0].Size, "messages stored in %s (the refused SEND must leave nothing)", q)
		got = runOps(t, c, b, "consumer", "consumer-pw", op("subscribe", q))
		requireEqual(t, "ok", got[0], "consumer SUBSCRIBE")
		// Nobody may create a queue outside what their permissions cover.
		got = runOps(t, c, b, "producer", "producer-pw", op("send", "/queue/elsewhere-"+c.short))
		if !strings.HasPrefix(got[0], "access refused") {
			t.Fatalf("producer SEND outside sec.#: %q", got[0])
		}
	})
}

type wildcardOut struct {
	Bodies []string `json:"bodies"`
	Error  string   `json:"error"`
}

// A wildcard SUBSCRIBE delivers only from channels the user may consume.
func TestSecurityWildcardSubscriberReceivesOnlyPermittedChannels(t *testing.T) {
	b, _ := startSecureBroker(t, "")
	var out wildcardOut
	pythonClient.run(t, b, "auth_wildcard", map[string]any{
		"sub":    map[string]any{"login": "watcher", "passcode": "watcher-pw"},
		"pub":    map[string]any{"login": "admin", "passcode": "admin-pw"},
		"filter": "/topic/>",
		"sends":  [][2]string{{"/topic/secret.a", "s1"}, {"/topic/prices.eu", "p1"}, {"/topic/other", "o1"}, {"/topic/prices.us.nyse", "p2"}},
		"marker": [2]string{"/topic/prices.end", "end"},
	}, &out)
	if out.Error != "" {
		t.Fatalf("scenario: %s (bodies %v)", out.Error, out.Bodies)
	}
	requireEqual(t, "p1,p2,end", strings.Join(out.Bodies, ","), "bodies the wildcard subscriber received")
}

// ---------------------------------------------------------------- client certificates

type testPKI struct {
	caPEM                 []byte
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	dir                   string
	serverCert, serverKey string
	caFile                string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	requireNoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "titan test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	requireNoError(t, err)
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	p.caFile = filepath.Join(p.dir, "ca.pem")
	requireNoError(t, os.WriteFile(p.caFile, p.caPEM, 0o600))
	cert, k := p.issue(t, "127.0.0.1", p.ca, p.caKey, true)
	p.serverCert, p.serverKey = filepath.Join(p.dir, "server.pem"), filepath.Join(p.dir, "server.key")
	requireNoError(t, os.WriteFile(p.serverCert, cert, 0o600))
	requireNoError(t, os.WriteFile(p.serverKey, k, 0o600))
	return p
}

var serial int64 = 10

// issue returns a PEM certificate and key for cn signed by parent (a server certificate with
// an IP SAN when server, else a client certificate).
func (p *testPKI) issue(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	return issueCert(t, cn, parent, parentKey, func(tmpl *x509.Certificate) {
		if server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		}
	})
}

// issueCert returns a PEM certificate and key for cn signed by parent (self-signed when
// parent is nil): a client certificate, which edit may change before it is signed.
func issueCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, edit func(*x509.Certificate)) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	requireNoError(t, err)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	edit(tmpl)
	if parent == nil { // self-signed
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	requireNoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	requireNoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// dialTLS connects to addr presenting the client certificate (none when certPEM is nil).
func (p *testPKI) dialTLS(t *testing.T, addr string, certPEM, keyPEM []byte) (*rawConn, error) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	conf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certPEM != nil {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		requireNoError(t, err)
		conf.Certificates = []tls.Certificate{cert}
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// A verified client certificate authenticates the connection: its CN names the user, who
// then has that user's permissions; a certificate naming no user is refused; one from
// another CA fails the TLS handshake. The monitor API is served over HTTPS.
func TestSecurityClientCertificateLogin(t *testing.T) {
	pki := newTestPKI(t)
	users := writeUsersFile(t, t.TempDir(), securityRules)
	b := startBroker(t, fmt.Sprintf(`titan:
  servers:
    - name: stomps
      host: 127.0.0.1
      port: 0
      tls: {enabled: true, cert-file: %q, key-file: %q, client-auth: require, ca-file: %q}
  monitor: {host: 127.0.0.1, port: 0, tls: {enabled: true, cert-file: %q, key-file: %q}}
  store: {type: memory}
  security: {users-file: %q}
  log: {level: debug}
`, pki.serverCert, pki.serverKey, pki.caFile, pki.serverCert, pki.serverKey, users))

	// The monitor API speaks HTTPS with the same certificate.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.caPEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", "https://"+b.monitorAddr+"/titan/monitor/health", nil)
	req.SetBasicAuth("admin", "admin-pw")
	resp, err := hc.Do(req)
	requireNoError(t, err, "HTTPS GET health")
	resp.Body.Close()
	requireEqual(t, http.StatusOK, resp.StatusCode, "HTTPS monitor health")
	hc.CloseIdleConnections()

	cert, key := pki.issue(t, "app1", pki.ca, pki.caKey, false)
	c, err := pki.dialTLS(t, b.stompAddr, cert, key)
	requireNoError(t, err, "TLS dial with app1's certificate")
	c.connect() // no login header: the certificate is the credential
	requireNoError(t, c.write("SEND\ndestination:/queue/apps.jobs\nreceipt:r1\n\nhello\x00"))
	f, err := c.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command, "answer to app1's SEND (%s)", f)
	requireNoError(t, c.write("SEND\ndestination:/queue/sec.orders\nreceipt:r2\n\nhello\x00"))
	f, err = c.readFrame(10 * time.Second)
	requireNoError(t, err)
	msg, _ := f.get("message")
	requireEqual(t, "ERROR access refused", f.command+" "+msg, "app1 SEND outside its permissions")

	// python3-stomp (ssl) presenting app1's certificate, without a login.
	certFile, keyFile := filepath.Join(pki.dir, "app1.pem"), filepath.Join(pki.dir, "app1.key")
	requireNoError(t, os.WriteFile(certFile, cert, 0o600))
	requireNoError(t, os.WriteFile(keyFile, key, 0o600))
	var py struct {
		Connected bool     `json:"connected"`
		Send      string   `json:"send"`
		Errors    []string `json:"errors"`
		Error     string   `json:"error"`
	}
	pythonClient.run(t, b, "auth_tls", map[string]any{"cert": certFile, "key": keyFile, "ca": pki.caFile, "dest": "/queue/apps/py"}, &py)
	if !py.Connected || py.Send != "ok" || py.Error != "" {
		t.Fatalf("python3-stomp certificate login: %+v", py)
	}

	cert, key = pki.issue(t, "stranger", pki.ca, pki.caKey, false)
	c, err = pki.dialTLS(t, b.stompAddr, cert, key)
	requireNoError(t, err, "TLS dial with a certificate naming no user")
	requireNoError(t, c.write("CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00"))
	f, err = c.readFrame(10 * time.Second)
	requireNoError(t, err)
	msg, _ = f.get("message")
	requireEqual(t, "ERROR access refused", f.command+" "+msg, "a certificate naming no user")

	rogue, rkey := pki.issue(t, "app1", nil, nil, false) // self-signed, CN app1
	if c, err = pki.dialTLS(t, b.stompAddr, rogue, rkey); err == nil {
		_ = c.write("CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00")
		if f, err = c.readFrame(10 * time.Second); err == nil {
			t.Fatalf("a certificate from another CA got %s", f)
		}
	}
	if c, err = pki.dialTLS(t, b.stompAddr, nil, nil); err == nil {
		_ = c.write("CONNECT\naccept-version:1.2\nhost:localhost\nlogin:admin\npasscode:admin-pw\n\n\x00")
		if f, err = c.readFrame(10 * time.Second); err == nil {
			t.Fatalf("client-auth require accepted a connection without a certificate: %s", f)
		}
	}
}

// ---------------------------------------------------------------- hot reload

// SIGHUP re-reads the users file: the connection stays open, and its next SEND is checked
// against the new permissions.
func TestSecurityReloadOnSIGHUPAppliesToOpenConnections(t *testing.T) {
	b, users := startSecureBroker(t, "")
	c := dialRaw(t, b)
	c.connect("login:producer", "passcode:producer-pw")
	send := func(rid string) *rawFrame {
		t.Helper()
		requireNoError(t, c.write("SEND\ndestination:/queue/sec.reload\nreceipt:"+rid+"\n\nx\x00"))
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err, "answer to SEND %s", rid)
		return f
	}
	requireEqual(t, "RECEIPT", send("r1").command, "SEND before the reload")

	// A watcher subscribed before the reload, and an admin publisher.
	w := dialRaw(t, b)
	w.connect("login:watcher", "passcode:watcher-pw")
	requireNoError(t, w.write("SUBSCRIBE\ndestination:/topic/prices.live\nid:1\nreceipt:s1\n\n\x00"))
	f, err := w.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command, "watcher SUBSCRIBE")
	pub := dialRaw(t, b)
	pub.connect("login:admin", "passcode:admin-pw")
	publish := func(body string) {
		t.Helper()
		requireNoError(t, pub.write("SEND\ndestination:/topic/prices.live\nreceipt:"+body+"\n\n"+body+"\x00"))
		f, err := pub.readFrame(10 * time.Second)
		requireNoError(t, err)
		requireEqual(t, "RECEIPT", f.command, "admin SEND %s", body)
	}
	publish("before")
	f, err = w.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "MESSAGE before", f.command+" "+string(f.body), "watcher delivery before the reload")

	rules := append([]auth.Rule(nil), securityRules...)
	rules[1].Send = []string{"admins"}    // producers lose send on sec.#
	rules[2].Consume = []string{"admins"} // watchers lose consume on prices.#
	writeUsersFile(t, filepath.Dir(users), rules)
	requireNoError(t, b.cmd.Process.Signal(syscall.SIGHUP))
	eventually(t, 10*time.Second, func() bool {
		return strings.Contains(b.stderr.String(), "users file reloaded")
	}, "reload logged")

	f = send("r2")
	msg, _ := f.get("message")
	rid, _ := f.get("receipt-id")
	requireEqual(t, "ERROR access refused r2", f.command+" "+msg+" "+rid, "SEND after the reload, on the same connection")

	// The events fan-out is done when the publisher has its RECEIPT, so the watcher's
	// RECEIPT for a later frame would come after any MESSAGE "after": there must be none.
	publish("after")
	requireNoError(t, w.write("DISCONNECT\nreceipt:w-end\n\n\x00"))
	f, err = w.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command, "watcher's next frame after the reload (%s)", f)
}

// ---------------------------------------------------------------- monitor API and WebSocket

// monitorCall sends method path to b's monitor API as user (no credentials when "") and
// decodes a JSON answer into out (when non-nil); it returns the status. hdrs are extra
// header pairs; a "Host" pair sets the request's Host.
func monitorCall(t *testing.T, b *broker, method, path, user, pass, body string, out any, hdrs ...string) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, monitorURL(b)+path, rd)
	requireNoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	for i := 0; i+1 < len(hdrs); i += 2 {
		if hdrs[i] == "Host" {
			req.Host = hdrs[i+1]
		} else {
			req.Header.Set(hdrs[i], hdrs[i+1])
		}
	}
	resp, err := httpClient.Do(req)
	requireNoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	requireNoError(t, err)
	if out != nil && resp.StatusCode < 300 {
		requireNoError(t, json.Unmarshal(data, out), "decoding %s", data)
	}
	return resp.StatusCode
}

// The monitor API with users configured: no credentials → 401; a user without manage
// cannot delete or publish; a foreign Host is refused even when Origin matches it; the CLI
// logs in with --user and --password.
func TestSecurityMonitorAPI(t *testing.T) {
	b, _ := startSecureBroker(t, "")
	requireEqual(t, http.StatusUnauthorized, monitorCall(t, b, "GET", "/titan/monitor/queues", "", "", "", nil), "no credentials")
	requireEqual(t, http.StatusUnauthorized, monitorCall(t, b, "POST", "/publish", "", "", `{"destination":"/queue/sec.m","body":"x"}`, nil), "publish without credentials")
	requireEqual(t, http.StatusUnauthorized, monitorCall(t, b, "GET", "/titan/monitor/queues", "admin", "wrong", "", nil), "wrong password")
	requireEqual(t, http.StatusCreated, monitorCall(t, b, "POST", "/titan/monitor/queues?destination=/queue/sec.m", "admin", "admin-pw", "", nil), "admin creates")
	// consumer has browse (on sec.#) but no manage.
	requireEqual(t, http.StatusOK, monitorCall(t, b, "GET", "/titan/monitor/queues", "consumer", "consumer-pw", "", nil), "consumer reads")
	requireEqual(t, http.StatusForbidden, monitorCall(t, b, "DELETE", "/titan/monitor/queues?destination=/queue/sec.m&force=true", "consumer", "consumer-pw", "", nil), "consumer deletes")
	requireEqual(t, http.StatusForbidden, monitorCall(t, b, "POST", "/publish", "consumer", "consumer-pw", `{"destination":"/queue/sec.m","body":"x"}`, nil), "consumer publishes")
	requireEqual(t, http.StatusForbidden, monitorCall(t, b, "GET", "/titan/monitor/queues", "producer", "producer-pw", "", nil), "a user without browse reads")
	// DNS rebinding: the foreign name is same-origin for the browser, Origin included.
	_, port, _ := net.SplitHostPort(b.monitorAddr)
	evil := "rebind.example:" + port
	requireEqual(t, http.StatusForbidden, monitorCall(t, b, "POST", "/titan/monitor/queues?destination=/queue/sec.evil", "admin", "admin-pw", "", nil,
		"Host", evil, "Origin", "http://"+evil, "Sec-Fetch-Site", "same-origin"), "foreign Host")
	requireEqual(t, http.StatusForbidden, monitorCall(t, b, "GET", "/titan/monitor/snapshot", "admin", "admin-pw", "", nil, "Host", evil), "foreign Host read")

	r := titanCLI(t, b, "--user", "consumer", "--password-file", secretFile(t, "consumer-pw"), "queue", "delete", "/queue/sec.m")
	if r.code == 0 || !strings.Contains(r.stderr, "lacks the manage permission") {
		t.Fatalf("CLI delete without manage: %s", r)
	}
	requireCLIOK(t, b, "--user", "admin", "--password-file", secretFile(t, "admin-pw"), "queue", "delete", "/queue/sec.m")
}

// The quick start: with no users file and no monitor host configured, the monitor API
// listens on loopback only, and loopback STOMP clients connect anonymously.
func TestSecurityQuickStartDefaults(t *testing.T) {
	b := startBroker(t, `titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: 0}
  monitor: {port: 0}
  store: {type: memory}
`)
	host, _, err := net.SplitHostPort(b.monitorAddr)
	requireNoError(t, err)
	requireEqual(t, "127.0.0.1", host, "default monitor bind address")
	var out authConnectOut
	pythonClient.run(t, b, "auth_connect", nil, &out)
	if !out.Connected {
		t.Fatalf("anonymous loopback CONNECT without a users file: %+v", out)
	}
	if !strings.Contains(b.stderr.String(), "no users file") {
		t.Errorf("the quick-start mode is not logged")
	}
}

// The WebSocket endpoint accepts same-origin pages and non-browser clients, and refuses a
// page from a foreign origin unless allowed-origins lists it.
func TestSecurityWebSocketForeignOriginRefusedByDefault(t *testing.T) {
	n := newTitanNode(t, wsConfig(t))
	p := n.start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := wsURL(p)
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://evil.example"}}})
	if err == nil {
		c.CloseNow()
		t.Fatal("WebSocket upgrade from a foreign Origin accepted")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Origin: %v, want 403", err)
	}
	for _, h := range []http.Header{{"Origin": {"http://" + p.stompAddrs[1]}}, nil} {
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{"v12.stomp"}})
		requireNoError(t, err, "WebSocket upgrade with Origin %v", h)
		requireNoError(t, c.Write(ctx, websocket.MessageText, []byte("CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00")))
		_, data, err := c.Read(ctx)
		requireNoError(t, err)
		if !strings.HasPrefix(string(data), "CONNECTED\n") {
			t.Fatalf("answer over WebSocket: %q", data)
		}
		c.CloseNow()
	}
	n.stop()
}
