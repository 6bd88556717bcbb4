package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/dest"
)

// Streams that spread (issue 28): a group's queues and logs are partitioned over
// cluster.partitions streams by a hash of the destination, each partition's leader on a
// node of its own.

// queueStream is the stream holding queue channel (ring size ring, 0: none) of group in a
// test cluster (R3, the default partition count).
func queueStream(group, channel string, ring int) string {
	id := dest.Identity{Group: group, Pattern: dest.PatternQueues, Channel: channel}
	return cluster.PlaceQueue(id, ring, 3, cluster.DefaultPartitions, 0).Stream
}

// logStream is the stream holding events-store log channel of group (no retention).
func logStream(group, channel string) string {
	id := dest.Identity{Group: group, Pattern: dest.PatternEventsStore, Channel: channel}
	return cluster.PlaceLog(id, cluster.SettingsOf(nil, id), 3, cluster.DefaultPartitions, 0).Stream
}

// Many queues of one group, sent to through all three nodes: they land in all twelve
// partition streams of the group, the streams' leaders are on every node (the cluster view
// of GET /titan/monitor/cluster, as `titan cluster` shows it), and every queue's messages
// are delivered in the order they were sent, to a consumer on another node.
func TestClusterPartitionsSpreadLeadersAndKeepOrder(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	nodes := startCluster(t, "")
	const perQueue = 20
	// Two queues per partition: names chosen by the placement itself, so each of the
	// twelve streams is used.
	var queues []string
	per := make([]int, cluster.DefaultPartitions)
	for i := 0; len(queues) < 2*cluster.DefaultPartitions; i++ {
		ch := fmt.Sprintf("spread.%d", i)
		k := cluster.PartitionOf(dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: ch}, cluster.DefaultPartitions)
		if per[k] < 2 {
			per[k]++
			queues = append(queues, ch)
		}
	}

	// One producer connection per node; queue i is sent to through node i%3, its SENDs
	// pipelined (no receipt) but the last, whose RECEIPT means its stream stored them all.
	prods := make([]*stomp.Conn, 3)
	for i, n := range nodes {
		prods[i] = goStompDial(n, nil)
		defer prods[i].Disconnect()
	}
	for j := range perQueue {
		for i, q := range queues {
			var err error
			body := []byte(fmt.Sprintf("%s-%02d", q, j))
			if j == perQueue-1 {
				err = prods[i%3].Send("/queue/"+q, "text/plain", body, stomp.SendOpt.Receipt)
			} else {
				err = prods[i%3].Send("/queue/"+q, "text/plain", body)
			}
			requireNoError(t, err, "SEND to /queue/"+q)
		}
	}

	// The view from node 0: the twelve queue streams, and who leads them.
	var v clusterView
	leads := map[string][]string{}
	eventually(t, 30*time.Second, func() bool {
		var ok bool
		if v, ok = getCluster(nodes[0]); !ok {
			return false
		}
		clear(leads)
		found := 0
		for _, s := range v.Streams {
			if class, _, p := cluster.SplitPartition(s.Name); p && class == "TITAN_default_Q" && s.Leader != "" {
				found++
				leads[s.Leader] = append(leads[s.Leader], s.Name)
			}
		}
		return found == cluster.DefaultPartitions
	}, "the cluster view lists %d queue partition streams with leaders (last %+v)", cluster.DefaultPartitions, &v)
	for _, n := range nodes {
		slices.Sort(leads[n.name])
		t.Logf("node %s leads %d of %d queue partitions: %s", n.name, len(leads[n.name]), cluster.DefaultPartitions, strings.Join(leads[n.name], " "))
		if len(leads[n.name]) == 0 {
			t.Errorf("node %s leads none of the group's %d queue partitions: %v", n.name, cluster.DefaultPartitions, leads)
		}
	}

	// Every queue in order, consumed through the node after its producer's.
	for i, q := range queues {
		c := goStompDial(nodes[(i+1)%3], nil)
		sub, err := c.Subscribe("/queue/"+q, stomp.AckAuto)
		requireNoError(t, err)
		var got []string
		for len(got) < perQueue {
			select {
			case m := <-sub.C:
				requireNoError(t, m.Err, "MESSAGE on /queue/"+q)
				got = append(got, string(m.Body))
			case <-time.After(20 * time.Second):
				t.Fatalf("/queue/%s: %d of %d messages after 20 s: %q", q, len(got), perQueue, got)
			}
		}
		for j, b := range got {
			if want := fmt.Sprintf("%s-%02d", q, j); b != want {
				t.Fatalf("/queue/%s delivered %q, want the sending order %s-00..%02d", q, got, q, perQueue-1)
			}
		}
		_ = sub.Unsubscribe()
		_ = c.Disconnect()
	}
}
