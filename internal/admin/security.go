package admin

import (
	"context"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

// Users is the monitor API's port to the broker's users (implemented over internal/auth by
// internal/broker). With Users set, every request needs HTTP Basic credentials of a user (or
// the bearer token, when one is configured); reading needs browse, anything else manage, on
// the destination the request names (see rights.go).
type Users interface {
	// Login checks a user's password; remote is the peer address (for the log). It must
	// take the same time for an unknown user as for a wrong password.
	Login(user, password, remote string) error
	// May reports whether user may read the API (manage false: browse) or change state
	// (manage true).
	May(user string, manage bool) bool
	// MayOn reports whether user holds browse (manage false) or manage (manage true) on id,
	// the destination a request reads or changes.
	MayOn(user string, manage bool, id dest.Identity) bool
	// Operator reports whether user holds the broker-wide browse (manage false) or manage
	// right, needed for what names no destination (connections, users reload, cluster,
	// /metrics).
	Operator(user string, manage bool) bool
	// Reload re-reads the users file (POST PathUsersReload) and returns the user count.
	Reload() (users int, err error)
}

// LoginThrottle is the monitor's port to the broker's login back-off (admission.LoginThrottle):
// Admit before credentials are checked (the wait to observe, or an error: refuse unchecked),
// then Fail or Succeed. Safe for concurrent use.
type LoginThrottle interface {
	Admit(remote, user string) (time.Duration, error)
	Fail(remote, user string)
	Succeed(remote, user string)
}

// PathUsersReload answers POST by re-reading the users file (manage needed), like SIGHUP.
const PathUsersReload = "/titan/monitor/users/reload"

// UsersReloadResult is the answer to POST PathUsersReload.
type UsersReloadResult struct {
	Reloaded bool `json:"reloaded"`
	Users    int  `json:"users"`
}

func (a *Admin) serveUsersReload(w http.ResponseWriter, r *http.Request) {
	if a.opts.Users == nil {
		a.respond(w, r, 0, nil, invalidParam("no users file is configured (start titan serve with --users FILE)"))
		return
	}
	n, err := a.opts.Users.Reload()
	if err != nil {
		a.respond(w, r, 0, nil, invalidParam("users file not reloaded (the previous one stays in force): "+err.Error()))
		return
	}
	a.respond(w, r, http.StatusOK, UsersReloadResult{Reloaded: true, Users: n}, nil)
}

// authenticate enforces Options.Token and Options.Users on every request: a matching bearer
// token (or the token as a Basic password, as before users existed) may do everything; a
// user's Basic credentials may read with browse and change state with manage. Without a
// token and users the API is open (it then binds loopback; see the broker).
func (a *Admin) authenticate(next http.Handler) http.Handler {
	if a.opts.Token == "" && a.opts.Users == nil {
		return next
	}
	token := []byte(a.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		scheme, cred, _ := strings.Cut(h, " ")
		tokenOK := func(s string) bool {
			return len(token) > 0 && subtle.ConstantTimeCompare([]byte(s), token) == 1
		}
		// Failed logins back off per address and user (issue 29), as on STOMP.
		th, login := a.opts.LoginThrottle, ""
		if th != nil && h != "" {
			login, _, _ = r.BasicAuth()
			wait, err := th.Admit(r.RemoteAddr, login)
			if err != nil {
				w.Header().Set("Retry-After", "10")
				writeError(w, newError(CodeUnauthorized, "unauthorized: too many failed logins from this address; retry later", ErrUnauthorized))
				return
			}
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-r.Context().Done():
				}
				t.Stop()
			}
			defer func() {
				if w.Header().Get("WWW-Authenticate") != "" {
					th.Fail(r.RemoteAddr, login) // refused below: the credentials were wrong
				} else {
					th.Succeed(r.RemoteAddr, login)
				}
			}()
		}
		switch strings.ToLower(scheme) {
		case "bearer":
			if tokenOK(strings.TrimSpace(cred)) {
				next.ServeHTTP(w, r)
				return
			}
		case "basic":
			user, pw, has := r.BasicAuth()
			if has && tokenOK(pw) && (a.opts.Users == nil || user == "" || user == "token") {
				next.ServeHTTP(w, r)
				return
			}
			if has && a.opts.Users != nil && a.opts.Users.Login(user, pw, r.RemoteAddr) == nil {
				manage := r.Method != http.MethodGet && r.Method != http.MethodHead
				if !a.opts.Users.May(user, manage) {
					need := "browse"
					if manage {
						need = "manage"
					}
					writeError(w, newError(CodeForbidden, "forbidden: user "+user+" lacks the "+need+" permission", ErrForbidden))
					return
				}
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
				return
			}
		}
		msg := "unauthorized: send \"Authorization: Bearer <token>\" (titan --token or TITAN_MONITOR_TOKEN)"
		if a.opts.Users != nil {
			msg = "unauthorized: log in with a Titan user (HTTP Basic; titan --user and --password, or TITAN_MONITOR_USER and TITAN_MONITOR_PASSWORD)"
		}
		if h != "" {
			msg = "unauthorized: the credentials are not valid"
			if a.opts.Users == nil {
				msg = "unauthorized: the token is not valid"
			}
		}
		if a.opts.Users != nil || r.URL.Path == PathConsole {
			w.Header().Set("WWW-Authenticate", `Basic realm="titan", charset="UTF-8"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="titan"`)
		}
		writeError(w, newError(CodeUnauthorized, msg, ErrUnauthorized))
	})
}

// checkHost refuses a request whose Host header is not a name this API answers to: an IP
// literal, a loopback name (localhost, *.localhost) or one of Options.Hosts. A web page on
// another site can point its own DNS name at this address (DNS rebinding); its requests are
// then same-origin in the browser, Origin check included, but carry that foreign Host.
func (a *Admin) checkHost(next http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, h := range a.opts.Hosts {
		allowed[strings.ToLower(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
		if host == "" || net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") || allowed[host] {
			next.ServeHTTP(w, r)
			return
		}
		writeError(w, newError(CodeForbidden, "forbidden: the Host header "+r.Host+" is not a name of this broker (add it to titan.monitor.allowed-hosts)", ErrForbidden))
	})
}

// userKey is the request-context key of the monitor user a request authenticated as.
type userKey struct{}

// requestUser returns the user r authenticated as with HTTP Basic ("" for the bearer token,
// or when the API has no users).
func requestUser(r *http.Request) string {
	u, _ := r.Context().Value(userKey{}).(string)
	return u
}
