package cluster

import "errors"

// ErrClosed is returned by a cluster adapter's Subscribe after its Close (the node is
// shutting down).
var ErrClosed = errors.New("cluster: shutting down")
