package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// userFile29 makes the users file of the #29 tests with the CLI, exactly as README's
// "Securing Titan" shows: admin may do everything, app owns /queue/orders.#, guest (role
// guests) may only consume /topic/prices.#.
func userFile29(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.yml")
	cli := func(stdin string, args ...string) {
		t.Helper()
		cmd := exec.Command(titanBin, append(args, "--users", path)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		requireNoError(t, err, "titan %s: %s", strings.Join(args, " "), out)
	}
	cli("admin-pw\n", "user", "add", "admin", "--grant", "#:all")
	cli("app-pw\n", "user", "add", "app", "--grant", "/queue/orders.#:send,consume,create,browse,manage")
	cli("guest-pw\n", "user", "add", "guest", "--roles", "guests")
	cli("", "role", "grant", "guests", "/topic/prices.#:consume")
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
		requireEqual(t, "ok,access refused receipt-id=send-2", strings.Join(runOps(t, c, b, "app", "app-pw", op("send", "/queue/orders.us"), op("send", "/queue/payroll")), ","), "app")
		res := runOps(t, c, b, "guest", "guest-pw", op("subscribe", "/topic/prices.eur"), op("send", "/topic/prices.eur"))
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
	} {
		requireEqual(t, c.want, monitorCall(t, b, c.method, c.path, "app", "app-pw", "", nil), "app %s %s", c.method, c.path)
	}
	var ql struct {
		Queues []struct{ Destination string } `json:"queues"`
	}
	monitorCall(t, b, "GET", "/titan/monitor/queues", "app", "app-pw", "", &ql)
	requireEqual(t, 1, len(ql.Queues), "queues app sees: %+v", ql.Queues)
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
	requireCLIOK(t, b, "--user", "admin", "--password-file", secretFile(t, "admin-pw"), "user", "reload")

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
	forEachClient(t, func(t *testing.T, c stompClient) {
		var out authConnectOut
		c.run(t, b, "auth_connect", map[string]any{"login": "guest", "passcode": "guest-pw"}, &out)
		if out.Connected {
			t.Fatal("a deleted user logged in")
		}
	})
}
