package admin_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

// Go's runtime profiles are served to a holder of the broker-wide manage right (root) and
// refused to a user who can only browse (reader) or without credentials; the index, a named
// profile, cmdline and a one-second CPU profile answer as net/http/pprof does.
func TestPprofNeedsBrokerWideManage(t *testing.T) {
	base := securedURL(t)
	c := httpClient(t)
	auth := func(user string) []string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, user+"-pw")
		return []string{"Authorization", req.Header.Get("Authorization")}
	}
	for _, tc := range []struct{ path, want string }{
		{"", "Types of profiles available"},
		{"heap?debug=1", "heap profile:"},
		{"goroutine?debug=1", "goroutine profile:"},
		{"cmdline", "admin.test"},
	} {
		r := call(t, c, "GET", base+admin.PathPprof+tc.path, "", auth("root")...)
		requireEqual(t, r.status, http.StatusOK, "root GET "+admin.PathPprof+tc.path)
		if !strings.Contains(string(r.body), tc.want) {
			t.Errorf("GET %s%s: body lacks %q: %.200s", admin.PathPprof, tc.path, tc.want, r.body)
		}
	}
	r := call(t, c, "GET", base+admin.PathPprof+"profile?seconds=1", "", auth("root")...)
	requireEqual(t, r.status, http.StatusOK, "root CPU profile")
	if len(r.body) < 2 || r.body[0] != 0x1f || r.body[1] != 0x8b {
		t.Errorf("CPU profile is not a gzipped profile: % x", r.body[:min(len(r.body), 8)])
	}
	r = call(t, c, "GET", base+admin.PathPprof+"heap", "", auth("reader")...)
	requireEqual(t, r.status, http.StatusForbidden, "reader GET heap profile")
	requireEqual(t, r.errorBody(t).Code, admin.CodeForbidden, "code")
	r = call(t, c, "GET", base+admin.PathPprof+"heap", "")
	requireEqual(t, r.status, http.StatusUnauthorized, "GET heap profile without credentials")
}
