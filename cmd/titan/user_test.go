package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/auth"
	"github.com/titan-broker/titan/internal/dest"
)

// runIn runs the titan command line with stdin (not a terminal: the password is its first
// line).
func runIn(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	code := 0
	if err := root.Execute(); err != nil {
		errb.WriteString("titan: " + err.Error() + "\n")
		code = 1
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

func login(t *testing.T, path, user, pass string) error {
	t.Helper()
	a, err := auth.New(auth.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Authenticate(auth.Credentials{Login: user, Passcode: pass})
	return err
}

func TestUserAddPasswdDeleteList(t *testing.T) {
	t.Setenv(usersEnv, "")
	path := filepath.Join(t.TempDir(), "users.yml")
	r := runIn(t, "first-secret\n", "user", "add", "alice", "--roles", "admins,ops", "--grant", "#:all", "--users", path).requireOK(t)
	requireContains(t, r.stdout, "added user alice in "+path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "first-secret") || !strings.Contains(string(data), "$2a$") {
		t.Fatalf("the users file must hold a bcrypt hash only:\n%s", data)
	}
	if err := login(t, path, "alice", "first-secret"); err != nil {
		t.Fatalf("login with the added password: %v", err)
	}
	runIn(t, "x\n", "user", "add", "alice", "--users", path).requireFail(t, "titan: auth: user already exists: alice\n")

	runIn(t, "second-secret\r\n", "user", "passwd", "alice", "--users", path).requireOK(t)
	if login(t, path, "alice", "first-secret") == nil || login(t, path, "alice", "second-secret") != nil {
		t.Fatal("passwd did not replace the password")
	}

	t.Setenv(usersEnv, path) // the environment names the file too
	runIn(t, "", "user", "add", "app1", "--no-password", "--roles", "apps", "--certificate", "cn:app1.example.com", "--grant", "/queue/apps.#:send").requireOK(t)
	r = runIn(t, "", "user", "list").requireOK(t)
	requireContains(t, r.stdout, "USER", "alice", "admins,ops", "password", "app1", "apps", "certificate cn:app1.example.com")

	runIn(t, "", "user", "delete", "alice").requireOK(t)
	if login(t, path, "alice", "second-secret") == nil {
		t.Fatal("a deleted user still logs in")
	}
	runIn(t, "", "user", "delete", "alice").requireFail(t, "titan: no user alice in "+path+"\n")
}

func TestUserPasswordNeverFromArgv(t *testing.T) {
	t.Setenv(usersEnv, "")
	path := filepath.Join(t.TempDir(), "users.yml")
	for _, sub := range []string{"add", "passwd"} {
		r := runIn(t, "pw\n", "user", sub, "bob", "--password", "x", "--users", path)
		if r.code == 0 || !strings.Contains(r.stderr, "a secret on the command line shows in the process list") {
			t.Fatalf("user %s took --password: %+v", sub, r)
		}
	}
	runIn(t, "\n", "user", "add", "bob", "--users", path).requireFail(t, "titan: empty password (type it at the prompt, or pipe it on stdin)\n")
	runIn(t, "pw\n", "user", "add", "bob").requireFail(t, "titan: no users file: pass --users FILE (or set TITAN_USERS_FILE)\n")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a failed add wrote the file: %v", err)
	}
}

// Issue #31: permissions without hand-editing YAML. --grant (repeatable) and user grant go to
// the user's own role; role grant to a role; a user left with no permission is warned about.
func TestUserGrantRevokeAndRole(t *testing.T) {
	t.Setenv(usersEnv, "")
	path := filepath.Join(t.TempDir(), "users.yml")
	runIn(t, "pw\n", "user", "add", "admin", "--grant", "#:all", "--users", path).requireOK(t)
	runIn(t, "pw\n", "user", "add", "app", "--grant", "/queue/orders.#:send,consume", "--grant", "/topic/prices/*:consume", "--users", path).requireOK(t)
	r := runIn(t, "pw\n", "user", "add", "guest", "--roles", "guests", "--users", path)
	if r.code != 0 || !strings.Contains(r.stderr, "warning: no rule grants guest") {
		t.Fatalf("no warning for a user without permissions: %+v", r)
	}
	runIn(t, "", "role", "grant", "guests", "/topic/prices.#:consume", "--users", path).requireOK(t)
	runIn(t, "", "user", "grant", "app", "/queue/orders.#:create", "--users", path).requireOK(t)
	runIn(t, "", "user", "revoke", "app", "/topic/prices/*:consume", "--users", path).requireOK(t)
	runIn(t, "", "user", "grant", "app", "/queue/orders:fly", "--users", path).requireFail(t,
		"titan: auth: invalid users file: grant \"/queue/orders:fly\": \"fly\" is not a permission (send, consume, browse, create, manage or all)\n")
	a, err := auth.New(auth.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user    string
		pattern dest.Pattern
		channel string
		want    auth.Permission
	}{
		{"admin", dest.PatternQueues, "orders.eu", auth.All}, // the narrower rule kept admin's rights
		{"app", dest.PatternQueues, "orders.eu", auth.Send | auth.Consume | auth.Create},
		{"app", dest.PatternEvents, "prices.eur", 0},
		{"guest", dest.PatternEvents, "prices.eur", auth.Consume},
		{"guest", dest.PatternQueues, "orders.eu", 0},
	} {
		if got := a.Allowed(c.user, "default", c.pattern, c.channel); got != c.want {
			t.Errorf("%s on %s %s: %v, want %v", c.user, c.pattern, c.channel, got, c.want)
		}
	}
}

// A script that pipes one password per line to several commands gives each command its own
// line (as the shell's read does): a prompt reads one line from stdin and leaves the rest.
func TestUserPasswordOneLinePerCommand(t *testing.T) {
	t.Setenv(usersEnv, "")
	path := filepath.Join(t.TempDir(), "users.yml")
	stdin := strings.NewReader("first-pw\nsecond-pw\n")
	for _, name := range []string{"alice", "bob"} {
		root := newRootCmd()
		root.SetArgs([]string{"user", "add", name, "--users", path})
		root.SetIn(stdin)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		if err := root.Execute(); err != nil {
			t.Fatalf("user add %s: %v", name, err)
		}
	}
	if err := login(t, path, "alice", "first-pw"); err != nil {
		t.Fatalf("alice with the first line: %v", err)
	}
	if err := login(t, path, "bob", "second-pw"); err != nil {
		t.Fatalf("bob with the second line: %v", err)
	}
}
