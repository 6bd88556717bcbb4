package router

import "time"

// receiptTimer is the final stage when Options.ReceiptLatency is set: it answers like
// finalStage and observes how long a frame that asked for a receipt took to be answered.
type receiptTimer struct{ obs interface{ Observe(float64) } }

func (t receiptTimer) Apply(c *Context) {
	finalStage{}.Apply(c)
	if c.Receipt != "" && !c.received.IsZero() {
		t.obs.Observe(time.Since(c.received).Seconds())
	}
}
