package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/stompclient"
)

func newSubscribeCmd(g *globalOptions) *cobra.Command {
	var stomp, group, ack, start, durable string
	var count int
	var wait time.Duration
	var headers []string
	cmd := &cobra.Command{
		Use:   "subscribe DESTINATION",
		Short: "Subscribe over STOMP and print the messages that arrive",
		Long: "Subscribe to DESTINATION over STOMP (--stomp) and print each MESSAGE: its headers and\n" +
			"body as text, or one JSON object per line with --output json. Stops after --count\n" +
			"messages, after --wait without a message, or on Ctrl-C. With --ack client-individual\n" +
			"each message is acknowledged after it is printed.",
		Example: "  titan subscribe '/topic/orders/>'\n" +
			"  titan subscribe /queue/jobs --count 10 --ack client-individual\n" +
			"  titan subscribe /events-store/audit --start-position first --durable-name auditor",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			hs, err := parseHeaders(headers)
			if err != nil {
				return err
			}
			c, err := stompclient.Dial(stomp, g.timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			f := &frame.Frame{Command: frame.CmdSubscribe, Headers: []frame.Header{
				{Key: frame.HdrDestination, Value: args[0]}, {Key: frame.HdrID, Value: "titan-cli"},
				{Key: frame.HdrAck, Value: ack}, {Key: frame.HdrReceipt, Value: "titan-subscribe"},
			}}
			if group != "" {
				f.Add(frame.HdrGroup, group)
			}
			if start != "" {
				f.Add("start-position", start)
			}
			if durable != "" {
				f.Add("durable-name", durable)
			}
			for _, h := range hs {
				f.Add(h[0], h[1])
			}
			if err := c.Write(f); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			got := 0
			for count <= 0 || got < count {
				m, err := c.Read(wait)
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						fmt.Fprintf(cmd.ErrOrStderr(), "no message for %s; %d received\n", wait, got)
						return nil
					}
					return err
				}
				if err := stompclient.Check(m); err != nil {
					return err
				}
				if m.Command != frame.CmdMessage {
					continue
				}
				got++
				if g.output == outputJSON {
					obj := map[string]any{"headers": headerMap(m), "body": string(m.Body)}
					_ = json.NewEncoder(out).Encode(obj)
				} else {
					fmt.Fprintf(out, "--- message %d\n", got)
					for _, h := range m.Headers {
						fmt.Fprintf(out, "%s: %s\n", h.Key, h.Value)
					}
					fmt.Fprintf(out, "\n%s\n", m.Body)
				}
				if ack != "auto" {
					if err := c.Write(&frame.Frame{Command: frame.CmdAck, Headers: []frame.Header{{Key: frame.HdrID, Value: m.Value(frame.HdrAck)}}}); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	stompAddrFlag(cmd, &stomp)
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

func headerMap(f *frame.Frame) map[string]string {
	m := make(map[string]string, len(f.Headers))
	for _, h := range f.Headers {
		if _, dup := m[h.Key]; !dup {
			m[h.Key] = h.Value
		}
	}
	return m
}
