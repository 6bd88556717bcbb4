package main

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newQueueDeleteCmd is `titan queue delete DEST [--group G] [--force]`: DELETE
// admin.PathQueues. A queue holding messages is refused unless --force.
func newQueueDeleteCmd(g *globalOptions) *cobra.Command {
	var (
		group string
		force bool
	)
	cmd := &cobra.Command{
		Use:     "delete DESTINATION",
		Aliases: []string{"rm"},
		Short:   "Delete a queue (--force to discard the messages it holds)",
		Long: `Delete the queue of DESTINATION in --group. A queue that still holds messages is
refused unless --force is given; --force discards them and stops the queue's consumer.
The next SEND to the destination creates a fresh queue.`,
		Example: "  titan queue delete /orders\n  titan queue delete /orders --group market --force",
		Args:    oneDestination,
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if force {
				q.Set(admin.ParamForce, "true")
			}
			var res admin.DeleteQueueResult
			err := queueCall(cmd, g, http.MethodDelete, admin.PathQueues, args[0], group, q, &res)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output == outputJSON {
				return printJSON(out, res)
			}
			msg := "deleted queue " + where(res.Destination, res.Group)
			if res.Discarded > 0 {
				msg += fmt.Sprintf(", discarding %d messages", res.Discarded)
			}
			_, err = fmt.Fprintln(out, msg)
			return err
		},
	}
	addGroupFlag(cmd, &group)
	cmd.Flags().BoolVarP(&force, "force", "f", false, "delete even if the queue holds messages, discarding them")
	return cmd
}

// queueError rewrites API errors about one queue into the CLI's wording.
func queueError(err error, destination, group string) error {
	ae, ok := err.(*apiError)
	if !ok {
		return err
	}
	name := destination
	if group != "" && group != "default" {
		name += " in group " + group
	}
	switch ae.code {
	case admin.CodeQueueNotEmpty:
		return fmt.Errorf("queue %s is not empty (use --force)", name)
	case admin.CodeQueueNotFound:
		return fmt.Errorf("no queue %s (see `titan queue list`)", name)
	case admin.CodeInvalidDestination:
		return fmt.Errorf("invalid destination %q", destination)
	}
	return err
}
