package e2e

import (
	"slices"
	"strings"
	"testing"
)

// An ActiveMQ-style selector through stompjs (issue 26): on a topic (exact and wildcard
// subscriptions) each subscriber receives only what its selector selects; on a queue a
// red-only consumer receives only red messages and the blue ones stay, in order, for a blue
// consumer that subscribes later; a selector that does not parse gets an ERROR naming the
// position, and one on an events-store log (which cannot filter) is refused, not ignored.
func TestSelectorOnTopicAndQueue(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	var out struct {
		TopicA    []string `json:"topic_a"`
		TopicB    []string `json:"topic_b"`
		QueueRed  []string `json:"queue_red"`
		QueueBlue []string `json:"queue_blue"`
		Invalid   []struct {
			Message string `json:"message"`
			Body    string `json:"body"`
		} `json:"invalid"`
		Unsupported []struct {
			Message string `json:"message"`
		} `json:"unsupported"`
	}
	stompjsClient.run(t, b, "selector", map[string]any{
		"topic": "/topic/sel-js/orders", "wildcard": "/topic/sel-js.>", "queue": "/queue/sel-js",
		"store": "/events-store/sel-js",
	}, &out)
	if want := []string{"red-big", "fence-a"}; !slices.Equal(out.TopicA, want) {
		t.Errorf("topic subscriber with color = 'red' AND size > 5 received %q, want %q", out.TopicA, want)
	}
	if want := []string{"blue-big", "fence-b"}; !slices.Equal(out.TopicB, want) {
		t.Errorf("wildcard subscriber with color = 'blue' received %q, want %q", out.TopicB, want)
	}
	if want := []string{"red-0", "red-2", "red-4", "red-fence"}; !slices.Equal(out.QueueRed, want) {
		t.Errorf("red queue consumer received %q, want %q", out.QueueRed, want)
	}
	if want := []string{"blue-1", "blue-3", "blue-5"}; !slices.Equal(out.QueueBlue, want) {
		t.Errorf("blue queue consumer received %q, want %q (left on the queue, in order)", out.QueueBlue, want)
	}
	if len(out.Invalid) != 1 || out.Invalid[0].Message != "invalid selector" || !strings.Contains(out.Invalid[0].Body, "position 17") {
		t.Errorf("invalid selector got %+v, want one ERROR 'invalid selector' naming position 17", out.Invalid)
	}
	if len(out.Unsupported) != 1 || out.Unsupported[0].Message != "selector not supported" {
		t.Errorf("a selector on an events-store log got %+v, want one ERROR 'selector not supported'", out.Unsupported)
	}
}

// python3-stomp sends to a queue with priorities (issue 26): delivery is highest priority
// first, FIFO within a priority, 4 when absent; a priority out of 0-9 is an ERROR naming it.
func TestQueuePriorityOrder(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	var out struct {
		Received []string `json:"received"`
		Invalid  []struct {
			Message string `json:"message"`
		} `json:"invalid"`
	}
	pythonClient.run(t, b, "priority", map[string]any{
		"dest": "/queue/prio-py",
		"messages": [][]any{
			{"low-a", "1"}, {"default-a", nil}, {"high-a", "9"}, {"mid-a", "4"}, {"low-b", "1"},
			{"high-b", "9"}, {"zero", "0"}, {"seven", "7"}, {"default-b", nil},
		},
		"bad": "12",
	}, &out)
	want := []string{"high-a", "high-b", "seven", "default-a", "mid-a", "default-b", "low-a", "low-b", "zero"}
	if !slices.Equal(out.Received, want) {
		t.Errorf("delivery order %q, want %q", out.Received, want)
	}
	if len(out.Invalid) != 1 || out.Invalid[0].Message != "invalid priority header" {
		t.Errorf("priority:12 got %+v, want one ERROR 'invalid priority header'", out.Invalid)
	}
}
