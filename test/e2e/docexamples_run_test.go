package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/auth"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/testport"
)

// TestDocExamplesRun runs every fenced code block of README.md and docs/ that a reader would
// run, as written, against real titan processes (issue #31): shell blocks (sh, bash, shell;
// console: its "$ " lines) with bash, python blocks with /usr/bin/python3 (Debian's
// python3-stomp), js blocks with node as ES modules (npm's stompjs, from
// test/e2e/clients/node_modules). A go block is compiled against this checkout: a complete
// file as written, a fragment as the body of a function whose parameters its marker names.
// yaml blocks are TestDocExamplesConfig's; a text block is a diagram. Any other block, and
// any block that cannot run here, must carry a marker on the line right above its opening
// fence: a block that is neither runnable nor marked fails the test. A users.yml that a
// shell block leaves in its directory must grant what the document's hand-written users
// file (the next yaml block with users:) grants, as the README says.
//
// Markers (HTML comments, so the rendered document does not show them):
//
//	<!-- not-run: REASON -->           the block is not run, for REASON (logged)
//	<!-- not-run "PREFIX": REASON -->  its commands that start with PREFIX are not run
//	<!-- fragment: PARAMS -->          a go block that is a fragment: compiled as the body of
//	                                   func(PARAMS) (what the reader's program provides)
//	<!-- given: FIXTURE, ... -->       the state the block presumes, made by the test first:
//	    connection   a live STOMP connection, whose session id replaces the README's
//	                 example id titan-1f2e3d4c5b6a7980
//	    dead-letter  /queue/jobs with one message waiting and one dead-lettered to
//	                 /queue/DLQ/jobs (NACKed max-deliveries times)
//	    durables     offline durable subscriptions named billing: on /events-store/orders,
//	                 and on /topic/orders for client-id app-1
//	    stopped      the broker has stored a message and was stopped (SIGTERM)
//
// How a block runs (what the test changes, and nothing else):
//   - Working directory: a fresh temporary directory; `titan` on PATH is the binary the e2e
//     harness built from this checkout, and `go run ./cmd/titan` runs that binary too (the
//     compile is TestMain's). No TITAN_* variable of the test's environment leaks in.
//   - Ports: the documented ports (STOMP 61613-61619, monitor 7777-7779, cluster routes
//     6222-6224) are rewritten to the test's ports, in the text and in TITAN_PORT,
//     TITAN_MONITOR_PORT, TITAN_STOMP and TITAN_ADDR (what a command without flags uses);
//     TITAN_HOST=127.0.0.1 keeps a server without --host on loopback.
//   - The broker: a block that starts no `titan serve` runs against one the test starts as
//     the quick start does (`titan serve`, Pebble store in ./data of the block's directory).
//     A block that starts servers gets fresh ports and no test broker.
//   - Long-running commands run in the background: `titan serve` (and the test waits for its
//     ready line before the next command, as the README asks), `titan subscribe` without
//     --count or --wait, and the dashboard (`titan` without --once). At the block's end, and
//     at least a second after it started, each must still be running (no failure, no
//     "unavailable" monitor); then it is stopped with SIGTERM, and a server must exit 0.
//   - What a reader types: a variable the block reads but never assigns ($ORDERS_PW) is set
//     to a generated secret, and stdin holds password lines, one for each prompt.
//   - bash runs with `set -Eeo pipefail`: every command must succeed; curl runs with
//     --fail-with-body, so an HTTP error answer fails the block too.
//
// A failing block fails the test with its file:line, the line of the failing command and
// the block's output. Blocks run in parallel, each with its own directory and broker.
func TestDocExamplesRun(t *testing.T) {
	t.Parallel()
	// The blocks run at once, each in its own goroutine: they mostly wait for the processes
	// they start, and t.Parallel would run only -parallel (GOMAXPROCS) of them at a time.
	var runs []func()
	var wg sync.WaitGroup
	defer wg.Wait()
	ran := 0
	for _, b := range docBlocks(t) {
		name := fmt.Sprintf("%s:%d", b.file, b.line)
		plan, err := parseDocMarks(b.marks)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if plan.notRun != "" {
			t.Logf("%s (%s): not run: %s", name, b.lang, plan.notRun)
			continue
		}
		switch b.lang {
		case "yaml":
			continue // TestDocExamplesConfig loads and serves these
		case "text":
			continue // a diagram
		case "go":
			ran++
			runs = append(runs, func() { t.Run(name, func(t *testing.T) { compileGoBlock(t, name, b, plan) }) })
			continue
		case "sh", "bash", "console", "shell", "python", "js":
		default:
			t.Errorf("%s: a %q block, which this test cannot run: mark it <!-- not-run: REASON --> (see TestDocExamplesRun)", name, b.lang)
			continue
		}
		ran++
		runs = append(runs, func() { t.Run(name, func(t *testing.T) { runDocBlock(t, name, b, plan) }) })
	}
	if ran == 0 {
		t.Fatal("no runnable example found in README.md or docs/")
	}
	for _, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
}

// docPlan is what a block's markers say.
type docPlan struct {
	notRun   string            // the whole block is not run, for this reason
	fragment *string           // a go fragment's function parameters
	skipCmds map[string]string // command prefix → why such commands are not run
	given    []string          // fixtures
}

var (
	notRunMark = regexp.MustCompile(`^not-run(?: "([^"]+)")?: (\S.*)$`)
	givenMark  = regexp.MustCompile(`^given: (\S.*)$`)
	fragMark   = regexp.MustCompile(`^fragment: (\S.*)$`)
	fixtures   = []string{"connection", "dead-letter", "durables", "stopped"}
)

func parseDocMarks(marks []string) (docPlan, error) {
	p := docPlan{skipCmds: map[string]string{}}
	for _, m := range marks {
		if g := notRunMark.FindStringSubmatch(m); g != nil {
			if g[1] == "" {
				p.notRun = g[2]
			} else {
				p.skipCmds[g[1]] = g[2]
			}
			continue
		}
		if g := givenMark.FindStringSubmatch(m); g != nil {
			for _, f := range strings.Split(g[1], ",") {
				f = strings.TrimSpace(f)
				if !slices.Contains(fixtures, f) {
					return p, fmt.Errorf("marker %q: unknown fixture %q (known: %s)", m, f, strings.Join(fixtures, ", "))
				}
				p.given = append(p.given, f)
			}
			continue
		}
		if g := fragMark.FindStringSubmatch(m); g != nil {
			p.fragment = &g[1]
			continue
		}
		return p, fmt.Errorf("comment %q right above a code block is not a marker of TestDocExamplesRun (not-run: REASON, not-run \"PREFIX\": REASON, given: FIXTURE, fragment: PARAMS)", m)
	}
	return p, nil
}

// shCmd is one command of a shell block: its text (continuation lines joined as written)
// and the document line it starts on.
type shCmd struct {
	line int
	text string
}

// shCommands splits a shell block into commands, dropping comment and blank lines.
func shCommands(b docBlock) []shCmd {
	var out []shCmd
	lines := strings.Split(strings.TrimSuffix(b.text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if b.lang == "console" {
			// A console block is a transcript: commands after a "$ " prompt, the rest output.
			if !strings.HasPrefix(l, "$ ") {
				continue
			}
			l = strings.TrimPrefix(l, "$ ")
			lines[i] = l
		}
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		c := shCmd{line: b.line + 1 + i, text: l}
		for strings.HasSuffix(strings.TrimRight(lines[i], " "), `\`) && i+1 < len(lines) {
			i++
			c.text += "\n" + lines[i]
		}
		out = append(out, c)
	}
	return out
}

// cmdFields returns a command's words without its trailing comment and background `&`,
// and whether it ended in `&`.
func cmdFields(text string) ([]string, bool) {
	if i := strings.Index(text, " #"); i >= 0 {
		text = text[:i]
	}
	text = strings.ReplaceAll(text, "\\\n", " ")
	f := strings.Fields(text)
	bg := len(f) > 0 && f[len(f)-1] == "&"
	if bg {
		f = f[:len(f)-1]
	}
	return f, bg
}

// titanSubcommands are the first words after `titan` that are commands; `titan` without one
// is the live dashboard.
var titanSubcommands = []string{"serve", "send", "subscribe", "bench", "queue", "connection",
	"durable", "cluster", "user", "role", "store", "version", "help", "completion"}

// cmdKind classifies a command: "serve" (a server), "client" (a long-running client: the
// dashboard, a subscribe without --count or --wait) or "" (runs to completion).
func cmdKind(f []string) string {
	if len(f) == 0 || f[0] != "titan" {
		return ""
	}
	sub := ""
	for _, w := range f[1:] {
		if slices.Contains(titanSubcommands, w) {
			sub = w
			break
		}
	}
	has := func(flags ...string) bool {
		return slices.ContainsFunc(f, func(w string) bool {
			for _, fl := range flags {
				if w == fl || strings.HasPrefix(w, fl+"=") {
					return true
				}
			}
			return false
		})
	}
	switch {
	case sub == "serve":
		return "serve"
	case sub == "subscribe" && !has("--count", "-n", "--wait"):
		return "client"
	case sub == "" && !has("--once", "--help", "-h", "--version", "-v"):
		return "client"
	}
	return ""
}

// docPorts are the ports the documents use; a block's are rewritten to the test's.
var docPorts = regexp.MustCompile(`\b(6161[3-9]|777[7-9]|622[2-4])\b`)

// exampleConnID is the connection id the README's examples use.
const exampleConnID = "titan-1f2e3d4c5b6a7980"

// runDocBlock runs one shell, python or js block as TestDocExamplesRun describes.
func runDocBlock(t *testing.T, name string, b docBlock, plan docPlan) {
	dir := t.TempDir()
	text := strings.ReplaceAll(b.text, "go run ./cmd/titan", "titan")
	var cmds []shCmd
	serves := false
	if b.lang != "python" && b.lang != "js" {
		used := map[string]bool{}
		for _, c := range shCommands(docBlock{text: text, line: b.line, lang: b.lang}) {
			f, _ := cmdFields(c.text)
			skip := false
			for prefix, why := range plan.skipCmds {
				if strings.HasPrefix(strings.TrimSpace(c.text), prefix) {
					t.Logf("%s:%d: not run: %s", b.file, c.line, why)
					skip, used[prefix] = true, true
				}
			}
			if skip {
				continue
			}
			serves = serves || cmdKind(f) == "serve"
			cmds = append(cmds, c)
		}
		for prefix := range plan.skipCmds {
			if !used[prefix] {
				t.Errorf("%s: marker not-run %q matches no command of the block (a stale marker)", name, prefix)
			}
		}
	} else if len(plan.skipCmds) > 0 {
		t.Errorf("%s: not-run \"PREFIX\" markers apply to shell blocks only", name)
	}

	// Ports: the test broker's, or fresh ones for a block that starts its own servers.
	ports := map[string]int{}
	var fix *docFixture
	if !serves {
		if slices.Contains(plan.given, "stopped") && len(plan.given) > 1 {
			t.Fatalf("%s: fixture stopped goes alone", name)
		}
		fix = startDocBroker(t)
		dir = fix.node.dir
		ports["61613"], ports["7777"] = fix.b.stompPort, fix.monitorPort
		for _, g := range plan.given {
			fix.make(t, g)
		}
	} else if len(plan.given) > 0 {
		t.Fatalf("%s: a block that starts its own servers takes no fixture (given: %v)", name, plan.given)
	}
	port := func(doc string) int {
		if p, ok := ports[doc]; ok {
			return p
		}
		p := testport.Free(t)
		ports[doc] = p
		return p
	}
	rewrite := func(s string) string {
		s = docPorts.ReplaceAllStringFunc(s, func(m string) string { return strconv.Itoa(port(m)) })
		if strings.Contains(s, exampleConnID) {
			if fix == nil || fix.connID == "" {
				t.Fatalf("%s: uses the example connection id %s without <!-- given: connection -->", name, exampleConnID)
			}
			s = strings.ReplaceAll(s, exampleConnID, fix.connID)
		}
		return s
	}

	// `titan` on PATH is the harness's binary, whatever its file name (TITAN_E2E_BINARY).
	bin := t.TempDir()
	titanAbs, err := filepath.Abs(titanBin)
	requireNoError(t, err)
	requireNoError(t, os.Symlink(titanAbs, filepath.Join(bin, "titan")))
	env := docEnv(text, bin)
	env = append(env,
		"TITAN_HOST=127.0.0.1",
		fmt.Sprintf("TITAN_PORT=%d", port("61613")),
		fmt.Sprintf("TITAN_MONITOR_PORT=%d", port("7777")),
		fmt.Sprintf("TITAN_STOMP=localhost:%d", port("61613")),
		fmt.Sprintf("TITAN_ADDR=http://localhost:%d", port("7777")))

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	switch b.lang {
	case "python":
		if pythonErr != nil {
			t.Fatalf("%s: %v; %s", name, pythonErr, installHint)
		}
		script := filepath.Join(dir, "example.py")
		requireNoError(t, os.WriteFile(script, []byte(rewrite(text)), 0o644))
		cmd = exec.CommandContext(ctx, systemPython, script)
	case "js":
		if nodeErr != nil {
			t.Fatalf("%s: %v; %s", name, nodeErr, installHint)
		}
		// The packages the reader installs with npm: the harness's installed clients.
		modules, err := filepath.Abs(filepath.Join("clients", "node_modules"))
		requireNoError(t, err)
		requireNoError(t, os.Symlink(modules, filepath.Join(dir, "node_modules")))
		script := filepath.Join(dir, "example.mjs")
		requireNoError(t, os.WriteFile(script, []byte(rewrite(text)), 0o644))
		cmd = exec.CommandContext(ctx, "node", script)
	default:
		logs := t.TempDir()
		env = append(env, "DOC_LOGS="+logs)
		cmd = exec.CommandContext(ctx, "bash", "-c", shScript(cmds, rewrite))
		t.Cleanup(func() {
			ents, _ := os.ReadDir(logs)
			for _, e := range ents {
				data, _ := os.ReadFile(filepath.Join(logs, e.Name()))
				if bytes.Contains(data, []byte("WARNING: DATA RACE")) {
					t.Errorf("%s: the background command of %s reported a data race", name, e.Name())
				}
				if t.Failed() {
					t.Logf("%s:\n%s", e.Name(), data)
				}
			}
		})
	}
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = strings.NewReader(strings.Repeat("doc-Example-passw0rd\n", 16))
	// One process group: the background servers and clients a block starts are stopped with
	// it, whatever happens.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := os.CreateTemp(t.TempDir(), "out")
	requireNoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out // a file: background processes do not hold Wait
	start := time.Now()
	runErr := cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // nothing of the block outlives it
	output, _ := os.ReadFile(out.Name())
	if runErr != nil {
		t.Fatalf("%s (%s) failed: %v after %v\n--- output:\n%s", name, b.lang, runErr,
			time.Since(start).Round(time.Millisecond), output)
	}
	if raceEnabled && bytes.Contains(output, []byte("WARNING: DATA RACE")) {
		t.Fatalf("%s: a titan process reported a data race:\n%s", name, output)
	}
	t.Logf("%s ran in %v\n--- output:\n%s", name, time.Since(start).Round(time.Millisecond), output)
	if users := filepath.Join(dir, "users.yml"); b.lang != "python" && b.lang != "js" {
		if _, err := os.Stat(users); err == nil {
			sameGrantsAsDocument(t, name, b, users)
		}
	}
}

// sameGrantsAsDocument checks a users file a block wrote against the document's hand-written
// users file (the next yaml block with top key users: after the block): every user both
// name has the same permissions on every probed destination. The README says the two give
// the same permissions; this holds it to that.
func sameGrantsAsDocument(t *testing.T, name string, b docBlock, written string) {
	t.Helper()
	var hand *docBlock
	for _, o := range docBlocks(t) {
		if o.file == b.file && o.line > b.line && o.lang == "yaml" && strings.Contains("\n"+o.text, "\nusers:") {
			hand = &o
			break
		}
	}
	if hand == nil {
		t.Fatalf("%s wrote users.yml, but no hand-written users file (a yaml block with users:) follows it in %s", name, b.file)
	}
	handPath := filepath.Join(t.TempDir(), "users.yml")
	requireNoError(t, os.WriteFile(handPath, []byte(hand.text), 0o600))
	want, err := auth.New(auth.Options{Path: handPath})
	requireNoError(t, err, "loading the users file of %s:%d", hand.file, hand.line)
	got, err := auth.New(auth.Options{Path: written})
	requireNoError(t, err, "loading the users file %s wrote", name)
	users := []string{}
	for _, l := range strings.Split(hand.text, "\n") {
		if m := regexp.MustCompile(`^  ([a-z][a-z0-9-]*):`).FindStringSubmatch(l); m != nil {
			users = append(users, m[1])
		}
	}
	if len(users) == 0 {
		t.Fatalf("no user in the users file of %s:%d", hand.file, hand.line)
	}
	probes, granted := 0, 0
	for _, u := range users {
		for _, group := range []string{"default", "billing", "other"} {
			for p := dest.PatternEvents; p <= dest.MaxPattern; p++ {
				for _, ch := range []string{"orders", "orders.eu", "prices", "prices.gold", "jobs", "x.y"} {
					probes++
					if want.Allowed(u, group, p, ch) != 0 {
						granted++
					}
					if g, w := got.Allowed(u, group, p, ch), want.Allowed(u, group, p, ch); g != w {
						t.Errorf("%s wrote users.yml granting %s on %s@%v/%s %v; the hand-written file (%s:%d) grants %v",
							name, u, group, p, ch, g, hand.file, hand.line, w)
					}
				}
			}
		}
	}
	if granted == 0 {
		t.Fatalf("the hand-written users file (%s:%d) grants nothing on the probes", hand.file, hand.line)
	}
	t.Logf("%s: users.yml grants %v what %s:%d grants (%d probes, %d with permissions)", name, users, hand.file, hand.line, probes, granted)
}

// docEnv is the environment of a block: the test's, without TITAN_* variables, with bin
// (holding the harness's titan) first on PATH and the variables the block reads but never sets given a
// generated value.
func docEnv(text, bin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TITAN_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	// A -race build sleeps 1 s at exit (GORACE atexit_sleep_ms): a block runs many commands.
	env = append(env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	assigned := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*([A-Za-z_][A-Za-z0-9_]*)=`).FindAllStringSubmatch(text, -1) {
		assigned[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\$\{?([A-Z_][A-Z0-9_]*)`).FindAllStringSubmatch(text, -1) {
		if v := m[1]; !assigned[v] && os.Getenv(v) == "" && !strings.HasPrefix(v, "TITAN_") {
			env = append(env, v+"=doc-"+strings.ToLower(v)+"-S3cret")
			assigned[v] = true
		}
	}
	return env
}

// shPrelude runs before a shell block's commands: strict mode, curl that fails on an HTTP
// error, and the bookkeeping of background commands (bg, ready, the EXIT trap that checks
// and stops them).
const shPrelude = `set -Eeo pipefail
__line=0; __ok=0; __pids=(); __names=(); __kinds=(); __lines=(); __starts=()
trap 'echo "doc-test: the command at line $__line failed (exit $?): $BASH_COMMAND"' ERR
curl() { command curl --silent --show-error --fail-with-body "$@"; }
__bg() { __pids+=("$1"); __names+=("$2"); __kinds+=("$3"); __lines+=("$__line"); __starts+=("${EPOCHREALTIME/./}"); }
__ready() {
  local i n=${#__pids[@]} k
  for ((k = 0; k < n; k++)); do
    [ "${__kinds[k]}" = serve ] || continue
    for ((i = 0; i < 600; i++)); do
      grep -q ' ready: ' "$DOC_LOGS/${__names[k]}.log" && break
      if ! kill -0 "${__pids[k]}" 2>/dev/null; then
        echo "doc-test: the server started at line ${__lines[k]} exited before its ready line:"
        cat "$DOC_LOGS/${__names[k]}.log"; return 1
      fi
      sleep 0.1
    done
    if ((i == 600)); then echo "doc-test: the server started at line ${__lines[k]} printed no ready line in 60 s"; return 1; fi
  done
}
__end() {
  local rc=$? k st fail=0 wait_us=0 age
  trap - ERR
  # A long-running command gets a second to fail (a bad flag, no broker) before it is judged.
  for ((k = 0; k < ${#__pids[@]}; k++)); do
    age=$((${EPOCHREALTIME/./} - __starts[k]))
    if ((1000000 - age > wait_us)); then wait_us=$((1000000 - age)); fi
  done
  if ((__ok && wait_us > 0)); then sleep "$((wait_us / 1000000)).$(printf %06d $((wait_us % 1000000)))"; fi
  for ((k = 0; k < ${#__pids[@]}; k++)); do
    if ((__ok)); then
      if ! kill -0 "${__pids[k]}" 2>/dev/null; then
        echo "doc-test: the command started at line ${__lines[k]} is no longer running:"; cat "$DOC_LOGS/${__names[k]}.log"; fail=1
      elif grep -q 'unavailable' "$DOC_LOGS/${__names[k]}.log"; then
        echo "doc-test: the command started at line ${__lines[k]} cannot reach the broker:"; cat "$DOC_LOGS/${__names[k]}.log"; fail=1
      fi
    fi
    kill -TERM "${__pids[k]}" 2>/dev/null || true
  done
  for ((k = 0; k < ${#__pids[@]}; k++)); do
    st=0; wait "${__pids[k]}" || st=$?
    if ((__ok)) && [ "${__kinds[k]}" = serve ] && ((st != 0)); then
      echo "doc-test: the server started at line ${__lines[k]} exited $st after SIGTERM:"; cat "$DOC_LOGS/${__names[k]}.log"; fail=1
    fi
  done
  if ((rc == 0 && fail)); then rc=1; fi
  exit $rc
}
trap __end EXIT
`

// shScript is the bash program of a shell block's commands (see TestDocExamplesRun).
func shScript(cmds []shCmd, rewrite func(string) string) string {
	var sb strings.Builder
	sb.WriteString(shPrelude)
	waiting := false
	for _, c := range cmds {
		text := rewrite(c.text)
		f, bg := cmdFields(text)
		kind := cmdKind(f)
		if waiting && kind != "serve" {
			sb.WriteString("__ready\n")
			waiting = false
		}
		fmt.Fprintf(&sb, "__line=%d; echo \"--- line %d (at ${SECONDS}s)\"\n", c.line, c.line)
		if kind == "" {
			if bg {
				fmt.Fprintf(&sb, "echo 'doc-test: line %d runs a command in the background that the test does not know how to wait for'; exit 1\n", c.line)
				continue
			}
			sb.WriteString(text + "\n")
			continue
		}
		// The trailing comment goes (the output is redirected after the command); a " #"
		// inside quotes would be cut too, which no documented long-running command has.
		if i := strings.Index(text, " #"); i >= 0 && !strings.Contains(text[i:], "\n") {
			text = text[:i]
		}
		text = strings.TrimRight(strings.TrimSuffix(strings.TrimRight(text, " "), "&"), " ")
		logName := fmt.Sprintf("line%d-titan-%s", c.line, kind)
		fmt.Fprintf(&sb, "%s >\"$DOC_LOGS/%s.log\" 2>&1 </dev/null &\n__bg $! %s %s\n", text, logName, logName, kind)
		waiting = waiting || kind == "serve"
	}
	if waiting {
		sb.WriteString("__ready\n")
	}
	sb.WriteString("__ok=1\n")
	return sb.String()
}

// docFixture is the broker a block runs against, started as the quick start starts one,
// and the state its fixtures made.
type docFixture struct {
	node        *titanNode
	b           *broker
	monitorPort int
	connID      string // the live connection of fixture connection
}

// startDocBroker starts `titan serve` with the quick start's settings (Pebble in ./data of
// the block's working directory) on free loopback ports.
func startDocBroker(t *testing.T) *docFixture {
	t.Helper()
	n := newTitanNode(t, `titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: 0}
  monitor: {host: 127.0.0.1, port: 0}
  store: {type: pebble, data-dir: ./data}
`)
	p := n.start()
	f := &docFixture{node: n, b: p.broker()}
	_, port, ok := strings.Cut(p.monitorAddr, ":")
	if !ok {
		t.Fatalf("monitor address %q", p.monitorAddr)
	}
	var err error
	f.monitorPort, err = strconv.Atoi(port)
	requireNoError(t, err, "monitor port of %q", p.monitorAddr)
	return f
}

// request writes frame (without its NUL; a receipt header is added) and returns the frames
// read before its RECEIPT; an ERROR fails the test.
func (c *rawConn) request(frame, receipt string) []*rawFrame {
	c.t.Helper()
	head, body, _ := strings.Cut(frame, "\n\n")
	requireNoError(c.t, c.write(head+"\nreceipt:"+receipt+"\n\n"+body+"\x00"), "writing %s", frame)
	var before []*rawFrame
	for {
		f, err := c.readFrame(10 * time.Second)
		requireNoError(c.t, err, "waiting for RECEIPT %s", receipt)
		if f.command == "ERROR" {
			c.t.Fatalf("%s answered by %s", strings.SplitN(frame, "\n", 2)[0], f)
		}
		if id, _ := f.get("receipt-id"); f.command == "RECEIPT" && id == receipt {
			return before
		}
		before = append(before, f)
	}
}

// make builds one fixture of a <!-- given: --> marker (see TestDocExamplesRun).
func (f *docFixture) make(t *testing.T, fixture string) {
	t.Helper()
	switch fixture {
	case "connection":
		c := dialRaw(t, f.b)
		connected := c.connect()
		f.connID, _ = connected.get("session")
		if f.connID == "" {
			t.Fatalf("CONNECTED without a session id: %s", connected)
		}
		c.request("SUBSCRIBE\nid:1\ndestination:/topic/orders\n\n", "sub")
	case "dead-letter":
		c := dialRaw(t, f.b)
		c.connect()
		c.request("SEND\ndestination:/queue/jobs\n\njob-1", "s1")
		early := c.request("SUBSCRIBE\nid:1\ndestination:/queue/jobs\nack:client-individual\nprefetch-count:1\n\n", "sub")
		// max-deliveries (default 10) deliveries, each NACKed: then it is dead-lettered.
		for i := 1; i <= 10; i++ {
			var m *rawFrame
			if len(early) > 0 {
				m, early = early[0], early[1:]
			} else {
				var err error
				m, err = c.readFrame(10 * time.Second)
				requireNoError(t, err, "delivery %d of job-1", i)
			}
			ack, _ := m.get("ack")
			if m.command != "MESSAGE" || ack == "" {
				t.Fatalf("delivery %d of job-1: %s", i, m)
			}
			early = append(early, c.request("NACK\nid:"+ack+"\n\n", fmt.Sprintf("n%d", i))...)
		}
		c.request("UNSUBSCRIBE\nid:1\n\n", "unsub")
		c.request("SEND\ndestination:/queue/jobs\n\njob-2", "s2")
		c.request("DISCONNECT\n\n", "bye")
		eventuallyQueue(t, f.b, "/queue/DLQ/jobs", "job-1 dead-lettered", func(q queueStat) bool { return q.Size == 1 })
	case "durables":
		c := dialRaw(t, f.b)
		c.connect("client-id:app-1")
		c.request("SEND\ndestination:/events-store/orders\n\norder-1", "s1")
		c.request("SUBSCRIBE\nid:1\ndestination:/events-store/orders\ndurable-name:billing\nack:client-individual\n\n", "sub1")
		c.request("SUBSCRIBE\nid:2\ndestination:/topic/orders\ndurable-subscription-name:billing\n\n", "sub2")
		c.request("DISCONNECT\n\n", "bye")
	case "stopped":
		c := dialRaw(t, f.b)
		c.connect()
		c.request("SEND\ndestination:/queue/jobs\n\nhello", "s1")
		c.request("DISCONNECT\n\n", "bye")
		f.node.stop()
	default:
		t.Fatalf("unknown fixture %q", fixture)
	}
}

// goImports are the packages a go block may use without importing them (a fragment has no
// import block): the test imports those it names.
var goImports = map[string]string{
	"context": "context", "tls": "crypto/tls", "x509": "crypto/x509", "errors": "errors",
	"fmt": "fmt", "log": "log", "os": "os", "time": "time",
	"client": "github.com/titan-broker/titan/client",
}

// compileGoBlock compiles a go block against this checkout with `go build -overlay`: a
// complete file as written; a fragment (<!-- fragment: PARAMS -->) as the body of
// func(PARAMS), with the packages it names imported and the variables it declares used.
// The package is virtual (an overlay file in a directory that does not exist), so the
// source tree is not written.
func compileGoBlock(t *testing.T, name string, b docBlock, plan docPlan) {
	src := b.text
	if !strings.HasPrefix(src, "package ") {
		if plan.fragment == nil {
			t.Fatalf("%s: a go block that is not a complete file needs <!-- fragment: PARAMS --> (see TestDocExamplesRun)", name)
		}
		var imports []string
		for q, path := range goImports {
			if regexp.MustCompile(`\b` + q + `\.`).MatchString(src + *plan.fragment) {
				imports = append(imports, strconv.Quote(path))
			}
		}
		slices.Sort(imports)
		var declared []string
		for _, m := range regexp.MustCompile(`(?m)^([a-z]\w*(?:, [a-z]\w*)*) :=`).FindAllStringSubmatch(src, -1) {
			for _, v := range strings.Split(m[1], ", ") {
				if v != "_" && !slices.Contains(declared, v) {
					declared = append(declared, v)
				}
			}
		}
		use := ""
		if len(declared) > 0 {
			use = strings.TrimSuffix(strings.Repeat("_, ", len(declared)), ", ") + " = " + strings.Join(declared, ", ") + "\n"
		}
		src = fmt.Sprintf("package docgo\n\nimport (\n%s\n)\n\nfunc example(%s) {\n%s%s}\n",
			strings.Join(imports, "\n"), *plan.fragment, src, use)
	}
	root, err := filepath.Abs(docRoot)
	requireNoError(t, err)
	virtual := filepath.Join(root, "test", "e2e", fmt.Sprintf("docgo%d", b.line), "example.go")
	if _, err := os.Stat(filepath.Dir(virtual)); err == nil {
		t.Fatalf("%s exists; the go block's virtual package must not", filepath.Dir(virtual))
	}
	tmp := t.TempDir()
	file := filepath.Join(tmp, "example.go")
	requireNoError(t, os.WriteFile(file, []byte(src), 0o644))
	overlay := filepath.Join(tmp, "overlay.json")
	requireNoError(t, os.WriteFile(overlay, []byte(fmt.Sprintf(`{"Replace": {%q: %q}}`, virtual, file)), 0o644))
	args := []string{"build", "-o", os.DevNull, "-overlay", overlay}
	if raceEnabled {
		args = append(args, "-race") // shares TestMain's build cache
	}
	cmd := exec.Command("go", append(args, "./"+filepath.ToSlash(filepath.Join("test", "e2e", filepath.Base(filepath.Dir(virtual)))))...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s does not compile: %v\n%s\n--- as compiled:\n%s", name, err, out, src)
	}
	t.Logf("%s compiles against this checkout", name)
}
