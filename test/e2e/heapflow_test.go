package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Heap watermarks (issue 11, flow-control.heap): when the Go heap of a real titan crosses
// the high mark every producer pauses (its connection stops being read); when consumers
// drain what filled the heap and it falls to the low mark, producers resume. Nothing is
// lost, and the pause and resume are visible on /metrics.
func TestHeapWatermarksPauseAndResumeProducers(t *testing.T) {
	pythonClient.require(t)
	const limit = 64 << 20 // heap.max-bytes: high mark 25.6 MiB, low mark 12.8 MiB
	b := startBroker(t, yamlConfigWith("", fmt.Sprintf(
		"  flow-control:\n    heap: {max-bytes: %d, high-watermark: 0.4, low-watermark: 0.2}\n", limit)))
	const dest, n, size = "/queue/heap", 80, 512 << 10 // 40 MiB queued: well over the high mark

	prod := startLiveScript(t, pythonClient, b, "session", nil)
	prod.call(map[string]any{"op": "connect", "conn": "p"}, nil)
	var mu sync.Mutex
	var rids []string
	var sendErr error
	sent := make(chan struct{})
	go func() { // the producer blocks in its socket writes while titan does not read it
		defer close(sent)
		for i := range n {
			var r struct{ Receipt string }
			if err := prod.try(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": fmt.Sprintf("%04d", i), "pad": size - 4, "wait": false}, &r); err != nil {
				mu.Lock()
				sendErr = err
				mu.Unlock()
				return
			}
			mu.Lock()
			rids = append(rids, r.Receipt)
			mu.Unlock()
		}
	}()

	// The heap crosses the high mark: titan says so and the producer is paused.
	eventually(t, 30*time.Second, func() bool {
		m := scrapeSeries(t, b)
		return m["titan_heap_over_watermark"] == 1 && m["titan_producers_paused"] >= 1
	}, "titan_heap_over_watermark 1 and a producer paused")
	m := scrapeSeries(t, b)
	queued := requireQueue(t, b, dest, "").Size
	t.Logf("paused with %d messages queued; heap pauses so far %v", queued, m["titan_producer_pauses_total"])
	if queued >= n {
		t.Fatalf("all %d messages were queued: the producer was never held back", n)
	}

	// A consumer drains the queue; the heap falls, the producer resumes and finishes.
	cons := startLiveScript(t, pythonClient, b, "session", nil)
	cons.call(map[string]any{"op": "connect", "conn": "c"}, nil)
	cons.call(map[string]any{"op": "subscribe", "conn": "c", "dest": dest}, nil)
	select {
	case <-sent:
	case <-time.After(60 * time.Second):
		t.Fatal("the producer did not finish sending after the consumer drained the queue")
	}
	mu.Lock()
	requireNoError(t, sendErr)
	all := append([]string(nil), rids...)
	mu.Unlock()
	for _, r := range all {
		prod.call(map[string]any{"op": "wait_receipt", "conn": "p", "receipt": r}, nil)
	}
	var got sessionState
	cons.call(map[string]any{"op": "wait_messages", "conn": "c", "count": n, "trunc": 4}, &got)
	seen := map[string]bool{}
	for _, msg := range got.Messages {
		seen[msg.Body[:4]] = true
	}
	for i := range n {
		if !seen[fmt.Sprintf("%04d", i)] {
			t.Errorf("message %d lost", i)
		}
	}
	requireEqual(t, n, len(got.Messages), "messages received")
	prod.finish(nil)
	cons.finish(nil)

	// Once the garbage is collected the heap is back under its marks (a paused broker forces
	// a collection at least every second while over).
	eventually(t, 10*time.Second, func() bool {
		return scrapeSeries(t, b)["titan_heap_over_watermark"] == 0
	}, "titan_heap_over_watermark back to 0")
	m = scrapeSeries(t, b)
	checkEqual(t, 0.0, m["titan_producers_paused"], "producers paused at the end")
	if m["titan_producer_pauses_total"] < 1 || m["titan_producer_resumes_total"] != m["titan_producer_pauses_total"] {
		t.Errorf("pauses %v, resumes %v: want >= 1 and equal", m["titan_producer_pauses_total"], m["titan_producer_resumes_total"])
	}
	if !strings.Contains(b.stderr.String(), "heap over its high watermark") || !strings.Contains(b.stderr.String(), "producers resumed") {
		t.Error("titan did not log the heap pause and resume")
	}
}
