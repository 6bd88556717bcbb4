package session

import (
	"testing"
	"time"
)

// BenchmarkHeartBeatSchedule reschedules heart-beats from parallel goroutines, each over its
// own 64 sessions, as the read and timer goroutines of many connections do (issue 32: the
// process-wide heap was one lock for all of them).
func BenchmarkHeartBeatSchedule(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ss := make([]*Session, 64)
		for i := range ss {
			ss[i] = &Session{hbIndex: -1, hbShard: uint8(hbNext.Add(1) % hbShards)} // as New assigns them
		}
		i := 0
		for pb.Next() {
			s := ss[i%len(ss)]
			i++
			s.mu.Lock()
			scheduleHeartBeat(s, time.Hour+time.Duration(i))
			s.mu.Unlock()
		}
		for _, s := range ss {
			s.mu.Lock()
			cancelHeartBeat(s)
			s.mu.Unlock()
		}
	})
}
