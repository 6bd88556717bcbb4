package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretFile writes secret to a 0600 file and returns its path (for the --*-file flags).
func secretFile(t *testing.T, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue #29: no secret in argv. Each secret flag refuses a value and names the file flag and
// the environment variable to use instead.
func TestSecretsNeverFromArgv(t *testing.T) {
	for _, args := range [][]string{
		{"--password", "x", "queue", "list"},
		{"--token", "x", "queue", "list"},
		{"send", "--passcode", "x", "/queue/a", "b"},
		{"serve", "--monitor-token", "0123456789abcdef0123"},
	} {
		r := run(t, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "a secret on the command line shows in the process list") {
			t.Errorf("%v: %+v", args, r)
		}
	}
}
