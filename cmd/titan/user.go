package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/auth"
)

// usersEnv is read when --users is not given.
const usersEnv = "TITAN_USERS_FILE"

type userFlags struct {
	users        string
	roles        []string
	certificates []string
	grants       []string
	noPassword   bool
	done         string // what the edit did, reported after it was saved
}

// newUserCmd is `titan user add|passwd|delete|list`: it edits the users file the broker
// reads (titan.security.users-file, `titan serve --users`). Passwords are read from a prompt
// on a terminal, else from the first line of stdin; never from the command line. The file
// holds bcrypt hashes only. A running broker picks the change up on SIGHUP (or POST
// /titan/monitor/users/reload).
func newUserCmd(g *globalOptions) *cobra.Command {
	f := &userFlags{}
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Edit the users file (users, password hashes, roles)",
		Long: `Edit the users file that titan serve --users reads. Passwords are read from a prompt, or
from the first line of stdin when it is not a terminal; they are never taken from the
command line, and the file stores only bcrypt hashes. Permissions are granted to roles in
the file's permissions: section (see README, "Securing Titan"). A running broker re-reads
the file on SIGHUP.`,
		Example: "  titan user add alice --roles admins --users users.yml\n" +
			"  titan user add app --grant '/queue/orders.#:send,consume,create' --users users.yml\n" +
			"  titan user grant app '/topic/prices.#:consume' --users users.yml\n" +
			"  echo \"$APP_PASSWORD\" | titan user add app --roles apps --users users.yml\n" +
			"  titan user passwd alice --users users.yml\n" +
			"  titan user list --users users.yml\n" +
			"  titan --user alice user reload        # a running broker re-reads its file (or: kill -HUP)",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.users, "users", "", "users file (default $"+usersEnv+")")
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user (password from a prompt or stdin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editUsers(f, func(file *auth.File) (string, error) {
				var pw []byte
				if !f.noPassword {
					var err error
					if pw, err = readPassword(cmd, "Password for "+args[0]+": "); err != nil {
						return "", err
					}
				}
				grants, err := parseGrants(f.grants)
				if err != nil {
					return "", err
				}
				if err := file.AddUser(args[0], pw, f.roles); err != nil {
					return "", err
				}
				file.Users[args[0]].Certificates = f.certificates
				if err := grantUser(file, args[0], grants); err != nil {
					return "", err
				}
				msg := "added user " + args[0]
				if slices.Contains(file.Unpermitted(), args[0]) {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: no rule grants %s (roles %s) any permission; add some with --grant, `titan user grant %s 'DEST-PATTERN:perm,perm'` or `titan role grant ROLE ...`\n",
						args[0], strings.Join(f.roles, ","), args[0])
				}
				return msg, nil
			})
		},
	}
	add.Flags().StringSliceVar(&f.roles, "roles", nil, "roles of the user (comma-separated)")
	add.Flags().StringSliceVar(&f.certificates, "certificate", nil, "client-certificate identity that logs in as this user: dn:SUBJECT-DN, cn:NAME, dns:NAME, email:ADDRESS, uri:URI or ip:ADDRESS")
	add.Flags().StringArrayVar(&f.grants, "grant", nil, "grant the user 'DEST-PATTERN:perm,perm' (repeatable; DEST-PATTERN as /queue/orders.#, /topic/prices/*, GROUP@/queue/x or #; perms send, consume, browse, create, manage, all)")
	add.Flags().BoolVar(&f.noPassword, "no-password", false, "no password: the user logs in with a client certificate, or is the anonymous user")
	passwd := &cobra.Command{
		Use:   "passwd NAME",
		Short: "Change a user's password (from a prompt or stdin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editUsers(f, func(file *auth.File) (string, error) {
				if err := f.requireUser(file, args[0]); err != nil {
					return "", err
				}
				pw, err := readPassword(cmd, "New password for "+args[0]+": ")
				if err != nil {
					return "", err
				}
				return "changed the password of " + args[0], file.SetPassword(args[0], pw)
			})
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editUsers(f, func(file *auth.File) (string, error) {
				if err := f.requireUser(file, args[0]); err != nil {
					return "", err
				}
				return "deleted user " + args[0], file.DeleteUser(args[0])
			})
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the users and their roles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := f.path()
			if err != nil {
				return err
			}
			file, err := auth.Load(path)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "USER\tROLES\tLOGIN")
			for _, name := range file.Names() {
				u := file.Users[name]
				var login []string
				if u.Password != "" {
					login = append(login, "password")
				}
				if len(u.Certificates) > 0 {
					login = append(login, "certificate "+strings.Join(u.Certificates, ","))
				}
				if file.Anonymous == name {
					login = append(login, "anonymous")
				}
				if len(login) == 0 {
					login = append(login, "certificate")
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", name, strings.Join(u.Roles, ","), strings.Join(login, "; "))
			}
			return w.Flush()
		},
	}
	for _, c := range []*cobra.Command{add, passwd} {
		run := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			// --password is the monitor API's (a global flag): never a user's new password.
			if f := cmd.Flags().Lookup("password"); f != nil && f.Changed {
				return errors.New("titan user never takes a password from the command line (it would show in the process list and shell history): type it at the prompt or pipe it on stdin")
			}
			return run(cmd, args)
		}
	}
	reload := &cobra.Command{
		Use:   "reload",
		Short: "Make a running broker re-read its users file (monitor API; needs manage)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.newClient()
			if err != nil {
				return err
			}
			defer c.close()
			var res admin.UsersReloadResult
			if _, err := c.do(cmd.Context(), http.MethodPost, admin.PathUsersReload, nil, nil, &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "reloaded the users file: %d users\n", res.Users)
			return nil
		},
	}
	// grant and revoke edit the user's own role (auth.UserRole), as `titan role` edits any.
	editOwnRole := func(revoke bool) func(cmd *cobra.Command, args []string) error {
		return func(cmd *cobra.Command, args []string) error {
			return editUsers(f, func(file *auth.File) (string, error) {
				grants, err := parseGrants(args[1:])
				if err != nil {
					return "", err
				}
				if err := f.requireUser(file, args[0]); err != nil {
					return "", err
				}
				if revoke {
					err = editRole(file, auth.UserRole(args[0]), grants, true)
				} else {
					err = grantUser(file, args[0], grants)
				}
				return grantVerb(revoke) + " " + args[0] + " " + strings.Join(args[1:], " "), err
			})
		}
	}
	grant := &cobra.Command{
		Use:   "grant NAME 'DEST-PATTERN:perm,perm'...",
		Short: "Grant a user permissions (through the user's own role user:NAME)",
		Args:  cobra.MinimumNArgs(2),
		RunE:  editOwnRole(false),
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME 'DEST-PATTERN:perm,perm'...",
		Short: "Revoke permissions granted with user grant (the user's own role user:NAME)",
		Args:  cobra.MinimumNArgs(2),
		RunE:  editOwnRole(true),
	}
	cmd.AddCommand(add, passwd, del, list, reload, grant, revoke)
	// The edit commands report on stdout through editUsers' message.
	for _, c := range []*cobra.Command{add, passwd, del, grant, revoke} {
		c.PostRun = func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), f.done+"; a running broker applies it on SIGHUP")
		}
	}
	return cmd
}

// parseGrants parses every --grant argument before anything is changed.
func parseGrants(args []string) ([]auth.Grant, error) {
	out := make([]auth.Grant, 0, len(args))
	for _, a := range args {
		g, err := auth.ParseGrant(a)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// grantUser grants each of grants to name's own role (auth.UserRole), adding the role to
// the user's roles.
func grantUser(file *auth.File, name string, grants []auth.Grant) error {
	if len(grants) == 0 {
		return nil
	}
	u := file.Users[name]
	role := auth.UserRole(name)
	if !slices.Contains(u.Roles, role) {
		u.Roles = append(u.Roles, role)
	}
	return editRole(file, role, grants, false)
}

// editRole grants each of grants to role, or revokes it (a revoke must match a permissions
// rule exactly).
func editRole(file *auth.File, role string, grants []auth.Grant, revoke bool) error {
	for _, g := range grants {
		if !revoke {
			if err := file.GrantRole(role, g); err != nil {
				return err
			}
		} else if !file.RevokeRole(role, g) {
			return fmt.Errorf("no permissions rule matches %s exactly (see the file's permissions: section)", g)
		}
	}
	return nil
}

// grantVerb is "granted" or "revoked", for the edit's report.
func grantVerb(revoke bool) string {
	if revoke {
		return "revoked"
	}
	return "granted"
}

// requireUser returns an error naming the users file when it has no user name.
func (f *userFlags) requireUser(file *auth.File, name string) error {
	if _, ok := file.Users[name]; !ok {
		return fmt.Errorf("no user %s in %s", name, f.users)
	}
	return nil
}

// newRoleCmd is `titan role grant|revoke ROLE 'DEST-PATTERN:perm,perm'...`: it edits the
// users file's permissions for a role, as `titan user grant` does for one user.
func newRoleCmd() *cobra.Command {
	f := &userFlags{}
	cmd := &cobra.Command{
		Use:   "role",
		Short: "Grant or revoke a role's permissions in the users file",
		Example: "  titan role grant apps '/queue/orders.#:send,consume,create' --users users.yml\n" +
			"  titan role grant admins '#:all' --users users.yml\n" +
			"  titan role revoke apps '/queue/orders.#:create' --users users.yml",
	}
	cmd.PersistentFlags().StringVar(&f.users, "users", "", "users file (default $"+usersEnv+")")
	edit := func(revoke bool) func(cmd *cobra.Command, args []string) error {
		return func(cmd *cobra.Command, args []string) error {
			err := editUsers(f, func(file *auth.File) (string, error) {
				grants, err := parseGrants(args[1:])
				if err != nil {
					return "", err
				}
				return grantVerb(revoke) + " role " + args[0] + " " + strings.Join(args[1:], " "), editRole(file, args[0], grants, revoke)
			})
			if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), f.done+"; a running broker applies it on SIGHUP")
			}
			return err
		}
	}
	cmd.AddCommand(&cobra.Command{Use: "grant ROLE 'DEST-PATTERN:perm,perm'...", Short: "Grant a role permissions", Args: cobra.MinimumNArgs(2), RunE: edit(false)},
		&cobra.Command{Use: "revoke ROLE 'DEST-PATTERN:perm,perm'...", Short: "Revoke a role's permissions on exactly that match", Args: cobra.MinimumNArgs(2), RunE: edit(true)})
	return cmd
}

// path returns --users or $TITAN_USERS_FILE.
func (f *userFlags) path() (string, error) {
	if f.users != "" {
		return f.users, nil
	}
	if p := os.Getenv(usersEnv); p != "" {
		f.users = p
		return p, nil
	}
	return "", errors.New("no users file: pass --users FILE (or set " + usersEnv + ")")
}

// editUsers loads the users file (an absent one is created), applies edit and saves it.
func editUsers(f *userFlags, edit func(*auth.File) (string, error)) error {
	path, err := f.path()
	if err != nil {
		return err
	}
	file, err := auth.LoadOrEmpty(path)
	if err != nil {
		return err
	}
	msg, err := edit(file)
	if err != nil {
		return err
	}
	if err := file.Save(path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	f.done = msg + " in " + path
	return nil
}

// readPassword prompts twice on a terminal (without echo); otherwise it reads the first
// line of stdin (the line end is not part of the password).
func readPassword(cmd *cobra.Command, prompt string) ([]byte, error) {
	in := cmd.InOrStdin()
	if file, ok := in.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
		fd := int(file.Fd())
		fmt.Fprint(cmd.ErrOrStderr(), prompt)
		pw, err := term.ReadPassword(fd)
		fmt.Fprintln(cmd.ErrOrStderr())
		if err != nil {
			return nil, err
		}
		fmt.Fprint(cmd.ErrOrStderr(), "Again: ")
		again, err := term.ReadPassword(fd)
		fmt.Fprintln(cmd.ErrOrStderr())
		if err != nil {
			return nil, err
		}
		if string(pw) != string(again) {
			return nil, errors.New("the passwords do not match")
		}
		return checkPassword(pw)
	}
	line, err := readLine(io.LimitReader(in, 4096))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the password from stdin: %w", err)
	}
	return checkPassword([]byte(strings.TrimRight(line, "\r\n")))
}

// readLine reads one line from r, a byte at a time, and leaves the rest of r unread: a
// script that pipes one password per line to several commands gives each its own line, as
// the shell's read does (a buffered reader would swallow the next command's line).
func readLine(r io.Reader) (string, error) {
	var line []byte
	var c [1]byte
	for {
		n, err := r.Read(c[:])
		if n == 1 {
			if c[0] == '\n' {
				return string(line), nil
			}
			line = append(line, c[0])
		}
		if err != nil {
			return string(line), err
		}
	}
}

func checkPassword(pw []byte) ([]byte, error) {
	if len(pw) == 0 {
		return nil, errors.New("empty password (type it at the prompt, or pipe it on stdin)")
	}
	if len(pw) > 72 {
		return nil, errors.New("password longer than 72 bytes (bcrypt's limit)")
	}
	return pw, nil
}
