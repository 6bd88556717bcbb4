package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/stompclient"
)

func errBadHeader(h string) error {
	return fmt.Errorf("--header %q is not name:value", h)
}

func newSendCmd(g *globalOptions) *cobra.Command {
	var stomp, group, file string
	var headers []string
	cmd := &cobra.Command{
		Use:   "send DESTINATION [BODY]",
		Short: "Send one message over STOMP and wait for its RECEIPT",
		Long: "Send one message to DESTINATION over STOMP (--stomp) and wait for the broker's RECEIPT,\n" +
			"which for queues and events-store means the message is stored. The body is BODY, the\n" +
			"file given by --file (- for standard input), or empty.",
		Example: "  titan send /queue/jobs 'hello'\n" +
			"  titan send /topic/prices --header content-type:application/json '{\"p\":1}'\n" +
			"  titan send /command/orders/cancel --header reply-to:/queue/replies --file order.json",
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
			c, err := stompclient.Dial(stomp, g.timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			f := &frame.Frame{Command: frame.CmdSend, Body: body, Headers: []frame.Header{
				{Key: frame.HdrDestination, Value: args[0]}, {Key: frame.HdrReceipt, Value: "titan-send"},
			}}
			if group != "" {
				f.Add(frame.HdrGroup, group)
			}
			for _, h := range hs {
				f.Add(h[0], h[1])
			}
			if err := c.Write(f); err != nil {
				return err
			}
			r, err := c.Read(g.timeout)
			if err != nil {
				return fmt.Errorf("no RECEIPT within %s: %w", g.timeout, err)
			}
			if err := stompclient.Check(r); err != nil {
				return err
			}
			if corr := r.Value(frame.HdrCorrelationID); corr != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "sent %d bytes to %s (correlation-id %s)\n", len(body), args[0], corr)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sent %d bytes to %s\n", len(body), args[0])
			return nil
		},
	}
	stompAddrFlag(cmd, &stomp)
	cmd.Flags().StringVar(&group, "group", "", "destination group (default \"default\")")
	cmd.Flags().StringArrayVarP(&headers, "header", "H", nil, "extra header name:value (repeatable)")
	cmd.Flags().StringVarP(&file, "file", "f", "", "read the body from a file (- for standard input)")
	return cmd
}
