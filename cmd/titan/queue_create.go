package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newQueueCreateCmd is `titan queue create DEST [--group G] [--max-pending-bytes N]
// [--capacity N] [--ring-size N]`: POST admin.PathQueues. Creation is idempotent: an existing
// queue is reported and keeps its limits (exit status 0).
func newQueueCreateCmd(g *globalOptions) *cobra.Command {
	var (
		group           string
		maxPendingBytes int64
		capacity        int
		ringSize        int
	)
	cmd := &cobra.Command{
		Use:   "create DESTINATION",
		Short: "Create a queue before traffic arrives, choosing its limits",
		Long: `Create the queue of DESTINATION in --group, choosing its limits up front.
Limits not given are those a queue created by traffic would get (address settings).

The destination's prefix decides what is created: /queue/jobs is a durable
point-to-point queue (messages wait, stored, until acknowledged); /topic/x, and a bare
destination such as /orders under the default default-pattern (events), get an events
dispatcher queue, the hand-off buffer between producers and the subscribers present now.
The output names the pattern.

Creation is idempotent: if the queue exists it is left as it is and its limits are
NOT replaced; the command says so and succeeds.`,
		Example: "  titan queue create /queue/orders --max-pending-bytes 1048576   # durable queue\n" +
			"  titan queue create /orders --max-pending-bytes 1048576         # events dispatcher queue (bare, default pattern)\n" +
			"  titan queue create /queue/jobs --group market --ring-size 1000",
		Args: oneDestination,
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			fl := cmd.Flags()
			if fl.Changed("max-pending-bytes") {
				q.Set(admin.ParamMaxPendingBytes, strconv.FormatInt(maxPendingBytes, 10))
			}
			if fl.Changed("capacity") {
				q.Set(admin.ParamCapacity, strconv.Itoa(capacity))
			}
			if fl.Changed("ring-size") {
				q.Set(admin.ParamRingSize, strconv.Itoa(ringSize))
			}
			var res admin.CreateQueueResult
			err := queueCall(cmd, g, http.MethodPost, admin.PathQueues, args[0], group, q, &res)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output == outputJSON {
				return printJSON(out, res)
			}
			qi := res.Queue
			limits := fmt.Sprintf("capacity %s, max-pending-bytes %s, ring size %s",
				limitCount(qi.Capacity), limitBytesExact(qi.MaxPendingBytes), limitCount(qi.RingSize))
			if res.Created {
				_, err = fmt.Fprintf(out, "created queue %s, %s: %s\n", where(qi.Destination, qi.Group), qi.Pattern, limits)
			} else {
				_, err = fmt.Fprintf(out, "queue %s already exists; its limits were kept: %s\n", where(qi.Destination, qi.Group), limits)
			}
			return err
		},
	}
	addGroupFlag(cmd, &group)
	fl := cmd.Flags()
	fl.Int64Var(&maxPendingBytes, "max-pending-bytes", 0, "bytes the queue may hold (0: no byte limit)")
	fl.IntVar(&capacity, "capacity", 0, "messages the queue may hold (0: no count limit)")
	fl.IntVar(&ringSize, "ring-size", 0, "make a ring queue of this many messages (/queue/... only; -1: no limit)")
	return cmd
}

// limitBytesExact renders a byte limit as "1048576 (1 MiB)", "none" for 0 or less.
func limitBytesExact(n int64) string {
	if n <= 0 {
		return "none"
	}
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10) + " (" + formatBytes(n) + ")"
}
