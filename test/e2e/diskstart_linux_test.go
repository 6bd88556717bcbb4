//go:build linux

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Starting on a faulty disk (issue 11): titan started with its data directory on a full
// file system, or on a read-only one, comes up with the store down and the cause on the
// health endpoint, refuses persistent SENDs with the reason (never a RECEIPT), delivers
// what was stored before, and recovers on its own once the file system accepts writes —
// the same degrade-and-recover path as a fault while running.

// fillFS writes a ballast file in dir until the file system is full and returns its path.
func fillFS(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.Create(path)
	requireNoError(t, err)
	for _, n := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, n)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
	}
	_ = f.Close()
	return path
}

func requireStartedDown(t *testing.T, p *titanProc, dest, reason string) {
	t.Helper()
	if !p.alive() {
		t.Fatalf("titan exited at start-up on a faulty disk: %v", p.waitErr)
	}
	b := p.broker()
	h := requireHealth(t, b, http.StatusServiceUnavailable, "DOWN")
	requireEqual(t, "down", h.Store.Status, "health store.status")
	requireEqual(t, reason, h.Store.Cause, "health store.cause")
	requireEqual(t, 1.0, metricSum(scrapeMetrics(t, b), `titan_store_state{state="down"}`), "titan_store_state{state=down}")
	c := dialRaw(t, b)
	c.connect()
	f := persistentSend(t, c, dest, 900, 64)
	msg, _ := f.get("message")
	if f.command != "ERROR" || msg != "store unavailable: "+reason {
		t.Fatalf("persistent SEND while the store is down: %s, want ERROR message:store unavailable: %s", f, reason)
	}
	requireOneLogLine(t, p, "store down")
}

func TestStartOnFullDiskThenRecovers(t *testing.T) {
	if delegateMounts(t) {
		return
	}
	mnt := mountTmpfsE2E(t, 64<<20)
	ballast := fillFS(t, mnt)
	node := newTitanNode(t, withStoreKeys(pebbleConfig(filepath.Join(mnt, "data"), ""), "min-free-bytes: -1"))
	p := node.start()
	const dest = "/queue/start-full"
	requireStartedDown(t, p, dest, "no space left on device")

	requireNoError(t, os.Remove(ballast))
	took := recoveredSend(t, p, dest, 1)
	t.Logf("persistent SENDs receipted %v after space was freed", took.Round(time.Millisecond))
	requireOneLogLine(t, p, "store recovered")
	requireHealth(t, p.broker(), http.StatusOK, "UP")
	receiveAll(t, p, dest, []int{1})
	node.stop()
}

func TestStartOnReadOnlyDataDirThenRecovers(t *testing.T) {
	if delegateMounts(t) {
		return
	}
	mnt := mountTmpfsE2E(t, 256<<20)
	data := filepath.Join(mnt, "data")
	node := newTitanNode(t, pebbleConfig(data, ""))
	p := node.start()
	const dest = "/queue/start-ro"
	c := dialRaw(t, p.broker())
	c.connect()
	var before []int
	for i := range 5 {
		if f := persistentSend(t, c, dest, i, 1024); f.command != "RECEIPT" {
			t.Fatalf("SEND before the fault: %s", f)
		}
		before = append(before, i)
	}
	node.stop()

	writable := bindReadOnly(t, data)
	p = node.start()
	requireStartedDown(t, p, dest, "read-only file system")
	// What was stored before is delivered while the store is down.
	receiveAll(t, p, dest, before)

	writable()
	// (Another queue: the subscriber above still holds this one.)
	took := recoveredSend(t, p, dest+"-after", 100)
	t.Logf("persistent SENDs receipted %v after the directory became writable", took.Round(time.Millisecond))
	requireOneLogLine(t, p, "store recovered")
	requireHealth(t, p.broker(), http.StatusOK, "UP")
	receiveAll(t, p, dest+"-after", []int{100})
	node.stop()
}
