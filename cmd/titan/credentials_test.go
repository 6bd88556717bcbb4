package main

import (
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/titan-broker/titan/internal/auth"
	"github.com/titan-broker/titan/internal/config"
)

// The operator commands log in to a broker with a users file: --user and --password, or
// the environment; browse reads, manage changes.
func TestMonitorUserCredentials(t *testing.T) {
	t.Setenv(userEnv, "")
	t.Setenv(passwordEnv, "")
	f := &auth.File{Users: map[string]*auth.User{}, Permissions: []auth.Rule{
		{Channel: "#", Browse: []string{"ops", "readers"}, Manage: []string{"ops"}},
	}}
	for name, role := range map[string]string{"ops": "ops", "reader": "readers"} {
		if err := f.AddUser(name, nil, []string{role}); err != nil {
			t.Fatal(err)
		}
		// bcrypt at its minimum cost: the same check, fast enough under -race.
		h, err := bcrypt.GenerateFromPassword([]byte(name+"-pw"), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		f.Users[name].Password = string(h)
	}
	path := filepath.Join(t.TempDir(), "users.yml")
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	_, addr := startBroker(t, func(c *config.Config) { c.Security.UsersFile = path })

	run(t, "--addr", addr, "queue", "list").requireFail(t, "titan: the monitor API at "+addr+
		" needs credentials: pass --user and --password-file (or set TITAN_MONITOR_USER and TITAN_MONITOR_PASSWORD), or --token-file (TITAN_MONITOR_TOKEN)\n")
	run(t, "--addr", addr, "--user", "ops", "--password-file", secretFile(t, "wrong"), "queue", "list").requireFail(t, "titan: the monitor API at "+addr+
		" refused user ops (check --user and --password-file, or TITAN_MONITOR_USER and TITAN_MONITOR_PASSWORD)\n")
	run(t, "--addr", addr, "--user", "ops", "--password-file", secretFile(t, "ops-pw"), "queue", "create", "/queue/jobs").requireOK(t)
	run(t, "--addr", addr, "--user", "reader", "--password-file", secretFile(t, "reader-pw"), "queue", "list").requireOK(t)
	run(t, "--addr", addr, "--user", "reader", "--password-file", secretFile(t, "reader-pw"), "queue", "delete", "/queue/jobs").
		requireFail(t, "titan: forbidden: user reader lacks the manage permission\n")
	run(t, "--addr", addr, "--user", "reader", "--password-file", secretFile(t, "reader-pw"), "user", "reload").
		requireFail(t, "titan: forbidden: user reader lacks the manage permission\n")
	t.Setenv(userEnv, "ops")
	t.Setenv(passwordEnv, "ops-pw")
	run(t, "--addr", addr, "queue", "delete", "/queue/jobs").requireOK(t)
	r := run(t, "--addr", addr, "user", "reload").requireOK(t)
	requireEqual(t, r.stdout, "reloaded the users file: 2 users\n", "reload output")
}
