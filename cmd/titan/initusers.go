package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/titan-broker/titan/internal/auth"
)

// Environment of `titan serve --init-users` (the container image sets TITAN_INIT_USERS).
const (
	// initUsersEnv set to "true" is --init-users.
	initUsersEnv = "TITAN_INIT_USERS"
	// initUserEnv names the first user (default defaultInitUser).
	initUserEnv = "TITAN_INIT_USER"
	// initPasswordEnv is the first user's password; unset, one is generated and printed once.
	initPasswordEnv = "TITAN_INIT_PASSWORD"
	// defaultInitUser is the first user's name when TITAN_INIT_USER is unset.
	defaultInitUser = "admin"
	// initRole is the first user's role, granted every permission on every destination.
	initRole = "admins"
)

// errInitUsersNeedsFile is --init-users without a users file to create.
var errInitUsersNeedsFile = errors.New("--init-users needs a users file path: --users FILE or TITAN_USERS_FILE")

// initUsers makes the users file at path when it does not exist yet, as RabbitMQ's and
// Artemis's images make a first user: one user (TITAN_INIT_USER, default admin) in role
// admins, which may send, consume, browse, create and manage every destination, with the
// password TITAN_INIT_PASSWORD or, when that is unset, a random one (24 base32 characters,
// 120 bits) printed once on w; the file holds only its bcrypt hash. An existing file is left
// as it is (nothing printed), so a restart on the same volume keeps its users.
func initUsers(path string, w io.Writer) error {
	if path == "" {
		return errInitUsersNeedsFile
	}
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("users file %s: %w", path, err)
	}
	name := os.Getenv(initUserEnv)
	if name == "" {
		name = defaultInitUser
	}
	pw, generated := os.Getenv(initPasswordEnv), false
	if pw == "" {
		pw, generated = rand.Text()[:24], true
	}
	var f auth.File
	if err := f.AddUser(name, []byte(pw), []string{initRole}); err != nil {
		return fmt.Errorf("--init-users: %w", err)
	}
	all := []string{initRole}
	f.Permissions = []auth.Rule{{Channel: "#", Send: all, Consume: all, Browse: all, Create: all, Manage: all}}
	if err := f.Save(path); err != nil {
		return fmt.Errorf("--init-users: %w", err)
	}
	if generated {
		_, err := fmt.Fprintf(w, "titan: created %s with user %q (role %s, every permission) and the one-time password: %s\n"+
			"titan: it is shown only now; change it with `titan user passwd %s --users %s`, or set %s before the first start\n",
			path, name, initRole, pw, name, path, initPasswordEnv)
		return err
	}
	_, err := fmt.Fprintf(w, "titan: created %s with user %q (role %s, every permission), password from %s\n", path, name, initRole, initPasswordEnv)
	return err
}
