package admin_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/auth"
	"github.com/titan-broker/titan/internal/config"
)

// usersFile writes a users file: root (browse+manage), reader (browse), app (neither).
func usersFile(t *testing.T) string {
	t.Helper()
	f := &auth.File{Users: map[string]*auth.User{}, Permissions: []auth.Rule{
		{Channel: "#", Browse: []string{"ops", "readers"}, Manage: []string{"ops"}, Send: []string{"ops", "apps"}},
	}}
	for name, role := range map[string]string{"root": "ops", "reader": "readers", "app": "apps"} {
		requireNoError(t, f.AddUser(name, nil, []string{role}))
		h, err := bcrypt.GenerateFromPassword([]byte(name+"-pw"), bcrypt.MinCost) // fast under -race
		requireNoError(t, err)
		f.Users[name].Password = string(h)
	}
	path := filepath.Join(t.TempDir(), "users.yml")
	requireNoError(t, f.Save(path))
	return path
}

func securedURL(t *testing.T) string {
	path := usersFile(t)
	return monitorURL(t, func(c *config.Config) { c.Security.UsersFile = path })
}

func TestMonitorUsersAuthenticateAndAuthorize(t *testing.T) {
	base := securedURL(t)
	c := httpClient(t)
	basic := func(user, pw string) string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, pw)
		return req.Header.Get("Authorization")
	}
	// No credentials: 401 with a Basic challenge, for reads and writes alike.
	for _, m := range []string{"GET", "POST", "DELETE"} {
		r := call(t, c, m, base+admin.PathQueues+"?destination=/queue/a", "")
		requireEqual(t, r.status, http.StatusUnauthorized, m+" without credentials")
		if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic ") {
			t.Fatalf("challenge %q", r.header.Get("WWW-Authenticate"))
		}
	}
	r := call(t, c, "GET", base+admin.PathSnapshot, "", "Authorization", basic("root", "wrong"))
	requireEqual(t, r.status, http.StatusUnauthorized, "wrong password")
	r = call(t, c, "GET", base+admin.PathSnapshot, "", "Authorization", basic("nobody", "root-pw"))
	requireEqual(t, r.status, http.StatusUnauthorized, "unknown user")

	// manage changes state; browse reads.
	r = call(t, c, "POST", base+admin.PathQueues+"?destination=/queue/a", "", "Authorization", basic("root", "root-pw"))
	requireEqual(t, r.status, http.StatusCreated, "root creates a queue")
	r = call(t, c, "GET", base+admin.PathQueues, "", "Authorization", basic("reader", "reader-pw"))
	requireEqual(t, r.status, http.StatusOK, "reader reads")
	for _, req := range []struct{ method, path, body string }{
		{"DELETE", admin.PathQueues + "?destination=/queue/a&force=true", ""},
		{"POST", admin.PathPublish, `{"destination":"/queue/a","body":"x"}`},
		{"POST", admin.PathQueuesPause + "?destination=/queue/a", ""},
	} {
		r = call(t, c, req.method, base+req.path, req.body, "Authorization", basic("reader", "reader-pw"))
		requireEqual(t, r.status, http.StatusForbidden, "reader "+req.method+" "+req.path)
		requireEqual(t, r.errorBody(t).Code, admin.CodeForbidden, "code")
	}
	r = call(t, c, "GET", base+admin.PathSnapshot, "", "Authorization", basic("app", "app-pw"))
	requireEqual(t, r.status, http.StatusForbidden, "a user without browse reads")

	r = call(t, c, "POST", base+admin.PathUsersReload, "", "Authorization", basic("root", "root-pw"))
	requireEqual(t, r.status, http.StatusOK, "reload")
	var res admin.UsersReloadResult
	r.decode(t, &res)
	requireEqual(t, res.Users, 3, "users after reload")
	r = call(t, c, "POST", base+admin.PathUsersReload, "", "Authorization", basic("reader", "reader-pw"))
	requireEqual(t, r.status, http.StatusForbidden, "reload without manage")
}

// DNS rebinding: a page served from a foreign name that resolves to the broker makes
// same-origin requests; they carry the foreign Host and are refused, Origin or not.
func TestMonitorRefusesForeignHost(t *testing.T) {
	base := monitorURL(t, func(c *config.Config) { c.Monitor.AllowedHosts = []string{"titan.internal"} })
	c := httpClient(t)
	port := base[strings.LastIndex(base, ":")+1:]
	for _, host := range []string{"evil.example:" + port, "evil.example"} {
		req, _ := http.NewRequest("POST", base+admin.PathQueues+"?destination=/queue/rebind", nil)
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		requireNoError(t, err)
		resp.Body.Close()
		requireEqual(t, resp.StatusCode, http.StatusForbidden, "Host "+host)
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "titan.internal:" + port, "[::1]:" + port} {
		req, _ := http.NewRequest("GET", base+admin.PathHealth, nil)
		req.Host = host
		resp, err := c.Do(req)
		requireNoError(t, err)
		resp.Body.Close()
		requireEqual(t, resp.StatusCode, http.StatusOK, "Host "+host)
	}
}

// Issue #29: the monitor's browse and manage are per destination, as STOMP's send and
// consume are; what names no destination needs the catch-all rule's right.
func TestMonitorRightsPerDestination(t *testing.T) {
	f := &auth.File{Users: map[string]*auth.User{}, Permissions: []auth.Rule{
		{Channel: "#", Send: []string{"admins"}, Consume: []string{"admins"}, Browse: []string{"admins"}, Create: []string{"admins"}, Manage: []string{"admins"}},
		// The most specific rule wins, so it names admins too (or they would lose orders.#).
		{Pattern: "queues", Channel: "orders.#", Send: []string{"apps", "admins"}, Browse: []string{"apps", "admins"}, Manage: []string{"apps", "admins"}, Create: []string{"apps", "admins"}},
	}}
	for name, role := range map[string]string{"admin": "admins", "app": "apps"} {
		requireNoError(t, f.AddUser(name, nil, []string{role}))
		h, err := bcrypt.GenerateFromPassword([]byte(name+"-pw"), bcrypt.MinCost)
		requireNoError(t, err)
		f.Users[name].Password = string(h)
	}
	path := filepath.Join(t.TempDir(), "users.yml")
	requireNoError(t, f.Save(path))
	base := monitorURL(t, func(c *config.Config) { c.Security.UsersFile = path })
	c := httpClient(t)
	as := func(user string) []string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, user+"-pw")
		return []string{"Authorization", req.Header.Get("Authorization")}
	}
	for _, d := range []string{"/queue/payroll", "/queue/orders.eu"} {
		r := call(t, c, "POST", base+admin.PathQueues+"?destination="+d, "", as("admin")...)
		requireEqual(t, r.status, http.StatusCreated, "admin creates "+d)
	}
	// app acts on orders.# and on nothing else.
	for _, req := range []struct {
		method, path string
		want         int
	}{
		{"GET", admin.PathQueuesMessages + "?destination=/queue/payroll", http.StatusForbidden},
		{"POST", admin.PathQueuesPurge + "?destination=/queue/payroll", http.StatusForbidden},
		{"POST", admin.PathQueuesPause + "?destination=/queue/payroll", http.StatusForbidden},
		{"POST", admin.PathQueuesResume + "?destination=/queue/payroll", http.StatusForbidden},
		{"POST", admin.PathQueuesRingSize + "?destination=/queue/payroll&size=5", http.StatusForbidden},
		{"POST", admin.PathQueuesRedrive + "?destination=/queue/payroll", http.StatusForbidden},
		{"DELETE", admin.PathQueues + "?destination=/queue/payroll&force=true", http.StatusForbidden},
		{"POST", admin.PathQueues + "?destination=/queue/salaries", http.StatusForbidden},
		{"DELETE", admin.PathDurableSubscriptions + "?destination=/events-store/payroll&name=d1", http.StatusForbidden},
		{"GET", admin.PathConnections, http.StatusForbidden},
		{"POST", admin.PathUsersReload, http.StatusForbidden},
		{"GET", admin.PathMetrics, http.StatusForbidden},
		{"GET", admin.PathQueuesMessages + "?destination=/queue/orders.eu", http.StatusOK},
		{"POST", admin.PathQueuesPause + "?destination=/queue/orders.eu", http.StatusOK},
		{"POST", admin.PathQueuesPurge + "?destination=/queue/orders.eu", http.StatusOK},
	} {
		r := call(t, c, req.method, base+req.path, "", as("app")...)
		requireEqual(t, r.status, req.want, "app "+req.method+" "+req.path)
		if req.want == http.StatusForbidden {
			requireEqual(t, r.errorBody(t).Code, admin.CodeForbidden, "code of "+req.path)
		}
	}
	// Listings keep only what app may browse.
	var ql admin.QueueList
	call(t, c, "GET", base+admin.PathQueues, "", as("app")...).decode(t, &ql)
	requireEqual(t, len(ql.Queues), 1, "queues app sees")
	requireEqual(t, ql.Queues[0].Destination, "/queue/orders/eu", "queue app sees")
	var snap admin.Snapshot
	call(t, c, "GET", base+admin.PathSnapshot, "", as("app")...).decode(t, &snap)
	requireEqual(t, len(snap.Queues), 1, "snapshot queues app sees")
	call(t, c, "GET", base+admin.PathQueues, "", as("admin")...).decode(t, &ql)
	requireEqual(t, len(ql.Queues), 2, "queues admin sees")
	for _, p := range []string{admin.PathConnections, admin.PathMetrics} {
		requireEqual(t, call(t, c, "GET", base+p, "", as("admin")...).status, http.StatusOK, "admin GET "+p)
	}
}
