package main

import (
	"net/url"
	"slices"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newQueueListCmd is `titan queue list [--group G]`: GET admin.PathQueues.
func newQueueListCmd(g *globalOptions) *cobra.Command {
	var group, match string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List queues with their size, limits, consumers and counters",
		Example: "  titan queue list\n  titan queue list --group market --output json\n  titan queue list --match '/queue/orders/>'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if group != "" {
				q.Set(admin.ParamGroup, group)
			}
			if match != "" {
				q.Set(admin.ParamMatch, match)
			}
			var list admin.QueueList
			if printed, err := getView(cmd, g, admin.PathQueues, q, &list); printed || err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if slices.ContainsFunc(list.Queues, func(q admin.QueueInfo) bool { return q.Leader != "" }) {
				return writeClusterQueueTable(out, newStyler(g, out), list.Queues, list.Summary) // cluster mode
			}
			return writeQueueTable(out, newStyler(g, out), list.Queues, list.Summary)
		},
	}
	cmd.Flags().StringVarP(&group, "group", "g", "", "list only the queues of this group (default: every group)")
	cmd.Flags().StringVar(&match, "match", "", "list the queues below a destination with wildcards (* one segment, > every descendant); in --group or default")
	return cmd
}
