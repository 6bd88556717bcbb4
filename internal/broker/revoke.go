package broker

import (
	"strconv"

	"github.com/titan-broker/titan/internal/auth"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/session"
)

// ReasonAccessRevoked is the message header of the ERROR a connection gets when a reload of
// the users file takes away what it relies on (issue #29).
const ReasonAccessRevoked = "access revoked"

// revoke applies a users-file reload to the open connections (issue #29, revocation bites):
//
//   - a connection whose user the file no longer holds gets "ERROR message:access revoked"
//     (the body names the user) and is closed;
//   - a connection with a subscription whose consume permission the file withdrew gets the
//     same ERROR naming the subscription and destination, and is closed: STOMP has no
//     frame that ends one subscription from the server side, and an ERROR closes the
//     connection (STOMP 1.2, "ERROR"). Events subscriptions — wildcards included — are
//     filtered per delivery already and stay open; they just stop receiving.
//
// Closing aborts the connection's open transactions and returns its unacknowledged messages to
// their queues, as any close does. A transaction of a connection that stays open is checked
// again at COMMIT (the router's commit stage runs the authorization stage on every SEND it
// holds), so a SEND made before the reload commits only if the user may still make it.
func (b *Broker) revoke(a *auth.Authority) {
	if a.Open() {
		return
	}
	def := b.router.Options().DefaultPattern
	for _, sess := range b.Sessions() {
		user := sess.Principal()
		if user == "" {
			continue // not logged in yet: CONNECT checks the new file
		}
		if !a.HasUser(user) {
			closeRevoked(sess, "user "+user+" was removed from the users file")
			continue
		}
		dc := b.deliveryConn(sess)
		if dc == nil {
			continue
		}
		for _, si := range dc.Subscriptions() {
			d, err := dest.ParseFilter(si.Destination, def)
			if err != nil || d.Wildcard || d.Pattern == dest.PatternEvents || d.Pattern == dest.PatternTempQueue {
				continue
			}
			id := dest.IdentityOf(si.Group, d)
			if a.Allowed(user, id.Group, id.Pattern, id.Channel)&auth.Consume == 0 {
				closeRevoked(sess, "user "+user+" may no longer consume from "+id.Destination()+
					" (subscription "+strconv.Quote(si.ID)+" ended)")
				break
			}
		}
	}
}

// closeRevoked sends the ERROR and closes the connection once it is written (close reason
// admin).
func closeRevoked(sess *session.Session, detail string) {
	body := []byte(detail + "\n")
	sess.WriteFrame(&frame.Frame{Command: frame.CmdError, Headers: []frame.Header{
		{Key: frame.HdrMessage, Value: ReasonAccessRevoked},
		{Key: frame.HdrContentType, Value: "text/plain"},
		{Key: frame.HdrContentLength, Value: strconv.Itoa(len(body))},
	}, Body: body})
	sess.CloseAfterFlush(session.CloseAdmin)
}
