package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StepDownTimeout bounds StepDown as the broker calls it on SIGTERM: a part of the shutdown
// grace period, so the clients are still drained within it.
const StepDownTimeout = 5 * time.Second

// JetStream API subjects (nats-server's jsStreamLeaderStepDownT, jsConsumerLeaderStepDownT,
// JSApiLeaderStepDown, JSApiRemoveServer).
const (
	apiStreamStepDown   = "$JS.API.STREAM.LEADER.STEPDOWN.%s"
	apiConsumerStepDown = "$JS.API.CONSUMER.LEADER.STEPDOWN.%s.%s"
	apiMetaStepDown     = "$JS.API.META.LEADER.STEPDOWN"
	apiServerRemove     = "$JS.API.SERVER.REMOVE"
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
		if err := n.sysRequest(ctx, apiMetaStepDown, nil); err != nil {
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

// apiRequest sends a JetStream API request with an empty body as the global account (the
// streams' and consumers' API) and returns its error.
func (n *Node) apiRequest(ctx context.Context, subject string) error {
	return apiAnswer(n.nc.RequestWithContext(ctx, subject, nil))
}

// apiAnswer is the error of a JetStream API answer: the request's, an unreadable answer,
// or ErrJetStreamAPI with JetStream's description and code.
func apiAnswer(m *nats.Msg, err error) error {
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

// RemovePeer removes a node from the JetStream meta group (a node whose disk died, or
// shrinking the cluster: issue 27) with $JS.API.SERVER.REMOVE, which only the system
// account may send; the meta leader answers. peer is the node's name, or its Raft peer id
// (what `titan cluster` shows for a peer no node can name). JetStream then places the
// node's stream and consumer replicas on the other nodes, and on a node that joins later.
// A removed name can rejoin only after nats-server's peer-remove timeout (5 minutes); a
// replacement takes a new name. Only an embedded node can (ErrNotEmbedded with an
// external NATS, whose operators run `nats server raft peer-remove`). Errors: ErrPeerUp
// for this node or a node still connected (stop it first: JetStream would disable itself
// on it), ErrNotPeer for a name or id not in the meta group, ErrJetStreamAPI with
// JetStream's description (a removal in progress).
func (n *Node) RemovePeer(ctx context.Context, peer string) error {
	if n.srv == nil {
		return ErrNotEmbedded
	}
	if peer == n.srv.Name() || peer == n.srv.Node() {
		return fmt.Errorf("removing %s: %w: it is the node asked", peer, ErrPeerUp)
	}
	req, err := n.removal(ctx, peer)
	if err != nil {
		return fmt.Errorf("removing %s: %w", peer, err)
	}
	body, _ := json.Marshal(req)
	if err := n.sysRequest(ctx, apiServerRemove, body); err != nil {
		return fmt.Errorf("removing %s: %w", peer, err)
	}
	return nil
}

// removal is the $JS.API.SERVER.REMOVE request for peer (nats-server's
// JSApiMetaServerRemoveRequest: "peer" is a server name, "peer_id" a Raft peer id), after
// checking that peer is a member of the meta group and not up.
func (n *Node) removal(ctx context.Context, peer string) (map[string]string, error) {
	jsi, err := n.srv.Jsz(&server.JSzOptions{})
	if err != nil || jsi.Meta == nil {
		return nil, fmt.Errorf("%w: no JetStream meta group on this node", ErrNotPeer)
	}
	routed := n.routedNames()
	for _, p := range jsi.Meta.Replicas {
		if p == nil || (p.Name != peer && p.Peer != peer) {
			continue
		}
		if routed[p.Name] && !p.Offline {
			return nil, ErrPeerUp
		}
		// By id: the meta leader looks a name up among the servers it heard from since it
		// started, and a leader restarted while the node was down never heard from it
		// ("server is not a member of the cluster").
		if p.Peer != "" {
			return map[string]string{"peer_id": p.Peer}, nil
		}
		return map[string]string{"peer": peer}, nil
	}
	// A peer this node cannot name (it was down since this node started) that another
	// node names.
	names, _ := n.PeerNames(ctx)
	for _, p := range jsi.Meta.Replicas {
		if p != nil && names[p.Peer] == peer {
			return map[string]string{"peer_id": p.Peer}, nil
		}
	}
	return nil, ErrNotPeer
}

// routedNames is the set of nodes this node has a route to.
func (n *Node) routedNames() map[string]bool {
	out := map[string]bool{}
	if rz, err := n.srv.Routez(&server.RoutezOptions{}); err == nil {
		for _, r := range rz.Routes {
			if r.RemoteName != "" {
				out[r.RemoteName] = true
			}
		}
	}
	return out
}

// sysRequest sends a JetStream API request as the embedded server's system account (the
// meta group's API: step-down, peer removal) and returns its error.
func (n *Node) sysRequest(ctx context.Context, subject string, body []byte) error {
	nc, err := n.sysConn()
	if err != nil {
		return err
	}
	defer nc.Close()
	return apiAnswer(nc.RequestWithContext(ctx, subject, body))
}
