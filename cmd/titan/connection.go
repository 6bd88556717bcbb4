package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newConnectionCmd is `titan connection`, the parent of list and close (monitor API
// admin.PathConnections).
func newConnectionCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "connection",
		Aliases: []string{"connections", "conn"},
		Short:   "List or close client connections",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newConnectionListCmd(g), newConnectionCloseCmd(g))
	return cmd
}

func newConnectionListCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List client connections with their user, version, heart-beats and subscriptions",
		Example: "  titan connection list\n  titan connection list -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var l admin.ConnectionList
			if printed, err := getView(cmd, g, admin.PathConnections, nil, &l); printed || err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			t := newTable(out, newStyler(g, out), "ID", "CLIENT", "USER", "VERSION", "HEART-BEAT", "QUEUED", "SUBSCRIPTIONS")
			for _, cn := range l.Connections {
				subs := make([]string, len(cn.Subscriptions))
				for i, s := range cn.Subscriptions {
					subs[i] = s.Destination + " (" + strconv.Itoa(s.Pending) + " pending)"
				}
				user := cn.User
				if user == "" {
					user = "-"
				}
				t.row(cn.ID, cn.RemoteAddr, user, cn.Version,
					strconv.FormatInt(cn.HeartBeatSendMs, 10)+","+strconv.FormatInt(cn.HeartBeatReceiveMs, 10)+" ms",
					formatBytes(cn.QueuedBytes), strings.Join(subs, ", "))
			}
			if err := t.flush(); err != nil {
				return err
			}
			_, err := fmt.Fprintln(out, plural(len(l.Connections), "connection"))
			return err
		},
	}
}

func newConnectionCloseCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "close ID",
		Short:   "Close a client connection (its unacknowledged messages go back to their queues)",
		Example: "  titan connection close 3f2a9c",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%s needs exactly one connection id (see `titan connection list`)", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.newClient()
			if err != nil {
				return err
			}
			defer c.close()
			var res admin.CloseConnectionResult
			if _, err := c.do(cmd.Context(), http.MethodDelete, admin.PathConnections, url.Values{admin.ParamID: {args[0]}}, nil, &res); err != nil {
				if ae, ok := err.(*apiError); ok && ae.code == admin.CodeConnectionNotFound {
					return fmt.Errorf("no connection %s (see `titan connection list`)", args[0])
				}
				return err
			}
			out := cmd.OutOrStdout()
			if g.output == outputJSON {
				return printJSON(out, res)
			}
			_, err = fmt.Fprintf(out, "closed connection %s\n", res.ID)
			return err
		},
	}
}
