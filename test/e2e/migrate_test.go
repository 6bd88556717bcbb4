package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// pyMigrate runs clients/pymigrate.py (python3-stomp with RabbitMQ's headers, issue 26).
var pyMigrate = stompClient{
	name:  "python3-stomp",
	short: "py",
	cmd: func(scenario, args string) (string, []string) {
		return systemPython, []string{filepath.Join("clients", "pymigrate.py"), scenario, args}
	},
	err: func() error { return pythonErr },
}

// TestMigrateRabbitMQ: an application written for RabbitMQ's STOMP plugin, unchanged, with
// stomp.py against a real titan: a durable topic subscription keeps all 100 messages
// published while it is detached, two connections with one id share it, UNSUBSCRIBE
// durable:true deletes it, and the control headers Titan cannot honour are refused by name.
func TestMigrateRabbitMQ(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	c := pyMigrate
	t.Run("durable subscription keeps what was published while away", func(t *testing.T) {
		var out struct {
			Bodies       []string `json:"bodies"`
			Destinations []string `json:"destinations"`
			Total        int      `json:"total"`
		}
		c.run(t, b, "rabbit_durable", map[string]any{"dest": "/topic/mig.py.orders", "id": "billing", "count": 100}, &out)
		want := make([]string, 100)
		for i := range want {
			want[i] = fmt.Sprint("m", i)
		}
		checkEqual(t, true, slices.Equal(want, out.Bodies), "bodies in order: %v", out.Bodies)
		checkEqual(t, 100, out.Total, "messages received in all (none twice)")
		checkEqual(t, true, slices.Equal([]string{"/topic/mig/py/orders"}, out.Destinations), "MESSAGE destination: %v", out.Destinations)
	})
	t.Run("two connections with one id share it", func(t *testing.T) {
		var out struct{ A, B []string }
		c.run(t, b, "rabbit_shared", map[string]any{"dest": "/exchange/amq.topic/mig.py.shared", "id": "shared", "count": 100}, &out)
		all := append(slices.Clone(out.A), out.B...)
		slices.Sort(all)
		checkEqual(t, 100, len(all), "messages in all: a %d, b %d", len(out.A), len(out.B))
		checkEqual(t, len(all), len(slices.Compact(all)), "no message to both")
		checkEqual(t, true, len(out.A) > 0 && len(out.B) > 0, "both got some: a %d, b %d", len(out.A), len(out.B))
	})
	t.Run("UNSUBSCRIBE durable:true deletes it", func(t *testing.T) {
		var out struct{ Bodies []string }
		c.run(t, b, "rabbit_delete", map[string]any{"dest": "/topic/mig.py.del", "id": "gone"}, &out)
		checkEqual(t, true, slices.Equal([]string{"after"}, out.Bodies), "bodies after re-creating: %v", out.Bodies)
	})
	t.Run("refused headers are named", func(t *testing.T) {
		type tc struct {
			Command string            `json:"command"`
			Dest    string            `json:"dest"`
			Headers map[string]string `json:"headers"`
			want    string
		}
		cases := []tc{
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-queue-name": "q"}, "unsupported header: x-queue-name"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-message-ttl": "1000"}, "unsupported header: x-message-ttl"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-expires": "1000"}, "unsupported header: x-expires"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-dead-letter-exchange": "dlx"}, "unsupported header: x-dead-letter-exchange"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"auto-delete": "true"}, "unsupported header: auto-delete"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"exclusive": "true"}, "unsupported header: exclusive"},
			{"SUBSCRIBE", "/topic/mig-py", map[string]string{"durable": "true", "auto-delete": "true"}, "unsupported header: auto-delete"},
			{"SEND", "/queue/mig-py", map[string]string{"x-queue-name": "q"}, "unsupported header: x-queue-name"},
			{"SEND", "/exchange/amq.fanout/x", map[string]string{}, "unsupported exchange"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-max-priority": "10"}, "RECEIPT"},
			{"SEND", "/queue/mig-py", map[string]string{"persistent": "false", "x-message-ttl": "60000"}, "RECEIPT"},
			{"SEND", "/amq/queue/mig-py", map[string]string{"x-app": "kept"}, "RECEIPT"},
		}
		var out struct{ Answers []string }
		c.run(t, b, "refused", map[string]any{"cases": cases}, &out)
		for i, x := range cases {
			if i < len(out.Answers) {
				checkEqual(t, x.want, out.Answers[i], "%s %s %v", x.Command, x.Dest, x.Headers)
			}
		}
		checkEqual(t, len(cases), len(out.Answers), "answers")
	})
}
