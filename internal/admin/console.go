package admin

import (
	_ "embed"
	"net/http"
)

// consoleHTML is the web console: one self-contained page (inline CSS and JS, no external
// assets, no build step) that polls every second PathSnapshot (queues=false), one page of
// PathQueues (50, with the filter box's filter), PathHistory, PathConnections and PathLogs,
// and renders the broker's rates (published, delivered, acknowledged per second, drawn on a
// <canvas> from the broker's history, so from before the page was opened), destinations page
// by page with their state, rates and actions (create, pause, resume, purge, delete, ring
// size, browse, re-drive), events-store logs, log subscriptions with position and lag,
// connections (close), and a form to publish a test message. A destination's page
// (#/destination/GROUP/DESTINATION) adds its counters and settings, its rates over time
// (PathHistory with destination), its consumers (PathSubscriptions) and a message browser
// (PathQueuesMessages). It sends the credentials the browser holds (the Basic challenge of
// "/") or those typed in its login form. It builds the DOM with textContent only, so
// destination names cannot inject markup.
//
//go:embed console.html
var consoleHTML []byte

func serveConsole(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	_, _ = w.Write(consoleHTML)
}
