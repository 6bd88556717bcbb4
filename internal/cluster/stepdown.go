package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StepDownTimeout bounds StepDown as the broker calls it on SIGTERM: a part of the shutdown
// grace period, so the clients are still drained within it.
const StepDownTimeout = 5 * time.Second

// JetStream API subjects (nats-server's jsStreamLeaderStepDownT, jsConsumerLeaderStepDownT,
// JSApiLeaderStepDown).
const (
	apiStreamStepDown   = "$JS.API.STREAM.LEADER.STEPDOWN.%s"
	apiConsumerStepDown = "$JS.API.CONSUMER.LEADER.STEPDOWN.%s.%s"
	apiMetaStepDown     = "$JS.API.META.LEADER.STEPDOWN"
)

// StepDownReport is what StepDown moved away from this node.
type StepDownReport struct {
	// Streams and Consumers are the Raft groups this node led and asked to elect another
	// leader ("TITAN_default_Q", "TITAN_default_Q/q_orders").
	Streams, Consumers []string
	// Meta is true when this node was the JetStream meta leader and stepped down.
	Meta bool
}

// StepDown moves every leadership this embedded node holds to another node before it stops
// (a rolling restart, issue 27): each Titan stream and consumer it leads
// ($JS.API.STREAM.LEADER.STEPDOWN, $JS.API.CONSUMER.LEADER.STEPDOWN), then the JetStream
// meta group ($JS.API.META.LEADER.STEPDOWN); it waits until the streams have another
// leader, so publishes in flight through this node go to a leader that stays. Bounded by
// ctx; errors name what could not be moved (the rest is moved anyway). A node with an
// external NATS leads nothing and returns at once.
func (n *Node) StepDown(ctx context.Context) (StepDownReport, error) {
	var rep StepDownReport
	if n.srv == nil {
		return rep, nil
	}
	self := n.Name()
	var errs []error
	var led []string
	lister := n.js.ListStreams(ctx)
	for si := range lister.Info() {
		name := si.Config.Name
		if !strings.HasPrefix(name, "TITAN_") {
			continue
		}
		// Consumers first: a consumer stepping down needs its stream's group working.
		if s, err := n.js.Stream(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", name, err))
		} else {
			for ci := range s.ListConsumers(ctx).Info() {
				if ci.Cluster != nil && ci.Cluster.Leader == self {
					if err := n.apiRequest(ctx, fmt.Sprintf(apiConsumerStepDown, name, ci.Name)); err != nil {
						errs = append(errs, fmt.Errorf("consumer %s/%s: %w", name, ci.Name, err))
					} else {
						rep.Consumers = append(rep.Consumers, name+"/"+ci.Name)
					}
				}
			}
		}
		if si.Cluster != nil && si.Cluster.Leader == self {
			if err := n.apiRequest(ctx, fmt.Sprintf(apiStreamStepDown, name)); err != nil {
				errs = append(errs, fmt.Errorf("stream %s: %w", name, err))
			} else {
				rep.Streams = append(rep.Streams, name)
				led = append(led, name)
			}
		}
	}
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		errs = append(errs, fmt.Errorf("listing streams: %w", err))
	}
	if n.srv.JetStreamIsLeader() {
		if err := n.apiRequest(ctx, apiMetaStepDown); err != nil {
			errs = append(errs, fmt.Errorf("meta group: %w", err))
		} else {
			rep.Meta = true
		}
	}
	for _, name := range led {
		for ctx.Err() == nil {
			s, err := n.js.Stream(ctx, name)
			if err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" && s.CachedInfo().Cluster.Leader != self {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("waiting for new leaders: %w", ctx.Err()))
	}
	return rep, errors.Join(errs...)
}

// apiResponse is the part of a JetStream API answer Titan reads.
type apiResponse struct {
	Success bool `json:"success"`
	Error   *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// apiRequest sends a JetStream API request with an empty body and returns its error.
func (n *Node) apiRequest(ctx context.Context, subject string) error {
	return n.apiRequestBody(ctx, subject, nil)
}

func (n *Node) apiRequestBody(ctx context.Context, subject string, body []byte) error {
	m, err := n.nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return err
	}
	var r apiResponse
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("answer %q: %w", m.Data, err)
	}
	if r.Error != nil {
		return fmt.Errorf("%w: %s (%d)", ErrJetStreamAPI, r.Error.Description, r.Error.ErrCode)
	}
	return nil
}
