package admin

import (
	"encoding/base64"
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/frame"
)

// Operator is the port of the operator views and actions beside Titan's monitor paths
// (connections, subscriptions, events-store logs, purge, browse, re-drive), declared here by
// its consumer in its own terms; internal/broker adapts the broker to it. Every method must
// be safe for concurrent use.
type Operator interface {
	// Connections returns the open connections with their subscriptions, in any order.
	Connections() []Connection
	// CloseConnection closes the connection whose session id is id (as an operator close:
	// its unacknowledged messages go back to their queues) and reports whether it existed.
	CloseConnection(id string) bool
	// EventLogs returns the events-store logs held by the store and their live
	// subscriptions. Errors: the store's.
	EventLogs() ([]EventLog, error)
	// PurgeQueue removes the ready and scheduled messages of the queues-pattern queue id
	// and returns how many. Errors: dispatch.ErrNoQueue.
	PurgeQueue(id dest.Identity) (int, error)
	// BrowseQueue returns up to max messages of queue id without consuming them, ready ones
	// head first, then scheduled ones. Errors: dispatch.ErrNoQueue.
	BrowseQueue(id dest.Identity, max int) ([]StoredMessage, error)
	// MoveQueueHead takes the head message of queue id, calls fn and removes it when fn
	// returns nil (otherwise it goes back to the head and fn's error is returned); moved is
	// false when the queue had nothing ready. Errors: dispatch.ErrNoQueue, fn's.
	MoveQueueHead(id dest.Identity, fn func(StoredMessage) error) (moved bool, err error)
}

// StoredMessage is a message held by a queue, as the Operator port hands it over.
type StoredMessage struct {
	ID          string
	Group       string
	Destination string
	Headers     []frame.Header
	Body        []byte
	TimestampMs int64
	Persistent  bool
	// DeliveryCount is how many times it was delivered so far.
	DeliveryCount int
	// DeliverAt is when a scheduled message becomes deliverable (zero when ready).
	DeliverAt time.Time
}

// Connection is one client connection with its subscriptions (GET
// /titan/monitor/connections).
type Connection struct {
	// Node is the broker node holding the connection.
	Node string `json:"node"`
	// ID is the session id sent in CONNECTED.
	ID string `json:"id"`
	// RemoteAddr is the client's host:port.
	RemoteAddr string `json:"remoteAddr"`
	// User is the authenticated login ("" when the server needs no authentication).
	User string `json:"user"`
	// Version is the negotiated STOMP version.
	Version string `json:"version"`
	// ConnectedAt is when the connection was accepted.
	ConnectedAt time.Time `json:"connectedAt"`
	// HeartBeatSendMs is the interval of Titan's heart-beats to the client, in ms (0: none).
	HeartBeatSendMs int64 `json:"heartBeatSendMs"`
	// HeartBeatReceiveMs is how long Titan waits for data from the client before closing
	// it, in ms (heart-beat interval × grace, or the connection TTL; 0: no limit).
	HeartBeatReceiveMs int64 `json:"heartBeatReceiveMs"`
	// QueuedBytes is output queued and not yet written to the socket.
	QueuedBytes int64 `json:"queuedBytes"`
	// Subscriptions are the connection's subscriptions, by id. Never nil.
	Subscriptions []Subscription `json:"subscriptions"`
}

// Subscription is one subscription of a connection.
type Subscription struct {
	// Node is the broker node holding the subscription.
	Node string `json:"node"`
	// Connection is the session id of the subscriber.
	Connection string `json:"connection"`
	// ID is the subscription id header.
	ID string `json:"id"`
	// Group is the destination group.
	Group string `json:"group"`
	// Destination is the canonical destination or wildcard filter.
	Destination string `json:"destination"`
	// Pattern is the destination's pattern ("events", "queues", "events-store", ...).
	Pattern string `json:"pattern"`
	// Ack is the ack mode.
	Ack string `json:"ack"`
	// Prefetch bounds unacknowledged deliveries in client ack modes.
	Prefetch int `json:"prefetch"`
	// Pending counts delivered, unacknowledged messages.
	Pending int `json:"pending"`
	// DurableName is the events-store durable-name ("" when none).
	DurableName string `json:"durableName,omitempty"`
	// Selector is the subscription's JMS selector header ("" when none).
	Selector string `json:"selector,omitempty"`
	// Delivered counts MESSAGE frames written to it.
	Delivered uint64 `json:"delivered"`
	// Dropped counts events not delivered because it or its connection was full.
	Dropped uint64 `json:"dropped"`
}

// EventLog is one events-store log (GET /titan/monitor/logs).
type EventLog struct {
	// Node is the broker node holding the log.
	Node string `json:"node"`
	// Group is the log's destination group.
	Group string `json:"group"`
	// Destination is the canonical destination ("/events-store/orders").
	Destination string `json:"destination"`
	// Messages counts the records the log holds; Bytes their size.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// FirstSequence is the lowest sequence held; LastSequence the highest ever given.
	FirstSequence uint64 `json:"firstSequence"`
	LastSequence  uint64 `json:"lastSequence"`
	// RetentionMaxMessages, RetentionMaxBytes and RetentionMaxAgeMs are the log's retention
	// (0: unbounded).
	RetentionMaxMessages int64 `json:"retentionMaxMessages"`
	RetentionMaxBytes    int64 `json:"retentionMaxBytes"`
	RetentionMaxAgeMs    int64 `json:"retentionMaxAgeMs"`
	// Subscriptions are the live subscriptions reading it. Never nil.
	Subscriptions []LogSubscription `json:"subscriptions"`
}

// LogSubscription is a subscription reading an events-store log: a live one, or an offline
// durable subscription (Offline set, Connection and Subscription empty).
type LogSubscription struct {
	// Offline marks a durable subscription no SUBSCRIBE reads now; it resumes at Position.
	Offline bool `json:"offline,omitempty"`
	// Connection is the subscriber's session id; Subscription its subscription id.
	Connection   string `json:"connection"`
	Subscription string `json:"subscription"`
	// DurableName is the durable-name header ("" for a non-durable subscription).
	DurableName string `json:"durableName,omitempty"`
	// Delivered is the last sequence delivered; Position the last acknowledged and saved
	// (durable) or delivered (non-durable).
	Delivered uint64 `json:"delivered"`
	Position  uint64 `json:"position"`
	// Lag is LastSequence - Position: records the subscription has yet to consume.
	Lag uint64 `json:"lag"`
	// Pending counts delivered, unacknowledged records.
	Pending int `json:"pending"`
}

// ConnectionList is the answer of GET /titan/monitor/connections.
type ConnectionList struct {
	Node string `json:"node"`
	// Connections are sorted by connection time, oldest first. Never nil.
	Connections []Connection `json:"connections"`
}

// SubscriptionList is the answer of GET /titan/monitor/subscriptions.
type SubscriptionList struct {
	Node string `json:"node"`
	// Subscriptions are sorted by group, destination, connection and id. Never nil.
	Subscriptions []Subscription `json:"subscriptions"`
}

// EventLogList is the answer of GET /titan/monitor/logs.
type EventLogList struct {
	Node string `json:"node"`
	// Logs are sorted by group, then destination. Never nil.
	Logs []EventLog `json:"logs"`
}

// node is the node name reported in every answer.
func (a *Admin) node() string { return a.opts.Node }

// Connections lists the open connections with their subscriptions. It does not fail.
func (a *Admin) Connections() (*ConnectionList, error) {
	cs := a.src.Connections()
	sort.Slice(cs, func(i, j int) bool {
		if !cs[i].ConnectedAt.Equal(cs[j].ConnectedAt) {
			return cs[i].ConnectedAt.Before(cs[j].ConnectedAt)
		}
		return cs[i].ID < cs[j].ID
	})
	for i := range cs {
		cs[i].Node = a.node()
		if cs[i].Subscriptions == nil {
			cs[i].Subscriptions = []Subscription{}
		}
		for j := range cs[i].Subscriptions {
			cs[i].Subscriptions[j].Node, cs[i].Subscriptions[j].Connection = a.node(), cs[i].ID
		}
	}
	if cs == nil {
		cs = []Connection{}
	}
	return &ConnectionList{Node: a.node(), Connections: cs}, nil
}

// CloseConnectionResult is the answer of DELETE /titan/monitor/connections.
type CloseConnectionResult struct {
	Node string `json:"node"`
	// ID is the closed connection's session id.
	ID string `json:"id"`
	// Closed is true (a missing connection is an error).
	Closed bool `json:"closed"`
}

// CloseConnection closes the connection with session id id; its unacknowledged messages go
// back to their queues. Errors (*Error): CodeInvalidParameter for an empty id,
// CodeConnectionNotFound when no such connection is open.
func (a *Admin) CloseConnection(id string) (*CloseConnectionResult, error) {
	if id == "" {
		return nil, invalidParam("id is required (a connection's session id, as listed by GET " + PathConnections + ")")
	}
	if !a.src.CloseConnection(id) {
		return nil, newError(CodeConnectionNotFound, "no connection "+strconv.Quote(id), ErrNotFound)
	}
	return &CloseConnectionResult{Node: a.node(), ID: id, Closed: true}, nil
}

// Subscriptions lists every subscription of every connection, filtered by ref (an empty
// Destination or Group does not filter; a destination filter compares canonical forms).
// Errors (*Error): CodeInvalidGroup, CodeInvalidDestination.
func (a *Admin) Subscriptions(ref QueueRef) (*SubscriptionList, error) {
	if ref.Group != "" && !dest.ValidGroup(ref.Group) {
		return nil, newError(CodeInvalidGroup, "invalid group: names match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidGroup)
	}
	want := ""
	if ref.Destination != "" {
		d, err := dest.ParseFilter(ref.Destination, a.defaultPattern())
		if err != nil {
			return nil, errInvalidDestination(err)
		}
		want = d.String()
	}
	cl, _ := a.Connections()
	out := &SubscriptionList{Node: a.node(), Subscriptions: []Subscription{}}
	for _, c := range cl.Connections {
		for _, s := range c.Subscriptions {
			if (ref.Group == "" || s.Group == ref.Group) && (want == "" || s.Destination == want) {
				out.Subscriptions = append(out.Subscriptions, s)
			}
		}
	}
	sort.Slice(out.Subscriptions, func(i, j int) bool {
		x, y := out.Subscriptions[i], out.Subscriptions[j]
		if x.Group != y.Group {
			return x.Group < y.Group
		}
		if x.Destination != y.Destination {
			return x.Destination < y.Destination
		}
		if x.Connection != y.Connection {
			return x.Connection < y.Connection
		}
		return x.ID < y.ID
	})
	return out, nil
}

// Logs lists the events-store logs and their live subscriptions with position and lag,
// filtered by ref like Subscriptions. Errors (*Error): CodeInvalidGroup,
// CodeInvalidDestination, CodeInternal for a store failure.
func (a *Admin) Logs(ref QueueRef) (*EventLogList, error) {
	if ref.Group != "" && !dest.ValidGroup(ref.Group) {
		return nil, newError(CodeInvalidGroup, "invalid group: names match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidGroup)
	}
	want := ""
	if ref.Destination != "" {
		d, err := dest.Parse(ref.Destination, dest.PatternEventsStore)
		if err != nil {
			return nil, errInvalidDestination(err)
		}
		want = d.String()
	}
	logs, err := a.src.EventLogs()
	if err != nil {
		return nil, asError(err)
	}
	out := &EventLogList{Node: a.node(), Logs: []EventLog{}}
	for _, l := range logs {
		if (ref.Group != "" && l.Group != ref.Group) || (want != "" && l.Destination != want) {
			continue
		}
		l.Node = a.node()
		if l.Subscriptions == nil {
			l.Subscriptions = []LogSubscription{}
		}
		for i := range l.Subscriptions {
			s := &l.Subscriptions[i]
			if l.LastSequence > s.Position {
				s.Lag = l.LastSequence - s.Position
			}
		}
		out.Logs = append(out.Logs, l)
	}
	sort.Slice(out.Logs, func(i, j int) bool {
		x, y := out.Logs[i], out.Logs[j]
		if x.Group != y.Group {
			return x.Group < y.Group
		}
		return x.Destination < y.Destination
	})
	return out, nil
}

// queueOf resolves ref to a queues-pattern identity (purge, browse and re-drive act on
// stored queues). Errors (*Error): those of identity; CodeUnsupportedPattern for an events
// destination.
func (a *Admin) queueOf(ref QueueRef, what string) (dest.Identity, error) {
	id, err := a.identity(ref)
	if err != nil {
		return id, err
	}
	if id.Pattern != dest.PatternQueues {
		return id, newError(CodeUnsupportedPattern, what+" applies to queues destinations (/queue/...), not "+id.Pattern.String(), ErrUnsupportedPattern)
	}
	return id, nil
}

// PurgeResult is the answer of POST /titan/monitor/queues/purge.
type PurgeResult struct {
	Node        string `json:"node"`
	Group       string `json:"group"`
	Destination string `json:"destination"`
	// Purged counts the ready and scheduled messages removed (messages in delivery stay).
	Purged int `json:"purged"`
}

// Purge removes every ready and scheduled message of a queues-pattern queue, keeping the
// queue, its consumers, limits and state (Artemis removeAllMessages, RabbitMQ purge).
// Errors (*Error): those of queueOf; CodeQueueNotFound.
func (a *Admin) Purge(ref QueueRef) (*PurgeResult, error) {
	id, err := a.queueOf(ref, "purge")
	if err != nil {
		return nil, err
	}
	if a.inCluster(id) {
		return a.clusterPurge(id)
	}
	n, err := a.src.PurgeQueue(id)
	if err != nil {
		return nil, a.queueErr(id, err)
	}
	return &PurgeResult{Node: a.node(), Group: id.Group, Destination: id.Destination(), Purged: n}, nil
}

func (a *Admin) queueErr(id dest.Identity, err error) error {
	if errors.Is(err, dispatch.ErrNoQueue) {
		return notFound(id, err)
	}
	return asError(err)
}

// BrowsedMessage is one message seen by Browse, not consumed.
type BrowsedMessage struct {
	// MessageID is the message-id subscribers see.
	MessageID string `json:"messageId"`
	// Destination is the message's canonical destination.
	Destination string `json:"destination"`
	// Headers are the message's own headers (not the per-delivery ones).
	Headers map[string]string `json:"headers"`
	// Body is the body as text when it is valid UTF-8; otherwise BodyBase64 holds it.
	Body       *string `json:"body,omitempty"`
	BodyBase64 *string `json:"bodyBase64,omitempty"`
	// BodyBytes is the body's length in bytes.
	BodyBytes int `json:"bodyBytes"`
	// Timestamp is when the broker accepted it.
	Timestamp time.Time `json:"timestamp"`
	// Persistent says whether it is stored.
	Persistent bool `json:"persistent"`
	// DeliveryCount is how many times it was delivered so far.
	DeliveryCount int `json:"deliveryCount"`
	// DeliverAt is when a scheduled message becomes deliverable (absent when ready).
	DeliverAt *time.Time `json:"deliverAt,omitempty"`
}

// BrowseResult is the answer of GET /titan/monitor/queues/messages.
type BrowseResult struct {
	Node        string `json:"node"`
	Group       string `json:"group"`
	Destination string `json:"destination"`
	// Messages are ready ones head first, then scheduled ones. Never nil.
	Messages []BrowsedMessage `json:"messages"`
}

// DefaultBrowseLimit and MaxBrowseLimit bound Browse's limit (messages).
const (
	DefaultBrowseLimit = 50
	MaxBrowseLimit     = 1000
)

// Browse returns up to limit messages of a queues-pattern queue without consuming them
// (limit <= 0: DefaultBrowseLimit; at most MaxBrowseLimit). Errors (*Error): those of
// queueOf; CodeInvalidParameter for a limit over MaxBrowseLimit; CodeQueueNotFound.
func (a *Admin) Browse(ref QueueRef, limit int) (*BrowseResult, error) {
	id, err := a.queueOf(ref, "browse")
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultBrowseLimit
	}
	if limit > MaxBrowseLimit {
		return nil, invalidParam("limit must be at most " + strconv.Itoa(MaxBrowseLimit) + " messages")
	}
	var ms []StoredMessage
	if a.inCluster(id) {
		ms, err = a.clusterBrowse(id, limit)
	} else if ms, err = a.src.BrowseQueue(id, limit); err != nil {
		err = a.queueErr(id, err)
	}
	if err != nil {
		return nil, err
	}
	out := &BrowseResult{Node: a.node(), Group: id.Group, Destination: id.Destination(), Messages: make([]BrowsedMessage, 0, len(ms))}
	for _, m := range ms {
		bm := BrowsedMessage{
			MessageID: m.ID, Destination: m.Destination, Headers: map[string]string{}, BodyBytes: len(m.Body),
			Timestamp: time.UnixMilli(m.TimestampMs).UTC(), Persistent: m.Persistent, DeliveryCount: m.DeliveryCount,
		}
		for _, h := range m.Headers {
			if _, dup := bm.Headers[h.Key]; !dup { // first wins, as in STOMP
				bm.Headers[h.Key] = h.Value
			}
		}
		if utf8.Valid(m.Body) {
			s := string(m.Body)
			bm.Body = &s
		} else {
			s := base64.StdEncoding.EncodeToString(m.Body)
			bm.BodyBase64 = &s
		}
		if !m.DeliverAt.IsZero() {
			t := m.DeliverAt.UTC()
			bm.DeliverAt = &t
		}
		out.Messages = append(out.Messages, bm)
	}
	return out, nil
}

// RedriveResult is the answer of POST /titan/monitor/queues/redrive.
type RedriveResult struct {
	Node  string `json:"node"`
	Group string `json:"group"`
	// From is the dead-letter queue the messages left.
	From string `json:"from"`
	// Moved counts messages re-published to their queue and removed from From.
	Moved int `json:"moved"`
	// To counts the moved messages by destination.
	To map[string]int `json:"to"`
}

// Dead-letter headers written by the queues pattern (pointqueue.Pattern.deadLetter); a
// re-driven message leaves them behind.
const (
	HeaderDLQOriginalDestination = "dlq-original-destination"
	headerDLQPrefix              = "dlq-"
)

// Redrive moves up to limit dead-lettered messages (limit <= 0: as many as it holds when the
// call starts, so it ends even when copies come back to it) from a
// dead-letter queue back to the queue each came from (its dlq-original-destination header,
// else the DLQ name without "DLQ."), head first, through the SEND route (stored and limited
// as any SEND, made as principal; "" as trusted code). ref names the dead-letter queue
// (/queue/DLQ.orders) or the queue whose default dead-letter queue to drain (/queue/orders).
// A message is removed from the dead-letter queue only once its copy is accepted, so a
// failure stops the move and leaves it at the head. Errors (*Error): those of queueOf;
// CodeQueueNotFound; the publish errors (CodeQueueFull, ...) of the message that stopped it,
// with the count moved before it in the message.
func (a *Admin) Redrive(ref QueueRef, limit int, principal string) (*RedriveResult, error) {
	id, err := a.queueOf(ref, "redrive")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(id.Channel, "DLQ.") {
		id.Channel = "DLQ." + id.Channel
	}
	held, moveHead := 0, a.src.MoveQueueHead
	if a.inCluster(id) { // the cluster's copy of the dead-letter queue
		if held, err = a.clusterDepth(id); err != nil {
			return nil, err
		}
		moveHead = a.clusterMoveHead
	} else {
		q, ok := a.src.Dispatcher().Lookup(id)
		if !ok {
			return nil, notFound(id, dispatch.ErrNoQueue)
		}
		held = q.Stats().Messages
	}
	if limit <= 0 || limit > held {
		limit = held // what it holds now: a message that comes back (or arrives) is not moved twice
	}
	res := &RedriveResult{Node: a.node(), Group: id.Group, From: id.Destination(), To: map[string]int{}}
	for res.Moved < limit {
		moved, err := moveHead(id, func(m StoredMessage) error {
			to := ""
			hdrs := make([]frame.Header, 0, len(m.Headers)+1)
			for _, h := range m.Headers {
				switch {
				case h.Key == HeaderDLQOriginalDestination:
					if to == "" {
						to = h.Value
					}
				case strings.HasPrefix(h.Key, headerDLQPrefix):
				default:
					hdrs = append(hdrs, h)
				}
			}
			if to == "" {
				to = dest.Destination{Pattern: dest.PatternQueues, Channel: strings.TrimPrefix(id.Channel, "DLQ.")}.String()
			}
			if m.Persistent {
				hdrs = append(hdrs, frame.Header{Key: frame.HdrPersistent, Value: "true"})
			}
			pub, err := a.src.Publish(Publication{Destination: to, Group: id.Group, Headers: hdrs, Body: m.Body, Principal: principal})
			if err != nil {
				tid, _ := a.resolve(QueueRef{Destination: to, Group: id.Group}, true)
				return a.publishError(tid, err)
			}
			res.To[pub.Destination]++
			return nil
		})
		if err != nil {
			var e *Error
			if errors.As(err, &e) && !errors.Is(err, dispatch.ErrNoQueue) {
				return nil, newError(e.Code, e.Message+" (re-drive stopped after "+plural(res.Moved, "message", "messages")+")", e.Err)
			}
			return nil, a.queueErr(id, err)
		}
		if !moved {
			break
		}
		res.Moved++
	}
	return res, nil
}
