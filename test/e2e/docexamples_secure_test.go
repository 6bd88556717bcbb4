package e2e

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// serveWithFiles serves a documented titan-env.yml that names files (TLS certificates, a
// users file) with those files made by the test, and checks that every server answers as the
// example says. The files:
//   - cert-file/key-file: a server certificate for 127.0.0.1 from a test CA; ca-file: that
//     CA (the clients' CA of client-auth: require);
//   - users-file: the document's hand-written users file (its first yaml block with users:)
//     with a password set on its first user by `titan user passwd`, the way the README
//     gives.
//
// Then: a plain server takes that user's login, a TLS server with client-auth: require takes
// a client certificate the users file maps (cn:NAME) and refuses a client without one, a
// WebSocket server with TLS answers the wss:// upgrade at its path (101), another TLS server
// completes a handshake with the CA, and a TLS monitor answers GET /titan/monitor/health
// over HTTPS with the user's credentials.
func serveWithFiles(t *testing.T, name string, b docBlock) {
	t.Helper()
	var hand *docBlock
	for _, o := range docBlocks(t) {
		if o.file == b.file && o.lang == "yaml" && strings.Contains("\n"+o.text, "\nusers:") {
			hand = &o
			break
		}
	}
	if hand == nil {
		t.Fatalf("%s names a users file; %s has no hand-written users file to serve it with", name, b.file)
	}
	user, pw := usersFilePasswd(t, fmt.Sprintf("%s:%d", hand.file, hand.line), hand.text)
	pki := newTestPKI(t)
	files := map[string]string{"cert-file": pki.serverCert, "key-file": pki.serverKey, "ca-file": pki.caFile}

	var root map[string]any
	requireNoError(t, yaml.Unmarshal([]byte(servable(t, b.text)), &root))
	ti := root["titan"].(map[string]any)
	if sec, ok := ti["security"].(map[string]any); ok && sec["users-file"] != nil {
		sec["users-file"] = user.path
	}
	// Every *-file of a tls section is one the test made.
	type server struct {
		name             string
		tls, requireCert bool
		wsPath           string // transport: websocket: its path
	}
	var servers []server
	fixTLS := func(m map[string]any, what string) (on, require bool) {
		tl, ok := m["tls"].(map[string]any)
		if !ok {
			return false, false
		}
		for k, v := range tl {
			if strings.HasSuffix(k, "-file") {
				f, ok := files[k]
				if !ok {
					t.Fatalf("%s: %s names %s: %v, a file the test does not make", name, what, k, v)
				}
				tl[k] = f
			}
		}
		return tl["enabled"] == true, tl["client-auth"] == "require"
	}
	for _, s := range ti["servers"].([]any) {
		m := s.(map[string]any)
		on, req := fixTLS(m, fmt.Sprint("server ", m["name"]))
		s := server{name: fmt.Sprint(m["name"]), tls: on, requireCert: req}
		if m["transport"] == "websocket" {
			s.wsPath = "/stomp"
			if o, ok := m["transport-options"].(map[string]any); ok && o["path"] != nil {
				s.wsPath = fmt.Sprint(o["path"])
			}
		}
		servers = append(servers, s)
	}
	monitorTLS, _ := fixTLS(ti["monitor"].(map[string]any), "the monitor")
	cfg, err := yaml.Marshal(root)
	requireNoError(t, err)

	n := newTitanNode(t, string(cfg))
	p := n.start()
	if len(p.stompAddrs) != len(servers) {
		t.Fatalf("%s: %d servers configured, the ready line lists %d", name, len(servers), len(p.stompAddrs))
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.caPEM)
	for i, s := range servers {
		addr := p.stompAddrs[i]
		switch {
		case !s.tls:
			c := dialRaw(t, &broker{stompAddr: addr})
			c.connect("login:"+user.name, "passcode:"+pw)
			t.Logf("%s: server %s (%s): CONNECTED as %s", name, s.name, addr, user.name)
		case s.requireCert:
			cn := certUser(t, hand.text)
			cert, key := pki.issue(t, cn, pki.ca, pki.caKey, false)
			pair, err := tls.X509KeyPair(cert, key)
			requireNoError(t, err)
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
				&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}})
			requireNoError(t, err, "%s: TLS to server %s with a client certificate cn:%s", name, s.name, cn)
			c := rawOver(t, conn)
			c.connect()
			t.Logf("%s: server %s (%s): client certificate cn:%s CONNECTED", name, s.name, addr, cn)
			// Without a client certificate the handshake (or the first read) fails.
			bare, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool})
			if err == nil {
				_ = bare.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = bare.Write([]byte("CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00"))
				if err == nil {
					_, err = bare.Read(make([]byte, 1))
				}
				_ = bare.Close()
			}
			if err == nil {
				t.Errorf("%s: server %s (client-auth: require) answered a client without a certificate", name, s.name)
			}
		case s.wsPath != "":
			// wss://: the WebSocket upgrade at the configured path answers 101.
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool})
			requireNoError(t, err, "%s: TLS handshake with server %s", name, s.name)
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v12.stomp\r\n\r\n", s.wsPath, addr)
			requireNoError(t, err)
			status, err := bufio.NewReader(conn).ReadString('\n')
			_ = conn.Close()
			requireNoError(t, err, "%s: server %s: reading the upgrade's answer", name, s.name)
			if !strings.HasPrefix(status, "HTTP/1.1 101") {
				t.Fatalf("%s: server %s: WebSocket upgrade at %s answered %q", name, s.name, s.wsPath, status)
			}
			t.Logf("%s: server %s (%s): wss:// upgrade at %s answered 101", name, s.name, addr, s.wsPath)
		default:
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool})
			requireNoError(t, err, "%s: TLS handshake with server %s", name, s.name)
			_ = conn.Close()
			t.Logf("%s: server %s (%s): TLS handshake with the CA", name, s.name, addr)
		}
	}
	scheme := "http"
	client := &http.Client{Timeout: 10 * time.Second}
	if monitorTLS {
		scheme = "https"
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	req, err := http.NewRequest("GET", scheme+"://"+p.monitorAddr+"/titan/monitor/health", nil)
	requireNoError(t, err)
	req.SetBasicAuth(user.name, pw)
	resp, err := client.Do(req)
	requireNoError(t, err, "%s: the monitor at %s", name, p.monitorAddr)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: GET %s://%s/titan/monitor/health as %s: %s", name, scheme, p.monitorAddr, user.name, resp.Status)
	}
	t.Logf("%s: monitor %s://%s answers %s", name, scheme, p.monitorAddr, user.name)
}

// docUser is a user of a hand-written users file with the password the test set.
type docUser struct{ name, path string }

// certUser returns the cn: of the first certificate identity a users file lists.
func certUser(t *testing.T, doc string) string {
	t.Helper()
	i := strings.Index(doc, `"cn:`)
	if i < 0 {
		t.Fatal("the users file lists no cn: certificate identity")
	}
	rest := doc[i+len(`"cn:`):]
	return rest[:strings.IndexByte(rest, '"')]
}

// rawOver wraps an established connection (TLS) as a rawConn.
func rawOver(t *testing.T, conn net.Conn) *rawConn {
	t.Helper()
	t.Cleanup(func() { _ = conn.Close() })
	return &rawConn{t: t, conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
}
