package queue

import "slices"

// Peek returns up to max messages without changing the queue (browse, as Artemis's
// browseMessages): the ready ones head to tail, then the scheduled ones in due order. Messages
// in delivery are not included. max <= 0 returns nil. The Messages stay owned by the queue:
// the caller may read them only while it holds the lock that guards the queue.
func (q *Queue) Peek(max int) []*Message {
	if max <= 0 {
		return nil
	}
	out := make([]*Message, 0, min(max, q.ready.len()+len(q.scheduled)))
	for i := 0; i < q.ready.len() && len(out) < max; i++ {
		out = append(out, q.ready.at(i))
	}
	if len(out) < max && len(q.scheduled) > 0 {
		sched := slices.Clone(q.scheduled)
		slices.SortFunc(sched, func(a, b schedEntry) int {
			if a.less(&b) {
				return -1
			}
			return 1
		})
		for _, e := range sched {
			if len(out) == max {
				break
			}
			out = append(out, e.m)
		}
	}
	return out
}
