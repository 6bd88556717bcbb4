package main

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newQueueListCmd is `titan queue list [--group G] [--filter F]`: GET admin.PathQueues,
// page after page (admin.MaxQueuePageSize each) until every queue is listed.
func newQueueListCmd(g *globalOptions) *cobra.Command {
	var group, match, filter string
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
			if filter != "" {
				q.Set(admin.ParamFilter, filter)
			}
			list, err := listAllQueues(cmd, g, q)
			if err != nil {
				return err
			}
			if g.output == outputJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			out := cmd.OutOrStdout()
			if slices.ContainsFunc(list.Queues, func(q admin.QueueInfo) bool { return q.Leader != "" }) {
				return writeClusterQueueTable(out, newStyler(g, out), list.Queues, list.Summary) // cluster mode
			}
			return writeQueueTable(out, newStyler(g, out), list.Queues, list.Summary)
		},
	}
	cmd.Flags().StringVarP(&group, "group", "g", "", "list only the queues of this group (default: every group)")
	cmd.Flags().StringVar(&filter, "filter", "", "list only destinations containing this text (ignoring case), or matching it as a glob when it holds * or ?")
	cmd.Flags().StringVar(&match, "match", "", "list the queues below a destination with wildcards (* one segment, > every descendant); in --group or default")
	return cmd
}

// listAllQueues GETs every page of admin.PathQueues for q and returns them as one list
// (offset 0, limit 0: unpaged).
func listAllQueues(cmd *cobra.Command, g *globalOptions, q url.Values) (*admin.QueueList, error) {
	c, err := g.newClient()
	if err != nil {
		return nil, err
	}
	defer c.close()
	all := &admin.QueueList{Queues: []admin.QueueInfo{}}
	q.Set(admin.ParamLimit, strconv.Itoa(admin.MaxQueuePageSize))
	for offset := 0; ; {
		q.Set(admin.ParamOffset, strconv.Itoa(offset))
		var page admin.QueueList
		if _, err := c.do(cmd.Context(), http.MethodGet, admin.PathQueues, q, nil, &page); err != nil {
			return nil, err
		}
		all.Queues = append(all.Queues, page.Queues...)
		all.Summary, all.Total = page.Summary, page.Total
		if page.NextOffset <= offset || len(page.Queues) == 0 {
			return all, nil
		}
		offset = page.NextOffset
	}
}
