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
		Short: "Manage durable subscriptions: events-store and durable topic ones (list, delete)",
		Long: `Manage durable subscriptions over the monitor API (--addr).

An events-store durable subscription is a SUBSCRIBE with a durable-name on an
/events-store/... destination: its position is kept while it is offline, and counts against
limits.max-durable-subscriptions until it is deleted (or expires, when
limits.durable-subscription-idle-timeout is set).

A durable topic subscription is one of the peers' dialects on a /topic/... destination
(RabbitMQ durable:true with an id; ActiveMQ activemq.subscriptionName or Artemis
durable-subscription-name with a CONNECT client-id): a queue fed by the topic, shown with
its client-id, queue and messages. It counts against the same limit until deleted.`,
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
			t := newTable(out, newStyler(g, out), "GROUP", "DESTINATION", "NAME", "STATE", "POSITION", "LAST-ACTIVE", "CLIENT-ID", "QUEUE")
			for _, d := range list.Subscriptions {
				state, last, position, clientID, queue := "offline", "-", strconv.FormatUint(d.Position, 10), "-", "-"
				if d.Live > 0 {
					state = "live"
				}
				if d.LastActive != nil {
					last = d.LastActive.UTC().Format(time.RFC3339)
				}
				if d.Kind == admin.KindTopic {
					// A queue, not a position: its messages stand in the POSITION column's place.
					position = strconv.Itoa(d.Messages) + " msgs"
					queue = d.Queue
					if d.ClientID != "" {
						clientID = d.ClientID
					}
				}
				t.row(d.Group, d.Destination, d.Name, state, position, last, clientID, queue)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVarP(&group, "group", "g", "", "list only this group's (default: every group)")
	cmd.Flags().StringVarP(&destination, "destination", "d", "", "list only this events-store destination's or topic's")
	return cmd
}

// newDurableDeleteCmd is `titan durable delete DESTINATION NAME [--group G] [--client-id C]`.
func newDurableDeleteCmd(g *globalOptions) *cobra.Command {
	var group, clientID string
	cmd := &cobra.Command{
		Use:     "delete DESTINATION NAME",
		Aliases: []string{"rm"},
		Short:   "Delete an offline durable subscription and its position",
		Long: `Delete the durable subscription NAME (its durable-name) of the events-store log of
DESTINATION in --group: its saved position is forgotten, it no longer counts against
limits.max-durable-subscriptions, and a later SUBSCRIBE with that name starts afresh.
A durable subscription a live SUBSCRIBE reads is refused: close that connection first.

For a durable topic subscription DESTINATION is its topic (/topic/...), NAME its name
(RabbitMQ: the SUBSCRIBE id) and --client-id the CONNECT client-id of an ActiveMQ or
Artemis one: it is deleted with its queue and what that holds, as the peer's UNSUBSCRIBE.`,
		Example: "  titan durable delete /events-store/orders billing\n  titan durable delete /topic/orders billing --client-id app-1",
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
			if clientID != "" {
				q.Set(admin.ParamClientID, clientID)
			}
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
	cmd.Flags().StringVar(&clientID, "client-id", "", "the CONNECT client-id owning an ActiveMQ or Artemis durable topic subscription")
	return cmd
}
