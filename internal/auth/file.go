package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"
)

// BcryptCost is the bcrypt work factor of new password hashes (bcrypt.DefaultCost, about
// 50 ms per check on a current core).
const BcryptCost = bcrypt.DefaultCost

// File is the users file (titan.security.users-file, `titan serve --users`): users with
// bcrypt password hashes and roles, the anonymous user, and the permissions. Its YAML shape:
//
//	users:
//	  alice: {password: "$2a$10$...", roles: [admins]}
//	  app1: {roles: [apps], certificates: ["cn:app1.example.com"]}   # certificate login only
//	  guest: {roles: [guests]}
//	anonymous: guest            # CONNECT without login is guest; omit to refuse it
//	permissions:
//	  - {channel: "#", send: [admins], consume: [admins], browse: [admins], create: [admins], manage: [admins]}
//	  - {pattern: queues, channel: "orders.#", send: [apps], consume: [apps], create: [apps]}
//
// Passwords are never stored in plain text: `titan user add` writes bcrypt hashes.
type File struct {
	// Users maps user names to their entry.
	Users map[string]*User `yaml:"users"`
	// Anonymous names the user a CONNECT without a login header becomes ("" refuses it).
	Anonymous string `yaml:"anonymous,omitempty"`
	// Permissions are the security settings; the most specific match wins (see Rule).
	Permissions []Rule `yaml:"permissions,omitempty"`
	// Quotas are per-user and per-role limits (see Quota).
	Quotas Quotas `yaml:"quotas,omitempty"`
}

// User is one users-file entry.
type User struct {
	// Password is the bcrypt hash of the user's password; empty means no password login.
	Password string `yaml:"password,omitempty"`
	// Roles are the groups of users the permissions grant to.
	Roles []string `yaml:"roles,omitempty,flow"`
	// Certificates are the verified client-certificate identities that log in as this user,
	// each typed by its field: "dn:SUBJECT-DN", "cn:NAME", "dns:NAME", "email:ADDRESS",
	// "uri:URI" or "ip:ADDRESS" (see CertDN...). Nothing else maps a certificate to a user:
	// with no entry in the file, certificate login is off. One identity names one user.
	Certificates []string `yaml:"certificates,omitempty,flow"`
}

// Parse decodes and validates a users file. Unknown keys are errors naming the key and its
// line. Errors wrap ErrInvalidFile.
func Parse(data []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFile, err)
	}
	if f.Users == nil {
		f.Users = map[string]*User{}
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Load reads and parses the users file at path. A missing file is an error (os.ErrNotExist
// wrapped); use LoadOrEmpty to create one.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// LoadOrEmpty is Load, but a file that does not exist yet is an empty File.
func LoadOrEmpty(path string) (*File, error) {
	f, err := Load(path)
	if errors.Is(err, os.ErrNotExist) {
		return &File{Users: map[string]*User{}}, nil
	}
	return f, err
}

// Validate returns every problem at once, wrapped in ErrInvalidFile, or nil.
func (f *File) Validate() error {
	var errs []error
	certOwners := map[string]string{}
	for _, name := range f.Names() {
		u := f.Users[name]
		if !ValidUserName(name) {
			errs = append(errs, fmt.Errorf("users.%s: a user name is 1 to 128 bytes without control characters, ':' or spaces", name))
		}
		if u == nil {
			f.Users[name] = &User{}
			continue
		}
		for _, c := range u.Certificates {
			kind, value, err := parseCertIdentity(c)
			if err != nil {
				errs = append(errs, fmt.Errorf("users.%s.certificates: %v", name, err))
				continue
			}
			k := certKey(kind, value)
			if other, dup := certOwners[k]; dup && other != name {
				errs = append(errs, fmt.Errorf("users.%s.certificates: %s already maps to user %s", name, c, other))
			}
			certOwners[k] = name
		}
		if u.Password != "" {
			if _, err := bcrypt.Cost([]byte(u.Password)); err != nil {
				errs = append(errs, fmt.Errorf("users.%s.password: not a bcrypt hash (set it with `titan user passwd %s --users FILE`)", name, name))
			}
		}
	}
	if f.Anonymous != "" {
		if _, ok := f.Users[f.Anonymous]; !ok {
			errs = append(errs, fmt.Errorf("anonymous: %q is not a user in this file", f.Anonymous))
		}
	}
	errs = append(errs, f.Quotas.validate()...)
	for i, r := range f.Permissions {
		if _, err := compileRule(r, i); err != nil {
			errs = append(errs, fmt.Errorf("permissions[%d]: %v", i, err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidFile, errors.Join(errs...))
}

// ValidUserName reports whether name can be a user: 1 to 128 bytes, no control characters,
// spaces or ':' (the HTTP Basic separator).
func ValidUserName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c == 0x7f || c == ':' {
			return false
		}
	}
	return true
}

// HashPassword returns the bcrypt hash of password. Errors: ErrWeakPassword.
func HashPassword(password []byte) (string, error) {
	if len(password) == 0 || len(password) > MaxPasswordBytes {
		return "", ErrWeakPassword
	}
	h, err := bcrypt.GenerateFromPassword(password, BcryptCost)
	if err != nil {
		return "", err
	}
	return string(h), nil
}

// AddUser adds name with password (hashed here; nil for certificate-only) and roles.
// Errors: ErrUserExists, ErrWeakPassword.
func (f *File) AddUser(name string, password []byte, roles []string) error {
	if !ValidUserName(name) {
		return fmt.Errorf("%w: invalid user name %q", ErrInvalidFile, name)
	}
	if _, ok := f.Users[name]; ok {
		return fmt.Errorf("%w: %s", ErrUserExists, name)
	}
	u := &User{Roles: roles}
	if password != nil {
		h, err := HashPassword(password)
		if err != nil {
			return err
		}
		u.Password = h
	}
	if f.Users == nil {
		f.Users = map[string]*User{}
	}
	f.Users[name] = u
	return nil
}

// SetPassword replaces name's password hash. Errors: ErrNoSuchUser, ErrWeakPassword.
func (f *File) SetPassword(name string, password []byte) error {
	u, ok := f.Users[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoSuchUser, name)
	}
	h, err := HashPassword(password)
	if err != nil {
		return err
	}
	u.Password = h
	return nil
}

// DeleteUser removes name (and clears Anonymous when it named it). Errors: ErrNoSuchUser.
func (f *File) DeleteUser(name string) error {
	if _, ok := f.Users[name]; !ok {
		return fmt.Errorf("%w: %s", ErrNoSuchUser, name)
	}
	delete(f.Users, name)
	if f.Anonymous == name {
		f.Anonymous = ""
	}
	return nil
}

// Names returns the user names, sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.Users))
	for n := range f.Users {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Save writes f to path atomically (a temporary file in the same directory, fsync'd, then
// renamed over path) with mode 0600, so a concurrent reload never sees half a file.
func (f *File) Save(path string) error {
	data, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	data = append([]byte("# Titan users file: edit users with `titan user add|passwd|delete|list`.\n"), data...)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".users-*.tmp")
	if err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
