package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Damage in the newest write-ahead log, found at start-up (issue 11): damage that recovery
// can prove had been synced makes titan refuse to start with a corruption error (which does
// not blame another titan process); damage it cannot prove synced but that drops records
// is reported loudly (an ERROR line naming the WAL and the offsets), and titan starts.
func TestDamagedWALReportedAtStartup(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	node := newTitanNode(t, pebbleConfig(data, ""))

	sendPersistent := func(p *titanProc, from int) {
		c := dialRaw(t, p.broker())
		c.connect()
		for i := from; i < from+5; i++ {
			if f := persistentSend(t, c, "/queue/wal-damage", i, 300); f.command != "RECEIPT" {
				t.Fatalf("SEND %d: %s", i, f)
			}
		}
	}

	// Run 1: five receipted messages, then a clean stop; flip a byte in the last batch.
	p := node.start()
	sendPersistent(p, 0)
	node.stop()
	wal := newestWAL(t, data)
	b, err := os.ReadFile(wal)
	requireNoError(t, err)
	off := len(b) - 12 // the last chunk's last payload byte, before the 11-byte EOF trailer
	b[off] ^= 0x40
	requireNoError(t, os.WriteFile(wal, b, 0o644))

	p = node.start()
	line := logLineWith(p.stderr.String(), "store recovery drops records")
	if line == "" || !strings.Contains(line, filepath.Base(wal)) || !strings.Contains(line, "damage_offset=") {
		t.Fatalf("no ERROR line reporting the dropped WAL tail; stderr:\n%s", p.stderr.String())
	}
	t.Logf("titan: %s", line)

	// Run 2: five more, a clean stop; damage the first batch of the newest WAL, which later
	// chunks prove was synced: titan must refuse to start.
	sendPersistent(p, 100)
	node.stop()
	wal = newestWAL(t, data)
	b, err = os.ReadFile(wal)
	requireNoError(t, err)
	b[30] ^= 0x40
	requireNoError(t, os.WriteFile(wal, b, 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), brokerStartTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, titanBin, "serve", "--config", node.cfgPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("titan on a corrupt WAL: exit %v (timeout %v), want a failed start; stderr:\n%s", err, ctx.Err(), stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "corrupt data") || !strings.Contains(out, filepath.Base(wal)) {
		t.Errorf("the start-up error does not say the WAL is corrupt and which:\n%s", out)
	}
	if strings.Contains(out, "another titan") {
		t.Errorf("the corruption error blames another titan process:\n%s", out)
	}
	t.Logf("titan refused to start: %s", strings.TrimSpace(logLineWith(out, "corrupt data")))
}

// newestWAL returns the path of the highest-numbered *.log file in dir.
func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	requireNoError(t, err)
	if len(logs) == 0 {
		t.Fatalf("no WAL in %s", dir)
	}
	slices.Sort(logs) // fixed-width numbers
	return logs[len(logs)-1]
}

// logLineWith returns the first line of log containing s, or "".
func logLineWith(log, s string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
