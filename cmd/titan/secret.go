package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// Secrets never come from the command line (issue #29): argv shows in `ps`, /proc and shell
// history. Each secret has a NAME-file flag (the file's first line; a trailing line end is not
// part of the secret) and an environment variable; the old NAME flag stays only to say so.

// refusedSecret is the pflag.Value of a secret flag given on the command line: Set fails with
// where to put the secret instead.
type refusedSecret struct{ name, file, env string }

func (r refusedSecret) String() string { return "" }
func (r refusedSecret) Type() string   { return "string" }
func (r refusedSecret) Set(string) error {
	return fmt.Errorf("a secret on the command line shows in the process list and shell history: use --%s FILE or $%s instead", r.file, r.env)
}

// fileSecret is the pflag.Value of a NAME-file flag: Set reads the secret from the file.
type fileSecret struct {
	dst  *string
	path string
}

func (s *fileSecret) String() string { return s.path }
func (s *fileSecret) Type() string   { return "file" }
func (s *fileSecret) Set(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return fmt.Errorf("%s: the first line is empty", path)
	}
	s.path, *s.dst = path, line
	return nil
}

// secretFlags registers --NAME (refused) and --NAME-file (read into dst) on fs; env is the
// environment variable the command reads when neither sets dst.
func secretFlags(fs *pflag.FlagSet, dst *string, name, env, usage string) {
	fs.Var(refusedSecret{name: name, file: name + "-file", env: env}, name, "refused: a secret in argv shows in ps; use --"+name+"-file or $"+env)
	_ = fs.MarkHidden(name)
	fs.Var(&fileSecret{dst: dst}, name+"-file", usage+" read from the first line of this file (or $"+env+")")
}
