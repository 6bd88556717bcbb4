package e2e

import (
	"os"
	"path/filepath"
	"testing"
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
