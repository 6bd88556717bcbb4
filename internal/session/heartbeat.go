package session

import (
	"container/heap"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/lockorder"
)

// heartBeats runs the server-side heart-beat sends (STOMP 1.2, "Heart-beating") of every
// session in the process on hbShards timers: each shard is a min-heap of sessions ordered by
// when each is next due, so a connection costs a heap slot and two fields instead of a
// runtime timer and its callback closure (issue 13: memory per idle connection), and the
// reschedules of many connections spread over hbShards locks instead of one (issue 32). A
// session stays in the shard New gave it (Session.hbShard). Each due session's heartBeat
// runs on its shard's timer goroutine, in due order.
var heartBeats [hbShards]hbScheduler

// hbShards is the number of heart-beat scheduler shards: a power of two, enough that the
// connections of a many-core machine rarely meet on one lock, few enough that each shard's
// timer fires for a crowd of sessions at once.
const hbShards = 16

// hbNext hands out shards round-robin to new sessions.
var hbNext atomic.Uint32

// hbs returns s's scheduler shard.
func (s *Session) hbs() *hbScheduler { return &heartBeats[s.hbShard] }

// hbEpoch is the origin of hbScheduler due times (monotonic).
var hbEpoch = time.Now()

// hbScheduler is one shard of heartBeats: a min-heap of sessions by Session.hbDue with one
// timer set to the earliest. Lock order: a Session's mu before mu (LOCKS.md); run takes no
// Session.mu while holding mu.
type hbScheduler struct {
	mu    lockorder.Mutex[lockorder.HeartBeatRank]
	h     hbHeap
	timer *time.Timer   // made on first use; fires run
	at    time.Duration // when timer fires (since hbEpoch); 0: stopped
}

// schedule (re)arms s to be due after d. The caller holds s.mu.
func (hs *hbScheduler) schedule(s *Session, d time.Duration) {
	due := time.Since(hbEpoch) + d
	hs.mu.Lock()
	s.hbDue = due
	if s.hbIndex >= 0 {
		heap.Fix(&hs.h, int(s.hbIndex))
	} else {
		heap.Push(&hs.h, s)
	}
	hs.armLocked()
	hs.mu.Unlock()
}

// cancel removes s (no more heart-beats). The caller holds s.mu.
func (hs *hbScheduler) cancel(s *Session) {
	hs.mu.Lock()
	if s.hbIndex >= 0 {
		heap.Remove(&hs.h, int(s.hbIndex))
	}
	hs.mu.Unlock()
}

// armLocked sets the timer to the earliest due time when it would fire later (or not at
// all). hs.mu must be held.
func (hs *hbScheduler) armLocked() {
	if len(hs.h) == 0 {
		return // a timer that fires for nothing stops itself
	}
	first := hs.h[0].hbDue
	if hs.at != 0 && hs.at <= first {
		return
	}
	hs.at = max(first, 1)
	d := first - time.Since(hbEpoch)
	if hs.timer == nil {
		hs.timer = time.AfterFunc(d, hs.run)
	} else {
		hs.timer.Reset(d)
	}
}

// run is the timer's callback: it takes every due session off the heap and calls its
// heartBeat (which schedules it again), then re-arms the timer for the next one.
func (hs *hbScheduler) run() {
	var due []*Session
	hs.mu.Lock()
	hs.at = 0
	now := time.Since(hbEpoch)
	for len(hs.h) > 0 && hs.h[0].hbDue <= now {
		due = append(due, heap.Pop(&hs.h).(*Session))
	}
	hs.armLocked()
	hs.mu.Unlock()
	for _, s := range due {
		s.heartBeat()
	}
}

// hbHeap implements heap.Interface over Session.hbDue, keeping Session.hbIndex current
// (-1: not in the heap).
type hbHeap []*Session

func (h hbHeap) Len() int           { return len(h) }
func (h hbHeap) Less(i, j int) bool { return h[i].hbDue < h[j].hbDue }
func (h hbHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hbIndex, h[j].hbIndex = int32(i), int32(j)
}

func (h *hbHeap) Push(x any) {
	s := x.(*Session)
	s.hbIndex = int32(len(*h))
	*h = append(*h, s)
}

func (h *hbHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	s.hbIndex = -1
	if cap(*h) > 64 && len(*h) < cap(*h)/4 {
		*h = append(hbHeap(nil), *h...) // shrink after a crowd of connections left
	}
	return s
}

// scheduleHeartBeat (re)arms s's next heart-beat check after d. The caller holds s.mu.
func scheduleHeartBeat(s *Session, d time.Duration) { s.hbs().schedule(s, d) }

// cancelHeartBeat removes s from the scheduler. The caller holds s.mu.
func cancelHeartBeat(s *Session) { s.hbs().cancel(s) }
