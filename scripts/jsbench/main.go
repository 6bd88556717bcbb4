// Command jsbench measures raw JetStream on a NATS server or cluster the way `nats bench js`
// does, so that Titan's cluster mode can be compared with the engine it runs on without the
// nats CLI (issue 28). Point it at a cluster node's embedded NATS client port
// (titan.cluster.client-port, `--cluster-client-port`, TITAN_CLUSTER_CLIENT_PORT):
//
//	go run ./scripts/jsbench --url nats://127.0.0.1:4222                  # every scenario
//	go run ./scripts/jsbench --url nats://127.0.0.1:4222 --only async,sync1 --duration 10s
//
// Scenarios (each on a stream of its own, JSBENCH_<scenario>_<random>, subject
// jsbench.<random>.<scenario>: never one of Titan's TITAN_* streams; deleted afterwards
// unless --keep):
//
//	pub     async publish alone into a file WorkQueue stream (`nats bench js pub async`)
//	async   async publish while a durable pull consumer drains the same stream and acks
//	        each message (`nats bench js pub async` with `nats bench js consume` running);
//	        the stream Titan's queue scenario a stores in
//	sync1   synchronous publish, 1 client: each publish waits for its PubAck (`nats bench
//	        js pub sync`); Titan's d0 (a RECEIPT awaited per SEND)
//	sync16  the same with 16 clients, each its own connection (`--clients 16`); Titan's d16
//
// With --fetch the async scenario's consumer pulls the way Titan's pull loop does (one
// Fetch at a time, the next once the batch arrived) instead of Consume's overlapping pulls:
// on three embedded servers both consumed about 19,000–22,000 msg/s, so the pull pattern
// is not what separates Titan's scenario a from raw JetStream (issue 28).
//
// With --msgid every message carries a unique Nats-Msg-Id, as every message Titan stores
// does (its publishes are retried through leader changes and must be stored once): the
// engine then parses the header and records the id in the stream's duplicate table on
// every replica. On three embedded servers that cost it about a fifth of async+consume's
// consumed rate and a tenth of sync16's.
//
// Streams are file-stored with --replicas replicas (default 3) and the server's own sync
// setting (Titan's cluster.sync: always by default), like Titan's queue streams; messages
// carry no Nats-Msg-Id unless --msgid (without: the engine's ceiling). Each scenario
// prints one JSON line on stdout: published and consumed counts, their rates in msg/s over
// the scenario's own time, and for synchronous publishes the PubAck latency p50/p99 in µs.
// Rates vary with the machine's load: compare Titan and jsbench run back to back on the
// same servers, as ratios.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// result is one scenario's figures (one JSON line).
type result struct {
	Scenario    string  `json:"scenario"`
	Published   int64   `json:"published"`
	PublishedPS float64 `json:"published_per_s"`
	Consumed    int64   `json:"consumed,omitempty"`
	ConsumedPS  float64 `json:"consumed_per_s,omitempty"`
	P50us       int64   `json:"pub_p50_us,omitempty"`
	P99us       int64   `json:"pub_p99_us,omitempty"`
	Errors      int64   `json:"errors,omitempty"`
}

type bench struct {
	url      string
	size     int
	duration time.Duration
	replicas int
	pending  int
	batch    int
	fetch    bool
	msgID    bool
	ids      atomic.Uint64 // Nats-Msg-Id counter (--msgid)
	idPrefix string
	keep     bool
	clients  int
}

func main() {
	b := bench{}
	flag.StringVar(&b.url, "url", "nats://127.0.0.1:4222", "NATS URL (a Titan cluster node's client port)")
	flag.IntVar(&b.size, "size", 100, "message body size in bytes")
	flag.DurationVar(&b.duration, "duration", 15*time.Second, "how long each scenario publishes")
	flag.IntVar(&b.replicas, "replicas", 3, "stream replicas")
	flag.IntVar(&b.pending, "pending", 4096, "async publishes awaiting their PubAck at most (Titan's node window)")
	flag.IntVar(&b.batch, "batch", 256, "pull batch size of the consumer (Titan's pull.MaxBatch)")
	flag.IntVar(&b.clients, "clients", 16, "clients of sync16")
	flag.BoolVar(&b.msgID, "msgid", false, "every message carries a unique Nats-Msg-Id, as Titan's do (JetStream then checks and records it in the stream's duplicate window)")
	flag.BoolVar(&b.fetch, "fetch", false, "async: the consumer pulls with one Fetch at a time (Titan's pull loop) instead of Consume's overlapping pulls")
	flag.BoolVar(&b.keep, "keep", false, "keep the streams afterwards")
	only := flag.String("only", "pub,async,sync1,sync16", "comma-separated scenarios")
	flag.Parse()
	b.idPrefix = "jsbench-" + strings.ToLower(rand.Text()[:10]) + "-"
	ctx := context.Background()
	for _, s := range strings.Split(*only, ",") {
		var (
			r   result
			err error
		)
		switch s {
		case "pub":
			r, err = b.async(ctx, false)
		case "async":
			r, err = b.async(ctx, true)
		case "sync1":
			r, err = b.sync(ctx, 1)
		case "sync16":
			r, err = b.sync(ctx, b.clients)
		default:
			err = fmt.Errorf("unknown scenario %q", s)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "jsbench %s: %v\n", s, err)
			os.Exit(1)
		}
		r.Scenario = s
		line, _ := json.Marshal(r)
		fmt.Println(string(line))
	}
}

// stream makes a fresh WorkQueue stream for scenario and returns its subject and a func
// that deletes it (unless --keep).
func (b *bench) stream(ctx context.Context, js jetstream.JetStream, scenario string) (jetstream.Stream, string, func(), error) {
	tag := strings.ToLower(rand.Text()[:10])
	subject := "jsbench." + tag + "." + scenario
	name := "JSBENCH_" + strings.ToUpper(scenario) + "_" + strings.ToUpper(tag)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{subject}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Replicas: b.replicas,
	})
	if err != nil {
		return nil, "", nil, fmt.Errorf("creating stream %s: %w", name, err)
	}
	return st, subject, func() {
		if !b.keep {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = js.DeleteStream(dctx, name)
			cancel()
		}
	}, nil
}

// async publishes asynchronously for the duration, with a durable pull consumer draining
// the stream meanwhile when consume is set.
func (b *bench) async(ctx context.Context, consume bool) (result, error) {
	nc, err := nats.Connect(b.url, nats.Name("jsbench-pub"))
	if err != nil {
		return result{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(b.pending))
	if err != nil {
		return result{}, err
	}
	st, subject, drop, err := b.stream(ctx, js, map[bool]string{false: "pub", true: "async"}[consume])
	if err != nil {
		return result{}, err
	}
	defer drop()

	var (
		consumed atomic.Int64
		lastAt   atomic.Int64          // unix ns of the last message consumed
		cdone    = make(chan struct{}) // closed by the consumer once it has every published message
		pubDone  atomic.Int64          // published count once the publisher finished, else -1
	)
	pubDone.Store(-1)
	start := time.Now()
	if consume {
		cnc, err := nats.Connect(b.url, nats.Name("jsbench-consume"))
		if err != nil {
			return result{}, err
		}
		defer cnc.Close()
		cjs, _ := jetstream.New(cnc)
		cst, err := cjs.Stream(ctx, st.CachedInfo().Config.Name)
		if err != nil {
			return result{}, err
		}
		cons, err := cst.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: "jsbench", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 20000, // as Titan's queue consumers
		})
		if err != nil {
			return result{}, err
		}
		handle := func(m jetstream.Msg) {
			_ = m.Ack()
			n := consumed.Add(1)
			lastAt.Store(time.Now().UnixNano())
			if p := pubDone.Load(); p >= 0 && n >= p {
				select {
				case <-cdone:
				default:
					close(cdone)
				}
			}
		}
		if b.fetch {
			// Titan's pull loop (cluster/pull.Loop): one pull request at a time, the next
			// sent once the previous one's messages arrived.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					batch, err := cons.Fetch(b.batch, jetstream.FetchMaxWait(time.Second))
					if err != nil {
						continue
					}
					for m := range batch.Messages() {
						handle(m)
					}
				}
			}()
		} else {
			cc, err := cons.Consume(handle, jetstream.PullMaxMessages(b.batch))
			if err != nil {
				return result{}, err
			}
			defer cc.Stop()
		}
	}

	body := make([]byte, b.size)
	var published, errs int64
	end := start.Add(b.duration)
	for time.Now().Before(end) {
		for range 256 {
			if _, err := js.PublishMsgAsync(b.msg(subject, body)); err != nil {
				errs++
				continue
			}
			published++
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		return result{}, errors.New("async publishes unanswered after 30s")
	}
	pubElapsed := time.Since(start)
	r := result{Published: published, PublishedPS: float64(published) / pubElapsed.Seconds(), Errors: errs}
	if consume {
		pubDone.Store(published)
		deadline := time.After(60 * time.Second)
	wait:
		for consumed.Load() < published {
			select {
			case <-cdone:
				break wait
			case <-deadline:
				break wait
			case <-time.After(100 * time.Millisecond):
			}
		}
		r.Consumed = consumed.Load()
		if last := lastAt.Load(); last > 0 {
			r.ConsumedPS = float64(r.Consumed) / time.Unix(0, last).Sub(start).Seconds()
		}
	}
	return r, nil
}

// sync publishes synchronously from clients connections for the duration, each publish
// waiting for its PubAck.
func (b *bench) sync(ctx context.Context, clients int) (result, error) {
	nc, err := nats.Connect(b.url, nats.Name("jsbench-admin"))
	if err != nil {
		return result{}, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	_, subject, drop, err := b.stream(ctx, js, fmt.Sprintf("sync%d", clients))
	if err != nil {
		return result{}, err
	}
	defer drop()
	body := make([]byte, b.size)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		lats []time.Duration
		errs atomic.Int64
		cerr error
	)
	start := time.Now()
	end := start.Add(b.duration)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cnc, err := nats.Connect(b.url, nats.Name("jsbench-sync"))
			if err != nil {
				mu.Lock()
				cerr = err
				mu.Unlock()
				return
			}
			defer cnc.Close()
			cjs, _ := jetstream.New(cnc)
			own := make([]time.Duration, 0, 4096)
			for time.Now().Before(end) {
				t0 := time.Now()
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := cjs.PublishMsg(pctx, b.msg(subject, body))
				cancel()
				if err != nil {
					errs.Add(1)
					continue
				}
				own = append(own, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, own...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if cerr != nil {
		return result{}, cerr
	}
	elapsed := time.Since(start)
	slices.Sort(lats)
	r := result{Published: int64(len(lats)), PublishedPS: float64(len(lats)) / elapsed.Seconds(), Errors: errs.Load()}
	if len(lats) > 0 {
		r.P50us = lats[len(lats)/2].Microseconds()
		r.P99us = lats[len(lats)*99/100].Microseconds()
	}
	return r, nil
}

// msg returns a message of body on subject; with --msgid it carries a unique Nats-Msg-Id
// (a per-run prefix and a counter).
func (b *bench) msg(subject string, body []byte) *nats.Msg {
	m := &nats.Msg{Subject: subject, Data: body}
	if b.msgID {
		m.Header = nats.Header{jetstream.MsgIDHeader: []string{b.idPrefix + strconv.FormatUint(b.ids.Add(1), 10)}}
	}
	return m
}
