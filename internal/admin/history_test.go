package admin_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
)

// makeQueues creates n queues /queue/q-00000 … in group.
func makeQueues(t *testing.T, a *admin.Admin, group string, n int) {
	t.Helper()
	for i := range n {
		_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: fmt.Sprintf("/queue/q-%05d", i), Group: group}})
		requireNoError(t, err)
	}
}

func TestQueuesPagesAndFilters(t *testing.T) {
	b, a := start(t, nil)
	makeQueues(t, a, "", 25)
	makeQueues(t, a, "market", 5)
	base := "http://" + b.MonitorAddr()
	c := httpClient(t)
	list := func(query string) admin.QueueList {
		t.Helper()
		r := call(t, c, "GET", base+admin.PathQueues+"?"+query, "")
		requireEqual(t, r.status, http.StatusOK, "GET queues?"+query)
		var l admin.QueueList
		r.decode(t, &l)
		return l
	}

	// Pages cover every queue once, in order, and say how many there are.
	var seen []string
	next := 0
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		l := list("limit=7&offset=" + strconv.Itoa(next))
		requireEqual(t, l.Total, 30, "total")
		requireEqual(t, l.Summary.Queues, 30, "summary counts every page")
		requireEqual(t, l.Limit, 7, "limit")
		requireEqual(t, l.Offset, next, "offset")
		for _, q := range l.Queues {
			seen = append(seen, q.Group+" "+q.Destination)
		}
		if l.NextOffset == 0 {
			requireEqual(t, len(l.Queues), 30-next, "last page")
			break
		}
		requireEqual(t, len(l.Queues), 7, "full page")
		requireEqual(t, l.NextOffset, next+7, "next offset")
		next = l.NextOffset
	}
	requireEqual(t, len(seen), 30, "queues over all pages")
	requireEqual(t, seen[0], "default /queue/q-00000", "first")
	requireEqual(t, seen[29], "market /queue/q-00004", "last")

	// The default page and an offset past the end.
	l := list("")
	requireEqual(t, l.Limit, admin.DefaultQueuePageSize, "default limit")
	requireEqual(t, len(l.Queues), 30, "all on the default page")
	l = list("offset=100")
	requireEqual(t, len(l.Queues), 0, "past the end")
	requireEqual(t, l.Total, 30, "total past the end")

	// Filter: a substring ignoring case, or a glob over the whole destination.
	l = list("filter=Q-0001")
	requireEqual(t, l.Total, 10, "substring q-0001 (q-00010 to q-00019)")
	l = list("filter=" + "/queue/q-0000?" + "&group=market")
	requireEqual(t, l.Total, 5, "glob in group market")
	l = list("filter=*-0002*&limit=3")
	requireEqual(t, l.Total, 5, "glob *-0002* (q-00020 to q-00024, none in market)")
	requireEqual(t, len(l.Queues), 3, "glob page")
	requireEqual(t, l.Queues[0].Destination, "/queue/q-00020", "glob first")
	requireEqual(t, l.NextOffset, 3, "glob next page")
	l = list("filter=/queue/q-00003")
	requireEqual(t, l.Total, 2, "substring in both groups")
	l = list("filter=nothing-like-it")
	requireEqual(t, l.Total, 0, "no match")
	requireEqual(t, l.Summary.Text, "0 queues in 0 groups", "no match summary")

	// Bad paging parameters are refused with the rule.
	for _, q := range []string{"limit=0", "limit=-1", "limit=" + strconv.Itoa(admin.MaxQueuePageSize+1), "offset=-1", "limit=x"} {
		r := call(t, c, "GET", base+admin.PathQueues+"?"+q, "")
		requireEqual(t, r.status, http.StatusBadRequest, q)
		requireEqual(t, r.errorBody(t).Code, admin.CodeInvalidParameter, q+" code")
	}

	// The snapshot without its queue list still counts them.
	r := call(t, c, "GET", base+admin.PathSnapshot+"?queues=false", "")
	requireEqual(t, r.status, http.StatusOK, "snapshot")
	var s admin.Snapshot
	r.decode(t, &s)
	requireEqual(t, len(s.Queues), 0, "snapshot queues")
	requireEqual(t, s.Summary.Queues, 30, "snapshot summary")
}

func TestHistoryRecordsRatesWithinBounds(t *testing.T) {
	b, a := start(t, func(c *config.Config) { c.Monitor.HistoryIntervalMs = 60000 }) // the test samples by hand
	h := admin.NewHistory(admin.HistoryOptions{Interval: time.Second, Window: 10 * time.Second})
	requireEqual(t, h.Capacity(), 10, "capacity is window / interval")
	makeQueues(t, a, "", admin.MaxTrackedDestinations+40)

	// Traffic on a few queues: they are the busiest, so they get rings.
	publish := func(destination string, n int) {
		for range n {
			_, err := a.Publish(admin.PublishRequest{Destination: destination, Body: ptr("x")})
			requireNoError(t, err)
		}
	}
	t0 := time.Now()
	h.Sample(b.Dispatcher(), t0)
	publish("/queue/q-00150", 20)
	publish("/queue/busy", 5)
	h.Sample(b.Dispatcher(), t0.Add(time.Second))
	requireEqual(t, h.Tracked(), admin.MaxTrackedDestinations, "destination rings are bounded")

	g := h.Read("", "")
	requireEqual(t, len(g.Samples), 1, "broker-wide samples after two Sample calls")
	requireEqual(t, g.Samples[0].Published, 25.0, "published per second")
	requireEqual(t, g.Samples[0].Depth, int64(25), "messages held")
	requireEqual(t, g.IntervalMs, int64(1000), "interval")

	// The rings never outgrow the window.
	for i := 2; i < 40; i++ {
		h.Sample(b.Dispatcher(), t0.Add(time.Duration(i)*time.Second))
	}
	g = h.Read("", "")
	requireEqual(t, len(g.Samples), 10, "broker-wide ring is bounded")
	if !g.Samples[9].Time.Equal(t0.Add(39 * time.Second)) {
		t.Fatalf("newest sample at %v, want %v", g.Samples[9].Time, t0.Add(39*time.Second))
	}
	for i := 1; i < len(g.Samples); i++ {
		if !g.Samples[i].Time.After(g.Samples[i-1].Time) {
			t.Fatalf("samples out of order at %d: %v", i, g.Samples)
		}
	}
	d := h.Read("default", "/queue/busy")
	requireEqual(t, d.Tracked, true, "the busy queue is tracked")
	requireEqual(t, len(d.Samples), 9, "destination rates (one fewer than its points)")
	requireEqual(t, d.Samples[8].Depth, int64(5), "its depth")

	// An idle destination outside the busiest (ties go to the first listed) has no ring
	// until someone asks for it.
	idle := fmt.Sprintf("/queue/q-%05d", admin.MaxTrackedDestinations+39)
	d = h.Read("default", idle)
	if d.Tracked {
		t.Fatal("an idle queue among the least busy was tracked")
	}
	requireEqual(t, len(d.Samples), 0, "untracked samples")
	for i := 40; i < 43; i++ {
		h.Sample(b.Dispatcher(), t0.Add(time.Duration(i)*time.Second))
	}
	d = h.Read("default", idle)
	requireEqual(t, d.Tracked, true, "asked-for queue tracked")
	requireEqual(t, len(d.Samples), 2, "its rates since it was asked for")
	requireEqual(t, h.Tracked(), admin.MaxTrackedDestinations, "still bounded with a pinned one")

	// Pins are bounded too: asking for every queue keeps MaxPinnedDestinations of them.
	for i := range admin.MaxTrackedDestinations + 40 {
		h.Read("default", fmt.Sprintf("/queue/q-%05d", i))
	}
	h.Read("default", "/queue/q-00000")
	h.Sample(b.Dispatcher(), t0.Add(50*time.Second))
	requireEqual(t, h.Tracked(), admin.MaxTrackedDestinations, "bounded after pinning every queue")
	requireEqual(t, h.Read("default", "/queue/q-00000").Tracked, true, "the last asked for is pinned")
}

func TestHistoryServedByTheBroker(t *testing.T) {
	b, a := start(t, func(c *config.Config) { c.Monitor.HistoryIntervalMs = 100 })
	for range 3 {
		_, err := a.Publish(admin.PublishRequest{Destination: "/queue/jobs", Body: ptr("x")})
		requireNoError(t, err)
	}
	c := httpClient(t)
	base := "http://" + b.MonitorAddr()
	var g admin.RateHistory
	eventually(t, 10*time.Second, func() bool {
		r := call(t, c, "GET", base+admin.PathHistory, "")
		requireEqual(t, r.status, http.StatusOK, "history")
		r.decode(t, &g)
		return len(g.Samples) >= 2 && g.Samples[len(g.Samples)-1].Depth == 3
	})
	requireEqual(t, g.IntervalMs, int64(100), "interval from titan.monitor.history-interval-ms")
	requireEqual(t, g.MaxSamples, admin.MaxHistorySamples, "15 minutes of 100 ms samples, capped")
	r := call(t, c, "GET", base+admin.PathHistory+"?destination=/queue/jobs", "")
	requireEqual(t, r.status, http.StatusOK, "destination history")
	var d admin.RateHistory
	r.decode(t, &d)
	requireEqual(t, d.Destination, "/queue/jobs", "destination")
	r = call(t, c, "GET", base+admin.PathHistory+"?destination=/queue//x", "")
	requireEqual(t, r.status, http.StatusBadRequest, "invalid destination")
}

// BenchmarkConsoleAPI100k measures, with 100,000 queues (made by traffic, one message
// each), what the console asks for every second: a page of the queue list (page), a glob
// filter over every name (filter), the snapshot's count without the list (count), and
// what the broker spends on a history sample (sample).
func BenchmarkConsoleAPI100k(b *testing.B) {
	const n = 100000
	c := testConfig()
	c.Monitor.HistoryIntervalMs = 60000
	c.Limits.MaxDestinations = 2 * n
	br := brokertest.Run(b, c)
	a := br.Admin()
	for i := range n {
		if _, err := a.Publish(admin.PublishRequest{Destination: fmt.Sprintf("/queue/q-%05d", i), Body: ptr("m")}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("page", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := a.Queues(admin.QueuesOptions{Offset: n / 2, Limit: 50})
			if err != nil || len(l.Queues) != 50 || l.Total != n {
				b.Fatalf("page: %v", err)
			}
		}
	})
	b.Run("filter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := a.Queues(admin.QueuesOptions{Filter: "*-9999?", Limit: 50})
			if err != nil || l.Total != 10 {
				b.Fatalf("filter: %v", err)
			}
		}
	})
	b.Run("count", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s, err := a.Snapshot(admin.SnapshotOptions{OmitQueues: true}); err != nil || s.Summary.Queues != n {
				b.Fatalf("count: %v", err)
			}
		}
	})
	b.Run("sample", func(b *testing.B) {
		h := admin.NewHistory(admin.HistoryOptions{})
		now := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(5 * time.Second)
			h.Sample(br.Dispatcher(), now)
		}
		if h.Tracked() != admin.MaxTrackedDestinations {
			b.Fatalf("tracked %d", h.Tracked())
		}
	})
}

func TestHistoryNeedsBrowse(t *testing.T) {
	base := securedURL(t)
	c := httpClient(t)
	basic := func(user string) string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, user+"-pw")
		return req.Header.Get("Authorization")
	}
	r := call(t, c, "GET", base+admin.PathHistory, "")
	requireEqual(t, r.status, http.StatusUnauthorized, "history without credentials")
	r = call(t, c, "GET", base+admin.PathHistory, "", "Authorization", basic("reader"))
	requireEqual(t, r.status, http.StatusOK, "broker-wide history for a reader")
	r = call(t, c, "GET", base+admin.PathHistory+"?destination=/queue/a", "", "Authorization", basic("reader"))
	requireEqual(t, r.status, http.StatusOK, "a destination's history for a reader")
	r = call(t, c, "GET", base+admin.PathHistory+"?destination=/queue/a", "", "Authorization", basic("app"))
	requireEqual(t, r.status, http.StatusForbidden, "a destination's history without browse")
	r = call(t, c, "GET", base+admin.PathQueues+"?filter=a", "", "Authorization", basic("app"))
	requireEqual(t, r.status, http.StatusForbidden, "the queue list without browse")
}
