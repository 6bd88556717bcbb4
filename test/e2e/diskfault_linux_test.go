//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/mountns"
)

// Disk faults under a running titan (issue 11): the data directory lives on a small tmpfs
// the test mounts (root, as CI runs), and is filled up or made read-only while producers
// send persistent messages with receipts. The broker must refuse what it cannot store with
// an ERROR and never a RECEIPT, stay up, report it once in its log, and accept persistent
// SENDs again on its own once the fault is lifted, delivering every message it receipted.

// delegateMounts runs the calling test in a user and mount namespace when it is not root
// (mountns.Delegate), on the titan binary this process built; true means it ran there and
// the caller returns.
func delegateMounts(t *testing.T) bool {
	t.Helper()
	return mountns.Delegate(t, "TITAN_E2E_BINARY="+titanBin)
}

// mountTmpfsE2E mounts a tmpfs of size bytes on a new directory and unmounts everything
// stacked on it at cleanup (after the broker is gone: cleanups run last-in first-out). It
// needs root: as root (CI) or in delegateMounts' namespace, which the test enters first.
func mountTmpfsE2E(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("mountTmpfsE2E needs root: call delegateMounts first")
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	requireNoError(t, os.Mkdir(dir, 0o755))
	mustRun(t, "mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir)
	t.Cleanup(func() {
		for range 5 {
			if exec.Command("umount", dir).Run() != nil {
				return
			}
		}
		t.Errorf("%s still mounted", dir)
	})
	return dir
}

// bindReadOnly bind-mounts dir over itself read-only — files open in it keep writing,
// nothing new can be created — and unmounts it at cleanup, before the tmpfs under it
// (cleanups run last-in first-out). writable remounts it read-write.
func bindReadOnly(t *testing.T, dir string) (writable func()) {
	t.Helper()
	mustRun(t, "mount", "--bind", dir, dir)
	mustRun(t, "mount", "-o", "remount,bind,ro", dir)
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return func() {
		t.Helper()
		mustRun(t, "mount", "-o", "remount,bind,rw", dir)
	}
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// persistentSend sends message i (body: "m-<i>" padded to size bytes) with a receipt and
// returns the answer: RECEIPT or ERROR.
func persistentSend(t *testing.T, c *rawConn, dest string, i, size int) *rawFrame {
	t.Helper()
	body := fmt.Sprintf("m-%d;", i)
	body += strings.Repeat("x", max(0, size-len(body)))
	if err := c.write(frameOf("SEND", []string{"destination:" + dest, "persistent:true", fmt.Sprintf("receipt:r-%d", i)}, body)); err != nil {
		t.Logf("writing SEND %d: %v", i, err)
	}
	f, err := c.readFrame(30 * time.Second)
	requireNoError(t, err, "answer to persistent SEND %d", i)
	return f
}

// fillUntilError sends persistent messages until one is answered with ERROR; it returns the
// ids of those answered with RECEIPT, and the ERROR.
func fillUntilError(t *testing.T, p *titanProc, dest string, size int) ([]int, *rawFrame) {
	t.Helper()
	c := dialRaw(t, p.broker())
	c.connect()
	var acked []int
	for i := range 2000 {
		f := persistentSend(t, c, dest, i, size)
		switch f.command {
		case "RECEIPT":
			if rid, _ := f.get("receipt-id"); rid != fmt.Sprintf("r-%d", i) {
				t.Fatalf("RECEIPT %s for SEND %d", f, i)
			}
			acked = append(acked, i)
		case "ERROR":
			if rid, _ := f.get("receipt-id"); rid != fmt.Sprintf("r-%d", i) {
				t.Errorf("ERROR receipt-id %q for SEND %d", rid, i)
			}
			return acked, f
		default:
			t.Fatalf("answer to SEND %d: %s", i, f)
		}
	}
	t.Fatal("no persistent SEND was refused")
	return nil, nil
}

// recoveredSend retries a persistent SEND with receipt on fresh connections until it gets a
// RECEIPT, and returns how long that took.
func recoveredSend(t *testing.T, p *titanProc, dest string, id int) time.Duration {
	t.Helper()
	start := time.Now()
	eventually(t, 30*time.Second, func() bool {
		c := dialRaw(t, p.broker())
		c.connect()
		f := persistentSend(t, c, dest, id, 64)
		_ = c.conn.Close()
		return f.command == "RECEIPT"
	}, "a persistent SEND is receipted again after the fault is lifted")
	return time.Since(start)
}

// receiveAll subscribes to dest and requires every id in want among the message bodies.
// Others may come too: a queue SEND is routed before its group commit, so one whose commit
// failed (answered with ERROR, never a RECEIPT) can still be delivered once.
func receiveAll(t *testing.T, p *titanProc, dest string, want []int) {
	t.Helper()
	c := dialRaw(t, p.broker())
	c.connect()
	requireNoError(t, c.write(frameOf("SUBSCRIBE", []string{"id:1", "destination:" + dest, "ack:auto"}, "")))
	got := map[string]bool{}
	missing := func() bool {
		for _, i := range want {
			if !got[fmt.Sprintf("m-%d", i)] {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(60 * time.Second)
	for missing() && time.Now().Before(deadline) {
		f, err := c.readFrame(time.Until(deadline))
		requireNoError(t, err, "receiving (%d of %d so far)", len(got), len(want))
		if f.command != "MESSAGE" {
			t.Fatalf("while receiving: %s", f)
		}
		id, _, _ := strings.Cut(string(f.body), ";")
		got[id] = true
	}
	for _, i := range want {
		if !got[fmt.Sprintf("m-%d", i)] {
			t.Fatalf("receipted message m-%d not delivered (%d of %d delivered)", i, len(got), len(want))
		}
	}
}

// requireOneLogLine waits for titan's log to hold a line containing s, requires exactly
// one (the store logs a state change once, not per refused write), and logs it.
func requireOneLogLine(t *testing.T, p *titanProc, s string) {
	t.Helper()
	eventually(t, 10*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), s)
	}, "titan logs %q", s)
	var lines []string
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(l, s) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines with %q, want 1:\n%s", len(lines), s, strings.Join(lines, "\n"))
	}
	t.Logf("titan: %s", lines[0])
}

// healthAnswer is GET /titan/monitor/health.
type healthAnswer struct {
	Status string `json:"status"`
	Store  struct {
		Status     string `json:"status"`
		Cause      string `json:"cause"`
		Changes    uint64 `json:"changes"`
		Recoveries uint64 `json:"recoveries"`
	} `json:"store"`
}

// requireHealth reads the health endpoint and requires its HTTP status and status field.
func requireHealth(t *testing.T, b *broker, code int, status string) healthAnswer {
	t.Helper()
	resp, err := httpClient.Get(monitorURL(b) + "/titan/monitor/health")
	requireNoError(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var h healthAnswer
	requireNoError(t, json.Unmarshal(data, &h), "health answer %s", data)
	requireEqual(t, code, resp.StatusCode, "health HTTP status (%s)", data)
	requireEqual(t, status, h.Status, "health status (%s)", data)
	return h
}

func TestDiskFullRefusesThenRecoversWithoutRestart(t *testing.T) {
	if delegateMounts(t) {
		return
	}
	mnt := mountTmpfsE2E(t, 96<<20)
	ballast := filepath.Join(mnt, "ballast")
	requireNoError(t, os.WriteFile(ballast, make([]byte, 40<<20), 0o644))
	node := newTitanNode(t, withStoreKeys(pebbleConfig(filepath.Join(mnt, "data"), ""), "min-free-bytes: -1"))
	p := node.start()
	const dest = "/queue/disk-full"

	acked, refusal := fillUntilError(t, p, dest, 256<<10)
	msg, _ := refusal.get("message")
	t.Logf("%d persistent SENDs receipted, then ERROR message:%q", len(acked), msg)
	requireEqual(t, "store unavailable: no space left on device", msg, "ERROR message of the refused SEND")
	if !p.alive() {
		t.Fatalf("titan exited on a full disk: %v", p.waitErr)
	}
	requireOneLogLine(t, p, "store down")
	b := p.broker()
	h := requireHealth(t, b, http.StatusServiceUnavailable, "DOWN")
	requireEqual(t, "down", h.Store.Status, "health store.status")
	requireEqual(t, "no space left on device", h.Store.Cause, "health store.cause")
	m := scrapeMetrics(t, b)
	requireEqual(t, 1.0, metricSum(m, `titan_store_state{state="down"}`), "titan_store_state{state=down}")
	if metricSum(m, "titan_store_state_changes_total") < 1 {
		t.Error("titan_store_state_changes_total is 0 while the store is down")
	}
	code, body := postPublish(t, b, map[string]any{"destination": dest, "body": "x", "headers": map[string]string{"persistent": "true"}})
	requireEqual(t, http.StatusServiceUnavailable, code, "POST /publish while the store is down: %s", body)
	if !strings.Contains(string(body), "store_unavailable") || !strings.Contains(string(body), "no space left on device") {
		t.Errorf("POST /publish answer %s does not say store_unavailable: no space left on device", body)
	}

	requireNoError(t, os.Remove(ballast))
	took := recoveredSend(t, p, dest, len(acked)+1000)
	t.Logf("persistent SENDs receipted again %v after space was freed", took.Round(time.Millisecond))
	requireOneLogLine(t, p, "store recovered")
	h = requireHealth(t, b, http.StatusOK, "UP")
	requireEqual(t, "ok", h.Store.Status, "health store.status after recovery")
	if h.Store.Recoveries < 1 {
		t.Errorf("health store.recoveries = %d after recovery, want >= 1", h.Store.Recoveries)
	}
	if metricSum(scrapeMetrics(t, b), "titan_store_recoveries_total") < 1 {
		t.Error("titan_store_recoveries_total is 0 after recovery")
	}
	receiveAll(t, p, dest, append(acked, len(acked)+1000))
	node.stop()
}

func TestReadOnlyDataDirRefusesThenRecoversWithoutRestart(t *testing.T) {
	if delegateMounts(t) {
		return
	}
	mnt := mountTmpfsE2E(t, 256<<20)
	data := filepath.Join(mnt, "data")
	node := newTitanNode(t, pebbleConfig(data, ""))
	p := node.start()
	const dest = "/queue/read-only"

	var before []int
	c := dialRaw(t, p.broker())
	c.connect()
	for i := range 5 {
		if f := persistentSend(t, c, dest, 5000+i, 1024); f.command != "RECEIPT" {
			t.Fatalf("SEND before the fault: %s", f)
		}
		before = append(before, 5000+i)
	}

	// A read-only bind mount over the live data directory: open files keep writing,
	// nothing new can be created — the next WAL rotation used to kill the process.
	bindReadOnly(t, data)
	acked, refusal := fillUntilError(t, p, dest, 256<<10)
	acked = append(acked, before...)
	msg, _ := refusal.get("message")
	t.Logf("%d persistent SENDs receipted, then ERROR message:%q", len(acked), msg)
	requireEqual(t, "store unavailable: read-only file system", msg, "ERROR message of the refused SEND")
	if !p.alive() {
		t.Fatalf("titan exited on a read-only data directory: %v", p.waitErr)
	}
	if strings.Contains(p.stderr.String(), "fatal error") {
		t.Fatal("titan reported a fatal error")
	}
	requireOneLogLine(t, p, "store down")

	mustRun(t, "umount", data)
	took := recoveredSend(t, p, dest, len(acked)+1000)
	t.Logf("persistent SENDs receipted again %v after the directory became writable", took.Round(time.Millisecond))
	requireOneLogLine(t, p, "store recovered")
	receiveAll(t, p, dest, append(acked, len(acked)+1000))
	node.stop()
}
