package router

import (
	"sync"
	"sync/atomic"
)

// pipelineDepth bounds the persistent SENDs one connection may have in flight between their
// WAL commit and their fsync. When it is full the read goroutine waits, so the producer's
// connection stops being read (back-pressure, not buffering).
//
// A queue SEND, published before its commit, may be one of pipelineDepth in flight (1024): its
// task only awaits the commit and answers, and a deeper pipeline lets a lazily committed
// group grow (measured: 7% less broker CPU per message in a 1→1 queue than at 256). A SEND
// published only after its commit (events-store) waits while pipelineDepthLate (256) are in
// flight: deeper, a producer runs so far ahead of the log's readers that they fall behind
// the shared tail and read the store (events-store 4×4 took twice as long at 1024).
//
// A push that finds the pipeline full waits until it has drained to half its depth
// (pipelineResume, pipelineResumeLate), not until one task finished: waking the read
// goroutine as each task finishes would hand the CPU back and forth between it and the
// pipeline's goroutine once per SEND while a landed group is answered (issue 33); waking it
// at half depth lets it read the next SENDs as one burst.
const (
	pipelineDepth      = 1024
	pipelineDepthLate  = 256
	pipelineResume     = pipelineDepth / 2
	pipelineResumeLate = pipelineDepthLate / 2
)

// pipeline finishes a connection's persistent SENDs off its read goroutine: the store stage
// commits each message to the WAL in order and defers the rest of the route — wait for the
// fsync, publish, answer — to this FIFO, run by one goroutine. Consecutive SENDs of one
// producer therefore share fsyncs (group commit within a connection, not only across
// connections), while publication order and RECEIPT order stay the order of the SENDs.
//
// Any frame that is not such a SEND first waits for the pipeline to drain (drain), so
// nothing overtakes a deferred SEND. Owned by one connection; push and drain are called from
// its read goroutine only.
type pipeline struct {
	work chan pipelineTask
	mu   sync.Mutex // held by the waiters on cond (drain, a late push) and by its Broadcasts
	cond *sync.Cond
	// busy counts the SENDs pushed and not yet finished. It changes without mu, so that a
	// SEND costs no lock on either goroutine; the worker takes mu only to wake the waiters,
	// when busy falls to a value one waits for (0, pipelineResumeLate, pipelineResume), and a
	// waiter checks it under mu, so no wake-up is lost between its check and its Wait. A
	// waiting push waits from busy at or above a depth down to its resume mark, so busy passes
	// that mark exactly while it waits.
	busy atomic.Int64
	dead atomic.Bool // a deferred SEND failed fatally: later ones are dropped (read per stored SEND: no lock)
	// onFull, when set (tests), is called by a push that found the pipeline full, before it
	// waits.
	onFull func()
}

func newPipeline(spawn func(name string, fn func()) bool) *pipeline {
	p := &pipeline{work: make(chan pipelineTask, pipelineDepth)}
	p.cond = sync.NewCond(&p.mu)
	run := func() {
		for t := range p.work {
			t.finish()
			if n := p.busy.Add(-1); n == 0 || n == pipelineResumeLate || n == pipelineResume {
				p.mu.Lock()
				p.cond.Broadcast() // drain waits for 0, a full push for its resume mark
				p.mu.Unlock()
			}
		}
	}
	if spawn == nil {
		go run()
	} else if !spawn("send-pipeline", run) {
		return nil
	}
	return p
}

// pipelineTask is a deferred SEND's remaining work (an interface, not a func, so that the
// task's one allocation is all it costs).
type pipelineTask interface{ finish() }

// push queues t. When pipelineDepth tasks are in flight, or, for a task published only
// after its commit (late), pipelineDepthLate, it blocks until the pipeline has drained to
// its resume mark (pipelineResume, pipelineResumeLate). The channel send never blocks: busy
// stays below pipelineDepth, the channel's capacity.
func (p *pipeline) push(t pipelineTask, late bool) {
	depth, resume := int64(pipelineDepth), int64(pipelineResume)
	if late {
		depth, resume = pipelineDepthLate, pipelineResumeLate
	}
	if p.busy.Load() >= depth {
		if p.onFull != nil {
			p.onFull()
		}
		p.mu.Lock()
		for p.busy.Load() > resume {
			p.cond.Wait()
		}
		p.mu.Unlock()
	}
	p.busy.Add(1) // only this goroutine raises busy: the room seen above stays
	p.work <- t
}

// pending reports whether deferred SENDs are still in flight.
func (p *pipeline) pending() bool { return p.busy.Load() > 0 }

// drain waits until every pushed SEND has finished.
func (p *pipeline) drain() {
	if p.busy.Load() == 0 {
		return
	}
	p.mu.Lock()
	for p.busy.Load() > 0 {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

// fail marks the pipeline dead after a fatal error; failed reports it. Safe for concurrent
// use.
func (p *pipeline) fail() { p.dead.Store(true) }

func (p *pipeline) failed() bool { return p.dead.Load() }

// close drains and stops the goroutine.
func (p *pipeline) close() {
	p.drain()
	close(p.work)
}
