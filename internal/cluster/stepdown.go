package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StepDownTimeout bounds StepDown as the broker calls it on SIGTERM: a part of the shutdown
// grace period, so the clients are still drained within it. Moving the leaderships takes
// at most leadershipTimeout of it; the hand-backs (OnStepDown) have the rest.
const StepDownTimeout = 7 * time.Second

// leadershipTimeout bounds the leadership moves of StepDown, leaving the hand-backs at
// least StepDownTimeout - leadershipTimeout.
const leadershipTimeout = 5 * time.Second

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

// StepDown prepares this node to stop while its clients are still connected (a rolling
// restart, issue 27). First it moves every leadership this embedded node holds to another
// node: each Titan stream and consumer it leads ($JS.API.STREAM.LEADER.STEPDOWN,
// $JS.API.CONSUMER.LEADER.STEPDOWN), then the JetStream meta group
// ($JS.API.META.LEADER.STEPDOWN); it waits until the consumers and streams have another
// leader, so acknowledgements and publishes in flight through this node go to a leader
// that stays. While its streams hand over, every node holds its publishes to them
// (holds.go: none is in flight to a leader that hands over, so none is stored after a
// later one) (all within
// leadershipTimeout; a node with an external NATS leads nothing). Then it runs the
// adapters' hand-backs (OnStepDown) concurrently and waits for them: what this node pulled
// goes back to JetStream in order before a client can move to another node. Bounded by ctx;
// errors name what could not be moved (the rest is moved anyway).
func (n *Node) StepDown(ctx context.Context) (StepDownReport, error) {
	lctx, cancel := context.WithTimeout(ctx, leadershipTimeout)
	rep, err := n.stepDownLeaderships(lctx)
	cancel()
	n.hookMu.Lock()
	hooks := append([]func(context.Context){}, n.handBacks...)
	n.hookMu.Unlock()
	var wg sync.WaitGroup
	for _, f := range hooks {
		wg.Go(func() { f(ctx) })
	}
	wg.Wait()
	return rep, err
}

// OnStepDown registers f to run at the end of StepDown, after the leaderships moved and
// before the broker closes its client connections: an adapter stops pulling and hands back,
// in stream order, every message this node holds (issue 27: a rolling restart must not
// reorder). f returns when done or when ctx ends. Safe for concurrent use.
func (n *Node) OnStepDown(f func(ctx context.Context)) {
	n.hookMu.Lock()
	n.handBacks = append(n.handBacks, f)
	n.hookMu.Unlock()
}

// stepDownLeaderships is StepDown's first part: the leaderships, bounded by ctx.
func (n *Node) stepDownLeaderships(ctx context.Context) (StepDownReport, error) {
	var rep StepDownReport
	if n.srv == nil {
		return rep, nil
	}
	self := n.Name()
	var errs []error
	var paused []pausedConsumer
	var lead []string // streams this node leads
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
				// A consumer with no replicas (R1, such as a key-value watcher) has no
				// other node to lead it: it stops with this node.
				if ci.Cluster != nil && ci.Cluster.Leader == self && len(ci.Cluster.Replicas) > 0 {
					until := n.pauseForStepDown(ctx, name, ci)
					if !until.IsZero() {
						paused = append(paused, pausedConsumer{name, ci.Name, until})
					}
					if err := n.apiRequest(ctx, fmt.Sprintf(apiConsumerStepDown, name, ci.Name)); err != nil {
						errs = append(errs, fmt.Errorf("consumer %s/%s: %w", name, ci.Name, err))
					} else {
						rep.Consumers = append(rep.Consumers, name+"/"+ci.Name)
					}
				}
			}
		}
		if si.Cluster != nil && si.Cluster.Leader == self {
			lead = append(lead, name)
		}
	}
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		errs = append(errs, fmt.Errorf("listing streams: %w", err))
	}
	// The streams: every node holds its publishes to them first (holds.go), so that none is
	// in flight to this node when it hands over, then they step down, and the holds end
	// once each has its new leader.
	release := n.holdPublishes(ctx, lead)
	for _, name := range lead {
		if err := n.apiRequest(ctx, fmt.Sprintf(apiStreamStepDown, name)); err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", name, err))
		} else {
			rep.Streams = append(rep.Streams, name)
		}
	}
	n.waitStreamLeaders(ctx, rep.Streams)
	release()
	// Consumers too: the hand-backs that follow NAK to the consumers' leaders, and a NAK
	// sent while a consumer has none is lost (its message comes back after the ack wait,
	// behind newer ones).
	cctx, ccancel := context.WithTimeout(ctx, consumerLeaderWait)
	defer ccancel()
	for _, sc := range rep.Consumers {
		stream, name, _ := strings.Cut(sc, "/")
		for cctx.Err() == nil {
			c, err := consumerInfo(cctx, n.js, stream, name)
			if err == nil && c.CachedInfo().Cluster != nil && c.CachedInfo().Cluster.Leader != "" && c.CachedInfo().Cluster.Leader != self {
				break
			}
			select {
			case <-cctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	if cctx.Err() != nil && ctx.Err() == nil {
		errs = append(errs, fmt.Errorf("consumers %v: no other leader within %v", rep.Consumers, consumerLeaderWait))
	}
	n.resumeAfterStepDown(paused) // before the meta group moves: resuming is a meta request
	if n.srv.JetStreamIsLeader() {
		if err := n.sysRequest(ctx, apiMetaStepDown, nil); err != nil {
			errs = append(errs, fmt.Errorf("meta group: %w", err))
		} else {
			rep.Meta = true
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("waiting for new leaders: %w", ctx.Err()))
	}
	return rep, errors.Join(errs...)
}

// waitStreamLeaders returns once each of streams has a leader other than this node, or
// when ctx ends.
func (n *Node) waitStreamLeaders(ctx context.Context, streams []string) {
	self := n.Name()
	for _, name := range streams {
		for ctx.Err() == nil {
			ictx, icancel := context.WithTimeout(ctx, LookupTimeout)
			s, err := n.js.Stream(ictx, name)
			icancel()
			if err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" && s.CachedInfo().Cluster.Leader != self {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
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

// Consumer step-down without losing deliveries (issue 27). When a consumer's leader steps
// down, the new leader answers every pull request it knows of with "409 Leadership
// Change", and the Go client then drops its pull's inbox: messages the old leader sent to
// that pull just before, which reach the puller after the 409 (they travel on another
// route), are dropped, stay pending on the consumer and come back only after the ack wait,
// behind newer messages. So the stepping-down leader pauses the consumer first (no
// deliveries until stepDownPause from now, JetStream's consumer pause), waits until it
// applied the pause, steps down, and resumes the consumer once another node leads it. An
// operator's pause is left alone: a paused consumer delivers nothing and is not paused
// again, and only a pause whose deadline is still this node's is resumed. If the node
// stops before resuming, the pause ends by itself at its deadline.

// stepDownPause bounds the delivery pause of a consumer whose leader steps down.
const stepDownPause = 2 * time.Second

// consumerLeaderWait bounds StepDown's wait for the consumers it stepped down to have a
// new leader.
const consumerLeaderWait = 2 * time.Second

// pausedConsumer is a consumer StepDown paused, until its deadline.
type pausedConsumer struct {
	stream, name string
	until        time.Time
}

// pauseForStepDown pauses the consumer of ci (this node leads it) until stepDownPause from
// now and waits until its leader applied the pause (bounded by stepDownPause). It returns
// the deadline, or zero when the consumer was paused already or could not be paused (it
// steps down anyway).
func (n *Node) pauseForStepDown(ctx context.Context, stream string, ci *jetstream.ConsumerInfo) time.Time {
	// The consumer's own answer, not the listing's (which does not say it is paused).
	if c, err := consumerInfo(ctx, n.js, stream, ci.Name); err == nil {
		ci = c.CachedInfo()
	}
	if ci.Paused || ci.Config.PauseUntil != nil && ci.Config.PauseUntil.After(time.Now()) {
		return time.Time{}
	}
	until := time.Now().Add(stepDownPause).UTC()
	if _, err := n.js.PauseConsumer(ctx, stream, ci.Name, until); err != nil {
		n.log.Warn("cluster: consumer not paused before its step-down", "stream", stream, "consumer", ci.Name, "err", err)
		return time.Time{}
	}
	wctx, cancel := context.WithTimeout(ctx, stepDownPause)
	defer cancel()
	for wctx.Err() == nil {
		if c, err := consumerInfo(wctx, n.js, stream, ci.Name); err == nil && c.CachedInfo().Paused {
			break
		}
		select {
		case <-wctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	if ci.Cluster != nil {
		n.waitApplied(wctx, ci.Cluster.RaftGroup)
	}
	return until
}

// Deliveries waiting for their quorum. A replicated consumer's leader sends a message only
// once the Raft entry recording its delivery is applied (nats-server's
// consumer.pendingDeliveries); a leader that steps down drops the messages still waiting,
// while their entries may yet commit, so the next leader counts them delivered and they
// come back only after the ack wait, behind newer ones (seen in a rolling restart: all 256
// messages of the stopping node's own pull, none of them ever sent). After the pause, so
// that nothing more is delivered, StepDown therefore waits until this node's copy of the
// consumer's Raft group applied every entry appended before it: the waiting messages are
// then sent, and the pull that asked for them receives them before the step-down.

// appliedPoll is how often waitApplied reads the Raft group's state, and proposalsSettle
// how long it waits for the proposals queued before it to be appended (the consumer
// forwards its proposals from its own queue; acknowledgements go on being proposed).
const (
	appliedPoll     = 2 * time.Millisecond
	proposalsSettle = 100 * time.Millisecond
)

// waitApplied returns once this node's member of Raft group (a consumer it leads) applied
// every entry appended when the proposals queued at the call were appended, or when ctx
// ends, or at once when the group is not on this node.
func (n *Node) waitApplied(ctx context.Context, group string) {
	if group == "" || n.srv == nil {
		return
	}
	acc := n.srv.GlobalAccount().GetName()
	state := func() (server.RaftzGroup, bool) {
		st := n.srv.Raftz(&server.RaftzOptions{AccountFilter: acc, GroupFilter: group})
		if st == nil {
			return server.RaftzGroup{}, false
		}
		g, ok := (*st)[acc][group]
		return g, ok
	}
	settle := time.Now().Add(proposalsSettle)
	var target uint64
	for ctx.Err() == nil {
		g, ok := state()
		if !ok {
			return
		}
		if target == 0 && (g.IPQPropLen == 0 || time.Now().After(settle)) {
			if g.PIndex == 0 {
				return // nothing appended yet
			}
			target = g.PIndex
		}
		if target != 0 && g.Applied >= target {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(appliedPoll):
		}
	}
}

// resumeAfterStepDown resumes the consumers StepDown paused whose pause is still its own
// (same deadline), each within AttemptTimeout (its look-ups retried every LookupTimeout); a failure is logged (the pause ends at its
// deadline).
func (n *Node) resumeAfterStepDown(paused []pausedConsumer) {
	for _, p := range paused {
		ctx, cancel := context.WithTimeout(context.Background(), AttemptTimeout)
		var c jetstream.Consumer
		var err error
		for {
			if c, err = consumerInfo(ctx, n.js, p.stream, p.name); err == nil || ctx.Err() != nil {
				break
			}
		}
		if err == nil {
			pu := c.CachedInfo().Config.PauseUntil
			if pu == nil || !pu.Equal(p.until) {
				cancel()
				continue // resumed already, or paused again by an operator
			}
			_, err = n.js.ResumeConsumer(ctx, p.stream, p.name)
		}
		cancel()
		if err != nil {
			n.log.Warn("cluster: consumer not resumed after its step-down; it resumes at its deadline", "stream", p.stream, "consumer", p.name, "until", p.until, "err", err)
		}
	}
}

// LookupTimeout bounds one stream or consumer info request while leaderships move: the
// first such request a node sends after stepping down may go unanswered (seen: no answer
// at all, from a consumer whose new leader was elected within a second), so each is
// retried soon instead of waiting out a whole deadline.
const LookupTimeout = 250 * time.Millisecond

// consumerInfo looks consumer name of stream up within LookupTimeout (and ctx).
func consumerInfo(ctx context.Context, js jetstream.JetStream, stream, name string) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, LookupTimeout)
	defer cancel()
	return js.Consumer(ctx, stream, name)
}
