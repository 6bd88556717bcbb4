package broker

import (
	"strings"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/durable"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/metrics"
	"github.com/titan-broker/titan/internal/pointqueue"
)

// This file adapts the broker to admin.Operator: the operator views and actions of the
// monitor API and the console.

// Connections implements admin.Operator.
func (s adminSource) Connections() []admin.Connection {
	sessions := s.b.Sessions()
	out := make([]admin.Connection, 0, len(sessions))
	for _, sess := range sessions {
		c := admin.Connection{
			ID: sess.ID(), RemoteAddr: sess.RemoteAddr(), User: sess.Principal(), Version: sess.Version().String(),
			ConnectedAt: sess.Created(), QueuedBytes: sess.QueuedBytes(), Subscriptions: []admin.Subscription{},
		}
		if send, recv, ok := sess.HeartBeat(); ok {
			c.HeartBeatSendMs, c.HeartBeatReceiveMs = send.Milliseconds(), recv.Milliseconds()
		}
		if dc := s.b.deliveryConn(sess); dc != nil {
			for _, si := range dc.Subscriptions() {
				c.Subscriptions = append(c.Subscriptions, admin.Subscription{
					ID: si.ID, Group: si.Group, Destination: si.Destination, Pattern: si.Pattern, Ack: si.Ack,
					Prefetch: si.Prefetch, Pending: si.Pending, DurableName: si.DurableName, Selector: si.Selector,
					Delivered: si.Delivered, Dropped: si.Dropped,
				})
			}
		}
		out = append(out, c)
	}
	return out
}

// CloseConnection implements admin.Operator: the session sends ERROR "connection closed by
// an operator" and closes as an operator close
// (reason admin); the router then returns its unacknowledged messages to their queues.
func (s adminSource) CloseConnection(id string) bool {
	for _, sess := range s.b.Sessions() {
		if sess.ID() == id {
			sess.CloseByOperator()
			return true
		}
	}
	return false
}

// EventLogs implements admin.Operator from the store's streams and the live readers.
func (s adminSource) EventLogs() ([]admin.EventLog, error) {
	streams, err := s.b.durable.Store().Streams()
	if err != nil {
		return nil, err
	}
	readers := map[dest.Identity][]admin.LogSubscription{}
	for _, r := range s.b.p.log.Readers() {
		readers[r.Identity] = append(readers[r.Identity], admin.LogSubscription{
			Connection: r.Session, Subscription: r.Subscription, DurableName: r.DurableName,
			Delivered: r.Delivered, Position: r.Position, Pending: r.Pending,
		})
	}
	offline := s.offlineDurables()
	out := []admin.EventLog{}
	seen := map[dest.Identity]bool{}
	for _, st := range streams {
		id, ok := durable.ParseStream(st.Name)
		if !ok || id.Pattern != dest.PatternEventsStore {
			continue
		}
		seen[id] = true
		set := s.b.p.dispatcher.Settings(id)
		out = append(out, admin.EventLog{
			Group: id.Group, Destination: id.Destination(), Messages: st.Count, Bytes: st.Bytes,
			FirstSequence: st.First, LastSequence: st.Last,
			RetentionMaxMessages: set.RetentionMaxMessages, RetentionMaxBytes: set.RetentionMaxBytes,
			RetentionMaxAgeMs: set.RetentionMaxAge.Milliseconds(), Subscriptions: readers[id],
		})
		k := [2]string{id.Group, logDestination(id.Group, id.Channel)}
		out[len(out)-1].Subscriptions = append(out[len(out)-1].Subscriptions, offline[k]...)
		delete(offline, k)
	}
	for id, subs := range readers { // read before anything was written: no stream yet
		if !seen[id] && !strings.ContainsAny(id.Channel, "*>") {
			out = append(out, admin.EventLog{Group: id.Group, Destination: id.Destination(), Subscriptions: subs})
		}
	}
	for k, subs := range offline { // durable subscriptions of a log with no stream (yet)
		out = append(out, admin.EventLog{Group: k[0], Destination: k[1], Subscriptions: subs})
	}
	return out, nil
}

func (s adminSource) pointQueue(id dest.Identity) (*pointqueue.Queue, error) {
	q, ok := s.b.p.dispatcher.Lookup(id)
	if !ok {
		return nil, dispatch.ErrNoQueue
	}
	pq, ok := q.(*pointqueue.Queue)
	if !ok {
		return nil, dispatch.ErrNoQueue
	}
	return pq, nil
}

// PurgeQueue implements admin.Operator.
func (s adminSource) PurgeQueue(id dest.Identity) (int, error) {
	q, err := s.pointQueue(id)
	if err != nil {
		return 0, err
	}
	return q.Clear(), nil
}

func stored(m *message.Message) admin.StoredMessage {
	return admin.StoredMessage{
		ID: m.ID, Group: m.Group, Destination: m.Destination, Headers: m.Headers, Body: m.Body,
		TimestampMs: m.TimestampMs, Persistent: m.Persistent,
	}
}

// BrowseQueue implements admin.Operator.
func (s adminSource) BrowseQueue(id dest.Identity, max int) ([]admin.StoredMessage, error) {
	q, err := s.pointQueue(id)
	if err != nil {
		return nil, err
	}
	ps := q.Peek(max)
	out := make([]admin.StoredMessage, len(ps))
	for i, p := range ps {
		out[i] = stored(p.Message)
		out[i].DeliveryCount, out[i].DeliverAt = p.DeliveryCount, p.DeliverAt
	}
	return out, nil
}

// MoveQueueHead implements admin.Operator.
func (s adminSource) MoveQueueHead(id dest.Identity, fn func(admin.StoredMessage) error) (bool, error) {
	q, err := s.pointQueue(id)
	if err != nil {
		return false, err
	}
	return q.MoveHead(func(m *message.Message) error { return fn(stored(m)) })
}

// logStats feeds metrics.LogCollector: every events-store log with its live subscriptions'
// lags. A store failure exports no log series for that scrape.
func (s adminSource) logStats() []metrics.LogStat {
	logs, err := s.EventLogs()
	if err != nil {
		return nil
	}
	out := make([]metrics.LogStat, 0, len(logs))
	for _, l := range logs {
		ls := metrics.LogStat{Group: l.Group, Destination: l.Destination, Messages: l.Messages, Bytes: l.Bytes, LastSequence: l.LastSequence}
		for _, sub := range l.Subscriptions {
			lag := uint64(0)
			if l.LastSequence > sub.Position {
				lag = l.LastSequence - sub.Position
			}
			ls.Lags = append(ls.Lags, lag)
		}
		out = append(out, ls)
	}
	return out
}
