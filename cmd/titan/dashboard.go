package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// Dashboard views of --view.
const (
	viewOverview = "overview"
	viewQueues   = "queues"
)

// overview limits: the busiest connections and fullest queues shown.
const (
	overviewConnections = 10
	overviewQueues      = 15
)

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// dashboardOptions are the flags of bare `titan`.
type dashboardOptions struct {
	view     string
	interval time.Duration
	once     bool
}

func (d *dashboardOptions) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&d.view, "view", viewOverview, "dashboard view: overview or queues")
	fl.DurationVar(&d.interval, "interval", time.Second, "dashboard refresh interval")
	fl.BoolVar(&d.once, "once", false, "print one dashboard frame and exit (for scripts)")
}

// runDashboard is bare `titan`: a live view of GET admin.PathSnapshot. On a terminal each
// frame replaces the last (ANSI clear); otherwise frames are printed one after another,
// separated by a blank line (JSON output: one compact snapshot per line). It runs until
// interrupted, or for one frame with --once, which fails (non-zero exit) when the broker
// cannot be read. In live mode a failed read is shown and retried at the next tick.
func runDashboard(cmd *cobra.Command, g *globalOptions, d *dashboardOptions) error {
	if d.view != viewOverview && d.view != viewQueues {
		return fmt.Errorf("--view %q is not supported (use overview or queues)", d.view)
	}
	if d.interval < 100*time.Millisecond {
		return fmt.Errorf("--interval must be at least 100ms, got %s", d.interval)
	}
	c, err := g.newClient()
	if err != nil {
		return err
	}
	defer c.close()
	out := cmd.OutOrStdout()
	st := newStyler(g, out)
	fetch := func(ctx context.Context) (*admin.Snapshot, error) {
		var s admin.Snapshot
		if _, err := c.do(ctx, http.MethodGet, admin.PathSnapshot, nil, nil, &s); err != nil {
			return nil, err
		}
		return &s, nil
	}
	if d.once {
		s, err := fetch(cmd.Context())
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			return printJSON(out, s)
		}
		var b bytes.Buffer
		renderFrame(&b, st, c.addr(), d.view, s)
		_, err = out.Write(b.Bytes())
		return err
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	term := isTerminal(out)
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	for first := true; ; first = false {
		s, err := fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var b bytes.Buffer
		switch {
		case term:
			b.WriteString(clearScreen)
		case !first && g.output != outputJSON:
			b.WriteByte('\n')
		}
		switch {
		case err != nil && g.output == outputJSON:
			fmt.Fprintf(cmd.ErrOrStderr(), "titan: %v\n", err)
		case err != nil:
			fmt.Fprintf(&b, "%s %s\n", st.bold("Titan"), st.dim(c.addr()))
			fmt.Fprintf(&b, "%s %v\n", st.yellow("unavailable:"), err)
			fmt.Fprintf(&b, "retrying every %s; Ctrl-C to quit\n", d.interval)
		case g.output == outputJSON:
			js, _ := json.Marshal(s)
			b.Write(js)
			b.WriteByte('\n')
		default:
			renderFrame(&b, st, c.addr(), d.view, s)
			if term {
				fmt.Fprintf(&b, "\n%s\n", st.dim("refresh "+d.interval.String()+" · --view "+d.view+" · Ctrl-C to quit"))
			}
		}
		if _, err := out.Write(b.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// renderFrame writes one dashboard frame of s.
func renderFrame(w io.Writer, st styler, addr, view string, s *admin.Snapshot) {
	var queued int64
	for _, c := range s.Connections {
		queued += c.QueuedBytes
	}
	fmt.Fprintf(w, "%s %s · %s · up %s · %s\n", st.bold("Titan"), s.Server.Version, addr, s.Server.Uptime,
		s.Server.Now.Local().Format("2006-01-02 15:04:05"))
	fmt.Fprintf(w, "connections %d (%s buffered) · %s · published %d · goroutines %d · heap %s · memory %s\n",
		len(s.Connections), formatBytes(queued), s.Summary.Text, s.Counters.Published,
		s.Runtime.Goroutines, formatBytes(int64(s.Runtime.HeapBytes)), formatBytes(int64(s.Runtime.TotalBytes)))
	fmt.Fprintln(w)
	if view == viewQueues {
		_ = writeQueueTable(w, st, s.Queues, s.Summary)
		return
	}

	conns := append([]admin.ConnectionInfo(nil), s.Connections...)
	sort.SliceStable(conns, func(i, j int) bool { return conns[i].QueuedBytes > conns[j].QueuedBytes })
	fmt.Fprintf(w, "%s\n", st.bold(fmt.Sprintf("CONNECTIONS (%d)", len(conns))))
	if len(conns) == 0 {
		fmt.Fprintln(w, "No client connections.")
	} else {
		t := newTable(w, st, "SESSION", "REMOTE", "STOMP", "CONNECTED", "WRITE BUFFER")
		for _, c := range conns[:min(len(conns), overviewConnections)] {
			t.row(c.ID, c.RemoteAddr, c.Version, s.Server.Now.Sub(c.ConnectedAt).Round(time.Second).String()+" ago", formatBytes(c.QueuedBytes))
		}
		_ = t.flush()
		if n := len(conns) - overviewConnections; n > 0 {
			fmt.Fprintf(w, "… and %d more\n", n)
		}
	}
	fmt.Fprintln(w)

	qs := append([]admin.QueueInfo(nil), s.Queues...)
	sort.SliceStable(qs, func(i, j int) bool { return qs[i].Size > qs[j].Size })
	fmt.Fprintf(w, "%s\n", st.bold("QUEUES ("+s.Summary.Text+")"))
	if len(qs) == 0 {
		fmt.Fprintln(w, "No queues.")
		return
	}
	t := newTable(w, st, "GROUP", "DESTINATION", "PATTERN", "SIZE", "PENDING", "CONSUMERS", "ENQUEUED", "DISPATCHED", "DROPPED", "STATE")
	for _, q := range qs[:min(len(qs), overviewQueues)] {
		t.styledRow(append(cells(q.Group, q.Destination, q.Pattern, strconv.Itoa(q.Size), formatBytes(q.PendingBytes),
			strconv.Itoa(q.Consumers), u64(q.Enqueued), u64(q.Dispatched), u64(q.Dropped)), queueState(st, q))...)
	}
	_ = t.flush()
	if n := len(qs) - overviewQueues; n > 0 {
		fmt.Fprintf(w, "… and %d more (--view queues shows all)\n", n)
	}
}
