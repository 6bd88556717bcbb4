package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/client"
	"github.com/titan-broker/titan/internal/dest"
)

type benchOptions struct {
	stomp       stompOptions
	destination string
	producers   int
	consumers   int
	messages    int
	size        int
	receipts    bool
	persistent  bool
	rate        int // messages per second over every producer; 0: as fast as they go
}

// benchResult is what titan bench reports (also as JSON with --output json).
type benchResult struct {
	Destination    string  `json:"destination"`
	Producers      int     `json:"producers"`
	Consumers      int     `json:"consumers"`
	Sent           int64   `json:"sent"`
	Received       int64   `json:"received"`
	Seconds        float64 `json:"seconds"`
	SendPerSecond  float64 `json:"sendPerSecond"`
	RecvPerSecond  float64 `json:"receivePerSecond"`
	LatencyP50Ms   float64 `json:"latencyP50Ms"`
	LatencyP99Ms   float64 `json:"latencyP99Ms"`
	LatencyMaxMs   float64 `json:"latencyMaxMs"`
	BodyBytes      int     `json:"bodyBytes"`
	WaitedReceipts bool    `json:"waitedReceipts"`
}

func newBenchCmd(g *globalOptions) *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running broker: producers and consumers over STOMP",
		Long: "Run --producers connections sending --messages messages in total to --destination and\n" +
			"--consumers connections receiving them, over STOMP (--stomp). Prints progress every\n" +
			"second on stderr, then throughput and end-to-end latency (send to receive). On a topic\n" +
			"every consumer receives every message. Producers pipeline their SENDs (one RECEIPT\n" +
			"confirms the last) unless --receipts makes each wait for its own RECEIPT.",
		Example: "  titan bench --destination /queue/bench --producers 4 --consumers 4 --messages 100000\n" +
			"  titan bench --destination /topic/bench --consumers 8 --size 1024",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stomp.resolve(cmd.ErrOrStderr())
			res, err := runBench(cmdContext(cmd), o, g, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if g.output == outputJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "destination   %s (%d producers, %d consumers, %d-byte bodies)\n", res.Destination, res.Producers, res.Consumers, res.BodyBytes)
			fmt.Fprintf(w, "sent          %d in %.2fs: %.0f msgs/s\n", res.Sent, res.Seconds, res.SendPerSecond)
			fmt.Fprintf(w, "received      %d: %.0f msgs/s\n", res.Received, res.RecvPerSecond)
			fmt.Fprintf(w, "latency       p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs)
			return nil
		},
	}
	stompFlags(cmd, &o.stomp)
	fl := cmd.Flags()
	fl.StringVar(&o.destination, "destination", "/queue/titan-bench", "destination to send to and receive from")
	fl.IntVarP(&o.producers, "producers", "p", 1, "producer connections")
	fl.IntVarP(&o.consumers, "consumers", "c", 1, "consumer connections")
	fl.IntVarP(&o.messages, "messages", "n", 10000, "messages to send in total")
	fl.IntVar(&o.size, "size", 256, "body size in bytes (at least 8)")
	fl.BoolVar(&o.receipts, "receipts", false, "wait for each SEND's RECEIPT before the next")
	fl.IntVar(&o.rate, "rate", 0, "send at this many messages per second in total, spread over the producers (0: as fast as possible); latency at a fixed rate")
	fl.BoolVar(&o.persistent, "persistent", true, "send persistent messages (false skips the store on queues)")
	return cmd
}

func runBench(ctx context.Context, o benchOptions, g *globalOptions, progress io.Writer) (*benchResult, error) {
	if o.producers < 1 || o.consumers < 0 || o.messages < 1 || o.rate < 0 {
		return nil, errors.New("--producers and --messages must be at least 1, --consumers and --rate at least 0")
	}
	if o.size < 8 {
		o.size = 8
	}
	d, err := dest.Parse(o.destination, dest.PatternEvents)
	if err != nil {
		return nil, fmt.Errorf("invalid destination %q", o.destination)
	}
	fanout := d.Pattern == dest.PatternEvents
	expect := int64(o.messages)
	if o.consumers == 0 {
		expect = 0 // producers only (scripts/bench d0, d16): nothing to wait for
	} else if fanout {
		expect *= int64(o.consumers)
	}
	var sent, received atomic.Int64
	var lmu sync.Mutex
	lat := make([]time.Duration, 0, min(expect, 1<<20))
	errc := make(chan error, o.producers+o.consumers)
	allReceived := make(chan struct{})
	var closeOnce sync.Once
	var clients []*client.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	dial := func() (*client.Client, error) {
		dctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		c, err := o.stomp.dial(dctx, g)
		if err == nil {
			clients = append(clients, c)
		}
		return c, err
	}
	for range o.consumers {
		c, err := dial()
		if err != nil {
			return nil, err
		}
		_, err = c.Subscribe("", o.destination, func(m *client.Message) {
			if len(m.Body) >= 8 {
				l := time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(m.Body)))
				lmu.Lock()
				if len(lat) < cap(lat) {
					lat = append(lat, l)
				}
				lmu.Unlock()
			}
			if received.Add(1) == expect {
				closeOnce.Do(func() { close(allReceived) })
			}
		}, client.WithPrefetch(10000))
		if err != nil {
			return nil, fmt.Errorf("subscribe: %w", err)
		}
	}
	if expect == 0 {
		closeOnce.Do(func() { close(allReceived) })
	}
	start := time.Now()
	stopProgress := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var ls, lr int64
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				s, r := sent.Load(), received.Load()
				fmt.Fprintf(progress, "%5.0fs  sent %d (%d/s)  received %d (%d/s)\n", time.Since(start).Seconds(), s, s-ls, r, r-lr)
				ls, lr = s, r
			}
		}
	}()
	defer close(stopProgress)
	var pwg sync.WaitGroup
	per := o.messages / o.producers
	for i := range o.producers {
		n := per
		if i == 0 {
			n += o.messages % o.producers
		}
		c, err := dial()
		if err != nil {
			return nil, err
		}
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			if err := produce(ctx, c, o, n, &sent, g.timeout); err != nil {
				errc <- err
			}
		}()
	}
	pwg.Wait()
	sendSecs := time.Since(start).Seconds()
	select {
	case err := <-errc:
		return nil, err
	default:
	}
	// Consumers must make progress: no new message for 10 s is a failure.
	for {
		last := received.Load()
		t := time.NewTimer(10 * time.Second)
		select {
		case <-allReceived:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
			if received.Load() == last {
				return nil, fmt.Errorf("consumers: no message for 10s with %d of %d received", last, expect)
			}
			continue
		}
		break
	}
	el := time.Since(start).Seconds()
	res := &benchResult{
		Destination: o.destination, Producers: o.producers, Consumers: o.consumers, Sent: sent.Load(), Received: received.Load(),
		Seconds: el, SendPerSecond: float64(sent.Load()) / sendSecs, RecvPerSecond: float64(received.Load()) / el,
		BodyBytes: o.size, WaitedReceipts: o.receipts,
	}
	lmu.Lock()
	defer lmu.Unlock()
	if len(lat) > 0 {
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	}
	return res, nil
}

// produce sends n messages on c. Each body starts with its send time (Unix ns, big-endian).
// Without --receipts only the last SEND asks for a RECEIPT, which confirms every earlier one
// (the broker answers frames of one connection in order).
func produce(ctx context.Context, c *client.Client, o benchOptions, n int, sent *atomic.Int64, timeout time.Duration) error {
	body := []byte(strings.Repeat("x", o.size))
	persistent := client.WithPersistent(o.persistent)
	noReceipt := client.WithoutReceipt()
	var interval time.Duration // between this producer's SENDs at --rate
	if o.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(o.producers) / float64(o.rate))
	}
	begin := time.Now()
	for i := range n {
		if interval > 0 {
			if wait := time.Until(begin.Add(time.Duration(i) * interval)); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
		last := i == n-1
		if o.receipts || last {
			sctx, cancel := context.WithTimeout(ctx, timeout)
			_, err := c.Send(sctx, "", o.destination, body, persistent)
			cancel()
			if err != nil {
				return fmt.Errorf("producer: %w", explainSendError(err, len(body)))
			}
		} else if _, err := c.Send(ctx, "", o.destination, body, persistent, noReceipt); err != nil {
			return fmt.Errorf("producer: %w", explainSendError(err, len(body)))
		}
		if o.receipts {
			sent.Add(1)
		} else if (i+1)%1024 == 0 {
			sent.Add(1024)
		} else if last {
			sent.Add(int64(n % 1024))
		}
	}
	return nil
}
