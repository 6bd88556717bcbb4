package e2e

import (
	"strings"
	"testing"
)

// TestMigrateRabbitRPCAutoSubscribe: a RabbitMQ application's RPC as RabbitMQ's STOMP guide
// has it (stomp.py): the requester SENDs with reply-to:/temp-queue/<name> and never
// SUBSCRIBEs; the broker subscribes it to its temp-queue (id /temp-queue/<name>) and the
// responder's answer arrives there. Once the requester SUBSCRIBEs to its temp-queue
// explicitly, its explicit subscription takes the replies over: each reply arrives exactly
// once, on the subscription the client chose.
func TestMigrateRabbitRPCAutoSubscribe(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	type received struct {
		Body         string `json:"body"`
		Destination  string `json:"destination"`
		Subscription string `json:"subscription"`
	}
	var out struct {
		SeenReplyTo []string   `json:"seen_reply_to"`
		Received    []received `json:"received"`
	}
	pyMigrate.run(t, b, "rabbit_rpc_auto", map[string]any{"dest": "/queue/mig-rpc-auto", "name": "answers"}, &out)
	for _, rt := range out.SeenReplyTo {
		if !strings.HasPrefix(rt, "/temp-queue/") || !strings.HasSuffix(rt, "/answers") || rt == "/temp-queue/answers" {
			t.Errorf("reply-to the responder saw = %q, want /temp-queue/<session>/answers", rt)
		}
	}
	want := []received{
		{"re:ping1", "/temp-queue/answers", "/temp-queue/answers"}, // RabbitMQ's automatic subscription id
		{"re:ping2", "/temp-queue/answers", "mine"},
		{"marker", "/temp-queue/answers", "mine"},
	}
	if len(out.Received) != len(want) {
		t.Fatalf("the requester received %+v, want %+v", out.Received, want)
	}
	for i := range want {
		checkEqual(t, want[i], out.Received[i], "message %d", i)
	}
}
