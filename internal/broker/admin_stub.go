package broker

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// adminServer is the monitor HTTP server (DESIGN §7).
type adminServer struct {
	b   *Broker
	ln  net.Listener
	srv *http.Server
}

func newAdminServer(b *Broker) (*adminServer, error) {
	ln, err := net.Listen("tcp", b.cfg.Monitor.Addr())
	if err != nil {
		return nil, err
	}
	a := &adminServer{b: b, ln: ln}
	a.srv = &http.Server{Handler: b.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	return a, nil
}

func (a *adminServer) start() {
	a.b.goroutine("admin-http", func() {
		if err := a.srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.b.log.Error("admin server stopped", "err", err)
		}
	})
}

func (a *adminServer) shutdown(ctx context.Context) { _ = a.srv.Shutdown(ctx) }

func (b *Broker) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /titan/monitor/health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"UP"}` + "\n"))
	})
	return mux
}
