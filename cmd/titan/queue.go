package main

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newQueueCmd is `titan queue`, the parent of the queue management commands. They call the
// monitor API's queue endpoints (admin.PathQueues and the paths beside it).
func newQueueCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Manage dispatcher queues (list, create, delete, pause, resume, set, purge, browse, redrive)",
		Long: `Manage the dispatcher queues of a running broker over its monitor API (--addr).

A queue is named by its destination, written as in a SEND (/orders, /queue/jobs,
/topic/prices), and its group (--group, default "default"): the same destination in
two groups is two queues.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newQueueListCmd(g),
		newQueueCreateCmd(g),
		newQueueDeleteCmd(g),
		newQueuePauseCmd(g),
		newQueueResumeCmd(g),
		newQueueSetCmd(g),
		newQueuePurgeCmd(g),
		newQueueBrowseCmd(g),
		newQueueRedriveCmd(g),
	)
	return cmd
}

// oneDestination accepts exactly one positional argument, the destination.
func oneDestination(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s needs exactly one destination, e.g. `%s /orders`", cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}

// addGroupFlag adds --group to a queue command.
func addGroupFlag(cmd *cobra.Command, group *string) {
	cmd.Flags().StringVarP(group, "group", "g", "", `destination group (default "default")`)
}

// queueQuery is the destination and group query of a queue endpoint.
func queueQuery(destination, group string) url.Values {
	q := url.Values{}
	q.Set(admin.ParamDestination, destination)
	if group != "" {
		q.Set(admin.ParamGroup, group)
	}
	return q
}

// queueCall sends one monitor API request about the queue of destination in group: the
// query is queueQuery's plus extra (nil for none), the answer is decoded into res, and an
// error is worded by queueError. It dials and closes its own client.
func queueCall(cmd *cobra.Command, g *globalOptions, method, path, destination, group string, extra url.Values, res any) error {
	c, err := g.newClient()
	if err != nil {
		return err
	}
	defer c.close()
	q := queueQuery(destination, group)
	for k, vs := range extra {
		q[k] = vs
	}
	if _, err := c.do(cmd.Context(), method, path, q, nil, res); err != nil {
		return queueError(err, destination, group)
	}
	return nil
}
