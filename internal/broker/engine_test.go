package broker

import (
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/event"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/pointqueue"
	"github.com/titan-broker/titan/internal/rpc"
)

// engine wires the pattern packages the way the broker does, without listeners or a store,
// for tests and benchmarks of the patterns together. It routes by identity through tables,
// as the router does.
type engine struct {
	*dispatch.Dispatcher
	events   *event.Pattern
	queues   *pointqueue.Pattern
	requests *rpc.Pattern
	pubs     [dest.MaxPattern + 1]interface {
		Publish(dest.Identity, *message.Message, <-chan struct{}) (bool, error)
	}
	subs [dest.MaxPattern + 1]interface {
		Subscribe(*delivery.Subscription) error
	}
}

type engineOptions struct {
	FanoutMode bool
	Settings   func(dest.Identity) address.Settings
}

type settingsFunc func(dest.Identity) address.Settings

func (f settingsFunc) Settings(id dest.Identity) address.Settings { return f(id) }

func newEngine(o engineOptions) *engine {
	var src dispatch.SettingsSource
	if o.Settings != nil {
		src = settingsFunc(o.Settings)
	}
	e := &engine{Dispatcher: dispatch.New(dispatch.Options{Settings: src})}
	e.events = event.New(e.Dispatcher, event.Options{FanoutMode: o.FanoutMode})
	e.queues = pointqueue.New(e.Dispatcher, pointqueue.Options{})
	e.requests = rpc.New(rpc.Options{Replies: enginePublisher{e}, TempQueues: e.queues})
	e.pubs[dest.PatternEvents], e.subs[dest.PatternEvents] = e.events, e.events
	e.pubs[dest.PatternQueues], e.subs[dest.PatternQueues] = e.queues, e.queues
	e.pubs[dest.PatternTempQueue], e.subs[dest.PatternTempQueue] = e.requests.Temp(), e.queues
	e.subs[dest.PatternCommands], e.subs[dest.PatternQueries] = e.requests, e.requests
	return e
}

type enginePublisher struct{ e *engine }

func (p enginePublisher) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (bool, error) {
	return p.e.PublishUntil(id, m, cancel)
}

func (e *engine) Publish(id dest.Identity, m *message.Message) (bool, error) {
	return e.PublishUntil(id, m, nil)
}

func (e *engine) PublishUntil(id dest.Identity, m *message.Message, cancel <-chan struct{}) (bool, error) {
	return e.pubs[id.Pattern].Publish(id, m, cancel)
}

func (e *engine) Subscribe(sub *delivery.Subscription) error {
	return e.subs[sub.Dest.Pattern].Subscribe(sub)
}

func (e *engine) Create(id dest.Identity, s address.Settings) (dispatch.Queue, bool) {
	q, created, _ := e.Dispatcher.Create(id, s)
	return q, created
}

func (e *engine) Ack(c *delivery.Conn, key, sub string, nack bool) error {
	return c.Ack(key, sub, nack)
}
func (e *engine) Resume(c *delivery.Conn) { c.Resume() }
func (e *engine) Request(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration, requester *delivery.Conn) error {
	return e.requests.Request(id, m, replyTo, corr, timeout, requester)
}
func (e *engine) CountDroppedResponse(id dest.Identity, late bool) {
	e.requests.CountDroppedResponse(id, late)
}
func (e *engine) RPCStats() []rpc.Stats                   { return e.requests.Stats() }
func (e *engine) SetTempOwner(s string, c *delivery.Conn) { e.requests.Own(s, c) }
func (e *engine) DropTempQueues(s string)                 { e.requests.Release(s) }
