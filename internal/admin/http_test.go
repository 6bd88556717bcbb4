package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/config"
)

// monitorURL is the base URL of b's monitor listener.
func monitorURL(t *testing.T, mutate func(*config.Config)) string {
	t.Helper()
	b, _ := start(t, mutate)
	if b.MonitorAddr() == "" {
		t.Fatal("monitor not listening")
	}
	return "http://" + b.MonitorAddr()
}

func TestHTTPQueueLifecycle(t *testing.T) {
	base := monitorURL(t, nil)
	c := httpClient(t)

	r := call(t, c, "GET", base+admin.PathHealth, "")
	requireEqual(t, r.status, 200, "health status")
	var h admin.Health
	r.decode(t, &h)
	requireEqual(t, h.Status, "UP", "health")

	r = call(t, c, "POST", base+admin.PathQueues+"?destination=/orders&maxPendingBytes=1048576", "")
	requireEqual(t, r.status, http.StatusCreated, "create status")
	requireEqual(t, r.header.Get("Content-Type"), "application/json; charset=utf-8", "content type")
	var cr admin.CreateQueueResult
	r.decode(t, &cr)
	requireEqual(t, cr.Created, true, "created")
	requireEqual(t, cr.Queue.MaxPendingBytes, int64(1048576), "maxPendingBytes")

	r = call(t, c, "POST", base+admin.PathQueues+"?destination=/orders&maxPendingBytes=5", "")
	requireEqual(t, r.status, http.StatusOK, "idempotent create status")
	r.decode(t, &cr)
	requireEqual(t, cr.Created, false, "created again")
	requireEqual(t, cr.Queue.MaxPendingBytes, int64(1048576), "limits kept")

	r = call(t, c, "POST", base+admin.PathQueues+"?destination=/queue/jobs&group=market&ringSize=10&capacity=100", "")
	requireEqual(t, r.status, http.StatusCreated, "create in group")

	r = call(t, c, "GET", base+admin.PathQueues, "")
	requireEqual(t, r.status, 200, "list status")
	var l admin.QueueList
	r.decode(t, &l)
	requireEqual(t, l.Summary.Text, "2 queues in 2 groups", "summary")
	requireEqual(t, l.Queues[1].Group, "market", "second queue group")
	requireEqual(t, l.Queues[1].RingSize, 10, "ring")
	requireEqual(t, l.Queues[1].Capacity, 100, "capacity")
	r = call(t, c, "GET", base+admin.PathQueues+"?group=market", "")
	r.decode(t, &l)
	requireEqual(t, len(l.Queues), 1, "filtered by group")

	r = call(t, c, "POST", base+admin.PathQueuesPause+"?destination=/queue/jobs&group=market", "")
	requireEqual(t, r.status, 200, "pause status")
	var qi admin.QueueInfo
	r.decode(t, &qi)
	requireEqual(t, qi.Paused, true, "paused")
	r = call(t, c, "POST", base+admin.PathQueuesResume+"?destination=/queue/jobs&group=market", "")
	r.decode(t, &qi)
	requireEqual(t, qi.Paused, false, "resumed")
	r = call(t, c, "POST", base+admin.PathQueuesRingSize+"?destination=/queue/jobs&group=market&size=3", "")
	requireEqual(t, r.status, 200, "ring status")
	r.decode(t, &qi)
	requireEqual(t, qi.RingSize, 3, "ring size")

	r = call(t, c, "POST", base+admin.PathPublish, `{"destination":"/queue/jobs","group":"market","body":"hello","headers":{"x-a":"1"}}`)
	requireEqual(t, r.status, 200, "publish status")
	var pr admin.PublishResult
	r.decode(t, &pr)
	requireEqual(t, pr.Destination, "/queue/jobs", "publish destination")
	requireEqual(t, pr.BodyBytes, 5, "publish body bytes")

	r = call(t, c, "DELETE", base+admin.PathQueues+"?destination=/queue/jobs&group=market", "")
	requireEqual(t, r.status, http.StatusConflict, "delete non-empty")
	e := r.errorBody(t)
	requireEqual(t, e.Code, admin.CodeQueueNotEmpty, "code")
	requireEqual(t, e.Error, "queue /queue/jobs in group market is not empty (1 message); delete with force=true to discard its messages", "error")

	r = call(t, c, "DELETE", base+admin.PathQueues+"?destination=/queue/jobs&group=market&force=true", "")
	requireEqual(t, r.status, 200, "forced delete")
	var dr admin.DeleteQueueResult
	r.decode(t, &dr)
	requireEqual(t, dr.Discarded, 1, "discarded")

	r = call(t, c, "DELETE", base+admin.PathQueues+"?destination=/queue/jobs&group=market", "")
	requireEqual(t, r.status, http.StatusNotFound, "delete absent")
	requireEqual(t, r.errorBody(t).Error, "no queue /queue/jobs in group market", "404 message")
}

func TestHTTPErrors(t *testing.T) {
	base := monitorURL(t, nil)
	c := httpClient(t)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, msg          string
	}{
		{"POST", admin.PathQueues + "?destination=/queue//x", "", 400, admin.CodeInvalidDestination, "invalid destination"},
		{"POST", admin.PathQueues + "?destination=%2Fqueue%2Fx%00y", "", 400, admin.CodeInvalidDestination, "invalid destination"},
		{"POST", admin.PathQueues, "", 400, admin.CodeInvalidParameter, "destination is required"},
		{"POST", admin.PathQueues + "?destination=/orders&group=no+spaces", "", 400, admin.CodeInvalidGroup, ""},
		{"POST", admin.PathQueues + "?destination=/orders&maxPendingBytes=1MiB", "", 400, admin.CodeInvalidParameter, `maxPendingBytes must be an integer, got "1MiB"`},
		{"POST", admin.PathQueues + "?destination=/orders&ringSize=3", "", 400, admin.CodeInvalidParameter, ""},
		{"DELETE", admin.PathQueues + "?destination=/orders&force=maybe", "", 400, admin.CodeInvalidParameter, ""},
		{"DELETE", admin.PathQueues + "?destination=/orders", "", 404, admin.CodeQueueNotFound, "no queue /orders"},
		{"POST", admin.PathQueuesPause + "?destination=/orders", "", 404, admin.CodeQueueNotFound, ""},
		{"POST", admin.PathQueuesRingSize + "?destination=/queue/x", "", 400, admin.CodeInvalidParameter, ""},
		{"GET", admin.PathQueuesPause, "", 405, admin.CodeMethodNotAllowed, ""},
		{"PUT", admin.PathQueues, "", 405, admin.CodeMethodNotAllowed, ""},
		{"GET", "/titan/monitor/nope", "", 404, admin.CodeNotFound, ""},
		{"POST", admin.PathPublish, "", 400, admin.CodeInvalidParameter, ""},
		{"POST", admin.PathPublish, `{"destination":"/queue/x","bogus":1}`, 400, admin.CodeInvalidParameter, ""},
		{"POST", admin.PathPublish, `{"destination":"/queue/x"} {}`, 400, admin.CodeInvalidParameter, ""},
		{"POST", admin.PathPublish, `{"destination":"/queue/x","body":"a","bodyBase64":"YQ=="}`, 400, admin.CodeInvalidParameter, ""},
		{"POST", admin.PathPublish, `{"destination":"queue/../x"}`, 400, admin.CodeInvalidDestination, "invalid destination"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := call(t, c, tc.method, base+tc.path, tc.body)
			requireEqual(t, r.status, tc.status, "status of "+string(r.body))
			e := r.errorBody(t)
			requireEqual(t, e.Code, tc.code, "code")
			if tc.msg != "" {
				requireEqual(t, e.Error, tc.msg, "error")
			}
		})
	}
}

func TestHTTPTokenAuth(t *testing.T) {
	const token = "s3cret-0123456789abcdef"
	base := monitorURL(t, func(c *config.Config) { c.Monitor.Token = token })
	c := httpClient(t)
	paths := []string{admin.PathHealth, admin.PathSnapshot, admin.PathQueues, admin.PathMetrics, admin.PathConsole}
	for _, p := range paths {
		r := call(t, c, "GET", base+p, "")
		requireEqual(t, r.status, http.StatusUnauthorized, p+" without token")
		e := r.errorBody(t)
		requireEqual(t, e.Code, admin.CodeUnauthorized, "code")
		if r.header.Get("WWW-Authenticate") == "" {
			t.Fatalf("%s: no WWW-Authenticate", p)
		}
		r = call(t, c, "GET", base+p, "", "Authorization", "Bearer wrong")
		requireEqual(t, r.status, http.StatusUnauthorized, p+" with a wrong token")
		requireEqual(t, r.errorBody(t).Error, "unauthorized: the token is not valid", "message")
		r = call(t, c, "GET", base+p, "", "Authorization", "Bearer "+token)
		requireEqual(t, r.status, http.StatusOK, p+" with the token")
	}
	// Mutations too.
	r := call(t, c, "POST", base+admin.PathQueues+"?destination=/orders", "")
	requireEqual(t, r.status, http.StatusUnauthorized, "create without token")
	r = call(t, c, "POST", base+admin.PathPublish, `{"destination":"/queue/x"}`)
	requireEqual(t, r.status, http.StatusUnauthorized, "publish without token")
	// A browser opening the console gets a Basic challenge and may answer it with the token.
	r = call(t, c, "GET", base+"/", "")
	if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("console challenge %q", r.header.Get("WWW-Authenticate"))
	}
	req, _ := http.NewRequest("GET", base+admin.PathSnapshot, nil)
	req.SetBasicAuth("anyone", token)
	resp, err := c.Do(req)
	requireNoError(t, err)
	resp.Body.Close()
	requireEqual(t, resp.StatusCode, 200, "basic auth with the token")
}

func TestConsoleIsSelfContained(t *testing.T) {
	base := monitorURL(t, nil)
	r := call(t, httpClient(t), "GET", base+"/", "")
	requireEqual(t, r.status, 200, "status")
	requireEqual(t, r.header.Get("Content-Type"), "text/html; charset=utf-8", "content type")
	page := string(r.body)
	for _, want := range []string{"<script>", admin.PathSnapshot, "setTimeout(poll, 1000)", "textContent"} {
		if !strings.Contains(page, want) {
			t.Errorf("console lacks %q", want)
		}
	}
	for _, bad := range []string{`src="http`, `href="http`, "<link", "innerHTML", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("console references external or unsafe %q", bad)
		}
	}
}

// The handler works without a listener too (httptest), e.g. when a program mounts it.
func TestHandlerWithHTTPTest(t *testing.T) {
	_, a := start(t, func(c *config.Config) {
		f := false
		c.Monitor.Enabled = &f
		c.Monitor.AllowedHosts = []string{"example.com"} // httptest's Host
	})
	h := a.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", admin.PathQueues+"?destination=/topic/prices&capacity=5", nil))
	requireEqual(t, rec.Code, http.StatusCreated, "status")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", admin.PathMetrics, nil))
	requireEqual(t, rec.Code, 200, "metrics status")
	if !strings.Contains(rec.Body.String(), `titan_queue_capacity_messages{destination="/topic/prices",group="default",pattern="events"} 5`) {
		t.Fatalf("metrics lack the queue:\n%s", rec.Body.String())
	}
}

// A page on another site cannot change state through a user's browser (CSRF); reads and
// non-browser clients are unaffected.
func TestCrossSiteBrowserRequestsCannotChangeState(t *testing.T) {
	_, a := start(t, func(c *config.Config) {
		f := false
		c.Monitor.Enabled = &f
		c.Monitor.AllowedHosts = []string{"example.com"} // httptest's Host
	})
	h := a.Handler()
	body := `{"destination":"/queue/x","body":"forged"}`
	req := httptest.NewRequest("POST", admin.PathPublish, strings.NewReader(body))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	requireEqual(t, rec.Code, http.StatusForbidden, "cross-site POST status")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", admin.PathPublish, strings.NewReader(body)))
	if rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
		t.Fatalf("non-browser POST: %d %s", rec.Code, rec.Body.String())
	}
	req = httptest.NewRequest("GET", admin.PathSnapshot, nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	requireEqual(t, rec.Code, http.StatusOK, "cross-site GET status")
}
