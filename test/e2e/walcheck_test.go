package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Damage in the newest write-ahead log, found at start-up (issue 11): damage that recovery
// can prove had been synced makes titan refuse to start with a corruption error (which does
// not blame another titan process); damage it cannot prove synced but that drops records
// is reported loudly (an ERROR line naming the WAL and the offsets) and, since the records
// it drops had been committed (issue 30's committed mark), titan refuses to start until
// --accept-data-loss.
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

	out := refusedStart(t, node)
	line := logLineWith(out, "store recovery drops records")
	if line == "" || !strings.Contains(line, filepath.Base(wal)) || !strings.Contains(line, "damage_offset=") {
		t.Fatalf("no ERROR line reporting the dropped WAL tail; stderr:\n%s", out)
	}
	if !strings.Contains(out, "committed records are missing") || !strings.Contains(out, "--accept-data-loss") {
		t.Fatalf("the start on a WAL that lost committed records was not refused with the data-loss advice:\n%s", out)
	}
	t.Logf("titan: %s", line)
	node.args = []string{"--accept-data-loss"}
	p = node.start()
	node.args = nil

	// Run 2: five more, a clean stop; damage the first batch of the newest WAL, which later
	// chunks prove was synced: titan must refuse to start.
	sendPersistent(p, 100)
	node.stop()
	wal = newestWAL(t, data)
	b, err = os.ReadFile(wal)
	requireNoError(t, err)
	b[30] ^= 0x40
	requireNoError(t, os.WriteFile(wal, b, 0o644))

	out = refusedStart(t, node)
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

// refusedStart runs `titan serve` on node's configuration and requires it to exit with an
// error before it is ready; it returns the process's stderr.
func refusedStart(t *testing.T, node *titanNode, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), brokerStartTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, titanBin, append([]string{"serve", "--config", node.cfgPath}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("titan serve: exit %v (timeout %v), want a refused start; stderr:\n%s", err, ctx.Err(), stderr.String())
	}
	return stderr.String()
}

// TestWALCutRefusedAndReported (issue 30): receipted messages, kill -9, then 777 bytes cut
// off the end of the newest WAL. titan refuses to start, saying how many committed records
// are missing and pointing at `titan store check` and --accept-data-loss; the check prints
// the report (exit 1); --accept-data-loss starts with what remains and logs the loss; the
// next plain start is clean and holds exactly the messages that survived.
func TestWALCutRefusedAndReported(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	node := newTitanNode(t, pebbleConfig(data, ""))
	p := node.start()
	c := dialRaw(t, p.broker())
	c.connect()
	const sent = 200
	for i := range sent {
		if f := persistentSend(t, c, "/queue/wal-cut", i, 200); f.command != "RECEIPT" {
			t.Fatalf("SEND %d: %s", i, f)
		}
	}
	node.kill()
	wal := newestWAL(t, data)
	fi, err := os.Stat(wal)
	requireNoError(t, err)
	requireNoError(t, os.Truncate(wal, fi.Size()-777))

	out := refusedStart(t, node)
	line := logLineWith(out, "committed records are missing")
	if line == "" || !strings.Contains(line, "titan store check") || !strings.Contains(line, "--accept-data-loss") {
		t.Fatalf("the start after the cut was not refused with the data-loss report and advice:\n%s", out)
	}
	t.Logf("refused: %s", strings.TrimSpace(line))

	r := runTitan(t, nil, "store", "check", "--data-dir", data)
	if r.code != 1 || !strings.Contains(r.stdout, "DATA LOSS") || !strings.Contains(r.stdout, "bytes discarded") {
		t.Fatalf("titan store check on the cut store: %s", r)
	}
	t.Logf("titan store check:\n%s", r.stdout)

	node.args = []string{"--accept-data-loss"}
	p = node.start()
	node.args = nil
	line = logLineWith(p.stderr.String(), "data loss accepted")
	if line == "" || !strings.Contains(line, "missing_records=") || !strings.Contains(line, "discarded_bytes=") {
		t.Fatalf("no ERROR line reporting the accepted loss:\n%s", p.stderr.String())
	}
	node.stop()
	p = node.start()
	if logLineWith(p.stderr.String(), "store recovery: nothing committed is missing") == "" {
		t.Fatalf("the start after --accept-data-loss is not clean:\n%s", p.stderr.String())
	}
	if r := runTitan(t, nil, "store", "check", "--data-dir", data); r.code == 0 {
		t.Fatalf("titan store check ran while titan holds the directory: %s", r)
	}
	c = dialRaw(t, p.broker())
	c.connect()
	got := drainBodies(t, c, "/queue/wal-cut", 2*time.Second)
	if len(got) == 0 || len(got) >= sent {
		t.Fatalf("%d of %d messages after the cut; want some lost (the cut) and the rest kept", len(got), sent)
	}
	for i, b := range got {
		if !strings.HasPrefix(b, fmt.Sprintf("m-%d;", i)) {
			t.Fatalf("message %d after the cut is %.20q: not the sent prefix", i, b)
		}
	}
	t.Logf("%d of %d receipted messages survived the 777-byte cut", len(got), sent)
}
