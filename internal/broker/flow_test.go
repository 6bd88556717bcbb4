package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/router"
	"github.com/titan-broker/titan/internal/testwait"
)

// While the heap is over its high watermark every publication waits (counted as a producer
// pause) and goes on once the heap is back at the low one; shutdown releases it too.
func TestHeapWatermarksPauseEveryPublication(t *testing.T) {
	c := config.Default()
	c.Servers[0].Host, c.Servers[0].Port = "127.0.0.1", 0
	c.Store.Type = "memory"
	c.FlowControl.Heap.MaxBytes = 1000 // marks at 900 and 700 bytes; the sampler is not started
	b, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Shutdown(context.Background()) }()
	if b.heap.High != 900 || b.heap.Low != 700 {
		t.Fatalf("heap marks %d %d", b.heap.High, b.heap.Low)
	}
	b.heap.Update(901)
	if !b.HeapCongested() {
		t.Fatal("over the high mark: congested")
	}
	for _, d := range []string{"/topic/heap", "/queue/heap", "/events-store/heap", "/command/heap"} {
		done := make(chan error, 1)
		go func() {
			p := router.Publication{Destination: d, Body: []byte("x")}
			if strings.HasPrefix(d, "/command/") {
				p.Headers = []frame.Header{{Key: "reply-to", Value: "/queue/heap-replies"}, {Key: "timeout", Value: "100"}}
			}
			_, err := b.router.Publish(p)
			done <- err
		}()
		testwait.Eventually(t, 5*time.Second, d+": publication paused by the heap", func() bool { return b.flow.Paused.Load() == 1 })
		b.heap.Update(700)
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		b.heap.Update(901)
	}
	if p, r := b.flow.Pauses.Load(), b.flow.Resumes.Load(); p != 4 || r != 4 {
		t.Fatalf("pauses %d resumes %d", p, r)
	}
}
