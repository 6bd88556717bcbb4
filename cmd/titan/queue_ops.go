package main

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newQueuePurgeCmd is `titan queue purge DEST [--group G]`: POST admin.PathQueuesPurge.
func newQueuePurgeCmd(g *globalOptions) *cobra.Command {
	var group string
	cmd := &cobra.Command{
		Use:   "purge DESTINATION",
		Short: "Remove every waiting message of a queue, keeping the queue",
		Long: `Remove the ready and scheduled messages of the queue of DESTINATION (a /queue/...
destination) in --group, from memory and from the store. Messages in delivery stay with
their consumers; the queue keeps its consumers, limits and state.`,
		Example: "  titan queue purge /queue/jobs",
		Args:    oneDestination,
		RunE: func(cmd *cobra.Command, args []string) error {
			var res admin.PurgeResult
			err := queueCall(cmd, g, http.MethodPost, admin.PathQueuesPurge, args[0], group, nil, &res)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output == outputJSON {
				return printJSON(out, res)
			}
			_, err = fmt.Fprintf(out, "purged %s from queue %s\n", plural(res.Purged, "message"), where(res.Destination, res.Group))
			return err
		},
	}
	addGroupFlag(cmd, &group)
	return cmd
}

// newQueueBrowseCmd is `titan queue browse DEST [--group G] [--limit N]`: GET
// admin.PathQueuesMessages.
func newQueueBrowseCmd(g *globalOptions) *cobra.Command {
	var group string
	var limit int
	cmd := &cobra.Command{
		Use:     "browse DESTINATION",
		Aliases: []string{"peek"},
		Short:   "Show the messages a queue holds without consuming them",
		Long: `Show up to --limit messages of the queue of DESTINATION (a /queue/... destination) in
--group, ready ones head first, then scheduled ones. Nothing is consumed or redelivered.`,
		Example: "  titan queue browse /queue/DLQ.jobs --limit 10\n  titan queue browse /queue/jobs -o json",
		Args:    oneDestination,
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if limit > 0 {
				q.Set(admin.ParamLimit, strconv.Itoa(limit))
			}
			var res admin.BrowseResult
			err := queueCall(cmd, g, http.MethodGet, admin.PathQueuesMessages, args[0], group, q, &res)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output == outputJSON {
				return printJSON(out, res)
			}
			st := newStyler(g, out)
			t := newTable(out, st, "MESSAGE-ID", "DELIVERIES", "BYTES", "HEADERS", "BODY")
			for _, m := range res.Messages {
				body := "(binary)"
				if m.Body != nil {
					body = strconv.Quote(abbrev(*m.Body, 60))
				}
				t.row(m.MessageID, strconv.Itoa(m.DeliveryCount), strconv.Itoa(m.BodyBytes), headerText(m.Headers), body)
			}
			if err := t.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%s shown from queue %s\n", plural(len(res.Messages), "message"), where(res.Destination, res.Group))
			return err
		},
	}
	addGroupFlag(cmd, &group)
	cmd.Flags().IntVarP(&limit, "limit", "n", 0, "show at most this many messages (default 50, at most 1000)")
	return cmd
}

// newQueueRedriveCmd is `titan queue redrive DEST [--group G] [--limit N]`: POST
// admin.PathQueuesRedrive.
func newQueueRedriveCmd(g *globalOptions) *cobra.Command {
	var group string
	var limit int
	cmd := &cobra.Command{
		Use:   "redrive DESTINATION",
		Short: "Move dead-lettered messages back to the queue they came from",
		Long: `Move the messages of a dead-letter queue back to their queue, head first. DESTINATION
is the dead-letter queue (/queue/DLQ.jobs) or the queue whose dead-letter queue to drain
(/queue/jobs). Each message goes to its dlq-original-destination through the SEND path
(stored, limits applied) and leaves the dead-letter queue once accepted.`,
		Example: "  titan queue redrive /queue/DLQ.jobs\n  titan queue redrive /queue/jobs --limit 10",
		Args:    oneDestination,
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if limit > 0 {
				q.Set(admin.ParamLimit, strconv.Itoa(limit))
			}
			var res admin.RedriveResult
			err := queueCall(cmd, g, http.MethodPost, admin.PathQueuesRedrive, args[0], group, q, &res)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output == outputJSON {
				return printJSON(out, res)
			}
			tos := make([]string, 0, len(res.To))
			for d, n := range res.To {
				tos = append(tos, d+" ("+strconv.Itoa(n)+")")
			}
			sort.Strings(tos)
			line := fmt.Sprintf("moved %s from %s", plural(res.Moved, "message"), where(res.From, res.Group))
			if len(tos) > 0 {
				line += " to " + strings.Join(tos, ", ")
			}
			_, err = fmt.Fprintln(out, line)
			return err
		},
	}
	addGroupFlag(cmd, &group)
	cmd.Flags().IntVarP(&limit, "limit", "n", 0, "move at most this many messages (default: all)")
	return cmd
}

func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + one + "s"
}

func abbrev(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func headerText(h map[string]string) string {
	ks := make([]string, 0, len(h))
	for k := range h {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = k + ":" + h[k]
	}
	return abbrev(strings.Join(parts, " "), 60)
}
