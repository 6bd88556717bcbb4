package dispatch

import (
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

// QueueStats is a point-in-time view of one queue for the admin API and metrics.
type QueueStats struct {
	Group       string
	Destination string
	Pattern     string
	// Messages is every message held (Artemis messageCount): ready + delivering + scheduled
	// for queues; buffered for events.
	Messages   int
	Delivering int
	Scheduled  int
	// PendingBytes is the bytes held.
	PendingBytes int64
	Consumers    int
	Paused       bool
	Settings     QueueSettings
	Enqueued     uint64
	Dispatched   uint64
	Acked        uint64
	Dropped      uint64 // refused by DROP policy, or (events) drained with no subscriber
	RingRemoved  uint64
	Expired      uint64
	DeadLettered uint64
}

// Stats returns the queue's current stats.
func (p *PointQueue) Stats() QueueStats {
	p.mu.Lock()
	c := p.q.Counts()
	st := QueueStats{
		Group: p.id.Group, Destination: p.id.Destination(), Pattern: p.id.Pattern.String(),
		Messages: c.Messages, Delivering: c.Delivering, Scheduled: c.Scheduled, PendingBytes: c.Bytes,
		Consumers: len(p.consumers), Paused: p.paused, Settings: p.settings,
	}
	st.Settings.RingSize = p.q.RingSize()
	p.mu.Unlock()
	st.Enqueued, st.Dispatched, st.Acked = p.Enqueued.Load(), p.Dispatched.Load(), p.Acked.Load()
	st.Dropped = p.Dropped.Load()
	st.RingRemoved = p.RemovedBy[1].Load()
	st.Expired = p.RemovedBy[2].Load()
	st.DeadLettered = p.RemovedBy[3].Load()
	return st
}

// Stats returns the queue's current stats.
func (q *EventQueue) Stats() QueueStats {
	q.mu.Lock()
	st := QueueStats{
		Group: q.id.Group, Destination: q.id.Destination(), Pattern: q.id.Pattern.String(),
		Messages: len(q.buf), PendingBytes: q.bytes, Paused: q.paused, Settings: q.settings,
	}
	q.mu.Unlock()
	st.Consumers = int(q.Consumers.Load())
	st.Enqueued, st.Dispatched = q.Enqueued.Load(), q.Dispatched.Load()
	st.Dropped = q.Dropped.Load() + q.NoSub.Load()
	return st
}

// SetPaused pauses (new enqueues wait or fail per policy) or resumes the queue for id.
// Errors: ErrNoQueue.
func (e *Engine) SetPaused(id dest.Identity, paused bool) error {
	q, ok := e.Lookup(id)
	if !ok {
		return ErrNoQueue
	}
	switch q := q.(type) {
	case *PointQueue:
		q.mu.Lock()
		q.paused = paused
		close(q.space)
		q.space = make(chan struct{})
		q.mu.Unlock()
	case *EventQueue:
		q.mu.Lock()
		q.paused = paused
		close(q.space)
		q.space = make(chan struct{})
		start := !paused && !q.running && len(q.buf) > 0
		if start {
			q.running = true
		}
		q.mu.Unlock()
		if start {
			q.startConsumer()
		}
	}
	return nil
}

// SetRingSize changes a queues-pattern queue's ring size at run time (reference 002: lowering
// it removes nothing at once). Errors: ErrNoQueue.
func (e *Engine) SetRingSize(id dest.Identity, n int) error {
	q, ok := e.Lookup(id)
	pq, isPoint := q.(*PointQueue)
	if !ok || !isPoint {
		return ErrNoQueue
	}
	pq.mu.Lock()
	pq.q.SetRingSize(n)
	pq.settings.RingSize = n
	s := pq.settings
	pq.mu.Unlock()
	if e.opts.OnSettings != nil {
		e.opts.OnSettings(id, &s)
	}
	return nil
}

// Delete removes the queue for id. A queue holding messages is refused with
// ErrQueueNotEmpty unless force is set; force discards its pending messages and stops its
// consumer. The next SEND creates a fresh queue. Errors: ErrNoQueue, ErrQueueNotEmpty.
func (e *Engine) Delete(id dest.Identity, force bool) error {
	q, ok := e.Lookup(id)
	if !ok {
		return ErrNoQueue
	}
	// Stats takes the queue's lock, so it runs without e.mu (lock order, LOCKS.md).
	if !force && q.Stats().Messages > 0 {
		return ErrQueueNotEmpty
	}
	e.mu.Lock()
	if e.queues[id] != q {
		e.mu.Unlock()
		return ErrNoQueue // deleted meanwhile
	}
	delete(e.queues, id)
	e.trieRemoveLocked(q)
	e.mu.Unlock()
	if e.opts.OnSettings != nil {
		e.opts.OnSettings(id, nil)
	}
	switch q := q.(type) {
	case *PointQueue:
		q.mu.Lock()
		q.deleted = true
		removed := cloneRemoved(q.q.Purge())
		if q.timer != nil {
			q.timer.Stop()
		}
		close(q.space)
		q.space = make(chan struct{})
		q.mu.Unlock()
		q.finish(nil, removed)
	case *EventQueue:
		q.mu.Lock()
		q.deleted = true
		q.buf = nil
		q.bytes = 0
		close(q.space)
		q.space = make(chan struct{})
		q.mu.Unlock()
	}
	return nil
}

// Create makes the queue for id with s unless one exists (idempotent: an existing queue keeps
// its settings). It returns the queue and whether it was created.
func (e *Engine) Create(id dest.Identity, s QueueSettings) (Queue, bool) {
	if id.Pattern == dest.PatternEvents && s.Capacity == 0 && s.MaxPendingBytes == 0 {
		s.Capacity = DefaultEventsCapacity
	}
	e.noteGroup(id.Group)
	q, created := e.GetOrPut(id, s)
	if created && e.opts.OnSettings != nil && id.Pattern == dest.PatternQueues {
		e.opts.OnSettings(id, &s)
	}
	return q, created
}

// Settings returns the effective settings a traffic-created queue for id would get.
func (e *Engine) Settings(id dest.Identity) QueueSettings { return e.opts.Settings(id) }

// Now returns the engine clock's time.
func (e *Engine) Now() time.Time { return e.opts.Now() }

// FanoutMode reports whether events SENDs go through dispatcher queues (fanout-mode). Without
// it an events destination has no queue.
func (e *Engine) FanoutMode() bool { return e.opts.FanoutMode }
