package router

import (
	"sync"
	"sync/atomic"
)

// pipelineDepth bounds the persistent SENDs one connection may have in flight between their
// WAL commit and their fsync. When it is full the read goroutine waits, so the producer's
// connection stops being read (back-pressure, not buffering). A deeper pipeline lets a group
// commit grow (measured: 7% less broker CPU per message in a 1→1 queue than at 256).
//
// SENDs published only after their commit (events-store, "late") are bounded together, across
// every connection of the broker, by pipelineLateBudget: deeper, producers run so far ahead of
// the logs' readers that the readers fall behind the shared tail and read the store (issue
// 13: events-store 4×4 took twice as long with 1024 per connection; issue 33: 3.75 against
// 2.77 µs of broker CPU per delivery). One budget for all, rather than 256 per connection,
// lets a single producer fill the whole budget (issue 33's scenario g: groups of about 500
// SENDs per fsync instead of 120, 0.43 of the relay's rate instead of 0.28, 5.9 µs of CPU
// per message instead of 8.6) while four producers share it as before.
//
// A push that finds the pipeline (or the late budget) full waits until it has drained to half
// (pipelineResume, pipelineLateResume), not until one task finished: waking the read
// goroutine as each task finishes would hand the CPU back and forth between it and the
// pipeline's goroutine once per SEND while a landed group is answered (issue 33); waking it
// at half lets it read the next SENDs as one burst.
const (
	pipelineDepth      = 1024
	pipelineResume     = pipelineDepth / 2
	pipelineLateBudget = 1024
	pipelineLateResume = pipelineLateBudget / 2
)

// lateBudget counts the late SENDs (published after their commit) in flight in every
// connection's pipeline, bounded by pipelineLateBudget. Shared by a Router's pipelines.
type lateBudget struct {
	// n changes without mu; a push that found it at the budget waits on cond, under mu, until
	// a finishing task brings it down to pipelineLateResume and broadcasts (under mu, so no
	// wake-up is lost). While n is at the budget every push waits, so n falls to the resume
	// mark: a decrement passes it exactly.
	n    atomic.Int64
	mu   sync.Mutex
	cond *sync.Cond
	// onFull, when set (tests), is called by a push that found the budget used up, before it
	// waits.
	onFull func()
}

func newLateBudget() *lateBudget {
	b := &lateBudget{}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// take counts one more late SEND, first waiting while the budget is used up.
func (b *lateBudget) take() {
	if b.n.Load() >= pipelineLateBudget {
		if b.onFull != nil {
			b.onFull()
		}
		b.mu.Lock()
		for b.n.Load() > pipelineLateResume {
			b.cond.Wait()
		}
		b.mu.Unlock()
	}
	b.n.Add(1)
}

// give counts a late SEND finished.
func (b *lateBudget) give() {
	if b.n.Add(-1) == pipelineLateResume {
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	}
}

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
	work chan pipelineItem
	late *lateBudget // shared by the Router's pipelines
	mu   sync.Mutex  // held by the waiters on cond (drain, a full push) and by its Broadcasts
	cond *sync.Cond
	// busy counts the SENDs pushed and not yet finished. It changes without mu, so that a
	// SEND costs no lock on either goroutine; the worker takes mu only to wake the waiters,
	// when busy falls to a value one waits for (0, pipelineResume), and a
	// waiter checks it under mu, so no wake-up is lost between its check and its Wait. A
	// waiting push waits from busy at or above a depth down to its resume mark, so busy passes
	// that mark exactly while it waits.
	busy atomic.Int64
	dead atomic.Bool // a deferred SEND failed fatally: later ones are dropped (read per stored SEND: no lock)
	// onFull, when set (tests), is called by a push that found the pipeline full, before it
	// waits.
	onFull func()
}

func newPipeline(spawn func(name string, fn func()) bool, late *lateBudget) *pipeline {
	p := &pipeline{work: make(chan pipelineItem, pipelineDepth), late: late}
	p.cond = sync.NewCond(&p.mu)
	run := func() {
		for it := range p.work {
			it.t.finish()
			if it.late {
				p.late.give()
			}
			if n := p.busy.Add(-1); n == 0 || n == pipelineResume {
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

// pipelineItem is a pushed task and whether it counts against the late budget.
type pipelineItem struct {
	t    pipelineTask
	late bool
}

// push queues t. When pipelineDepth tasks are in flight it blocks until the pipeline has
// drained to pipelineResume; a task published only after its commit (late) also waits, in
// the shared lateBudget, while pipelineLateBudget late tasks are in flight broker-wide, until
// they are down to pipelineLateResume. The channel send never blocks: busy stays below
// pipelineDepth, the channel's capacity.
func (p *pipeline) push(t pipelineTask, late bool) {
	if p.busy.Load() >= pipelineDepth {
		if p.onFull != nil {
			p.onFull()
		}
		p.mu.Lock()
		for p.busy.Load() > pipelineResume {
			p.cond.Wait()
		}
		p.mu.Unlock()
	}
	if late {
		p.late.take()
	}
	p.busy.Add(1) // only this goroutine raises busy: the room seen above stays
	p.work <- pipelineItem{t, late}
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
