package pipeline

import (
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/cluster/logs"
	"github.com/titan-broker/titan/internal/cluster/queues"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// Ordering and back-pressure are per stream (issue 28): while a publish to one stream is
// failing (being retried), a SEND to that stream waits at its gate, and a SEND to another
// stream from the same node is sent and stored meanwhile. Once the failure is resolved the
// gated SEND goes out and is stored. (The e2e test TestClusterStalledStreamDoesNotDelay-
// AnotherStream freezes a real leader; this one injects the failure into the lane.)
func TestPersisterGatesPerStream(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	q := queues.New(nodes[0], nil, nil)
	p, err := NewPersister(nodes[0], q, logs.New(nodes[0], nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := dest.Identity{Group: "gatea", Pattern: dest.PatternQueues, Channel: "jobs"}
	b := dest.Identity{Group: "gateb", Pattern: dest.PatternQueues, Channel: "jobs"}
	msg := func(id dest.Identity, body string) *message.Message {
		return &message.Message{ID: message.NewID("gate"), Group: id.Group, Destination: id.Destination(), Body: []byte(body), Persistent: true}
	}
	persist := func(id dest.Identity, body string) error {
		wait, err := p.PersistAsync(id, msg(id, body))
		if err != nil {
			return err
		}
		return wait()
	}
	for _, id := range []dest.Identity{a, b} { // each stream's first publish (waits for its PubAck)
		if err := persist(id, "first"); err != nil {
			t.Fatal(err)
		}
	}
	la := p.lane(q.Place(a).Stream)
	p.mu.Lock()
	la.failing++ // a publish to a's stream failed and is being retried
	p.mu.Unlock()
	gated := make(chan error, 1)
	go func() { gated <- persist(a, "gated") }()

	other := make(chan error, 1)
	go func() { other <- persist(b, "other") }()
	select {
	case err := <-other:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-gated:
		t.Fatalf("the SEND to the failing stream passed its gate (err %v)", err)
	case <-time.After(30 * time.Second):
		t.Fatal("a SEND to another stream waited for the failing stream's gate")
	}
	select {
	case err := <-gated:
		t.Fatalf("the SEND to the failing stream passed its gate (err %v)", err)
	default:
	}

	p.mu.Lock()
	la.failing--
	p.mu.Unlock()
	la.cond.Broadcast()
	select {
	case err := <-gated:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gated SEND was not sent once its stream's failure was resolved")
	}
	if got := clustertest.BodiesOn(t, nodes[1].JetStream(), q.Place(a).Stream, q.Place(a).Subject); !clustertest.Equal(got, []string{"first", "gated"}) {
		t.Fatalf("stream of %s holds %q", a, got)
	}
	if got := clustertest.BodiesOn(t, nodes[1].JetStream(), q.Place(b).Stream, q.Place(b).Subject); !clustertest.Equal(got, []string{"first", "other"}) {
		t.Fatalf("stream of %s holds %q", b, got)
	}
}
