package admin

import (
	_ "embed"
	"net/http"
)

// consoleHTML is the web console: one self-contained page (inline CSS and JS, no external
// assets) that polls PathSnapshot every second and renders the server, connections and
// queues. It builds the DOM with textContent only, so destination names cannot inject markup.
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
