package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The console's cluster figures (issue 27): it showed 0 B for a queue holding messages and
// one node's dead-letter count. The console reads the monitor API, so the API is checked:
// a queue's bytes are what JetStream stores for it, and the snapshot's dead-letter count
// is every node's.

// clusterQueueBytes is the pendingBytes and size GET /titan/monitor/queues on n reports for
// destination (ok false when it is not listed).
func clusterQueueBytes(t *testing.T, n *clusterNode, destination string) (bytes int64, size int, ok bool) {
	t.Helper()
	var l struct {
		Queues []struct {
			Destination  string
			Size         int
			PendingBytes int64
		}
	}
	requireMonitor(t, n.broker(), http.MethodGet, "/titan/monitor/queues", url.Values{"destination": {destination}}, &l)
	for _, q := range l.Queues {
		if q.Destination == destination || len(l.Queues) == 1 { // DLQ.a.b is listed as DLQ/a/b
			return q.PendingBytes, q.Size, true
		}
	}
	return 0, 0, false
}

// streamBytes is the bytes GET /titan/monitor/cluster on n reports for stream.
func streamBytes(t *testing.T, n *clusterNode, stream string) uint64 {
	t.Helper()
	var st struct {
		Streams []struct {
			Name  string
			Bytes uint64
		}
	}
	requireMonitor(t, n.broker(), http.MethodGet, "/titan/monitor/cluster", nil, &st)
	for _, s := range st.Streams {
		if s.Name == stream {
			return s.Bytes
		}
	}
	t.Fatalf("GET /titan/monitor/cluster on %s lists no stream %s", n.name, stream)
	return 0
}

// TestClusterConsoleBytesAndDeadLetters: three 1,000-byte messages sent through node 0 are
// listed by node 1 with the bytes their stream stores (they are its only messages); a
// message dead-lettered by node 1 and one by node 2 (max-deliveries 1, each NACKed once)
// make node 0's snapshot count 2 dead letters, and each of nodes 1 and 2 count its one in
// titan_messages_dead_lettered_total.
func TestClusterConsoleBytesAndDeadLetters(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, `    - {match: "ccons.dead", max-deliveries: 1}
`)
	const jobs, dead = "/queue/ccons/jobs", "/queue/ccons/dead"
	body := strings.Repeat("x", 1000)
	p := dialRaw(t, nodeBroker(nodes[0]))
	p.connect()
	rawExchange(t, p, "SEND\ndestination:"+jobs+"\nreceipt:1\n\n"+body+"\x00SEND\ndestination:"+jobs+"\nreceipt:2\n\n"+body+
		"\x00SEND\ndestination:"+jobs+"\nreceipt:3\n\n"+body+"\x00", "3", 0)
	var bytes int64
	var size int
	eventually(t, 10*time.Second, func() bool {
		var ok bool
		bytes, size, ok = clusterQueueBytes(t, nodes[1], jobs)
		return ok && size == 3
	}, "node 1 lists %s with 3 messages", jobs)
	if bytes < 3000 {
		t.Fatalf("node 1 lists %s with %d bytes, want at least the 3,000 bytes of its bodies", jobs, bytes)
	}
	jobsStream := queueStream("default", "ccons.jobs", 0) // cluster_partition_test.go
	checkEqual(t, streamBytes(t, nodes[2], jobsStream), uint64(bytes), "bytes of %s (the only messages of %s)", jobs, jobsStream)

	// One dead letter by node 1, one by node 2: each node's consumer NACKs its message once,
	// and its redelivery is past max-deliveries.
	for i, n := range []*clusterNode{nodes[1], nodes[2]} {
		c := dialRaw(t, nodeBroker(n))
		c.connect()
		rawExchange(t, c, "SUBSCRIBE\ndestination:"+dead+"\nid:1\nack:client-individual\nreceipt:sub\n\n\x00", "sub", 0)
		m := rawExchange(t, p, "SEND\ndestination:"+dead+"\nreceipt:d\n\nd\x00", "d", 0)
		checkEqual(t, 0, len(m), "messages on the producer's connection")
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err, "the message on %s", n.name)
		ack, _ := f.get("ack")
		rawExchange(t, c, "NACK\nid:"+ack+"\nreceipt:nack\n\n\x00", "nack", 0)
		eventually(t, 10*time.Second, func() bool {
			_, size, ok := clusterQueueBytes(t, nodes[0], "/queue/DLQ.ccons.dead")
			return ok && size == i+1
		}, "%d dead letters", i+1)
		rawExchange(t, c, "DISCONNECT\nreceipt:bye\n\n\x00", "bye", 0)
		// Its node's last pull request expires before the next node's consumer subscribes.
		eventually(t, 10*time.Second, func() bool {
			q, ok := clusterListed(t, nodes[0], dead)
			return ok && q.Consumers == 0 && q.Delivering == 0
		}, "no pull request nor delivery left on %s", dead)
	}
	var snap struct {
		Counters struct {
			DeadLettered uint64 `json:"deadLettered"`
		} `json:"counters"`
	}
	requireMonitor(t, nodes[0].broker(), http.MethodGet, "/titan/monitor/snapshot", nil, &snap)
	checkEqual(t, uint64(2), snap.Counters.DeadLettered, "dead letters in node 0's snapshot (one by node 1, one by node 2)")
	for _, n := range []*clusterNode{nodes[1], nodes[2]} {
		checkEqual(t, 1.0, metricSum(scrapeMetrics(t, n.broker()), "titan_messages_dead_lettered_total"),
			"titan_messages_dead_lettered_total on %s", n.name)
	}
}
