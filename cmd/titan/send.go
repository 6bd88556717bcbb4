package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/client"
)

func errBadHeader(h string) error {
	return fmt.Errorf("--header %q is not name:value", h)
}

// sendResult is what titan send prints with --output json.
type sendResult struct {
	Destination   string `json:"destination"`
	Group         string `json:"group"`
	Bytes         int    `json:"bytes"`
	CorrelationID string `json:"correlationId,omitempty"`
}

func newSendCmd(g *globalOptions) *cobra.Command {
	var so stompOptions
	var group, file string
	var headers []string
	cmd := &cobra.Command{
		Use:   "send DESTINATION [BODY]",
		Short: "Send one message over STOMP and wait for its RECEIPT",
		Long: "Send one message to DESTINATION over STOMP (--stomp) and wait for the broker's RECEIPT,\n" +
			"which for queues and events-store means the message is stored. The body is BODY, the\n" +
			"file given by --file (- for standard input), or empty. Without --stomp or TITAN_STOMP\n" +
			"it connects to " + defaultSTOMP + " and says so on stderr.",
		Example: "  titan send /queue/jobs 'hello'\n" +
			"  titan send /topic/prices --header content-type:application/json '{\"p\":1}'\n" +
			"  titan send /command/orders/cancel --header reply-to:/queue/replies --file order.json\n" +
			"  TITAN_LOGIN=app TITAN_PASSCODE=secret titan send --stomp broker:61614 --tls --ca ca.pem /queue/jobs hi",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			hs, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			var body []byte
			switch {
			case len(args) == 2 && file != "":
				return errors.New("give the body as an argument or with --file, not both")
			case len(args) == 2:
				body = []byte(args[1])
			case file == "-":
				if body, err = io.ReadAll(cmd.InOrStdin()); err != nil {
					return err
				}
			case file != "":
				if body, err = os.ReadFile(file); err != nil {
					return err
				}
			}
			so.resolve(cmd.ErrOrStderr())
			ctx, cancel := context.WithTimeout(cmdContext(cmd), g.timeout)
			defer cancel()
			c, err := so.dial(ctx, g)
			if err != nil {
				return err
			}
			defer c.Close()
			opts := make([]client.SendOption, 0, len(hs))
			for _, h := range hs {
				opts = append(opts, client.WithHeader(h[0], h[1]))
			}
			r, err := c.Send(ctx, group, args[0], body, opts...)
			if err != nil {
				return explainSendError(err, len(body))
			}
			res := sendResult{Destination: args[0], Group: group, Bytes: len(body), CorrelationID: r.Header("correlation-id")}
			if res.Group == "" {
				res.Group = "default"
			}
			if g.output == outputJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			if res.CorrelationID != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "sent %d bytes to %s (correlation-id %s)\n", len(body), args[0], res.CorrelationID)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sent %d bytes to %s\n", len(body), args[0])
			return nil
		},
	}
	stompFlags(cmd, &so)
	cmd.Flags().StringVar(&group, "group", "", "destination group (default \"default\")")
	cmd.Flags().StringArrayVarP(&headers, "header", "H", nil, "extra header name:value (repeatable)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the body from a file (- for standard input)")
	return cmd
}

// cmdContext is the command's context, or Background when it was run without one.
func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
