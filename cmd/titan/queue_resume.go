package main

import (
	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newQueueResumeCmd is `titan queue resume DEST [--group G]`: POST admin.PathQueuesResume.
func newQueueResumeCmd(g *globalOptions) *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:     "resume DESTINATION",
		Short:   "Resume a paused queue",
		Long:    "Resume the queue of DESTINATION in --group: waiting producers continue. Resuming a running queue does nothing.",
		Example: "  titan queue resume /orders",
		Args:    oneDestination,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPauseResume(cmd, g, admin.PathQueuesResume, "resumed", args[0], group)
		},
	}
	addGroupFlag(cmd, &group)
	return cmd
}
