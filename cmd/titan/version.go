package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/broker"
)

// Set by the release build (scripts/release) with
//
//	go build -ldflags "-X main.version=1.2.3 -X main.commit=abcdef0"
//
// Left empty, they come from the binary's build info: the module version (go install
// ...@v1.2.3) or broker.Version, and the VCS revision the go command stamps when building
// inside a git checkout.
var (
	version string
	commit  string
)

// buildInfo is what titan version reports (also with -o json).
type buildInfo struct {
	Version string `json:"version"`
	// Commit is the VCS revision, "-dirty" appended when the tree had local changes; empty
	// when unknown (a build outside a checkout).
	Commit string `json:"commit,omitempty"`
	// CommitTime is the commit's time (RFC 3339), when known.
	CommitTime string `json:"commitTime,omitempty"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
}

// readBuildInfo combines the -ldflags stamps with runtime/debug's build info.
func readBuildInfo() buildInfo {
	bi := buildInfo{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if ok {
		if bi.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			bi.Version = info.Main.Version
		}
		var rev, at string
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if bi.Commit == "" && rev != "" {
			bi.Commit = rev
			if dirty {
				bi.Commit += "-dirty"
			}
			bi.CommitTime = at
		}
	}
	if bi.Version == "" {
		bi.Version = broker.Version
	}
	return bi
}

// String is the one-line form: "titan 1.2.3 (commit abcdef0, go1.26.0 linux/amd64)". With no
// commit (no -ldflags stamp and no vcs.revision in the build info: built outside a git clone,
// from a git worktree, or with -buildvcs=false, which `go env GOFLAGS` may hold) it says so
// and how to get one.
func (b buildInfo) String() string {
	c := b.Commit
	if c == "" {
		c = "unknown: built without VCS stamping; go build in a git clone stamps it unless GOFLAGS holds -buildvcs=false"
	}
	return fmt.Sprintf("titan %s (commit %s, %s %s)", b.Version, c, b.Go, b.Platform)
}

func newVersionCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit of this titan binary",
		Long: "Print the version and VCS commit this binary was built from (also: titan --version).\n" +
			"With --output json: {\"version\", \"commit\", \"commitTime\", \"go\", \"platform\"}.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi := readBuildInfo()
			if g.output == outputJSON {
				return printJSON(cmd.OutOrStdout(), bi)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), bi.String())
			return err
		},
	}
}
