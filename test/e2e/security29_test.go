package e2e

import (
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/titan-broker/titan/internal/auth"
)

// secretFile writes secret to a 0600 file and returns its path (for the CLI's --*-file
// flags: no secret in argv, issue #29).
func secretFile(t *testing.T, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ---------------------------------------------------------------- issue #29 (and #31)

// userFile29 makes the users file of the #29 tests: admin (role admins) may do everything,
// app owns /queue/orders.#, guest (role guests) may only consume /topic/prices.#. The users
// are written here with bcrypt's minimum cost (a -race broker on a loaded 2-core machine
// checks cost-10 hashes too slowly for the tests' timeouts); every permission is granted with
// the CLI, as README's "Securing Titan" does.
func userFile29(t *testing.T) string {
	t.Helper()
	f := &auth.File{Users: map[string]*auth.User{}}
	for name, roles := range map[string][]string{"admin": {"admins"}, "app": nil, "guest": {"guests"}} {
		h, err := bcrypt.GenerateFromPassword([]byte(name+"-pw"), bcrypt.MinCost)
		requireNoError(t, err)
		f.Users[name] = &auth.User{Password: string(h), Roles: roles}
	}
	path := filepath.Join(t.TempDir(), "users.yml")
	requireNoError(t, f.Save(path))
	cli := func(args ...string) {
		t.Helper()
		out, err := exec.Command(titanBin, append(args, "--users", path)...).CombinedOutput()
		requireNoError(t, err, "titan %s: %s", strings.Join(args, " "), out)
	}
	cli("role", "grant", "admins", "#:all")
	cli("user", "grant", "app", "/queue/orders.#:send,consume,create,browse,manage")
	cli("role", "grant", "guests", "/topic/prices.#:consume")
	return path
}

func startBroker29(t *testing.T) (*broker, string) {
	t.Helper()
	users := userFile29(t)
	return startBroker(t, yamlConfigWith("", fmt.Sprintf("  security: {users-file: %q}\n", users))), users
}

// stompOK sends raw (a frame with receipt:rid) on c and requires its RECEIPT.
func stompOK(t *testing.T, c *rawConn, raw, what string) {
	t.Helper()
	requireNoError(t, c.write(raw))
	f, err := c.readFrame(10 * time.Second)
	requireNoError(t, err, what)
	requireEqual(t, "RECEIPT", f.command, "%s: %s", what, f)
}

// The three users over python3-stomp and stompjs: each logs in, and may do exactly what its
// grants say.
func TestSecurity29ThreeUsersOverClients(t *testing.T) {
	b, _ := startBroker29(t)
	forEachClient(t, func(t *testing.T, c stompClient) {
		requireEqual(t, "ok,ok", strings.Join(runOps(t, c, b, "admin", "admin-pw", op("send", "/queue/payroll"), op("send", "/queue/orders.eu")), ","), "admin")
		res := runOps(t, c, b, "app", "app-pw", op("send", "/queue/orders.us"), op("send", "/queue/payroll"))
		requireEqual(t, "ok", res[0], "app sends to orders")
		requireEqual(t, true, strings.HasPrefix(res[1], "access refused"), "app sends to payroll: %v", res)
		res = runOps(t, c, b, "guest", "guest-pw", op("subscribe", "/topic/prices.eur"), op("send", "/topic/prices.eur"))
		requireEqual(t, "ok", res[0], "guest subscribes to prices")
		requireEqual(t, true, strings.HasPrefix(res[1], "access refused"), "guest sends: %v", res)
	})
}

// H: the monitor's browse and manage are per destination (HTTP and the CLI); connections and
// the users reload need the broker-wide right.
func TestSecurity29MonitorRightsPerDestination(t *testing.T) {
	b, _ := startBroker29(t)
	for _, d := range []string{"/queue/payroll", "/queue/orders.eu"} {
		requireEqual(t, http.StatusOK, monitorCall(t, b, "POST", "/publish", "admin", "admin-pw", `{"destination":"`+d+`","body":"secret"}`, nil), "admin publishes to "+d)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/titan/monitor/queues/messages?destination=/queue/payroll", http.StatusForbidden},
		{"POST", "/titan/monitor/queues/purge?destination=/queue/payroll", http.StatusForbidden},
		{"POST", "/titan/monitor/queues/pause?destination=/queue/payroll", http.StatusForbidden},
		{"DELETE", "/titan/monitor/queues?destination=/queue/payroll&force=true", http.StatusForbidden},
		{"POST", "/titan/monitor/queues/redrive?destination=/queue/payroll", http.StatusForbidden},
		{"GET", "/titan/monitor/connections", http.StatusForbidden},
		{"POST", "/titan/monitor/users/reload", http.StatusForbidden},
		{"GET", "/titan/monitor/queues/messages?destination=/queue/orders.eu", http.StatusOK},
		{"POST", "/titan/monitor/queues/pause?destination=/queue/orders.eu", http.StatusOK},
		{"GET", "/titan/monitor/history?destination=/queue/payroll", http.StatusForbidden},
		{"GET", "/titan/monitor/history?destination=/queue/orders.eu", http.StatusOK},
	} {
		requireEqual(t, c.want, monitorCall(t, b, c.method, c.path, "app", "app-pw", "", nil), "app %s %s", c.method, c.path)
	}
	var ql struct {
		Queues []struct{ Destination string } `json:"queues"`
		Total  int                            `json:"total"`
	}
	monitorCall(t, b, "GET", "/titan/monitor/queues", "app", "app-pw", "", &ql)
	requireEqual(t, 1, len(ql.Queues), "queues app sees: %+v", ql.Queues)
	requireEqual(t, 1, ql.Total, "the total counts only the queues app sees")
	requireEqual(t, "/queue/orders/eu", ql.Queues[0].Destination, "the queue app sees")

	pw := secretFile(t, "app-pw")
	for _, args := range [][]string{
		{"queue", "purge", "/queue/payroll"},
		{"queue", "delete", "/queue/payroll", "--force"},
		{"connection", "list"},
		{"user", "reload"},
	} {
		r := titanCLI(t, b, append([]string{"--user", "app", "--password-file", pw}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "forbidden") {
			t.Errorf("CLI as app %v: %s", args, r)
		}
	}
	requireCLIOK(t, b, "--user", "admin", "--password-file", secretFile(t, "admin-pw"), "queue", "purge", "/queue/payroll")
}

// M: a client cannot set the broker's dead-letter headers, over STOMP or HTTP publish, so a
// re-drive cannot be steered to a destination the client may not reach.
func TestSecurity29ForgedDeadLetterHeaderStripped(t *testing.T) {
	b, _ := startBroker29(t)
	c := dialRaw(t, b)
	c.connect("login:app", "passcode:app-pw")
	stompOK(t, c, "SEND\ndestination:/queue/orders.dlq\ndlq-original-destination:/queue/payroll\ndlq-reason:forged\nx-keep:1\nreceipt:r1\n\nstomp\x00", "app SEND")
	requireEqual(t, http.StatusOK, monitorCall(t, b, "POST", "/publish", "app", "app-pw",
		`{"destination":"/queue/orders.dlq","body":"http","headers":{"dlq-original-destination":"/queue/payroll","x-keep":"2"}}`, nil), "app publishes over HTTP")
	var br struct {
		Messages []struct {
			Body    string            `json:"body"`
			Headers map[string]string `json:"headers"`
		} `json:"messages"`
	}
	requireEqual(t, http.StatusOK, monitorCall(t, b, "GET", "/titan/monitor/queues/messages?destination=/queue/orders.dlq", "admin", "admin-pw", "", &br), "browse")
	requireEqual(t, 2, len(br.Messages), "messages")
	for _, m := range br.Messages {
		for k := range m.Headers {
			if strings.HasPrefix(k, "dlq-") {
				t.Errorf("message %q kept the client's %s header", m.Body, k)
			}
		}
		if m.Headers["x-keep"] == "" {
			t.Errorf("message %q lost its own header: %v", m.Body, m.Headers)
		}
	}
}

// M: revocation bites. A reload that deletes a user closes its connections with ERROR
// message:access revoked; one that withdraws consume ends the queue subscription the same
// way; a transaction begun before the reload cannot COMMIT a SEND the user may no longer make.
func TestSecurity29RevocationBites(t *testing.T) {
	b, users := startBroker29(t)
	guest := dialRaw(t, b)
	guest.connect("login:guest", "passcode:guest-pw")
	sub := dialRaw(t, b)
	sub.connect("login:app", "passcode:app-pw")
	stompOK(t, sub, "SUBSCRIBE\ndestination:/queue/orders.rev\nid:s1\nreceipt:r1\n\n\x00", "app SUBSCRIBE")
	tx := dialRaw(t, b)
	tx.connect("login:app", "passcode:app-pw")
	stompOK(t, tx, "BEGIN\ntransaction:t1\nreceipt:b1\n\n\x00", "BEGIN")
	stompOK(t, tx, "SEND\ndestination:/queue/orders.tx\ntransaction:t1\nreceipt:s1\n\nin-tx\x00", "SEND in the transaction")

	for _, args := range [][]string{{"user", "delete", "guest"}, {"user", "revoke", "app", "/queue/orders.#:send,consume"}} {
		cmd := exec.Command(titanBin, append(args, "--users", users)...)
		out, err := cmd.CombinedOutput()
		requireNoError(t, err, "titan %v: %s", args, out)
	}
	requireCLIOK(t, b, "--timeout", "30s", "--user", "admin", "--password-file", secretFile(t, "admin-pw"), "user", "reload")

	for name, c := range map[string]*rawConn{"deleted user": guest, "subscriber that lost consume": sub} {
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err, name)
		msg, _ := f.get("message")
		requireEqual(t, "ERROR access revoked", f.command+" "+msg, "%s: %s", name, f)
		_, err = c.expectClosed(10 * time.Second)
		requireNoError(t, err, "%s: the close after ERROR", name)
	}
	requireNoError(t, tx.write("COMMIT\ntransaction:t1\nreceipt:c1\n\n\x00"))
	f, err := tx.readFrame(10 * time.Second)
	requireNoError(t, err)
	msg, _ := f.get("message")
	rid, _ := f.get("receipt-id")
	requireEqual(t, "ERROR access refused c1", f.command+" "+msg+" "+rid, "COMMIT after the revoke: %s", f)
	var ql struct {
		Queues []struct{ Size int } `json:"queues"`
	}
	monitorCall(t, b, "GET", "/titan/monitor/queues?destination=/queue/orders.tx", "admin", "admin-pw", "", &ql)
	if len(ql.Queues) > 0 && ql.Queues[0].Size != 0 {
		t.Fatalf("the refused COMMIT stored its SEND: %+v", ql.Queues)
	}
	// The deleted user cannot log in again (an unknown user costs a dummy bcrypt check at
	// the default cost: slow under -race, hence the long wait).
	again := dialRaw(t, b)
	requireNoError(t, again.write("CONNECT\naccept-version:1.2\nhost:localhost\nlogin:guest\npasscode:guest-pw\n\n\x00"))
	f, err = again.readFrame(60 * time.Second)
	requireNoError(t, err, "the deleted user's CONNECT")
	msg, _ = f.get("message")
	requireEqual(t, "ERROR access refused", f.command+" "+msg, "the deleted user's CONNECT")
}

// issueWithSANs is testPKI.issue for a client certificate with e-mail and DNS SANs.
func (p *testPKI) issueWithSANs(t *testing.T, cn string, emails, dns []string) (certPEM, keyPEM []byte) {
	t.Helper()
	return issueCert(t, cn, p.ca, p.caKey, func(tmpl *x509.Certificate) {
		tmpl.EmailAddresses, tmpl.DNSNames = emails, dns
	})
}

// M: certificate login maps only the identities the users file lists, by type. A CA-signed
// certificate whose CN or SAN merely equals a user name is nobody.
func TestSecurity29CertificateSpoofing(t *testing.T) {
	pki := newTestPKI(t)
	users := userFile29(t)
	cmd := exec.Command(titanBin, "user", "add", "svc", "--no-password", "--certificate", "email:svc@example.com",
		"--grant", "/queue/orders.#:send", "--users", users) // no password: nothing to hash
	out, err := cmd.CombinedOutput()
	requireNoError(t, err, "user add svc: %s", out)
	b := startBroker(t, fmt.Sprintf(`titan:
  servers:
    - name: stomps
      host: 127.0.0.1
      port: 0
      tls: {enabled: true, cert-file: %q, key-file: %q, client-auth: request, ca-file: %q}
  monitor: {host: 127.0.0.1, port: 0}
  store: {type: memory}
  security: {users-file: %q}
`, pki.serverCert, pki.serverKey, pki.caFile, users))
	connectWith := func(cert, key []byte, extra string) *rawFrame {
		t.Helper()
		c, err := pki.dialTLS(t, b.stompAddr, cert, key)
		requireNoError(t, err)
		requireNoError(t, c.write("CONNECT\naccept-version:1.2\nhost:localhost\n"+extra+"\n\x00"))
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err)
		return f
	}
	for name, san := range map[string][2][]string{
		"e-mail SAN admin":   {{"admin"}, nil},
		"DNS SAN admin":      {nil, {"admin"}},
		"CN svc@example.com": {nil, nil},
	} {
		cn := "someone.example.com"
		if san[0] == nil && san[1] == nil {
			cn = "svc@example.com" // the e-mail identity as a CN is not the e-mail SAN
		}
		cert, key := pki.issueWithSANs(t, cn, san[0], san[1])
		f := connectWith(cert, key, "")
		msg, _ := f.get("message")
		requireEqual(t, "ERROR access refused", f.command+" "+msg, "%s", name)
	}
	cert, key := pki.issueWithSANs(t, "admin", nil, nil)
	requireEqual(t, "ERROR", connectWith(cert, key, "").command, "CN admin without a certificate entry")
	// The spoofing certificate only secures the channel: admin's password still logs in.
	requireEqual(t, "CONNECTED", connectWith(cert, key, "login:admin\npasscode:admin-pw\n").command, "password login over a client certificate")
	cert, key = pki.issueWithSANs(t, "anything", []string{"svc@example.com"}, nil)
	requireEqual(t, "CONNECTED", connectWith(cert, key, "").command, "the listed e-mail SAN logs in as svc")
}

// M: per-user quotas. A user over its connections quota gets ERROR message:quota exceeded
// naming the quota; closing a connection gives its place back; others are unaffected.
func TestSecurity29ConnectionQuota(t *testing.T) {
	users := userFile29(t)
	f, err := auth.Load(users)
	requireNoError(t, err)
	f.Quotas = auth.Quotas{Users: map[string]auth.Quota{"app": {Connections: 1}}}
	requireNoError(t, f.Save(users))
	b := startBroker(t, yamlConfigWith("", fmt.Sprintf("  security: {users-file: %q}\n", users)))
	first := dialRaw(t, b)
	first.connect("login:app", "passcode:app-pw")
	second := dialRaw(t, b)
	requireNoError(t, second.write("CONNECT\naccept-version:1.2\nhost:localhost\nlogin:app\npasscode:app-pw\n\n\x00"))
	fr, err := second.readFrame(30 * time.Second)
	requireNoError(t, err)
	msg, _ := fr.get("message")
	requireEqual(t, "ERROR quota exceeded", fr.command+" "+msg, "second connection of app: %s", fr)
	if !strings.Contains(string(fr.body), "quota connections") {
		t.Fatalf("the ERROR does not name the quota: %q", fr.body)
	}
	requireEqual(t, 1.0, metricValue(scrapeMetricsAs(t, b, "127.0.0.1"), `titan_quota_refused_total{quota="connections"}`), "connections-quota refusals")
	dialRaw(t, b).connect("login:admin", "passcode:admin-pw") // other users are unaffected
	stompOK(t, first, "DISCONNECT\nreceipt:d1\n\n\x00", "DISCONNECT")
	_, err = first.expectClosed(10 * time.Second)
	requireNoError(t, err)
	eventually(t, 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", b.stompAddr, 5*time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\nhost:localhost\nlogin:app\npasscode:app-pw\n\n\x00"))
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 9)
		_, err = io.ReadFull(c, buf)
		return err == nil && string(buf) == "CONNECTED"
	}, "app connects again once its first connection closed")
}
