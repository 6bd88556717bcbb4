package e2e

import (
	"path/filepath"
	"testing"
)

// Operator-made state survives a restart (issue 14): a queue created with `titan queue
// create` (an events dispatcher queue under the default pattern, and a durable queue with its
// limits), a ring size set at run time and a pause all come back after titan restarts on the
// same data directory, clean or crashed; a resume and a delete are remembered too.
func TestOperatorStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	forEachRestart(t, func(t *testing.T, how restartHow) {
		n := newTitanNode(t, pebbleConfig(filepath.Join(t.TempDir(), "data"), ""))
		b := n.start().broker()
		requireCLIOK(t, b, "queue", "create", "/orders", "--max-pending-bytes", "1048576")
		requireCLIOK(t, b, "queue", "create", "/queue/jobs", "--capacity", "50")
		requireCLIOK(t, b, "queue", "create", "/queue/prices", "--ring-size", "3")
		requireCLIOK(t, b, "queue", "set", "/queue/prices", "--ring-size", "5")
		requireCLIOK(t, b, "queue", "pause", "/queue/jobs")
		requireCLIOK(t, b, "queue", "pause", "/orders")
		requireCLIOK(t, b, "queue", "create", "/queue/gone")
		requireCLIOK(t, b, "queue", "pause", "/queue/gone")
		requireCLIOK(t, b, "queue", "delete", "/queue/gone")

		how.restart(n)
		b = n.start().broker()
		orders := requireQueue(t, b, "/orders", "")
		checkEqual(t, "events", orders.Pattern, "/orders pattern after restart")
		checkEqual(t, true, orders.Paused, "/orders paused after restart")
		jobs := requireQueue(t, b, "/queue/jobs", "")
		checkEqual(t, 50, jobs.Capacity, "/queue/jobs capacity after restart")
		checkEqual(t, true, jobs.Paused, "/queue/jobs paused after restart")
		prices := requireQueue(t, b, "/queue/prices", "")
		checkEqual(t, 5, prices.RingSize, "/queue/prices ring size after restart")
		checkEqual(t, false, prices.Paused, "/queue/prices paused after restart")
		if qs, ok := monitorQueue(t, b, "/queue/gone", ""); ok {
			t.Fatalf("a deleted queue came back after the restart: %+v", qs)
		}

		requireCLIOK(t, b, "queue", "resume", "/queue/jobs")
		how.restart(n)
		b = n.start().broker()
		checkEqual(t, false, requireQueue(t, b, "/queue/jobs", "").Paused, "/queue/jobs paused after resume and restart")
		checkEqual(t, true, requireQueue(t, b, "/orders", "").Paused, "/orders paused after a second restart")
		n.stop()
	})
}
