package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newQueuePauseCmd is `titan queue pause DEST [--group G]`: POST admin.PathQueuesPause.
func newQueuePauseCmd(g *globalOptions) *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:   "pause DESTINATION",
		Short: "Pause a queue: new SENDs wait (or fail or drop, by policy) until resume",
		Long: `Pause the queue of DESTINATION in --group. New enqueues wait (BLOCK policy), fail
(FAIL) or are dropped (DROP) until ` + "`titan queue resume`" + `. Pausing a paused queue does nothing.

In cluster mode a /queue/ destination is paused cluster-wide the other way round: its
deliveries stop on every node while SENDs are still stored (a JetStream consumer pause).`,
		Example: "  titan queue pause /orders",
		Args:    oneDestination,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPauseResume(cmd, g, admin.PathQueuesPause, "paused", args[0], group)
		},
	}
	addGroupFlag(cmd, &group)
	return cmd
}

// runPauseResume posts to path and reports "<verb> queue DEST (group G)".
func runPauseResume(cmd *cobra.Command, g *globalOptions, path, verb, destination, group string) error {
	var qi admin.QueueInfo
	err := queueCall(cmd, g, http.MethodPost, path, destination, group, nil, &qi)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if g.output == outputJSON {
		return printJSON(out, qi)
	}
	_, err = fmt.Fprintf(out, "%s queue %s (%d messages held)\n", verb, where(qi.Destination, qi.Group), qi.Size)
	return err
}
