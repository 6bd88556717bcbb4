package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

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
	var retries int
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
			opts := make([]client.SendOption, 0, len(hs)+1)
			dupID := ""
			for _, h := range hs {
				opts = append(opts, client.WithHeader(h[0], h[1]))
				if h[0] == duplicateIDHeader {
					dupID = h[1]
				}
			}
			if dupID == "" && retries > 0 {
				// Every attempt carries the same duplicate id, so a retry after a lost RECEIPT
				// or a timeout cannot store the message twice (the broker answers a repeat
				// with a RECEIPT and drops it).
				dupID = newDuplicateID()
				opts = append(opts, client.WithHeader(duplicateIDHeader, dupID))
			}
			var r *client.Receipt
			for attempt := 0; ; attempt++ {
				r, err = sendOnce(cmdContext(cmd), g, &so, group, args[0], body, opts)
				if err == nil || attempt >= retries || !retryable(err) || cmdContext(cmd).Err() != nil {
					break
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "titan send: %v; retrying (%d of %d) with the same %s %s\n", err, attempt+1, retries, duplicateIDHeader, dupID)
				time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
			}
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
	cmd.Flags().IntVar(&retries, "retries", 2, "resend this many times after a lost connection or a timeout (safe: every attempt carries the same "+duplicateIDHeader+", added when not given with -H; 0 sends without it)")
	return cmd
}

// duplicateIDHeader is the broker's duplicate-detection header (Artemis's duplicate id).
const duplicateIDHeader = "_AMQ_DUPL_ID"

// newDuplicateID returns a random duplicate id (128 bits, hex).
func newDuplicateID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "titan-send-" + hex.EncodeToString(b[:])
}

// sendOnce dials, sends and waits for the RECEIPT within the --timeout.
func sendOnce(parent context.Context, g *globalOptions, so *stompOptions, group, destination string, body []byte, opts []client.SendOption) (*client.Receipt, error) {
	ctx, cancel := context.WithTimeout(parent, g.timeout)
	defer cancel()
	c, err := so.dial(ctx, g)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Send(ctx, group, destination, body, opts...)
}

// retryable reports whether a send may have failed in transit (the broker may or may not
// have the message): a lost connection or a timeout. A refusal (an ERROR frame) is final.
func retryable(err error) bool {
	var se *client.ServerError
	if errors.As(err, &se) {
		return false
	}
	return errors.Is(err, client.ErrConnectionLost) || errors.Is(err, context.DeadlineExceeded)
}

// cmdContext is the command's context, or Background when it was run without one.
func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
