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
		renderFrame(&b, st, c.addr(), d.view, s, nil)
		_, err = out.Write(b.Bytes())
		return err
	}

	ctx, stop := signal.NotifyContext(cmdContext(cmd), os.Interrupt, syscall.SIGTERM)
	defer stop()
	term := isTerminal(out)
	keys, restore, ok := dashboardKeys(cmd, term)
	if ok {
		defer restore()
	}
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	var rt rateTracker
	for first := true; ; first = false {
		s, err := fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var r *rates
		if err == nil {
			r = rt.update(s)
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
			renderFrame(&b, st, c.addr(), d.view, s, r)
			if term {
				quit := "Ctrl-C to quit"
				if keys != nil {
					quit = "q to quit"
				}
				fmt.Fprintf(&b, "\n%s\n", st.dim("refresh "+d.interval.String()+" · --view "+d.view+" · "+quit))
			}
		}
		if _, err := out.Write(b.Bytes()); err != nil {
			return err
		}
	wait:
		select {
		case <-ctx.Done():
			return nil
		case k := <-keys:
			if k == 'q' || k == 'Q' {
				return nil
			}
			goto wait
		case <-tick.C:
		}
	}
}

// dashboardKeys returns the keys pressed while the live dashboard runs on a terminal (a
// variable so tests can type). ok is false when keys are not watched; then the dashboard
// quits on Ctrl-C only.
var dashboardKeys = func(cmd *cobra.Command, term bool) (keys <-chan byte, restore func(), ok bool) {
	in, isFile := cmd.InOrStdin().(*os.File)
	if !isFile || !term {
		return nil, nil, false
	}
	return watchKeys(in)
}

// rates are per-second rates between two snapshots.
type rates struct {
	Published, Delivered, Acked float64
	// in and out are per queue (group + "\x00" + destination): enqueued/s, dispatched/s.
	in, out map[string]float64
}

// rateTracker turns successive snapshots' counters into rates.
type rateTracker struct {
	prev *admin.Snapshot
}

func queueKey(q admin.QueueInfo) string { return q.Group + "\x00" + q.Destination }

// update returns the rates since the previous snapshot, or nil for the first one (or when
// the broker's clock did not advance).
func (t *rateTracker) update(s *admin.Snapshot) *rates {
	prev := t.prev
	t.prev = s
	if prev == nil {
		return nil
	}
	dt := s.Server.Now.Sub(prev.Server.Now).Seconds()
	if dt <= 0 {
		return nil
	}
	per := func(now, before uint64) float64 {
		if now < before { // counters restart when a queue is deleted and made again
			return float64(now) / dt
		}
		return float64(now-before) / dt
	}
	r := &rates{in: map[string]float64{}, out: map[string]float64{}}
	r.Published = per(s.Counters.Published, prev.Counters.Published)
	old := make(map[string]admin.QueueInfo, len(prev.Queues))
	for _, q := range prev.Queues {
		old[queueKey(q)] = q
	}
	for _, q := range s.Queues {
		o := old[queueKey(q)]
		in, out, acked := per(q.Enqueued, o.Enqueued), per(q.Dispatched, o.Dispatched), per(q.Acked, o.Acked)
		r.in[queueKey(q)], r.out[queueKey(q)] = in, out
		r.Delivered += out
		r.Acked += acked
	}
	r.Delivered += per(s.Counters.EventsStoreDelivered, prev.Counters.EventsStoreDelivered)
	return r
}

// formatRate renders a per-second rate ("–" when unknown).
func formatRate(r *rates, v func(*rates) float64) string {
	if r == nil {
		return "–"
	}
	x := v(r)
	switch {
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x == 0:
		return "0"
	default:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
}

// renderFrame writes one dashboard frame of s; r (nil on the first frame and with --once)
// adds per-second rates.
func renderFrame(w io.Writer, st styler, addr, view string, s *admin.Snapshot, r *rates) {
	var queued int64
	for _, c := range s.Connections {
		queued += c.QueuedBytes
	}
	fmt.Fprintf(w, "%s %s · %s · up %s · %s\n", st.bold("Titan"), s.Server.Version, addr, s.Server.Uptime,
		s.Server.Now.Local().Format("2006-01-02 15:04:05"))
	fmt.Fprintf(w, "connections %d (%s buffered) · %s · published %d · goroutines %d · heap %s · memory %s\n",
		len(s.Connections), formatBytes(queued), s.Summary.Text, s.Counters.Published,
		s.Runtime.Goroutines, formatBytes(int64(s.Runtime.HeapBytes)), formatBytes(int64(s.Runtime.TotalBytes)))
	fmt.Fprintf(w, "rates/s: published %s · delivered %s · acknowledged %s\n",
		formatRate(r, func(r *rates) float64 { return r.Published }),
		formatRate(r, func(r *rates) float64 { return r.Delivered }),
		formatRate(r, func(r *rates) float64 { return r.Acked }))
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
	t := newTable(w, st, "GROUP", "DESTINATION", "PATTERN", "SIZE", "PENDING", "CONSUMERS", "IN/S", "OUT/S", "ENQUEUED", "DISPATCHED", "DROPPED", "STATE")
	for _, q := range qs[:min(len(qs), overviewQueues)] {
		k := queueKey(q)
		t.styledRow(append(cells(q.Group, q.Destination, q.Pattern, strconv.Itoa(q.Size), formatBytes(q.PendingBytes),
			strconv.Itoa(q.Consumers), formatRate(r, func(r *rates) float64 { return r.in[k] }), formatRate(r, func(r *rates) float64 { return r.out[k] }),
			u64(q.Enqueued), u64(q.Dispatched), u64(q.Dropped)), queueState(st, q))...)
	}
	_ = t.flush()
	if n := len(qs) - overviewQueues; n > 0 {
		fmt.Fprintf(w, "… and %d more (--view queues shows all)\n", n)
	}
}
