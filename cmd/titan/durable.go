package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newDurableCmd is `titan durable`, the parent of the events-store durable subscription
// commands, over admin.PathDurableSubscriptions.
func newDurableCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "durable",
		Short: "Manage events-store durable subscriptions (list, delete)",
		Long: `Manage the durable subscriptions of events-store logs over the monitor API (--addr).

A durable subscription is a SUBSCRIBE with a durable-name on an /events-store/...
destination: its position is kept while it is offline, and counts against
limits.max-durable-subscriptions until it is deleted (or expires, when
limits.durable-subscription-idle-timeout is set).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newDurableListCmd(g), newDurableDeleteCmd(g))
	return cmd
}

// newDurableListCmd is `titan durable list [--destination D] [--group G]`.
func newDurableListCmd(g *globalOptions) *cobra.Command {
	var group, destination string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List durable subscriptions, live and offline",
		Example: "  titan durable list\n  titan durable list --destination /events-store/orders -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if group != "" {
				q.Set(admin.ParamGroup, group)
			}
			if destination != "" {
				q.Set(admin.ParamDestination, destination)
			}
			var list admin.DurableSubscriptionList
			if printed, err := getView(cmd, g, admin.PathDurableSubscriptions, q, &list); printed || err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			t := newTable(out, newStyler(g, out), "GROUP", "DESTINATION", "NAME", "STATE", "POSITION", "LAST-ACTIVE")
			for _, d := range list.Subscriptions {
				state, last := "offline", "-"
				if d.Live > 0 {
					state = "live"
				}
				if d.LastActive != nil {
					last = d.LastActive.UTC().Format(time.RFC3339)
				}
				t.row(d.Group, d.Destination, d.Name, state, strconv.FormatUint(d.Position, 10), last)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVarP(&group, "group", "g", "", "list only this group's (default: every group)")
	cmd.Flags().StringVarP(&destination, "destination", "d", "", "list only this events-store destination's")
	return cmd
}

// newDurableDeleteCmd is `titan durable delete DESTINATION NAME [--group G]`.
func newDurableDeleteCmd(g *globalOptions) *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:     "delete DESTINATION NAME",
		Aliases: []string{"rm"},
		Short:   "Delete an offline durable subscription and its position",
		Long: `Delete the durable subscription NAME (its durable-name) of the events-store log of
DESTINATION in --group: its saved position is forgotten, it no longer counts against
limits.max-durable-subscriptions, and a later SUBSCRIBE with that name starts afresh.
A durable subscription a live SUBSCRIBE reads is refused: close that connection first.`,
		Example: "  titan durable delete /events-store/orders billing",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("%s needs a destination and a durable name, e.g. `%s /events-store/orders billing`", cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.newClient()
			if err != nil {
				return err
			}
			defer c.close()
			q := queueQuery(args[0], group)
			q.Set(admin.ParamName, args[1])
			var res admin.DeleteDurableResult
			if _, err := c.do(cmd.Context(), http.MethodDelete, admin.PathDurableSubscriptions, q, nil, &res); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output == outputJSON {
				return printJSON(out, res)
			}
			_, err = fmt.Fprintf(out, "deleted durable subscription %s of %s\n", res.Name, where(res.Destination, res.Group))
			return err
		},
	}
	addGroupFlag(cmd, &group)
	return cmd
}
