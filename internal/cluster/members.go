package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// unknownNamePrefix starts the name nats-server gives a Raft peer whose server it has not
// heard from since it started (server/jetstream_cluster.go clusterInfo: "Server name
// unknown at this time (peerID: …)"): a peer that was down all along, such as a node whose
// disk died, seen from a node restarted since.
const unknownNamePrefix = "Server name unknown"

// apiServerPing asks every server of the cluster for its JetStream state (nats-server's
// serverPingReqSubj with "JSZ"); only the system account may send it.
const apiServerPing = "$SYS.REQ.SERVER.PING.JSZ"

// PeerNameTimeout bounds PeerNames: the other nodes answer on loopback or LAN within
// milliseconds; a node that does not is skipped.
const PeerNameTimeout = time.Second

// UnknownName reports whether name is nats-server's placeholder for a peer whose server
// name it does not know (see PeerNames).
func UnknownName(name string) bool { return strings.HasPrefix(name, unknownNamePrefix) }

// PeerID is this node's JetStream Raft peer id (nats-server derives it from the node's
// name, so a node that keeps its node-name keeps its id, also on an empty data
// directory); "" with an external NATS.
func (n *Node) PeerID() string {
	if n.srv == nil {
		return ""
	}
	return n.srv.Node()
}

// PeerNames maps the Raft peer ids of the JetStream meta group to node names as the
// cluster knows them: every reachable node answers a $SYS.REQ.SERVER.PING.JSZ with the
// meta group as it sees it, and each names the peers it heard from since it started.
// A node restarted (or started on a wiped data directory) while another was down never
// heard from that one, and nats-server lists it as "Server name unknown" there while the
// other nodes name it (issue 27's phantom peer); the status view names it from this map,
// so every node gives the same view. Bounded by ctx and PeerNameTimeout; a node that does
// not answer is skipped. ErrNotEmbedded with an external NATS.
func (n *Node) PeerNames(ctx context.Context) (map[string]string, error) {
	if n.srv == nil {
		return nil, ErrNotEmbedded
	}
	ctx, cancel := context.WithTimeout(ctx, PeerNameTimeout)
	defer cancel()
	nc, err := n.sysConn()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("cluster: peer names: %w", err)
	}
	if err := nc.PublishRequest(apiServerPing, inbox, nil); err != nil {
		return nil, fmt.Errorf("cluster: peer names: %w", err)
	}
	names := map[string]string{n.srv.Node(): n.srv.Name()}
	want := n.routedNodes() + 1 // every connected node, and this one
	for got := 0; got < want; got++ {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break // the nodes that answered are enough
		}
		var r struct {
			Server server.ServerInfo `json:"server"`
			Data   server.JSInfo     `json:"data"`
		}
		if json.Unmarshal(m.Data, &r) != nil || r.Data.Meta == nil {
			continue
		}
		if r.Data.Meta.Leader != "" && r.Data.Meta.Peer != "" {
			names[r.Data.Meta.Peer] = r.Data.Meta.Leader
		}
		for _, p := range r.Data.Meta.Replicas {
			if p != nil && p.Peer != "" && p.Name != "" && !UnknownName(p.Name) {
				names[p.Peer] = p.Name
			}
		}
	}
	return names, nil
}

// routedNodes counts the other nodes this node has a route to.
func (n *Node) routedNodes() int { return len(n.routedNames()) }

// sysConn is an in-process connection as the embedded server's system account (the meta
// group's API: step-down, peer removal, server pings). The caller closes it.
func (n *Node) sysConn() (*nats.Conn, error) {
	nc, err := nats.Connect("", nats.InProcessServer(n.srv), nats.UserInfo(sysUser, n.sysPass), nats.Name("titan-system"))
	if err != nil {
		return nil, fmt.Errorf("cluster: system account connection: %w", err)
	}
	return nc, nil
}
