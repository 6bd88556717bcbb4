package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/titan-broker/titan/internal/auth"
	"github.com/titan-broker/titan/internal/config"
)

// docBlock is one fenced code block of a document: its language (the word after the
// opening fence), its text, where it starts, and the HTML comments on the lines right above
// its opening fence (the markers of TestDocExamplesRun, without "<!--" and "-->").
type docBlock struct {
	file, lang, text string
	line             int
	marks            []string
}

// docBlocks returns every fenced block of README.md and docs/*.md.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files := []string{filepath.Join(docRoot, "README.md")}
	more, err := filepath.Glob(filepath.Join(docRoot, "docs", "*.md"))
	requireNoError(t, err)
	files = append(files, more...)
	var out []docBlock
	for _, f := range files {
		data, err := os.ReadFile(f)
		requireNoError(t, err)
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		var cur *docBlock
		var sb strings.Builder
		var marks []string // the comment lines right above the current line
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if cur == nil && strings.HasPrefix(line, "<!--") && strings.HasSuffix(line, "-->") {
				marks = append(marks, strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "<!--"), "-->")))
				continue
			}
			switch {
			case cur == nil && strings.HasPrefix(line, "```"):
				cur = &docBlock{file: filepath.Base(f), lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), line: n, marks: marks}
				sb.Reset()
			case cur != nil && strings.HasPrefix(line, "```"):
				cur.text = sb.String()
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				sb.WriteString(line + "\n")
			}
			marks = nil
		}
		if cur != nil {
			t.Fatalf("%s:%d: fenced block never closed", cur.file, cur.line)
		}
	}
	return out
}

// servable rewrites a documented titan-env.yml so that a test broker can serve it: every
// server and the monitor on a free loopback port, the data directory inside the test's own
// directory, logs at debug. The rest (limits, address settings, flow control, patterns)
// is served as written.
func servable(t *testing.T, doc string) string {
	t.Helper()
	var root map[string]any
	requireNoError(t, yaml.Unmarshal([]byte(doc), &root))
	ti, _ := root["titan"].(map[string]any)
	servers, _ := ti["servers"].([]any)
	if len(servers) == 0 {
		servers = []any{map[string]any{"name": "stomp"}}
	}
	for _, s := range servers {
		m := s.(map[string]any)
		m["host"], m["port"] = "127.0.0.1", 0
	}
	ti["servers"] = servers
	mon, _ := ti["monitor"].(map[string]any)
	if mon == nil {
		mon = map[string]any{}
	}
	mon["host"], mon["port"] = "127.0.0.1", 0
	ti["monitor"] = mon
	st, _ := ti["store"].(map[string]any)
	if st == nil {
		st = map[string]any{}
	}
	st["data-dir"] = "data"
	ti["store"] = st
	ti["log"] = map[string]any{"level": "debug"}
	out, err := yaml.Marshal(root)
	requireNoError(t, err)
	return string(out)
}

// TestDocExamplesConfig: every fenced yaml block of README.md and docs/ that is a
// titan-env.yml (top key titan:) is loaded by the config loader as written (config.Parse
// and Validate, the path `titan serve --config` takes) and then served by a real titan with
// its ports and data directory rewritten (servable), and a STOMP client connects. A block
// that names files the example cannot hold (TLS certificates, a users file) is served with
// files the test makes, and each of its servers and its monitor is checked
// (serveWithFiles). A cluster node needs its peers: it is loaded and validated, not served
// (the Running a cluster shell block runs three nodes). A users file block (top key
// users:) is loaded and validated as the broker loads one, and `titan user passwd` makes
// it usable (usersFilePasswd).
func TestDocExamplesConfig(t *testing.T) {
	t.Parallel()
	n := 0
	for _, b := range docBlocks(t) {
		if b.lang != "yaml" {
			continue
		}
		name := fmt.Sprintf("%s:%d", b.file, b.line)
		var top map[string]any
		requireNoError(t, yaml.Unmarshal([]byte(b.text), &top), "%s: not YAML", name)
		if _, ok := top["users"]; ok {
			// A users file: loaded and validated as the broker loads it (auth.Parse, then
			// Validate), as written — it holds no hashes; `titan user passwd` sets them, as
			// the README says: each user with a password set that way then logs in.
			f, err := auth.Parse([]byte(b.text))
			if err == nil {
				err = f.Validate()
			}
			requireNoError(t, err, "%s: the users file does not load", name)
			usersFilePasswd(t, name, b.text)
			continue
		}
		if _, ok := top["titan"]; !ok {
			t.Errorf("%s: a yaml block that is neither a titan-env.yml (titan:) nor a users file (users:)", name)
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Parse([]byte(b.text))
			if err != nil {
				t.Fatalf("%s does not load: %v\n%s", name, err, b.text)
			}
			if err := c.Validate(); err != nil && !needsFiles(b.text) {
				t.Fatalf("%s does not validate: %v\n%s", name, err, b.text)
			}
			switch {
			case needsFiles(b.text):
				serveWithFiles(t, name, b)
				return
			case strings.Contains(b.text, "\n  cluster:"):
				t.Logf("%s: loaded and validated; not served: a cluster node needs its peers (the one-machine cluster block of TestDocExamplesRun runs three)", name)
				return
			}
			br := startBroker(t, servable(t, b.text))
			c2 := dialRaw(t, br)
			c2.connect()
			_ = c2.conn.Close()
		})
	}
	if n == 0 {
		t.Fatal("no titan-env.yml example found in README.md or docs/")
	}
}

// needsFiles reports whether a documented config names files outside the example: TLS
// certificates or a users file.
func needsFiles(doc string) bool {
	return strings.Contains(doc, "cert-file:") && !strings.Contains(doc, "# tls:") || strings.Contains(doc, "users-file:")
}

// docRoot is the repository root, seen from this package's directory (go test runs a test
// binary in its package's directory).
var docRoot = filepath.Join("..", "..")

// usersFilePasswd sets a password with `titan user passwd NAME --users FILE` on a copy of a
// hand-written users file for its first user without a certificate, and logs in with it:
// the README's way from a hand-written file to a usable one. One user, because a bcrypt
// hash costs about a CPU-second in a -race build. It returns that user (with the file) and
// the password; a second call for the same document returns the first's (the file is read
// only), so the users block's check and serveWithFiles pay once.
func usersFilePasswd(t *testing.T, name, doc string) (docUser, string) {
	t.Helper()
	passwdMu.Lock()
	defer passwdMu.Unlock()
	if r, ok := passwdDone[doc]; ok {
		if r.u.name == "" {
			t.Fatalf("%s: titan user passwd failed on this users file (see the first check's failure)", name)
		}
		return r.u, r.pw
	}
	passwdDone[doc] = passwdResult{} // a failure below leaves this: callers after it fail too
	path := filepath.Join(t.TempDir(), "users.yml")
	requireNoError(t, os.WriteFile(path, []byte(doc), 0o600))
	var users []string
	for _, l := range strings.Split(doc, "\n") {
		if m := regexp.MustCompile(`^  ([a-z][a-z0-9-]*):\s*\{(.*)\}`).FindStringSubmatch(l); m != nil && !strings.Contains(m[2], "certificates") {
			users = append(users, m[1])
			break
		}
	}
	if len(users) == 0 {
		t.Fatalf("%s: no user without a certificate in the users file", name)
	}
	for _, u := range users {
		pw := "doc-" + u + "-pw"
		cmd := exec.Command(titanBin, "user", "passwd", u, "--users", path)
		cmd.Stdin = strings.NewReader(pw + "\n")
		cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
		out, err := cmd.CombinedOutput()
		requireNoError(t, err, "%s: titan user passwd %s --users FILE: %s", name, u, out)
	}
	a, err := auth.New(auth.Options{Path: path})
	requireNoError(t, err, "%s: loading the users file after titan user passwd", name)
	for _, u := range users {
		_, err := a.Authenticate(auth.Credentials{Login: u, Passcode: "doc-" + u + "-pw"})
		requireNoError(t, err, "%s: %s logs in with the password titan user passwd set", name, u)
	}
	t.Logf("%s: titan user passwd made %v able to log in", name, users)
	r := passwdResult{docUser{name: users[0], path: path}, "doc-" + users[0] + "-pw"}
	passwdDone[doc] = r
	return r.u, r.pw
}

// passwdResult is what usersFilePasswd made of one document.
type passwdResult struct {
	u  docUser
	pw string
}

var (
	passwdMu   sync.Mutex
	passwdDone = map[string]passwdResult{}
)
