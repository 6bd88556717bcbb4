package e2e

import (
	"slices"
	"strings"
	"testing"
)

// The rules TestDocExamplesRun applies to a block, on small inputs: markers, command
// splitting, the long-running classification and the ready wait after servers.
func TestDocExamplesRunnerRules(t *testing.T) {
	t.Parallel()
	t.Run("markers", func(t *testing.T) {
		p, err := parseDocMarks([]string{`not-run "scripts/test": the suite`, "given: connection, stopped", "fragment: ctx context.Context"})
		requireNoError(t, err)
		if p.notRun != "" || p.skipCmds["scripts/test"] != "the suite" || !slices.Equal(p.given, []string{"connection", "stopped"}) || p.fragment == nil || *p.fragment != "ctx context.Context" {
			t.Fatalf("parsed %+v", p)
		}
		if p, _ := parseDocMarks([]string{"not-run: needs docker"}); p.notRun != "needs docker" {
			t.Fatalf("whole-block not-run: %+v", p)
		}
		for _, bad := range []string{"given: a-cluster", "not-run", "TODO: fix this example"} {
			if _, err := parseDocMarks([]string{bad}); err == nil {
				t.Errorf("marker %q accepted", bad)
			}
		}
	})
	t.Run("commands", func(t *testing.T) {
		b := docBlock{lang: "sh", line: 10, text: "# a comment\nA=1\n\ntitan serve --a \\\n  --b &\ntitan send /queue/x hi   # note\n"}
		got := shCommands(b)
		want := []shCmd{{12, "A=1"}, {14, "titan serve --a \\\n  --b &"}, {16, "titan send /queue/x hi   # note"}}
		if !slices.Equal(got, want) {
			t.Fatalf("shCommands = %+v, want %+v", got, want)
		}
		con := shCommands(docBlock{lang: "console", line: 1, text: "$ titan version\ntitan 1.2.3\n"})
		if len(con) != 1 || con[0].text != "titan version" || con[0].line != 2 {
			t.Fatalf("console block: %+v", con)
		}
	})
	t.Run("kinds", func(t *testing.T) {
		for cmd, want := range map[string]string{
			"titan serve --users $F   # or a config":          "serve",
			"titan serve --data-dir ./a \\\n  --port 1 &":     "serve",
			"titan subscribe '/topic/orders/>' --output json": "client",
			"titan subscribe /queue/jobs --count 1":           "",
			"titan subscribe /queue/jobs --wait=2s":           "",
			"titan                             # dashboard":   "client",
			"titan --view queues --once":                      "",
			"titan --addr http://x queue create /orders":      "",
			"curl \"$M/connections\"":                         "",
		} {
			f, _ := cmdFields(cmd)
			if got := cmdKind(f); got != want {
				t.Errorf("cmdKind(%q) = %q, want %q", cmd, got, want)
			}
		}
	})
	t.Run("script", func(t *testing.T) {
		cmds := []shCmd{{1, "titan serve --port 1 &"}, {2, "titan serve --port 2 &"}, {3, "titan send /queue/x hi"}, {4, "titan subscribe /topic/x"}}
		s := strings.TrimPrefix(shScript(cmds, func(s string) string { return s }), shPrelude)
		// Both servers start before the test waits for their ready lines; the client after.
		order := []string{"titan serve --port 1 >", "titan serve --port 2 >", "__ready\n", "titan send /queue/x hi\n", "titan subscribe /topic/x >", "__ok=1"}
		at := 0
		for _, w := range order {
			i := strings.Index(s[at:], w)
			if i < 0 {
				t.Fatalf("%q missing or out of order in:\n%s", w, s)
			}
			at += i + len(w)
		}
		if strings.Count(s, "__ready") != 1 {
			t.Fatalf("one wait expected:\n%s", s)
		}
	})
}
