package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/metrics"
)

// Handler returns the HTTP handler serving every path of the monitor API (the Path*
// constants), /metrics and the console, behind the token check when Options.Token is set and
// net/http's cross-origin protection for state-changing methods.
// Unknown paths answer 404 and wrong methods 405, both as JSON errors. Each call builds a
// fresh Prometheus registry, so call it once per server. Safe for concurrent use.
func (a *Admin) Handler() http.Handler {
	mux := http.NewServeMux()
	reg := a.registry()
	mux.Handle(PathHealth, methods{http.MethodGet: a.serveHealth})
	mux.Handle(PathSnapshot, methods{http.MethodGet: a.serveSnapshot})
	mux.Handle(PathQueues, methods{
		http.MethodGet:    a.serveQueues,
		http.MethodPost:   a.onDestination(true, a.identity, a.serveCreateQueue),
		http.MethodDelete: a.onDestination(true, a.identity, a.serveDeleteQueue),
	})
	mux.Handle(PathHistory, methods{http.MethodGet: a.onDestination(false, a.identity, a.serveHistory)})
	mux.Handle(PathQueuesPause, methods{http.MethodPost: a.onDestination(true, a.identity, a.servePause)})
	mux.Handle(PathQueuesResume, methods{http.MethodPost: a.onDestination(true, a.identity, a.serveResume)})
	mux.Handle(PathQueuesRingSize, methods{http.MethodPost: a.onDestination(true, a.identity, a.serveRingSize)})
	mux.Handle(PathConnections, methods{
		http.MethodGet:    a.broker(false, "listing connections", a.serveConnections),
		http.MethodDelete: a.broker(true, "closing a connection", a.serveCloseConnection),
	})
	mux.Handle(PathSubscriptions, methods{http.MethodGet: a.serveSubscriptions})
	mux.Handle(PathLogs, methods{http.MethodGet: a.serveLogs})
	mux.Handle(PathDurableSubscriptions, methods{http.MethodGet: a.serveDurables, http.MethodDelete: a.onDestination(true, durableIdentity, a.serveDeleteDurable)})
	mux.Handle(PathCluster, methods{http.MethodGet: a.broker(false, "the cluster's membership", a.serveCluster)})
	mux.Handle(PathClusterNodes, methods{http.MethodDelete: a.broker(true, "removing a cluster node", a.serveRemoveClusterNode)})
	mux.Handle(PathQueuesPurge, methods{http.MethodPost: a.onDestination(true, a.queueIdentity("purge"), a.servePurge)})
	mux.Handle(PathQueuesMessages, methods{http.MethodGet: a.onDestination(false, a.queueIdentity("browse"), a.serveBrowse)})
	mux.Handle(PathQueuesRedrive, methods{http.MethodPost: a.onDestination(true, a.dlqOf, a.serveRedrive)})
	mux.Handle(PathPublish, methods{http.MethodPost: a.servePublish})
	mux.Handle(PathUsersReload, methods{http.MethodPost: a.broker(true, "reloading the users file", a.serveUsersReload)})
	mux.Handle(PathMetrics, methods{http.MethodGet: a.broker(false, "/metrics", metrics.Handler(reg).ServeHTTP)})
	mux.Handle(PathPprof, methods{http.MethodGet: a.broker(true, "runtime profiles", servePprof)})
	mux.Handle(PathConsole+"{$}", methods{http.MethodGet: serveConsole})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(CodeNotFound, "no such endpoint: "+r.URL.Path, ErrNotFound))
	})
	// Browsers may not change state cross-site (CSRF): a page elsewhere cannot POST /publish
	// or delete queues through a user's browser, token or not. CLI and server-to-server
	// calls send no Origin or Sec-Fetch-Site and pass.
	var cop http.CrossOriginProtection
	return a.checkHost(a.authenticate(cop.Handler(mux)))
}

// methods dispatches by request method and answers 405 (JSON) for any other. HEAD is served
// as GET.
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if h, ok := m[method]; ok {
		h(w, r)
		return
	}
	allow := make([]string, 0, len(m))
	for _, k := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		if _, ok := m[k]; ok {
			allow = append(allow, k)
		}
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, newError(CodeMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path+" (allowed: "+strings.Join(allow, ", ")+")", ErrMethodNotAllowed))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // served as application/json with nosniff
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Status(), ErrorResponse{Error: e.Message, Code: e.Code})
}

// respond writes v with status, or err as a JSON error (logging 5xx other than a full queue
// and the like, and an action cluster mode does not support: answers, not failures).
func (a *Admin) respond(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		e := asError(err)
		if e.Status() >= 500 && e.Code != CodeQueueFull && e.Code != CodeNotStored && e.Code != CodeStoreUnavailable && e.Code != CodeDestinationLimit &&
			e.Code != CodeUnsupportedInCluster {
			a.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "err", e.Err)
		}
		writeError(w, e)
		return
	}
	writeJSON(w, status, v)
}

func ref(r *http.Request) QueueRef {
	q := r.URL.Query()
	return QueueRef{Destination: q.Get(ParamDestination), Group: q.Get(ParamGroup)}
}

func (a *Admin) serveHealth(w http.ResponseWriter, r *http.Request) {
	h, err := a.Health()
	status := http.StatusOK
	if h != nil && h.Status == "DOWN" {
		status = http.StatusServiceUnavailable
	}
	a.respond(w, r, status, h, err)
}

func (a *Admin) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	withQueues := true
	if v := r.URL.Query().Get(ParamQueues); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			a.respond(w, r, 0, nil, invalidParam("queues must be true or false, got "+strconv.Quote(v)))
			return
		}
		withQueues = b
	}
	s, err := a.Snapshot(SnapshotOptions{OmitQueues: !withQueues, keep: a.queueVisibility(r)})
	if err == nil && requestUser(r) != "" && a.opts.Users != nil && !a.brokerWide(r, false) {
		s.Connections = []ConnectionInfo{}
	}
	a.respond(w, r, http.StatusOK, s, err)
}

func (a *Admin) serveQueues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := QueuesOptions{Group: q.Get(ParamGroup), Destination: q.Get(ParamDestination), Match: q.Get(ParamMatch),
		Filter: q.Get(ParamFilter), Limit: DefaultQueuePageSize}
	offset, err := optInt(q, ParamOffset)
	var limit *int
	if err == nil {
		limit, err = optInt(q, ParamLimit)
	}
	switch {
	case err != nil:
	case offset != nil && *offset < 0:
		err = invalidParam("offset must be >= 0 (queues to skip)")
	case limit != nil && (*limit < 1 || *limit > MaxQueuePageSize):
		err = invalidParam("limit must be 1 to " + strconv.Itoa(MaxQueuePageSize) + " (queues per page)")
	}
	if err != nil {
		a.respond(w, r, 0, nil, err)
		return
	}
	if offset != nil {
		o.Offset = *offset
	}
	if limit != nil {
		o.Limit = *limit
	}
	o.keep = a.queueVisibility(r)
	l, err := a.Queues(o)
	a.respond(w, r, http.StatusOK, l, err)
}

func (a *Admin) serveCreateQueue(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o := CreateQueueOptions{QueueRef: ref(r)}
	var err error
	if o.MaxPendingBytes, err = optInt64(q, ParamMaxPendingBytes); err == nil {
		if o.Capacity, err = optInt(q, ParamCapacity); err == nil {
			o.RingSize, err = optInt(q, ParamRingSize)
		}
	}
	if err != nil {
		a.respond(w, r, 0, nil, err)
		return
	}
	res, err := a.CreateQueue(o)
	status := http.StatusOK
	if res != nil && res.Created {
		status = http.StatusCreated
	}
	a.respond(w, r, status, res, err)
}

func (a *Admin) serveDeleteQueue(w http.ResponseWriter, r *http.Request) {
	force, err := optBool(r.URL.Query(), ParamForce)
	if err != nil {
		a.respond(w, r, 0, nil, err)
		return
	}
	res, err := a.DeleteQueue(DeleteQueueOptions{QueueRef: ref(r), Force: force})
	a.respond(w, r, http.StatusOK, res, err)
}

func (a *Admin) servePause(w http.ResponseWriter, r *http.Request) {
	qi, err := a.Pause(ref(r))
	a.respond(w, r, http.StatusOK, qi, err)
}

func (a *Admin) serveResume(w http.ResponseWriter, r *http.Request) {
	qi, err := a.Resume(ref(r))
	a.respond(w, r, http.StatusOK, qi, err)
}

func (a *Admin) serveRingSize(w http.ResponseWriter, r *http.Request) {
	size, err := optInt(r.URL.Query(), ParamSize)
	if err == nil && size == nil {
		err = invalidParam("size is required (a number of messages; -1 for no limit)")
	}
	if err != nil {
		a.respond(w, r, 0, nil, err)
		return
	}
	qi, err := a.SetRingSize(RingSizeOptions{QueueRef: ref(r), Size: *size})
	a.respond(w, r, http.StatusOK, qi, err)
}

func (a *Admin) servePublish(w http.ResponseWriter, r *http.Request) {
	// Base64 inflates by 4/3; allow room for headers and metadata too.
	limit := int64(a.opts.MaxBodyBytes)/3*4 + 1<<20
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	var req PublishRequest
	if err := dec.Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			err = newError(CodeTooLarge, "request body is over "+strconv.FormatInt(limit, 10)+" bytes", ErrTooLarge)
		case errors.Is(err, io.EOF):
			err = invalidParam("request body is empty; send a JSON object {\"destination\": ..., \"body\": ...}")
		default:
			err = invalidParam("request body is not a valid publish request: " + err.Error())
		}
		a.respond(w, r, 0, nil, err)
		return
	}
	if dec.More() {
		a.respond(w, r, 0, nil, invalidParam("request body holds more than one JSON value"))
		return
	}
	res, err := a.publish(req, requestUser(r))
	a.respond(w, r, http.StatusOK, res, err)
}

type getter interface{ Get(string) string }

func optInt64(q getter, name string) (*int64, error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, invalidParam(name + " must be an integer, got " + strconv.Quote(v))
	}
	return &n, nil
}

func optInt(q getter, name string) (*int, error) {
	n64, err := optInt64(q, name)
	if err != nil || n64 == nil {
		return nil, err
	}
	n := int(n64Clamp(*n64))
	return &n, nil
}

func n64Clamp(n int64) int64 {
	const maxInt = int64(^uint(0) >> 1)
	if n > maxInt {
		return maxInt
	}
	if n < -maxInt-1 {
		return -maxInt - 1
	}
	return n
}

func optBool(q getter, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalidParam(name + " must be true or false, got " + strconv.Quote(v))
	}
	return b, nil
}

func (a *Admin) serveConnections(w http.ResponseWriter, r *http.Request) {
	l, err := a.Connections()
	a.respond(w, r, http.StatusOK, l, err)
}

func (a *Admin) serveCloseConnection(w http.ResponseWriter, r *http.Request) {
	res, err := a.CloseConnection(r.URL.Query().Get(ParamID))
	a.respond(w, r, http.StatusOK, res, err)
}

func (a *Admin) serveSubscriptions(w http.ResponseWriter, r *http.Request) {
	l, err := a.Subscriptions(ref(r))
	if err == nil {
		kept, wide := l.Subscriptions[:0], a.brokerWide(r, false)
		for _, s := range l.Subscriptions {
			if wide || (s.Pattern != dest.PatternTempQueue.String() && a.visible(r, s.Group, s.Destination)) {
				if !wide {
					s.Connection = "" // connection ids name temp-queues: operators only
				}
				kept = append(kept, s)
			}
		}
		l.Subscriptions = kept
	}
	a.respond(w, r, http.StatusOK, l, err)
}

func (a *Admin) serveLogs(w http.ResponseWriter, r *http.Request) {
	l, err := a.Logs(ref(r))
	if err == nil {
		kept, wide := l.Logs[:0], a.brokerWide(r, false)
		for _, g := range l.Logs {
			if a.visible(r, g.Group, g.Destination) {
				for i := range g.Subscriptions {
					if !wide {
						g.Subscriptions[i].Connection = "" // operators only (see serveSubscriptions)
					}
				}
				kept = append(kept, g)
			}
		}
		l.Logs = kept
	}
	a.respond(w, r, http.StatusOK, l, err)
}

func (a *Admin) servePurge(w http.ResponseWriter, r *http.Request) {
	res, err := a.Purge(ref(r))
	a.respond(w, r, http.StatusOK, res, err)
}

func (a *Admin) serveBrowse(w http.ResponseWriter, r *http.Request) {
	limit, err := optInt(r.URL.Query(), ParamLimit)
	if err != nil {
		a.respond(w, r, 0, nil, err)
		return
	}
	n := 0
	if limit != nil {
		n = *limit
	}
	res, err := a.Browse(ref(r), n)
	a.respond(w, r, http.StatusOK, res, err)
}

func (a *Admin) serveRedrive(w http.ResponseWriter, r *http.Request) {
	limit, err := optInt(r.URL.Query(), ParamLimit)
	if err != nil {
		a.respond(w, r, 0, nil, err)
		return
	}
	n := 0
	if limit != nil {
		n = *limit
	}
	res, err := a.Redrive(ref(r), n, requestUser(r))
	a.respond(w, r, http.StatusOK, res, err)
}

// queueVisibility is the predicate keeping the queues r's user may browse; nil (all) for
// the token, a server without users and the broker-wide right. Temp-queues are listed only
// with the broker-wide right: their names carry the owning connection's id, and knowing it
// is what lets a SEND reach another connection's temp-queue.
func (a *Admin) queueVisibility(r *http.Request) func(group, destination, pattern string) bool {
	if requestUser(r) == "" || a.opts.Users == nil || a.brokerWide(r, false) {
		return nil
	}
	return func(group, destination, pattern string) bool {
		return pattern != dest.PatternTempQueue.String() && a.visible(r, group, destination)
	}
}
