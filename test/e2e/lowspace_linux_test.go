//go:build linux

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSmallDiskSteadyRefusalThenRecovery (issue 30): the data directory on a small tmpfs
// (128 MiB, a quarter of it taken by a ballast file) with the store's free-space
// watermarks at 48 and 64 MiB. Producers fill it under load: once a memtable rotation
// (Pebble's WAL preallocation and flush) takes the free space below the low-water mark,
// every persistent SEND is refused with an ERROR naming it, the health endpoint and
// titan_store_state say down, and the refusal stays steady while producers keep trying —
// one state change, not the down-and-up flapping of a disk that meets ENOSPC in
// Pebble's background writes. Removing the ballast takes the free space above the
// high-water mark: SENDs are receipted again (one more state change), and every receipted
// message is delivered.
func TestSmallDiskSteadyRefusalThenRecovery(t *testing.T) {
	if delegateMounts(t) {
		return
	}
	mnt := mountTmpfsE2E(t, 128<<20)
	ballast := filepath.Join(mnt, "ballast")
	requireNoError(t, os.WriteFile(ballast, make([]byte, 32<<20), 0o644))
	node := newTitanNode(t, withStoreKeys(pebbleConfig(filepath.Join(mnt, "data"), ""),
		"min-free-bytes: 50331648, resume-free-bytes: 67108864"))
	p := node.start()
	b := p.broker()
	const dest = "/queue/small-disk"
	const lowMsg = "store unavailable: free disk space below the low-water mark"

	acked, refusal := fillUntilError(t, p, dest, 64<<10)
	msg, _ := refusal.get("message")
	t.Logf("%d persistent SENDs of 64 KiB receipted, then ERROR message:%q", len(acked), msg)
	requireEqual(t, lowMsg, msg, "ERROR message of the refused SEND")
	h := requireHealth(t, b, http.StatusServiceUnavailable, "DOWN")
	requireEqual(t, "free disk space below the low-water mark", h.Store.Cause, "health store.cause")
	changes := metricSum(scrapeMetrics(t, b), "titan_store_state_changes_total")
	requireEqual(t, 1.0, changes, "titan_store_state_changes_total at the refusal")

	// Steady: producers keep trying for 2 s; every SEND is refused, health stays DOWN, the
	// state does not change.
	refused := 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		c := dialRaw(t, b)
		c.connect()
		f := persistentSend(t, c, dest, 100000+refused, 64<<10)
		_ = c.conn.Close()
		if f.command != "ERROR" {
			t.Fatalf("SEND while below the low-water mark answered %s", f)
		}
		if m, _ := f.get("message"); m != lowMsg {
			t.Fatalf("ERROR message %q while below the low-water mark", m)
		}
		refused++
		requireHealth(t, b, http.StatusServiceUnavailable, "DOWN")
	}
	m := scrapeMetrics(t, b)
	requireEqual(t, 1.0, metricSum(m, `titan_store_state{state="down"}`), "titan_store_state{state=down} while refusing")
	requireEqual(t, 1.0, metricSum(m, "titan_store_state_changes_total"), "state changes after %d more refused SENDs (flapping)", refused)
	requireOneLogLine(t, p, "store refuses new messages")

	requireNoError(t, os.Remove(ballast))
	took := recoveredSend(t, p, dest, len(acked)+1000)
	t.Logf("%d SENDs refused steadily for 2 s; receipted again %v after the ballast was removed", refused, took.Round(time.Millisecond))
	requireHealth(t, b, http.StatusOK, "UP")
	requireEqual(t, 2.0, metricSum(scrapeMetrics(t, b), "titan_store_state_changes_total"), "state changes after recovery")
	requireOneLogLine(t, p, "store takes new messages again")
	receiveAll(t, p, dest, append(acked, len(acked)+1000))
	node.stop()
}
