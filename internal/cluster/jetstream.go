package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
)

// This file holds what every cluster adapter does with JetStream: bounded, retried API
// requests and publishes, and stream creation once per node.

// Tunables shared by the cluster adapters.
const (
	// PublishTimeout bounds the wait for a PubAck, retries through a leader change
	// included (crash elections take 4-9 s).
	PublishTimeout = 30 * time.Second
	// AckWait is the consumers' ack wait: a delivery not acknowledged nor kept alive within
	// it is redelivered, so what a node that died held (pulled, or delivered and not yet
	// acknowledged) is delivered elsewhere within about AckWait (issue 27 asks for a few
	// seconds; JetStream cannot know which node's pull a message went to, so the wait is
	// the only signal). Live deliveries are kept alive with +WPI every KeepAlive, since
	// STOMP has no ack timeout.
	AckWait = 5 * time.Second
	// KeepAlive is how often a live node sends +WPI for each message it holds: AckWait/5,
	// so a pull loop may fall 4 s behind (a GC pause, a blocked pull) before JetStream
	// redelivers a message this node still holds. The cost is one small publish per held
	// message per KeepAlive.
	KeepAlive = AckWait / 5
	// AttemptTimeout bounds one JetStream API request before it is retried.
	AttemptTimeout = 3 * time.Second
	// PublishAttemptTimeout bounds one publish attempt before it is retried.
	PublishAttemptTimeout = 5 * time.Second
)

// Settings gives a destination its address settings (max-deliveries, dead-letter,
// redelivery-delay, ring-size, retention); implemented by config.Resolver.
type Settings interface {
	Settings(id dest.Identity) address.Settings
}

// SettingsOf returns s's settings of id, the built-in defaults when s is nil.
func SettingsOf(s Settings, id dest.Identity) address.Settings {
	if s == nil {
		return address.Defaults(id)
	}
	return s.Settings(id)
}

// Retryable reports whether a JetStream error may pass with a new leader or quorum.
func Retryable(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		isAPIUnavailable(err)
}

func isAPIUnavailable(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.Code == 503 || apiErr.ErrorCode == 10008)
}

// Attempt runs fn with a context bounded by AttemptTimeout, retrying while JetStream
// answers with errors a leader change or a quorum coming back clears, until ctx ends.
func Attempt(ctx context.Context, fn func(ctx context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		err := fn(actx)
		cancel()
		if err == nil || !Retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PublishRetrying publishes msg, retrying through leader changes until ctx ends (its
// Nats-Msg-Id makes a retry idempotent). Each attempt is bounded by PublishAttemptTimeout:
// a publish whose stream leader died after receiving it gets no answer.
func PublishRetrying(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, PublishAttemptTimeout)
		ack, err := js.PublishMsg(actx, msg)
		cancel()
		if err == nil {
			return ack, nil
		}
		if !Retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// GetOrCreateConsumer returns the durable consumer cfg.Durable of stream, creating it when
// missing (an existing one keeps its position and configuration, except that its ack wait
// is set to cfg.AckWait when that is non-zero and differs). Attempts are bounded
// and retried until ctx ends.
func GetOrCreateConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		cons, err := js.Consumer(actx, stream, cfg.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			cons, err = js.CreateConsumer(actx, stream, cfg)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				cons, err = js.Consumer(actx, stream, cfg.Durable)
			}
		}
		if err == nil && cfg.AckWait > 0 {
			// A consumer made by an earlier version keeps its ack wait until told: set
			// this version's, so a dead node's messages come back as documented.
			if c := cons.CachedInfo().Config; c.AckWait != cfg.AckWait {
				c.AckWait = cfg.AckWait
				cons, err = js.UpdateConsumer(actx, stream, c)
			}
		}
		cancel()
		if err == nil {
			return cons, nil
		}
		if !Retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// LastSequence returns stream's last sequence (bounded attempts, retried until ctx ends).
func LastSequence(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		st, err := js.Stream(actx, stream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(actx)
		}
		cancel()
		if err == nil {
			return info.State.LastSeq, nil
		}
		if !Retryable(err) || ctx.Err() != nil {
			return 0, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Streams creates streams once per node. The zero value is not usable: NewStreams.
type Streams struct {
	js   jetstream.JetStream
	mu   sync.Mutex
	made map[string]bool          // guarded by mu
	busy map[string]chan struct{} // creations in progress, closed when done; guarded by mu

	// Log, when set before the first Ensure, gets a warning when a new stream's leader
	// could not be placed on its preferred node (PreferredLeader).
	Log *slog.Logger
}

// NewStreams returns the stream maker over js.
func NewStreams(js jetstream.JetStream) *Streams {
	return &Streams{js: js, made: make(map[string]bool), busy: make(map[string]chan struct{})}
}

// Has reports whether this node saw stream name made.
func (s *Streams) Has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.made[name]
}

// Ensure creates the stream cfg unless this node saw it made (an existing stream is
// reconciled to cfg's Titan-managed settings). A replicated stream this node created gets
// its leader moved to its PreferredLeader before Ensure returns (placeLeader: at most
// leaderPlaceTimeout more, once per stream), so no publish of this node goes to the
// leader being replaced. One stream is made by one call at a time (the others wait for
// it); different streams are made in parallel. Concurrent creations of one stream from
// several nodes can leave all but the first request unanswered: every attempt is bounded,
// and each first looks the stream up. Errors: the JetStream API's, after retries until ctx
// ends.
func (s *Streams) Ensure(ctx context.Context, cfg jetstream.StreamConfig) error {
	for {
		s.mu.Lock()
		if s.made[cfg.Name] {
			s.mu.Unlock()
			return nil
		}
		if ch, ok := s.busy[cfg.Name]; ok {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return fmt.Errorf("cluster: creating stream %s: %w", cfg.Name, ctx.Err())
			}
		}
		ch := make(chan struct{})
		s.busy[cfg.Name] = ch
		s.mu.Unlock()
		err := s.ensure(ctx, cfg)
		s.mu.Lock()
		delete(s.busy, cfg.Name)
		if err == nil {
			s.made[cfg.Name] = true
		}
		s.mu.Unlock()
		close(ch)
		return err
	}
}

func (s *Streams) ensure(ctx context.Context, cfg jetstream.StreamConfig) error {
	for {
		actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		st, err := s.js.Stream(actx, cfg.Name)
		created := false
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = s.js.CreateStream(actx, cfg)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil
			} else {
				created = err == nil
			}
		} else if err == nil {
			err = reconcile(actx, s.js, st.CachedInfo().Config, cfg)
		}
		cancel()
		if err == nil {
			if created && cfg.Replicas > 1 {
				// This node made it: it places its leader (partition.go).
				if perr := placeLeader(ctx, s.js, cfg.Name); perr != nil && s.Log != nil {
					s.Log.Warn("stream leader left where JetStream elected it", "stream", cfg.Name, "err", perr)
				}
			}
			return nil
		}
		if !Retryable(err) || ctx.Err() != nil {
			return fmt.Errorf("cluster: creating stream %s: %w", cfg.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WithCancel returns a context under parent (the node's Context) bounded by timeout that
// also ends when cancel closes (a producer's connection closed), and its cancel func.
func WithCancel(parent context.Context, timeout time.Duration, cancel <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, stop := context.WithTimeout(parent, timeout)
	if cancel != nil {
		go func() {
			select {
			case <-cancel:
				stop()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, stop
}
