package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/titan-broker/titan/internal/auth"
)

// initUsers with TITAN_INIT_USER and TITAN_INIT_PASSWORD makes a users file the broker
// loads: that user, in role admins, its password hashed (not printed), every permission;
// a second call leaves the file as it is; no path is an error.
func TestInitUsersFromEnvironment(t *testing.T) {
	t.Setenv(initUserEnv, "ops")
	t.Setenv(initPasswordEnv, "s3cret-pass")
	path := filepath.Join(t.TempDir(), "users.yml")
	var out bytes.Buffer
	if err := initUsers(path, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "s3cret-pass") || !strings.Contains(out.String(), `user "ops"`) {
		t.Errorf("output %q: want the user named, the password not printed", out.String())
	}
	f, err := auth.Load(path)
	if err != nil {
		t.Fatalf("the broker's loader refuses the file: %v", err)
	}
	u := f.Users["ops"]
	if u == nil || bcrypt.CompareHashAndPassword([]byte(u.Password), []byte("s3cret-pass")) != nil || len(u.Roles) != 1 || u.Roles[0] != initRole {
		t.Fatalf("user ops: %+v", u)
	}
	if len(f.Permissions) != 1 || f.Permissions[0].Channel != "#" || len(f.Permissions[0].Manage) != 1 {
		t.Fatalf("permissions: %+v", f.Permissions)
	}
	before, _ := os.ReadFile(path)
	out.Reset()
	if err := initUsers(path, &out); err != nil || out.Len() != 0 {
		t.Fatalf("second call: %v, output %q", err, out.String())
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("second call rewrote the file")
	}
	if err := initUsers("", &out); !errors.Is(err, errInitUsersNeedsFile) {
		t.Errorf("no path: %v", err)
	}
}
