package broker

import (
	"strconv"

	"github.com/titan-broker/titan/internal/auth"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/session"
	"github.com/titan-broker/titan/internal/topicsub"
)

// ReasonQuotaExceeded is the message header of the ERROR a frame over a per-user quota
// gets; the body names the quota (issue #29).
const ReasonQuotaExceeded = "quota exceeded"

// admitUser counts s against its user's connections quota (auth.Authority.ConnectionLimit)
// and returns the ERROR naming the quota when the user already holds that many. A counted
// session is released by releaseUserLocked when it ends.
func (b *Broker) admitUser(s *session.Session) *frame.ProtocolError {
	user := s.Principal()
	if user == "" || b.sec == nil {
		return nil
	}
	limit := b.sec.auth.ConnectionLimit(user)
	b.mu.Lock()
	defer b.mu.Unlock()
	if limit > 0 && b.userConns[user] >= limit {
		b.connQuotaRefused.Add(1)
		return &frame.ProtocolError{Reason: ReasonQuotaExceeded, Fatal: true,
			Detail: "user " + user + " holds its maximum of " + strconv.Itoa(limit) + " connections (quota " + auth.QuotaConnections + " in the users file)"}
	}
	b.userConns[user]++
	b.counted[s] = user
	return nil
}

// releaseUserLocked gives back s's place in its user's connections quota. b.mu must be held.
func (b *Broker) releaseUserLocked(s *session.Session) {
	user, ok := b.counted[s]
	if !ok {
		return
	}
	delete(b.counted, s)
	if b.userConns[user]--; b.userConns[user] <= 0 {
		delete(b.userConns, user)
	}
}

// Quota indexes of quotaNames and quotaRefused.
const (
	quotaConnections = iota
	quotaDurableSubscriptions
	quotaDestinations
	numQuotas
)

var quotaNames = [numQuotas]string{auth.QuotaConnections, auth.QuotaDurableSubscriptions, auth.QuotaDestinations}

// quotaRefused returns how many frames quota q refused: the connections quota is counted by
// the broker, the others by the authorization stage.
func (b *Broker) quotaRefused(q int) uint64 {
	st := b.sec.stage
	switch {
	case q == quotaConnections:
		return b.connQuotaRefused.Load()
	case st == nil: // open mode: no stage, no quotas
		return 0
	case q == quotaDurableSubscriptions:
		return st.DurableQuotaRefused.Load()
	default:
		return st.DestinationQuotaRefused.Load()
	}
}

// ownerExists is the Owners ledger's port: whether what a user made still exists.
func (b *Broker) ownerExists(o auth.Owned) bool {
	switch o.Kind {
	case auth.KindLogDurable:
		return b.p.log != nil && b.p.log.HasDurable(o.Identity, o.Name)
	case auth.KindTopicDurable:
		if cl := b.p.cluster; cl != nil && cl.durables != nil { // cluster mode: the cluster's registry
			return cl.durables.Has(o.Identity.Group, o.Owner, o.Name)
		}
		if b.p.topics == nil || b.p.dispatcher == nil {
			return false
		}
		_, ok := b.p.dispatcher.Lookup(topicsub.QueueOf(topicsub.Key{Group: o.Identity.Group, Owner: o.Owner, Name: o.Name}))
		return ok
	default:
		return b.sec.stageExists(o.Identity)
	}
}
