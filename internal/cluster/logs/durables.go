package logs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
)

// This file manages the events-store durable subscriptions cluster-wide (issue 27), as a
// single node does (internal/eventlog's durable.go): they are listed, deleted, bounded by
// limits.max-durable-subscriptions and expired when offline longer than
// limits.durable-subscription-idle-timeout.
//
// The engine part is JetStream: a durable subscription is its durable consumer
// (es_<hash>), replicated, so every node lists the same set; the consumer's metadata names
// the subscription (group, channel, durable-name) and when it last went offline. What
// JetStream cannot tell is which consumers a client reads now: every node answers a core
// NATS request on LiveSubject with the durable consumers its live subscriptions read, and
// the asking node gathers the answers of the live nodes (Options.Peers). A node that is down
// reads nothing, so its answer is not missed.
//
// One durable-name is read by one live SUBSCRIBE at a time, cluster-wide: a JetStream
// consumer hands each record to one reader, so two readers would split the log, where a
// single node gives both every record. A SUBSCRIBE that would be the second one is refused
// with ERROR "durable subscription in use" (README), once the other reader did not end
// within ClaimWait (a client moving to another node is not refused while its previous
// connection detaches). The claim is made before the others
// are asked (announce, then ask): two SUBSCRIBEs racing on two nodes each see the other and
// are both refused, never both accepted.

// LiveSubject is the core NATS subject a node asks every node on for the durable consumers
// its live events-store subscriptions read. The payload is a consumer name, or empty for
// all; the answer is the JSON of a liveAnswer.
const LiveSubject = "titan.logs.durables.live"

// LiveWait bounds how long a node waits for the other nodes' live answers.
const LiveWait = time.Second

// opTimeout bounds one management operation's JetStream requests (list, delete).
const opTimeout = 10 * time.Second

// Consumer metadata keys of an events-store durable consumer.
const (
	metaGroup   = "titan.group"
	metaChannel = "titan.channel"
	metaBare    = "titan.bare"
	metaName    = "titan.durable-name"
	// metaOffline is when the subscription's last live SUBSCRIBE ended (RFC 3339, UTC).
	metaOffline = "titan.offline-since"
)

// consumerPrefix starts every events-store durable consumer's name.
const consumerPrefix = "es_"

// DurableOptions configure the management of durable subscriptions (ManageDurables).
type DurableOptions struct {
	// Max bounds the durable subscriptions cluster-wide, counted together with Others (0:
	// no limit; limits.max-durable-subscriptions). Two nodes creating the last ones at the
	// same instant may each pass it once.
	Max int
	// Others returns how many other durable subscriptions (durable topic ones) count
	// against Max; nil: none.
	Others func() int
	// Peers returns how many nodes, this one included, answer live requests: the cluster's
	// live nodes (a result below 1 counts as 1). nil: unknown (an external NATS): every
	// answer within LiveWait is taken, and no expiry runs, since a node that did not answer
	// in time cannot be told from one that is down.
	Peers func() int
	// Leader reports whether this node runs the idle expiry (the JetStream meta leader, so
	// that one node does it); nil: this node does.
	Leader func() bool
}

// liveAnswer is one node's answer on LiveSubject.
type liveAnswer struct {
	Node string         `json:"node"`
	Live map[string]int `json:"live"` // live SUBSCRIBEs by consumer name
}

// DurableInfo is one events-store durable subscription, as JetStream holds it.
type DurableInfo struct {
	// Group and Channel name the log; Bare is true for a bare destination's log.
	Group, Channel string
	Bare           bool
	// Name is the durable-name ("" for a consumer made before names were recorded).
	Name string
	// Stream and Consumer are the JetStream stream and durable consumer holding it.
	Stream, Consumer string
	// Position is the last sequence acknowledged in order (the consumer's ack floor);
	// the subscription resumes after it.
	Position uint64
	// LastActive is when it was last active: the latest of its creation, its last
	// delivery, its last acknowledgement and its last live SUBSCRIBE's end.
	LastActive time.Time
	// Live counts the SUBSCRIBEs reading it now, on every node that answered.
	Live int
}

// errInUse refuses a SUBSCRIBE (or a deletion) of a durable subscription a live SUBSCRIBE
// reads; it wraps dispatch.ErrDurableSubscriptionInUse.
type errInUse struct{ name, where string }

func (e errInUse) Error() string {
	return fmt.Sprintf("cluster: durable subscription %s is read by a live subscription %s", e.name, e.where)
}
func (errInUse) Unwrap() error { return dispatch.ErrDurableSubscriptionInUse }

// durableConsumer is the name of the durable consumer of the durable subscription name on
// the log whose subject is subject.
func durableConsumer(name, subject string) string {
	h := sha256.Sum256([]byte(name + "\x00" + subject))
	return consumerPrefix + hex.EncodeToString(h[:16])
}

// ManageDurables starts answering other nodes' live requests (LiveSubject) and sets the
// limit; called once, before the first SUBSCRIBE. Without it durable subscriptions are
// neither bounded nor checked for a second live reader. Errors: the subscription's.
func (e *Pattern) ManageDurables(nc *nats.Conn, node string, o DurableOptions) error {
	e.nc, e.node, e.dopts = nc, node, o
	sub, err := nc.Subscribe(LiveSubject, e.answerLive)
	if err != nil {
		return fmt.Errorf("cluster: durable subscriptions: %w", err)
	}
	e.liveSub = sub
	return nil
}

// answerLive answers a live request with this node's live durable consumers (the one the
// payload names, or all).
func (e *Pattern) answerLive(msg *nats.Msg) {
	if msg.Reply == "" {
		return
	}
	want := string(msg.Data)
	a := liveAnswer{Node: e.node, Live: map[string]int{}}
	e.mu.Lock()
	for c, n := range e.live {
		if n > 0 && (want == "" || c == want) {
			a.Live[c] = n
		}
	}
	e.mu.Unlock()
	data, err := json.Marshal(a)
	if err == nil {
		_ = msg.Respond(data)
	}
}

// gatherLive asks every live node (this one included) which durable consumers it reads
// (consumer: that one only; "": all). It returns the live SUBSCRIBEs by consumer and node,
// and whether every node expected (DurableOptions.Peers) answered within LiveWait.
func (e *Pattern) gatherLive(ctx context.Context, consumer string) (map[string]map[string]int, bool) {
	out := map[string]map[string]int{}
	add := func(a liveAnswer) {
		for c, n := range a.Live {
			if out[c] == nil {
				out[c] = map[string]int{}
			}
			out[c][a.Node] += n
		}
	}
	if e.nc == nil { // not managed: this node alone
		e.mu.Lock()
		a := liveAnswer{Node: e.node, Live: map[string]int{}}
		for c, n := range e.live {
			if consumer == "" || c == consumer {
				a.Live[c] = n
			}
		}
		e.mu.Unlock()
		add(a)
		return out, true
	}
	want := 0 // unknown (an external NATS): every answer within LiveWait, never complete
	if e.dopts.Peers != nil {
		want = max(e.dopts.Peers(), 1)
	}
	ctx, cancel := context.WithTimeout(ctx, LiveWait)
	defer cancel()
	inbox := nats.NewInbox()
	sub, err := e.nc.SubscribeSync(inbox)
	if err != nil {
		return out, false
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := e.nc.PublishRequest(LiveSubject, inbox, []byte(consumer)); err != nil {
		return out, false
	}
	seen := map[string]bool{}
	for want == 0 || len(seen) < want {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return out, false
		}
		var a liveAnswer
		if json.Unmarshal(m.Data, &a) != nil || seen[a.Node] {
			continue
		}
		seen[a.Node] = true
		add(a)
	}
	return out, true
}

// ClaimWait bounds how long a SUBSCRIBE waits for another reader of its durable-name to
// end before it is refused: a client that disconnects from one node and subscribes again
// at once (on any node) is not refused while its previous connection is still detaching.
const ClaimWait = 2 * time.Second

// claimRetry is the pause between two looks at a durable-name another reader holds.
const claimRetry = 50 * time.Millisecond

// claim records a live SUBSCRIBE of consumer (the durable subscription name) on this node
// and returns once no other SUBSCRIBE, on any node, reads it; release undoes it. A reader
// that ends within ClaimWait is waited for. Errors: errInUse (nothing is held then), ctx's.
func (e *Pattern) claim(ctx context.Context, consumer, name string) error {
	deadline := time.Now().Add(ClaimWait)
	wait := func() bool { // false when the deadline or ctx ended
		if time.Now().Add(claimRetry).After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(claimRetry):
			return true
		}
	}
	for {
		e.mu.Lock()
		if e.live[consumer] == 0 {
			e.live[consumer]++ // announced before asking: a racing node sees it
			e.mu.Unlock()
			break
		}
		e.mu.Unlock()
		if !wait() {
			return errInUse{name: name, where: "on node " + e.node}
		}
	}
	for {
		live, _ := e.gatherLive(ctx, consumer)
		var others []string
		for node, n := range live[consumer] {
			if node != e.node && n > 0 {
				others = append(others, node)
			}
		}
		if len(others) == 0 {
			return nil
		}
		if !wait() {
			e.release(consumer)
			slices.Sort(others)
			return errInUse{name: name, where: "on node " + strings.Join(others, ", ")}
		}
	}
}

// release ends a live SUBSCRIBE's claim on consumer.
func (e *Pattern) release(consumer string) {
	e.mu.Lock()
	if e.live[consumer] <= 1 {
		delete(e.live, consumer)
	} else {
		e.live[consumer]--
	}
	e.mu.Unlock()
}

// durableConfig is the consumer configuration of durable subscription name on log id
// (subject subject), reading from policy.
func durableConfig(id dest.Identity, name, subject string, policy jetstream.DeliverPolicy, startSeq uint64, startTime *time.Time) jetstream.ConsumerConfig {
	md := map[string]string{metaGroup: id.Group, metaChannel: id.Channel, metaName: name}
	if id.Bare {
		md[metaBare] = "true"
	}
	return jetstream.ConsumerConfig{
		Durable: durableConsumer(name, subject), FilterSubject: subject,
		DeliverPolicy: policy, OptStartSeq: startSeq, OptStartTime: startTime,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: cluster.AckWait, MaxDeliver: -1,
		Metadata:    md,
		Description: "Titan events-store durable subscription " + name + " on " + id.Destination(),
	}
}

// bindDurable returns the durable consumer cfg names, creating it when it does not exist
// (refused with dispatch.ErrDurableSubscriptionLimit at the limit: nothing is made). A
// consumer made by an earlier version gets its metadata.
func (e *Pattern) bindDurable(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	_, err := e.js.Consumer(ctx, stream, cfg.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) && e.dopts.Max > 0 {
		n, err := e.DurableCount(ctx)
		if err != nil {
			return nil, err
		}
		if e.dopts.Others != nil {
			n += e.dopts.Others()
		}
		if n >= e.dopts.Max {
			e.refused.Add(1)
			return nil, dispatch.ErrDurableSubscriptionLimit
		}
	}
	cons, err := cluster.GetOrCreateConsumer(ctx, e.js, stream, cfg)
	if err != nil {
		return nil, err
	}
	if c := cons.CachedInfo().Config; c.Metadata[metaName] == "" || c.Metadata[metaOffline] != "" {
		md := map[string]string{}
		for k, v := range cfg.Metadata {
			md[k] = v
		}
		c.Metadata = md // live now: no longer offline
		if u, err := e.js.UpdateConsumer(ctx, stream, c); err == nil {
			cons = u
		}
	}
	return cons, nil
}

// markOffline records in consumer's metadata that its last live SUBSCRIBE ended now (the
// idle expiry counts from then). Best effort, bounded by opTimeout.
func (e *Pattern) markOffline(stream, consumer string) {
	ctx, cancel := context.WithTimeout(e.life, opTimeout)
	defer cancel()
	cons, err := e.js.Consumer(ctx, stream, consumer)
	if err != nil {
		return
	}
	c := cons.CachedInfo().Config
	md := map[string]string{}
	for k, v := range c.Metadata {
		md[k] = v
	}
	md[metaOffline] = time.Now().UTC().Format(time.RFC3339Nano)
	c.Metadata = md
	_, _ = e.js.UpdateConsumer(ctx, stream, c)
}

// isLogStream reports whether name is an events-store stream (TITAN_<g>_ES, or a retention
// class's TITAN_<g>_ES_<8 hex>; each also as a partition, _P<k> appended:
// cluster.PlaceLog).
func isLogStream(name string) bool {
	name, _, _ = cluster.SplitPartition(name)
	if !strings.HasPrefix(name, "TITAN_") {
		return false
	}
	if strings.HasSuffix(name, "_ES") {
		return true
	}
	i := strings.LastIndex(name, "_ES_")
	return i > 0 && len(name)-i-4 == 8
}

// consumers calls fn for every events-store durable consumer. Errors: the JetStream API's.
func (e *Pattern) consumers(ctx context.Context, fn func(stream string, ci *jetstream.ConsumerInfo)) error {
	names := e.js.StreamNames(ctx)
	var streams []string
	for n := range names.Name() {
		if isLogStream(n) {
			streams = append(streams, n)
		}
	}
	if err := names.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return err
	}
	for _, sn := range streams {
		s, err := e.js.Stream(ctx, sn)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		l := s.ListConsumers(ctx)
		for ci := range l.Info() {
			if strings.HasPrefix(ci.Name, consumerPrefix) {
				fn(sn, ci)
			}
		}
		if err := l.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
			return err
		}
	}
	return nil
}

// DurableCount returns how many events-store durable subscriptions the cluster holds.
// Errors: the JetStream API's.
func (e *Pattern) DurableCount(ctx context.Context) (int, error) {
	n := 0
	err := e.consumers(ctx, func(string, *jetstream.ConsumerInfo) { n++ })
	return n, err
}

// DurableRefusals counts the SUBSCRIBEs this node refused with
// dispatch.ErrDurableSubscriptionLimit.
func (e *Pattern) DurableRefusals() uint64 { return e.refused.Load() }

// Durables lists the cluster's events-store durable subscriptions, live and offline,
// sorted by group, channel, name, with their live SUBSCRIBEs on every node that answered
// (complete reports whether every live node did). Errors: the JetStream API's.
func (e *Pattern) Durables(ctx context.Context) (list []DurableInfo, complete bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err = e.consumers(ctx, func(stream string, ci *jetstream.ConsumerInfo) {
		list = append(list, durableInfo(stream, ci))
	})
	if err != nil {
		return nil, false, err
	}
	live, complete := e.gatherLive(ctx, "")
	for i := range list {
		for _, n := range live[list[i].Consumer] {
			list[i].Live += n
		}
	}
	slices.SortFunc(list, func(a, b DurableInfo) int {
		return cmpStrings(a.Group, b.Group, a.Channel, b.Channel, a.Name, b.Name)
	})
	return list, complete, nil
}

func cmpStrings(pairs ...string) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if c := strings.Compare(pairs[i], pairs[i+1]); c != 0 {
			return c
		}
	}
	return 0
}

// durableInfo reads one durable consumer's subscription.
func durableInfo(stream string, ci *jetstream.ConsumerInfo) DurableInfo {
	md := ci.Config.Metadata
	d := DurableInfo{Group: md[metaGroup], Channel: md[metaChannel], Bare: md[metaBare] == "true", Name: md[metaName],
		Stream: stream, Consumer: ci.Name, Position: ci.AckFloor.Stream, LastActive: ci.Created}
	if d.Group == "" { // made before the metadata: the group from the stream
		class, _, _ := cluster.SplitPartition(stream)
		d.Group = strings.TrimSuffix(strings.TrimPrefix(class, "TITAN_"), "_ES")
	}
	for _, t := range []*time.Time{ci.Delivered.Last, ci.AckFloor.Last} {
		if t != nil && t.After(d.LastActive) {
			d.LastActive = *t
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, md[metaOffline]); err == nil && t.After(d.LastActive) {
		d.LastActive = t
	}
	return d
}

// DeleteDurable deletes the durable subscription name of log id (its consumer and
// position): a later SUBSCRIBE with that name starts afresh. Errors:
// dispatch.ErrNoDurableSubscription, dispatch.ErrDurableSubscriptionInUse while a live
// SUBSCRIBE on any node reads it, the JetStream API's.
func (e *Pattern) DeleteDurable(ctx context.Context, id dest.Identity, name string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	p := e.Place(id)
	c := durableConsumer(name, p.Subject)
	if _, err := e.js.Consumer(ctx, p.Stream, c); err != nil {
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			return dispatch.ErrNoDurableSubscription
		}
		return err
	}
	live, _ := e.gatherLive(ctx, c)
	for node, n := range live[c] {
		if n > 0 {
			return errInUse{name: name, where: "on node " + node}
		}
	}
	err := e.js.DeleteConsumer(ctx, p.Stream, c)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return dispatch.ErrNoDurableSubscription
	}
	return err
}

// ExpireDurables deletes the durable subscriptions no live SUBSCRIBE reads and last active
// before now-idle, and returns them. It does nothing on a node that is not the expiring
// one (DurableOptions.Leader), and expires nothing unless every live node answered
// (a subscription read on a node that did not answer must not go). Errors: the JetStream
// API's.
func (e *Pattern) ExpireDurables(ctx context.Context, idle time.Duration, now time.Time) ([]DurableInfo, error) {
	if idle <= 0 || (e.dopts.Leader != nil && !e.dopts.Leader()) {
		return nil, nil
	}
	list, complete, err := e.Durables(ctx)
	if err != nil || !complete {
		return nil, err
	}
	cutoff := now.Add(-idle)
	var gone []DurableInfo
	for _, d := range list {
		if d.Live > 0 || !d.LastActive.Before(cutoff) {
			continue
		}
		// Asked again just before: a SUBSCRIBE may have claimed it since the listing.
		if live, ok := e.gatherLive(ctx, d.Consumer); !ok || len(live[d.Consumer]) > 0 {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, opTimeout)
		err := e.js.DeleteConsumer(dctx, d.Stream, d.Consumer)
		cancel()
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return gone, err
		}
		if err == nil {
			gone = append(gone, d)
		}
	}
	return gone, nil
}
