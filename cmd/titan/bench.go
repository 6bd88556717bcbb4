package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/stompclient"
)

type benchOptions struct {
	stomp       string
	destination string
	producers   int
	consumers   int
	messages    int
	size        int
	receipts    bool
	persistent  bool
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
			res, err := runBench(o, g.timeout, cmd.ErrOrStderr())
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
	stompAddrFlag(cmd, &o.stomp)
	fl := cmd.Flags()
	fl.StringVar(&o.destination, "destination", "/queue/titan-bench", "destination to send to and receive from")
	fl.IntVarP(&o.producers, "producers", "p", 1, "producer connections")
	fl.IntVarP(&o.consumers, "consumers", "c", 1, "consumer connections")
	fl.IntVarP(&o.messages, "messages", "n", 10000, "messages to send in total")
	fl.IntVar(&o.size, "size", 256, "body size in bytes (at least 8)")
	fl.BoolVar(&o.receipts, "receipts", false, "wait for each SEND's RECEIPT before the next")
	fl.BoolVar(&o.persistent, "persistent", true, "send persistent messages (false skips the store on queues)")
	return cmd
}

func runBench(o benchOptions, timeout time.Duration, progress io.Writer) (*benchResult, error) {
	if o.producers < 1 || o.consumers < 0 || o.messages < 1 {
		return nil, errors.New("--producers and --messages must be at least 1, --consumers at least 0")
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
	if fanout {
		expect *= int64(o.consumers)
	}
	var sent, received atomic.Int64
	var lmu sync.Mutex
	lat := make([]time.Duration, 0, min(expect, 1<<20))
	errc := make(chan error, o.producers+o.consumers)
	var cwg sync.WaitGroup
	var conns []*stompclient.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range o.consumers {
		c, err := stompclient.Dial(o.stomp, timeout)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		if err := c.Write(&frame.Frame{Command: frame.CmdSubscribe, Headers: []frame.Header{
			{Key: frame.HdrDestination, Value: o.destination}, {Key: frame.HdrID, Value: "bench-" + strconv.Itoa(i)},
			{Key: frame.HdrReceipt, Value: "sub"}, {Key: "prefetch-count", Value: "10000"},
		}}); err != nil {
			return nil, err
		}
		if r, err := c.Read(timeout); err != nil || r.Command != frame.CmdReceipt {
			if err == nil {
				err = stompclient.Check(r)
			}
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			local := make([]time.Duration, 0, 1024)
			defer func() {
				lmu.Lock()
				lat = append(lat, local...)
				lmu.Unlock()
			}()
			idleSince := time.Now()
			for received.Load() < expect {
				m, err := c.Read(200 * time.Millisecond)
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() && time.Since(idleSince) < 10*time.Second {
						continue // another consumer may take the rest; re-check the total
					}
					if received.Load() >= expect {
						return
					}
					errc <- fmt.Errorf("consumer: no message for 10s with %d of %d received: %w", received.Load(), expect, err)
					return
				}
				idleSince = time.Now()
				if m.Command != frame.CmdMessage {
					if err := stompclient.Check(m); err != nil {
						errc <- err
						return
					}
					continue
				}
				if len(m.Body) >= 8 {
					local = append(local, time.Duration(time.Now().UnixNano()-int64(binary.BigEndian.Uint64(m.Body))))
				}
				received.Add(1)
			}
		}()
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
		c, err := stompclient.Dial(o.stomp, timeout)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			if err := produce(c, o, n, &sent, timeout); err != nil {
				errc <- err
			}
		}()
	}
	pwg.Wait()
	sendSecs := time.Since(start).Seconds()
	done := make(chan struct{})
	go func() { cwg.Wait(); close(done) }()
	select {
	case err := <-errc:
		return nil, err
	case <-done:
	}
	el := time.Since(start).Seconds()
	res := &benchResult{
		Destination: o.destination, Producers: o.producers, Consumers: o.consumers, Sent: sent.Load(), Received: received.Load(),
		Seconds: el, SendPerSecond: float64(sent.Load()) / sendSecs, RecvPerSecond: float64(received.Load()) / el,
		BodyBytes: o.size, WaitedReceipts: o.receipts,
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		res.LatencyP50Ms, res.LatencyP99Ms, res.LatencyMaxMs = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	}
	return res, nil
}

// produce sends n messages on c. Each body starts with its send time (Unix ns, big-endian).
func produce(c *stompclient.Conn, o benchOptions, n int, sent *atomic.Int64, timeout time.Duration) error {
	body := []byte(strings.Repeat("x", o.size))
	persistent := strconv.FormatBool(o.persistent)
	for i := range n {
		binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
		f := &frame.Frame{Command: frame.CmdSend, Body: body, Headers: []frame.Header{
			{Key: frame.HdrDestination, Value: o.destination}, {Key: frame.HdrPersistent, Value: persistent},
		}}
		last := i == n-1
		if o.receipts || last {
			f.Add(frame.HdrReceipt, strconv.Itoa(i))
		}
		if err := c.Write(f); err != nil {
			return err
		}
		if o.receipts || last {
			r, err := c.Read(timeout)
			if err != nil {
				return fmt.Errorf("producer: no RECEIPT: %w", err)
			}
			if err := stompclient.Check(r); err != nil {
				return err
			}
			if last && !o.receipts {
				sent.Add(int64(n % 1024))
			}
		}
		if o.receipts {
			sent.Add(1)
		} else if (i+1)%1024 == 0 {
			sent.Add(1024)
		}
	}
	return nil
}
