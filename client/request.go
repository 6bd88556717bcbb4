package client

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// replyQueue is the temp-queue name the client subscribes for Request's responses; the
// broker makes it private to the connection (/temp-queue/<session>/go-client-replies; names starting "titan-" are session ids).
const replyQueue = "/temp-queue/go-client-replies"

// Request sends body to destination in group as a request (Titan's commands and queries
// patterns: /command/..., /query/...) and waits for the response: it sets reply-to to a
// temp-queue private to this connection and a fresh correlation-id, and passes ctx's
// deadline as the timeout header (ms), so the broker answers executed:false with
// error:timeout when no response comes in time.
//
// The returned Message is the response (for queries its body is the answer). Errors: a
// *RequestError when the broker or the responder answers executed:false (no responder,
// timeout); ctx's error; ErrConnectionLost when the connection ends first (the reply
// temp-queue dies with it); the errors of Send.
func (c *Client) Request(ctx context.Context, group, destination string, body []byte, opts ...SendOption) (*Message, error) {
	if err := c.ensureReplyQueue(); err != nil {
		return nil, err
	}
	corr := c.nextID("corr-")
	ch := make(chan *Message, 1)
	c.rpcMu.Lock()
	c.pending[corr] = ch
	c.rpcMu.Unlock()
	defer func() {
		c.rpcMu.Lock()
		delete(c.pending, corr)
		c.rpcMu.Unlock()
	}()
	opts = append(opts, WithReplyTo(replyQueue), WithCorrelationID(corr))
	if dl, ok := ctx.Deadline(); ok {
		ms := max(time.Until(dl).Milliseconds(), 1)
		opts = append(opts, WithHeader(frame.HdrTimeout, strconv.FormatInt(ms, 10)))
	}
	if _, err := c.Send(ctx, group, destination, body, opts...); err != nil {
		return nil, err
	}
	select {
	case m, ok := <-ch:
		if !ok || m == nil {
			return nil, fmt.Errorf("%w: waiting for the response to %s", ErrConnectionLost, destination)
		}
		if m.Header("executed") == "false" {
			reason := m.Header("error")
			if reason == "" {
				reason = "not executed"
			}
			return m, &RequestError{Reason: reason, Response: m}
		}
		return m, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no response to %s: %w", destination, ctx.Err())
	case <-c.done:
		return nil, c.Err()
	}
}

// ensureReplyQueue subscribes the reply temp-queue once (and it is re-subscribed with the
// others after a reconnect).
func (c *Client) ensureReplyQueue() error {
	c.rpcSubMu.Lock()
	defer c.rpcSubMu.Unlock()
	if c.rpcSub != nil {
		return nil
	}
	s, err := c.Subscribe("", replyQueue, c.routeResponse)
	if err != nil {
		return err
	}
	c.rpcSub = s
	return nil
}

func (c *Client) routeResponse(m *Message) {
	corr := m.Header(frame.HdrCorrelationID)
	c.rpcMu.Lock()
	ch := c.pending[corr]
	delete(c.pending, corr)
	c.rpcMu.Unlock()
	if ch != nil {
		ch <- m
	}
}

// failRequests ends every request waiting for a response: the temp-queue of the lost
// connection is gone with it.
func (c *Client) failRequests(*conn) {
	c.rpcMu.Lock()
	defer c.rpcMu.Unlock()
	for corr, ch := range c.pending {
		close(ch)
		delete(c.pending, corr)
	}
}

// Reply answers request req (a Message received by a responder subscribed to a /command/ or
// /query/ destination): it sends body to req's reply-to with req's correlation-id and
// group, and waits for the RECEIPT. Errors: an error when req has no reply-to; the errors
// of Send.
func (c *Client) Reply(ctx context.Context, req *Message, body []byte, opts ...SendOption) error {
	to := req.Header(frame.HdrReplyTo)
	if to == "" {
		return fmt.Errorf("client: the message from %s has no reply-to header", req.Destination)
	}
	if corr, ok := req.Lookup(frame.HdrCorrelationID); ok {
		opts = append([]SendOption{WithCorrelationID(corr)}, opts...)
	}
	_, err := c.Send(ctx, req.Group, to, body, opts...)
	return err
}
