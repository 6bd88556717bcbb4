package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/client"
)

func newSubscribeCmd(g *globalOptions) *cobra.Command {
	var so stompOptions
	var group, ack, start, durable string
	var count int
	var wait time.Duration
	var headers []string
	cmd := &cobra.Command{
		Use:   "subscribe DESTINATION",
		Short: "Subscribe over STOMP and print the messages that arrive",
		Long: "Subscribe to DESTINATION over STOMP (--stomp) and print each MESSAGE: its headers and\n" +
			"body as text, or one JSON object per line with --output json. Stops after --count\n" +
			"messages, after --wait without a message, or on Ctrl-C (which disconnects cleanly).\n" +
			"With --ack client or client-individual each message is acknowledged after it is printed.\n" +
			"Without --stomp or TITAN_STOMP it connects to " + defaultSTOMP + " and says so on stderr.",
		Example: "  titan subscribe '/topic/orders/>'\n" +
			"  titan subscribe /queue/jobs --count 10 --ack client-individual\n" +
			"  titan subscribe /events-store/audit --start-position first --durable-name auditor",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hs, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			so.resolve(cmd.ErrOrStderr())
			ctx, stop := signal.NotifyContext(cmdContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			dctx, cancel := context.WithTimeout(ctx, g.timeout)
			defer cancel()
			c, err := so.dial(dctx, g)
			if err != nil {
				return err
			}
			defer c.Close()
			opts := []client.SubscribeOption{client.WithAck(client.AckMode(ack))}
			if start != "" {
				opts = append(opts, client.WithStartPosition(start))
			}
			if durable != "" {
				opts = append(opts, client.WithDurableName(durable))
			}
			if count > 0 && ack != string(client.AckAuto) {
				// Take no more unacknowledged messages than will be printed: the rest stay
				// on the queue for other consumers.
				opts = append(opts, client.WithPrefetch(count))
			}
			for _, h := range hs {
				opts = append(opts, client.WithSubscribeHeader(h[0], h[1]))
			}
			msgs := make(chan *client.Message)
			done := make(chan struct{})
			defer close(done)
			if _, err := c.Subscribe(group, args[0], func(m *client.Message) {
				select {
				case msgs <- m:
				case <-done:
				}
			}, opts...); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			got := 0
			var idle <-chan time.Time
			for count <= 0 || got < count {
				var timer *time.Timer
				if wait > 0 {
					timer = time.NewTimer(wait)
					idle = timer.C
				}
				select {
				case <-ctx.Done():
					fmt.Fprintf(cmd.ErrOrStderr(), "interrupted; %d received\n", got)
					return nil
				case <-idle:
					fmt.Fprintf(cmd.ErrOrStderr(), "no message for %s; %d received\n", wait, got)
					return nil
				case <-c.Done():
					return c.Err()
				case m := <-msgs:
					got++
					if g.output == outputJSON {
						obj := map[string]any{"headers": headerMap(m), "body": string(m.Body)}
						if err := json.NewEncoder(out).Encode(obj); err != nil {
							return err
						}
					} else {
						fmt.Fprintf(out, "--- message %d\n", got)
						for _, h := range m.Headers {
							fmt.Fprintf(out, "%s: %s\n", h.Name, h.Value)
						}
						fmt.Fprintf(out, "\n%s\n", m.Body)
					}
					if err := m.Ack(); err != nil {
						return fmt.Errorf("acknowledging message %d: %w", got, err)
					}
				}
				if timer != nil {
					timer.Stop()
				}
			}
			return nil
		},
	}
	stompFlags(cmd, &so)
	fl := cmd.Flags()
	fl.StringVar(&group, "group", "", "destination group (default \"default\")")
	fl.StringVar(&ack, "ack", "auto", "ack mode: auto, client or client-individual")
	fl.IntVarP(&count, "count", "n", 0, "stop after this many messages (0: no limit)")
	fl.DurationVar(&wait, "wait", 0, "stop after this long without a message (0: wait forever)")
	fl.StringVar(&start, "start-position", "", "events-store start: new, first, last, a sequence, time:<RFC 3339>, delta:<duration>")
	fl.StringVar(&durable, "durable-name", "", "events-store durable subscription name")
	fl.StringArrayVarP(&headers, "header", "H", nil, "extra SUBSCRIBE header name:value (repeatable)")
	return cmd
}

func headerMap(m *client.Message) map[string]string {
	out := make(map[string]string, len(m.Headers))
	for _, h := range m.Headers {
		if _, dup := out[h.Name]; !dup {
			out[h.Name] = h.Value
		}
	}
	return out
}
