package session

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// Sessions with different heart-beat intervals share the scheduler's shards: each gets beats at its
// own interval (a slow one does not delay a fast one), and a closed session leaves the
// scheduler's heap at once.
func TestHeartBeatsShareOneSchedulerAtEachInterval(t *testing.T) {
	o := DefaultOptions()
	o.HeartBeatMin = 100 * time.Millisecond
	intervals := []string{"100", "400", "100", "5000"}
	type client struct {
		eols int
		s    *Session
	}
	clients := make([]*client, len(intervals))
	var wg sync.WaitGroup
	for i, iv := range intervals {
		c, p, _, s := serve(t, o)
		_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\nheart-beat:0," + iv + "\n\n\x00"))
		if f := read(t, c, p); f.Value("heart-beat") != iv+",10000" {
			t.Fatalf("CONNECTED %s", f)
		}
		cl := &client{s: s}
		clients[i] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(1200 * time.Millisecond))
			buf := make([]byte, 64)
			for {
				n, err := c.Read(buf)
				cl.eols += strings.Count(string(buf[:n]), "\n")
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	// A beat goes out whenever nothing was written for half the interval: in 1.2 s about 24
	// at 100 ms, 6 at 400 ms, none at 5 s (the first check is at 2.5 s). Allow a loaded
	// machine half.
	for i, want := range []int{12, 3, 12, 0} {
		if got := clients[i].eols; got < want || (intervals[i] == "5000" && got != 0) {
			t.Errorf("interval %s ms: %d heart-beats in 1.2 s", intervals[i], got)
		}
	}
	if clients[1].eols >= clients[0].eols {
		t.Errorf("400 ms interval got %d beats, 100 ms got %d: intervals not kept apart", clients[1].eols, clients[0].eols)
	}
	s := clients[3].s
	hs := s.hbs()
	hs.mu.Lock()
	in := s.hbIndex >= 0
	hs.mu.Unlock()
	if !in {
		t.Fatalf("a session with heart-beats is not in the scheduler")
	}
	s.Close(CloseClientEOF)
	hs.mu.Lock()
	in = s.hbIndex >= 0
	for _, x := range hs.h {
		in = in || x == s
	}
	hs.mu.Unlock()
	if in {
		t.Fatalf("a closed session stays in the heart-beat scheduler")
	}
}
