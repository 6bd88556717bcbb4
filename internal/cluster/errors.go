package cluster

import "errors"

// ErrClosed is returned by a cluster adapter's Subscribe after its Close (the node is
// shutting down).
var ErrClosed = errors.New("cluster: shutting down")

// ErrAckUnconfirmed is returned by Acks.Sync when an ack was not confirmed within
// PublishTimeout (the consumer's Raft group has no quorum).
var ErrAckUnconfirmed = errors.New("cluster: acknowledgement not confirmed by JetStream")
