package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Publish holds (issue 27, rolling restart): before a stream's leader hands over, every
// node stops sending new publishes to that stream and waits until those it sent are
// answered. A publish in flight at the hand-over can be dropped by the old leader and,
// once retried, be stored after a later SEND of its connection that the new leader already
// took; with nothing in flight there is nothing to drop. The stepping-down node asks every
// node on HoldSubject (a request whose answers it counts), steps the streams down, waits
// for their new leaders and publishes the release on ReleaseSubject. A node releases a
// hold by itself after holdMax, should the release never come (its requester died).
const (
	// HoldSubject is the core NATS subject a stepping-down node asks every node on to hold
	// its publishes to some streams (JSON holdRequest; the answer, empty, once held).
	HoldSubject = "titan.cluster.hold"
	// ReleaseSubject ends a hold (JSON holdRelease).
	ReleaseSubject = "titan.cluster.release"
	// holdWait bounds how long a node waits for its in-flight publishes before it answers
	// anyway, and how long the requester waits for the answers.
	holdWait = time.Second
	// holdMax ends a hold whose release never came.
	holdMax = 3 * time.Second
	// maxHeldStreams bounds the streams one hold request names (a node leads far fewer).
	maxHeldStreams = 4096
)

// PublishHolder is a node's publisher as a step-down needs it (declared here, implemented
// by pipeline.Persister): Hold stops new publishes to streams and returns once none of this
// node's is in flight to them, or when ctx ends; release lets them go.
type PublishHolder interface {
	Hold(ctx context.Context, streams []string) (release func())
}

type holdRequest struct {
	ID      string   `json:"id"`
	Streams []string `json:"streams"`
}

type holdRelease struct {
	ID string `json:"id"`
}

// ServePublishHolds answers other nodes' (and this node's own) hold requests with h, until
// the node's connection closes. Errors: the subscriptions'.
func (n *Node) ServePublishHolds(h PublishHolder) error {
	var mu sync.Mutex
	releases := map[string]func(){} // holds in force by id; guarded by mu
	ended := map[string]bool{}      // releases that came before their hold was in force; guarded by mu
	end := func(id string) {
		mu.Lock()
		r, ok := releases[id]
		delete(releases, id)
		if !ok {
			ended[id] = true
			time.AfterFunc(holdMax, func() { mu.Lock(); delete(ended, id); mu.Unlock() })
		}
		mu.Unlock()
		if r != nil {
			r()
		}
	}
	if _, err := n.nc.Subscribe(HoldSubject, func(m *nats.Msg) {
		var req holdRequest
		if json.Unmarshal(m.Data, &req) != nil || req.ID == "" || len(req.Streams) == 0 || len(req.Streams) > maxHeldStreams {
			return
		}
		for _, s := range req.Streams {
			if !strings.HasPrefix(s, "TITAN_") {
				return // only Titan's streams: a lane is made for each name
			}
		}
		// The publishes' answers arrive on this connection's other subscriptions: hold on
		// a goroutine of its own, not the one delivering this connection's messages.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), holdWait)
			release := h.Hold(ctx, req.Streams)
			cancel()
			mu.Lock()
			if ended[req.ID] { // the requester gave up waiting and released already
				delete(ended, req.ID)
				mu.Unlock()
				release()
				return
			}
			releases[req.ID] = release
			mu.Unlock()
			time.AfterFunc(holdMax, func() { end(req.ID) })
			if m.Reply != "" {
				_ = m.Respond(nil)
			}
		}()
	}); err != nil {
		return fmt.Errorf("cluster: serving publish holds: %w", err)
	}
	if _, err := n.nc.Subscribe(ReleaseSubject, func(m *nats.Msg) {
		var rel holdRelease
		if json.Unmarshal(m.Data, &rel) == nil {
			end(rel.ID)
		}
	}); err != nil {
		return fmt.Errorf("cluster: serving publish holds: %w", err)
	}
	return nil
}

// holdPublishes asks every node to hold its publishes to streams and returns once the
// live nodes answered (or after holdWait: a node that did not answer in time is not waited
// for) and the release, which publishes the end of the hold. Nothing is held (and release
// does nothing) when streams is empty or the request cannot be sent.
func (n *Node) holdPublishes(ctx context.Context, streams []string) (release func()) {
	if len(streams) == 0 || n.srv == nil {
		return func() {}
	}
	id := nats.NewInbox() // unique
	req, _ := json.Marshal(holdRequest{ID: id, Streams: streams})
	rel, _ := json.Marshal(holdRelease{ID: id})
	inbox := nats.NewInbox()
	sub, err := n.nc.SubscribeSync(inbox)
	if err != nil {
		return func() {}
	}
	defer func() { _ = sub.Unsubscribe() }()
	release = func() {
		_ = n.nc.Publish(ReleaseSubject, rel)
		_ = n.nc.Flush()
	}
	if err := n.nc.PublishRequest(HoldSubject, inbox, req); err != nil {
		return func() {}
	}
	wctx, cancel := context.WithTimeout(ctx, holdWait+250*time.Millisecond)
	defer cancel()
	for got, want := 0, max(len(n.srv.ActivePeers()), 1); got < want; got++ {
		if _, err := sub.NextMsgWithContext(wctx); err != nil {
			n.log.Warn("cluster: not every node confirmed holding its publishes before a step-down", "answered", got, "nodes", want, "err", err)
			break
		}
	}
	return release
}
