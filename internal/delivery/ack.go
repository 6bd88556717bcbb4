package delivery

import "github.com/titan-broker/titan/internal/frame"

// Ack acknowledges (or, with nack, rejects) the delivery named by key (the ack header on 1.2,
// the message-id on 1.0/1.1, with subID from the subscription header on 1.1). In client ack
// mode an ACK is cumulative (STOMP 1.2, "SUBSCRIBE ack Header"). Each resolved delivery is
// settled by its Source; its subscription keeps the credit until then, so a queue's
// delivering count never exceeds the prefetch the client asked for. Then the subscriptions'
// feeds are kicked. Errors: ErrUnknownAck.
func (c *Conn) Ack(key, subID string, nack bool) error {
	c.mu.Lock()
	res, ok := c.takeAckLocked(key, subID)
	for _, r := range res {
		if r.src != nil {
			r.sub.acking++
		}
	}
	if len(res) > 0 && res[0].src == nil {
		// events: the credit is free now; one ACK resolves deliveries of one subscription.
		c.drainHeldLocked(res[0].sub)
	}
	c.mu.Unlock()
	if !ok {
		return ErrUnknownAck
	}
	if len(res) == 1 { // the common case, without grouping
		r := res[0]
		if r.src == nil {
			return nil
		}
		r.src.SettleOne(r.seq, nack)
		c.mu.Lock()
		r.sub.acking--
		f := r.sub.Feed()
		c.mu.Unlock()
		if f != nil {
			f.Kick()
		}
		return nil
	}
	// Group by source, in first-appearance order, keeping consumption order within each.
	var srcs []Source
	var seqs [][]uint64
outer:
	for _, r := range res {
		if r.src == nil {
			continue
		}
		for i, s := range srcs {
			if s == r.src {
				seqs[i] = append(seqs[i], r.seq)
				continue outer
			}
		}
		srcs = append(srcs, r.src)
		seqs = append(seqs, []uint64{r.seq})
	}
	for i, s := range srcs {
		s.Settle(seqs[i], nack)
	}
	if len(srcs) == 0 {
		return nil
	}
	// Now the credit is free: let each subscription's feed deliver into it.
	var feeds []Feed
	c.mu.Lock()
	for _, r := range res {
		if r.src == nil {
			continue
		}
		r.sub.acking--
		if f := r.sub.Feed(); f != nil && !containsFeed(feeds, f) {
			feeds = append(feeds, f)
		}
	}
	c.mu.Unlock()
	for _, f := range feeds {
		f.Kick()
	}
	return nil
}

func containsFeed(fs []Feed, f Feed) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// removePendingLocked removes d from its subscription's pending list. c.mu held.
func removePendingLocked(c *Conn, d *delivery) {
	delete(c.pending, d.key)
	p := d.sub.pending
	for i, x := range p {
		if x == d {
			copy(p[i:], p[i+1:])
			p[len(p)-1] = nil
			d.sub.pending = p[:len(p)-1]
			return
		}
	}
}

// takeAckLocked finds the deliveries an ACK/NACK of key resolves: for AckClient it is every
// earlier pending delivery of the subscription too (cumulative). c.mu held.
func (c *Conn) takeAckLocked(key, subID string) ([]*delivery, bool) {
	d, ok := c.lookupLocked(key, subID)
	if !ok {
		return nil, false
	}
	if d.sub.Ack == AckClient {
		p := d.sub.pending
		n := 0
		for i, x := range p {
			delete(c.pending, x.key)
			if x == d {
				n = i + 1
				break
			}
		}
		out := append([]*delivery(nil), p[:n]...)
		copy(p, p[n:])
		clear(p[len(p)-n:])
		d.sub.pending = p[:len(p)-n]
		return out, true
	}
	removePendingLocked(c, d)
	return []*delivery{d}, true
}

func (c *Conn) lookupLocked(key, subID string) (*delivery, bool) {
	if c.w.Version() >= frame.V12 {
		d, ok := c.pending[key]
		return d, ok
	}
	if subID != "" {
		if d, ok := c.pending[subID+"\x00"+key]; ok {
			return d, true
		}
		// A 1.1 ACK whose subscription header names another subscription (clients written
		// against RabbitMQ and ActiveMQ send such frames, and those brokers accept them):
		// the message-id still names a message delivered on this connection.
	}
	for id := range c.subs { // STOMP 1.0 ACK names only the message-id
		if d, ok := c.pending[id+"\x00"+key]; ok {
			return d, true
		}
	}
	return nil, false
}
