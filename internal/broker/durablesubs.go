package broker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/eventlog"
	"github.com/titan-broker/titan/internal/topicsub"
)

// This file wires the events-store durable subscriptions: their limit
// (limits.max-durable-subscriptions), idle expiry (limits.durable-subscription-idle-timeout),
// the operator views and deletion (admin.DurableOperator) and their metrics.

// maxDurableSubscriptions is the limit handed to the events-store pattern (0: unlimited).
func (b *Broker) maxDurableSubscriptions() int {
	return max(b.cfg.Limits.MaxDurableSubscriptions, 0)
}

// startDurableExpiry starts the loop deleting offline durable subscriptions idle for
// limits.durable-subscription-idle-timeout, when one is set.
func (b *Broker) startDurableExpiry() {
	idle := b.cfg.Limits.DurableSubscriptionIdleTimeout
	if idle <= 0 || b.p == nil || b.p.log == nil {
		return
	}
	if b.p.cluster != nil {
		b.goroutine("durable-expiry", func() { b.clusterDurableExpiryLoop(config.Ms(idle)) })
		return
	}
	b.goroutine("durable-expiry", func() { b.durableExpiryLoop(config.Ms(idle)) })
}

// clusterDurableExpiryLoop is durableExpiryLoop in cluster mode: the JetStream meta leader
// deletes the events-store durable consumers offline longer than idle (cluster/logs).
func (b *Broker) clusterDurableExpiryLoop(idle time.Duration) {
	t := time.NewTicker(min(max(idle/4, 100*time.Millisecond), time.Minute))
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		gone, err := b.p.cluster.store.ExpireDurables(context.Background(), idle, time.Now())
		if err != nil {
			b.log.Debug("expiring idle durable subscriptions", "err", err)
		}
		for _, d := range gone {
			b.log.Info("durable subscription expired: offline longer than the idle timeout", "group", d.Group,
				"destination", logDestination(d.Group, d.Channel), "name", d.Name, "idle_timeout", idle)
		}
	}
}

// durableExpiryLoop runs ExpireDurables every idle/4 (between 10 ms and 1 minute) until
// shutdown; each expired subscription is logged.
func (b *Broker) durableExpiryLoop(idle time.Duration) {
	t := time.NewTicker(min(max(idle/4, 10*time.Millisecond), time.Minute))
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		keys, err := b.p.log.ExpireDurables(idle, time.Now())
		if err != nil {
			b.log.Debug("expiring idle durable subscriptions", "err", err)
			continue
		}
		for _, k := range keys {
			b.log.Info("durable subscription expired: offline longer than the idle timeout", "key", k, "idle_timeout", idle)
		}
	}
}

// logDestination is the canonical destination of the events-store log (group, channel).
func logDestination(group, channel string) string {
	return dest.Identity{Group: group, Channel: channel, Pattern: dest.PatternEventsStore}.Destination()
}

// DurableSubscriptions implements admin.DurableOperator.
func (s adminSource) DurableSubscriptions() ([]admin.DurableSubscription, error) {
	if c := s.b.p.cluster; c != nil {
		return s.clusterDurables()
	}
	all, err := s.b.p.log.Durables()
	if err != nil {
		return nil, err
	}
	out := make([]admin.DurableSubscription, 0, len(all))
	for _, d := range all {
		out = append(out, durableView(d))
	}
	return out, nil
}

func durableView(d eventlog.DurableInfo) admin.DurableSubscription {
	v := admin.DurableSubscription{
		Group: d.Group, Destination: logDestination(d.Group, d.Channel), Name: d.Name, Position: d.Position, Live: d.Live,
	}
	if !d.SavedAt.IsZero() {
		at := d.SavedAt.UTC()
		v.LastActive = &at
	}
	return v
}

// DeleteDurableSubscription implements admin.DurableOperator.
func (s adminSource) DeleteDurableSubscription(id dest.Identity, name string) error {
	if c := s.b.p.cluster; c != nil {
		return c.store.DeleteDurable(context.Background(), id, name)
	}
	return s.b.p.log.DeleteDurable(id, name)
}

// clusterDurables lists cluster mode's events-store durable subscriptions (every node's).
func (s adminSource) clusterDurables() ([]admin.DurableSubscription, error) {
	all, _, err := s.b.p.cluster.store.Durables(context.Background())
	if err != nil {
		return nil, err
	}
	out := make([]admin.DurableSubscription, 0, len(all))
	for _, d := range all {
		at := d.LastActive.UTC()
		out = append(out, admin.DurableSubscription{Group: d.Group, Destination: logDestination(d.Group, d.Channel),
			Name: d.Name, Position: d.Position, Live: d.Live, LastActive: &at})
	}
	return out, nil
}

// offlineDurables returns the offline durable subscriptions by log (group and canonical
// destination), as log subscriptions, for GET /titan/monitor/logs. A store error yields none.
func (s adminSource) offlineDurables() map[[2]string][]admin.LogSubscription {
	if s.b.p.cluster != nil {
		all, err := s.clusterDurables()
		if err != nil {
			return nil
		}
		out := map[[2]string][]admin.LogSubscription{}
		for _, d := range all {
			if d.Live == 0 {
				k := [2]string{d.Group, d.Destination}
				out[k] = append(out[k], admin.LogSubscription{Offline: true, DurableName: d.Name, Delivered: d.Position, Position: d.Position})
			}
		}
		return out
	}
	all, err := s.b.p.log.Durables()
	if err != nil {
		return nil
	}
	out := map[[2]string][]admin.LogSubscription{}
	for _, d := range all {
		if d.Live > 0 {
			continue
		}
		k := [2]string{d.Group, logDestination(d.Group, d.Channel)}
		out[k] = append(out[k], admin.LogSubscription{Offline: true, DurableName: d.Name, Delivered: d.Position, Position: d.Position})
	}
	return out
}

// durableCollector serves titan_durable_subscriptions (held by the store, live and
// offline), titan_durable_subscriptions_max (0: unlimited) and
// titan_durable_subscriptions_refused_total.
type durableCollector struct {
	b                     *Broker
	count, limit, refused *prometheus.Desc
}

func newDurableCollector(b *Broker) *durableCollector {
	return &durableCollector{
		b:       b,
		count:   prometheus.NewDesc("titan_durable_subscriptions", "Durable subscriptions the store holds (events-store durable-names and durable topic subscriptions), live and offline.", nil, nil),
		limit:   prometheus.NewDesc("titan_durable_subscriptions_max", "The durable subscription limit (max-durable-subscriptions; 0: unlimited).", nil, nil),
		refused: prometheus.NewDesc("titan_durable_subscriptions_refused_total", "SUBSCRIBEs refused because they would create a durable subscription over the limit.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *durableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.limit
	ch <- c.refused
}

// Collect implements prometheus.Collector. A store error omits the count for that scrape.
func (c *durableCollector) Collect(ch chan<- prometheus.Metric) {
	if c.b.p == nil || c.b.p.log == nil {
		return
	}
	if n, err := c.b.p.log.DurableCount(); err == nil {
		if c.b.p.topics != nil {
			n += c.b.p.topics.Count() // durable topic subscriptions share the limit
		}
		ok := true
		if cl := c.b.p.cluster; cl != nil {
			if cl.durables != nil {
				n += cl.durables.Count() // cluster mode's, cluster-wide
			}
			ctx, cancel := context.WithTimeout(context.Background(), clusterDepthTimeout)
			k, err := cl.store.DurableCount(ctx) // events-store ones, cluster-wide
			cancel()
			n, ok = n+k, err == nil
		}
		if ok {
			ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n))
		}
	}
	refused := c.b.p.log.DurableRefusals()
	if cl := c.b.p.cluster; cl != nil {
		refused += cl.store.DurableRefusals()
	}
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(c.b.maxDurableSubscriptions()))
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(refused))
}

var _ admin.DurableOperator = adminSource{}

// TopicDurableSubscriptions implements admin.TopicDurableOperator: every durable topic
// subscription (the peers' dialects) with its topic, client-id, name, queue, selector and
// its queue's consumers and messages. None in cluster mode.
func (s adminSource) TopicDurableSubscriptions() []admin.DurableSubscription {
	if s.b.p != nil && s.b.p.cluster != nil && s.b.p.cluster.durables != nil {
		return s.clusterTopicDurables()
	}
	if s.b.p == nil || s.b.p.topics == nil {
		return nil
	}
	subs := s.b.p.topics.List()
	out := make([]admin.DurableSubscription, 0, len(subs))
	for _, t := range subs {
		v := admin.DurableSubscription{
			Kind: admin.KindTopic, Group: t.Group, Destination: dest.IdentityOf(t.Group, t.Filter).Destination(),
			Name: t.Name, ClientID: t.Owner, Queue: t.Queue.Destination(), Selector: t.Selector,
		}
		if q, ok := s.b.p.dispatcher.Lookup(t.Queue); ok {
			st := q.Stats()
			v.Live, v.Messages = st.Consumers, st.Messages
		}
		out = append(out, v)
	}
	return out
}

// DeleteTopicDurableSubscription implements admin.TopicDurableOperator: the subscription
// (group, clientID, name) is deleted with its queue when its topic is filter.
func (s adminSource) DeleteTopicDurableSubscription(group, clientID, name string, filter dest.Destination) error {
	var list []topicsub.Sub
	var del func(topicsub.Key) error
	switch {
	case s.b.p != nil && s.b.p.cluster != nil && s.b.p.cluster.durables != nil:
		reg := s.b.p.cluster.durables
		list, del = reg.List(), func(k topicsub.Key) error { return reg.DeleteDurable(k.Group, k.Owner, k.Name) }
	case s.b.p != nil && s.b.p.topics != nil:
		list, del = s.b.p.topics.List(), s.b.p.topics.Delete
	default:
		return dispatch.ErrNoDurableSubscription
	}
	k := topicsub.Key{Group: group, Owner: clientID, Name: name}
	found := false
	for _, t := range list {
		if t.Key == k {
			found = t.Filter.Channel == filter.Channel && t.Filter.Bare == filter.Bare
			break
		}
	}
	if !found {
		return dispatch.ErrNoDurableSubscription
	}
	return del(k)
}

// clusterTopicDurables lists cluster mode's durable topic subscriptions with the messages
// their queues hold (one JetStream request each, bounded; left out when it fails). Live
// consumers are not counted: they are spread over the nodes.
func (s adminSource) clusterTopicDurables() []admin.DurableSubscription {
	subs := s.b.p.cluster.durables.List()
	out := make([]admin.DurableSubscription, 0, len(subs))
	for _, t := range subs {
		v := admin.DurableSubscription{
			Kind: admin.KindTopic, Group: t.Group, Destination: dest.IdentityOf(t.Group, t.Filter).Destination(),
			Name: t.Name, ClientID: t.Owner, Queue: t.Queue.Destination(), Selector: t.Selector,
		}
		ctx, cancel := context.WithTimeout(context.Background(), clusterDepthTimeout)
		if n, err := s.b.p.cluster.queues.QueueDepth(ctx, t.Queue); err == nil {
			v.Messages = n
		}
		cancel()
		out = append(out, v)
	}
	return out
}

// clusterDepthTimeout bounds reading one durable subscription queue's depth in cluster mode.
const clusterDepthTimeout = 2 * time.Second

var _ admin.TopicDurableOperator = adminSource{}
