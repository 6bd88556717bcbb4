package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster-mode semantics (issue 15) on three `titan serve` processes: ring size, events-store
// retention, _AMQ_DUPL_ID across nodes, atomic COMMIT. The scenarios are in
// clients/pycluster_semantics.py (python3-stomp, on pyclient.py's helpers).

// pyClusterSemantics runs clients/pycluster_semantics.py.
var pyClusterSemantics = stompClient{
	name:  "python3-stomp",
	short: "py",
	cmd: func(scenario, args string) (string, []string) {
		return systemPython, []string{filepath.Join("clients", "pycluster_semantics.py"), scenario, args}
	},
	err: func() error { return pythonErr },
}

// streamConfigs returns the configuration of every stream whose name starts with prefix,
// asked over NATS from the first node that answers.
func streamConfigs(t *testing.T, nodes []*clusterNode, prefix string) map[string]jetstream.StreamConfig {
	t.Helper()
	out := map[string]jetstream.StreamConfig{}
	eventually(t, 30*time.Second, func() bool {
		for _, n := range nodes {
			nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", n.natsPort), nats.Timeout(time.Second))
			if err != nil {
				continue
			}
			js, err := jetstream.New(nc)
			ok := false
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				l := js.ListStreams(ctx)
				for info := range l.Info() {
					if strings.HasPrefix(info.Config.Name, prefix) {
						out[info.Config.Name] = info.Config
					}
				}
				ok = l.Err() == nil
				cancel()
			}
			nc.Close()
			if ok {
				return true
			}
		}
		return false
	}, "the stream list")
	return out
}

func TestClusterSemanticsAcrossThreeNodes(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	pythonClient.require(t)
	// The list items, then (at the titan level) the duplicate-detection window.
	nodes := startCluster(t, `    - {match: "ring.#", default-ring-size: 3}
    - {match: "ret.#", retention-max-messages: 3}
    - {match: "aged.#", retention-max-age: 90s, retention-max-bytes: 1048576}
  duplicate-detection: {window: 120000}
`)
	run := func(t *testing.T, scenario string, args map[string]any, out any) {
		t.Helper()
		runClusterWith(t, pyClusterSemantics, nodes, scenario, args, out)
	}
	type result struct {
		Received []string `json:"received"`
		Errors   []any    `json:"errors"`
		Error    string   `json:"error"`
	}

	t.Run("ring size keeps the newest messages", func(t *testing.T) {
		var out result
		run(t, "ring", map[string]any{"dest": "/queue/ring.orders", "count": 5, "ring": 3}, &out)
		requireEqual(t, "", out.Error, "scenario error")
		if want := []string{"r2", "r3", "r4", "fence"}; !slices.Equal(want, out.Received) {
			t.Errorf("consumer on node 2 received %q, want %q (ring-size 3: the newest 3 of 5, then the fence)", out.Received, want)
		}
		if len(out.Errors) > 0 {
			t.Errorf("ERROR frames: %v", out.Errors)
		}
		cfgs := streamConfigs(t, nodes, "TITAN_default_Q_R")
		c, ok := cfgs[queueStream("default", "ring.orders", 3)]
		if !ok || c.MaxMsgsPerSubject != 3 || c.Discard != jetstream.DiscardOld || c.Retention != jetstream.WorkQueuePolicy {
			t.Errorf("ring stream config = %+v (found %v), want WorkQueue, MaxMsgsPerSubject 3, discard old", c, ok)
		}
	})

	t.Run("events-store retention", func(t *testing.T) {
		var out result
		run(t, "retention", map[string]any{"dest": "/events-store/ret.audit", "count": 5, "keep": 3}, &out)
		requireEqual(t, "", out.Error, "scenario error")
		if want := []string{"e3", "e4", "e5", "fence"}; !slices.Equal(want, out.Received) {
			t.Errorf("start-position first on node 2 read %q, want %q (retention-max-messages 3)", out.Received, want)
		}
		var aged result
		run(t, "retention", map[string]any{"dest": "/events-store/aged.audit", "count": 2, "keep": 2}, &aged)
		requireEqual(t, "", aged.Error, "scenario error")
		var sawMsgs, sawAge bool
		for name, c := range streamConfigs(t, nodes, "TITAN_default_ES_") {
			switch {
			case c.MaxMsgsPerSubject == 3:
				sawMsgs = true
			case c.MaxAge == 90*time.Second && c.MaxBytes == 1048576:
				sawAge = true
				if c.Duplicates != time.Minute {
					t.Errorf("%s: duplicate window %v, want 1m (the streams' broker-id window, below the 90 s max age)", name, c.Duplicates)
				}
			}
		}
		if !sawMsgs || !sawAge {
			t.Errorf("retention streams: max-messages class found %v, max-age/max-bytes class found %v", sawMsgs, sawAge)
		}
	})

	t.Run("duplicate id through every node is delivered once", func(t *testing.T) {
		var out struct {
			result
			Receipts int `json:"receipts"`
		}
		run(t, "dedup", map[string]any{"dest": "/queue/dd", "id": "order-42"}, &out)
		requireEqual(t, "", out.Error, "scenario error (every SEND waits for its RECEIPT)")
		requireEqual(t, 4, out.Receipts, "RECEIPTs for the four SENDs")
		if want := []string{"first", "fence"}; !slices.Equal(want, out.Received) {
			t.Errorf("consumer received %q, want %q: the repeats through nodes 2, 1 and 3 stored nothing", out.Received, want)
		}
		if len(out.Errors) > 0 {
			t.Errorf("ERROR frames: %v", out.Errors)
		}
		c := streamConfigs(t, nodes, "TITAN_default_Q")[queueStream("default", "dd", 0)]
		// The stream keeps broker ids for 1 minute; client ids are kept for the 2-minute
		// duplicate-detection.window in the TITAN_DUPL bucket (issue 28).
		requireEqual(t, time.Minute, c.Duplicates, "queue stream duplicate window (the broker-id window)")
	})

	t.Run("COMMIT stores all or none", func(t *testing.T) {
		var out struct {
			ReceivedA     []string `json:"received_a"`
			ReceivedB     []string `json:"received_b"`
			CommitReceipt bool     `json:"commit_receipt"`
			BigError      *string  `json:"big_error"`
			BigReceipt    bool     `json:"big_receipt"`
			Errors        []any    `json:"errors"`
			Error         string   `json:"error"`
		}
		const n = 6
		run(t, "commit", map[string]any{"queue_a": "/queue/txa", "queue_b": "/queue/txb", "count": n, "big": 1000}, &out)
		requireEqual(t, "", out.Error, "scenario error")
		if !out.CommitReceipt {
			t.Errorf("no RECEIPT for the COMMIT")
		}
		if want := append(numberedFrom("a", 1, n), "fence"); !slices.Equal(want, out.ReceivedA) {
			t.Errorf("queue a received %q, want the committed %q then the fence (nothing aborted, nothing of the refused COMMIT)", out.ReceivedA, want)
		}
		if want := []string{"b1", "b2", "fence"}; !slices.Equal(want, out.ReceivedB) {
			t.Errorf("queue b received %q, want %q", out.ReceivedB, want)
		}
		if out.BigError == nil || *out.BigError != "transaction too large" || out.BigReceipt {
			t.Errorf("COMMIT of 1001 SENDs to one stream: ERROR %v, RECEIPT %v; want ERROR \"transaction too large\" and no RECEIPT", out.BigError, out.BigReceipt)
		}
		if len(out.Errors) > 0 {
			t.Errorf("ERROR frames: %v", out.Errors)
		}
	})
}

// numberedFrom returns prefix<from> .. prefix<from+n-1>.
func numberedFrom(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, from+i)
	}
	return out
}
