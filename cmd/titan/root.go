package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// Defaults of the global flags.
const (
	defaultAddr    = "http://localhost:7777"
	defaultTimeout = 5 * time.Second
	// tokenEnv is read when --token is not given.
	tokenEnv = "TITAN_MONITOR_TOKEN"
	// addrEnv is read when --addr is not given.
	addrEnv = "TITAN_ADDR"
	// userEnv and passwordEnv are read when --user and --password are not given.
	userEnv     = "TITAN_MONITOR_USER"
	passwordEnv = "TITAN_MONITOR_PASSWORD"
)

// Output formats of --output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// globalOptions are the persistent flags every operator command shares. They are read when a
// command runs, after cobra parsed the flags.
type globalOptions struct {
	addr    string
	token   string
	timeout time.Duration
	noColor bool
	output  string
	// addrDefaulted is true when neither --addr nor TITAN_ADDR was given: the monitor API
	// commands then say on stderr that they use the default.
	addrDefaulted bool
	stderr        io.Writer
	user          string // monitor API user (HTTP Basic), see credentials
	passwd        string
}

func newRootCmd() *cobra.Command {
	g := &globalOptions{}
	var dash dashboardOptions
	root := &cobra.Command{
		Use:   "titan",
		Short: "Titan is a STOMP message broker",
		Long: "Titan is a STOMP 1.0/1.1/1.2 message broker.\n\n" +
			"Run `titan serve` to start a broker; the other commands operate a running broker over its monitor API.\n" +
			"With no command, titan shows a live dashboard of the broker at --addr (--once prints one frame).",
		Example: "  titan serve --store memory\n" +
			"  titan --addr http://localhost:7777 queue create /queue/orders --max-pending-bytes 1048576   # a durable queue\n" +
			"  titan queue create /orders   # bare: the events dispatcher queue under the default pattern\n" +
			"  titan queue list --output json\n" +
			"  titan --view queues --once",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if g.output != outputTable && g.output != outputJSON {
				return fmt.Errorf("--output %q is not supported (use table or json)", g.output)
			}
			if g.timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, got %s", g.timeout)
			}
			g.stderr = cmd.ErrOrStderr()
			if !cmd.Flags().Changed("addr") {
				if v := os.Getenv(addrEnv); v != "" {
					g.addr = v
				} else {
					g.addrDefaulted = true
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runDashboard(cmd, g, &dash) },
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.addr, "addr", defaultAddr, "monitor API address of the broker, URL or host:port (env "+addrEnv+")")
	secretFlags(pf, &g.token, "token", tokenEnv, "monitor API bearer token")
	pf.StringVar(&g.user, "user", "", "monitor API user of the broker's users file (default $"+userEnv+")")
	secretFlags(pf, &g.passwd, "password", passwordEnv, "that user's password")
	pf.DurationVar(&g.timeout, "timeout", defaultTimeout, "timeout of each request to the monitor API")
	pf.BoolVar(&g.noColor, "no-color", false, "never colour the output (also: NO_COLOR set in the environment)")
	pf.StringVarP(&g.output, "output", "o", outputTable, "output format: table or json")
	dash.flags(root)

	root.AddCommand(newServeCmd(), newUserCmd(g), newRoleCmd())
	root.AddCommand(newQueueCmd(g), newConnectionCmd(g), newDurableCmd(g), newClusterCmd(g))
	root.AddCommand(newSendCmd(g), newSubscribeCmd(g), newBenchCmd(g))
	root.AddCommand(newVersionCmd(g))
	root.AddCommand(newStoreCmd())
	root.Version = readBuildInfo().String()
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// execute runs the command line args with the given streams and returns the process exit
// status: 0 on success, 1 on any failure, reported on stderr as one line "titan: <message>"
// (exactly what main does with newRootCmd().Execute()).
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintln(stderr, "titan:", err)
		}
		return 1
	}
	return 0
}

// tokenValue returns --token, or $TITAN_MONITOR_TOKEN when the flag is empty.
func (g *globalOptions) tokenValue() string {
	if g.token != "" {
		return g.token
	}
	return os.Getenv(tokenEnv)
}
