package admin

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// servePprof serves Go's runtime profiles under PathPprof, as net/http/pprof does on its
// own mux: the index and every named profile (heap, allocs, goroutine, block, mutex,
// threadcreate), and cmdline, profile (CPU, ?seconds=N, default 30), symbol and trace. The
// caller holds the broker-wide manage right (a profile names every goroutine and allocation
// site, and a CPU profile or trace runs for its duration). Issue 33 asks for Go's profiler
// on the real binary; this is where `go tool pprof` reads it:
//
//	go tool pprof http://127.0.0.1:7777/debug/pprof/profile?seconds=15
func servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, PathPprof) {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r) // the index, or the named profile the path ends in
	}
}
