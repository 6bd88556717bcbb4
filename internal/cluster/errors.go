package cluster

import "errors"

// ErrClosed is returned by a cluster adapter's Subscribe after its Close (the node is
// shutting down).
var ErrClosed = errors.New("cluster: shutting down")

// ErrAckUnconfirmed is returned by Acks.Sync when an ack was not confirmed within
// PublishTimeout (the consumer's Raft group has no quorum).
var ErrAckUnconfirmed = errors.New("cluster: acknowledgement not confirmed by JetStream")

// ErrJetStreamDisabled is the cause DiskHealth reports while the embedded nats-server has
// disabled JetStream on this node (it does so when a write to its store fails: "out of
// resources, will be DISABLED").
var ErrJetStreamDisabled = errors.New("JetStream disabled on this node (its store could not be written)")

// ErrJetStreamAPI wraps an error answer of a JetStream API request (a step-down, a peer
// removal), with its description and error code.
var ErrJetStreamAPI = errors.New("cluster: JetStream API")

// ErrNotEmbedded is returned by what only an embedded node can do (RemovePeer) on a node
// that is a client of an external NATS.
var ErrNotEmbedded = errors.New("cluster: not an embedded node (external NATS: use its own tools)")

// ErrPeerUp is returned by RemovePeer for a node that is up (this node, or one connected
// and not reported offline): JetStream would disable itself on a removed node that still
// runs, so a node is stopped before it is removed.
var ErrPeerUp = errors.New("cluster: node is up (stop it before removing it)")

// ErrNotPeer is returned by RemovePeer for a name or peer id that is not in the JetStream
// meta group (never joined, or already removed).
var ErrNotPeer = errors.New("cluster: not a member of the cluster")

// ErrPartitionsChanged is returned by Start when cluster.partitions differs from the
// partition count the cluster stored at its first start: destinations would map to other
// streams and the messages already stored would be stranded (partition.go).
var ErrPartitionsChanged = errors.New("cluster: partition count changed")
