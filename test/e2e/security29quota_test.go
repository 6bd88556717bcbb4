package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/titan-broker/titan/internal/auth"
)

// quotaUsers29 writes the users file of the durable-ownership and quota tests: team1 and
// team2 (role teams) may send, consume and create on /events-store/audit.#, /topic/prices.#
// and /queue/t.# (browse and manage too); guest (role guests) may only consume
// /topic/prices.# (no create); ops has the broker-wide browse that /metrics needs. quotas
// are written as given.
func quotaUsers29(t *testing.T, dir string, quotas auth.Quotas) string {
	t.Helper()
	f := &auth.File{Users: map[string]*auth.User{}, Quotas: quotas}
	for name, roles := range map[string][]string{"team1": {"teams"}, "team2": {"teams"}, "guest": {"guests"}, "ops": {"ops"}} {
		h, err := bcrypt.GenerateFromPassword([]byte(name+"-pw"), bcrypt.MinCost)
		requireNoError(t, err)
		f.Users[name] = &auth.User{Password: string(h), Roles: roles}
	}
	path := dir + "/users.yml"
	requireNoError(t, f.Save(path))
	for _, g := range [][]string{
		{"role", "grant", "teams", "/events-store/audit.#:send,consume,create"},
		{"role", "grant", "teams", "/topic/prices.#:send,consume,create"},
		{"role", "grant", "teams", "/queue/t.#:send,consume,create,browse,manage"},
		{"role", "grant", "guests", "/topic/prices.#:consume"},
		{"role", "grant", "ops", "#:browse"}, // reads /metrics
	} {
		out, err := exec.Command(titanBin, append(g, "--users", path)...).CombinedOutput()
		requireNoError(t, err, "titan %s: %s", strings.Join(g, " "), out)
	}
	return path
}

// opsAs runs pyclient's auth_ops as user (CONNECT client-id clientID when not "") and
// returns each op's outcome ("ok" or the ERROR's message) and ERROR body.
func opsAs(t *testing.T, b *broker, user, clientID string, ops ...map[string]any) ([]string, []string) {
	t.Helper()
	var out struct {
		Results []string `json:"results"`
		Bodies  []string `json:"bodies"`
		Error   string   `json:"error"`
	}
	args := map[string]any{"login": user, "passcode": user + "-pw", "ops": ops}
	if clientID != "" {
		args["client_id"] = clientID
	}
	pythonClient.run(t, b, "auth_ops", args, &out)
	if out.Error != "" {
		t.Fatalf("%s: %s (results so far %v)", user, out.Error, out.Results)
	}
	return out.Results, out.Bodies
}

func subOp(dest, id string, hdrs map[string]string) map[string]any {
	return map[string]any{"op": "subscribe", "dest": dest, "id": id, "headers": hdrs}
}

// requireRefused checks one auth_ops outcome: ERROR message (with the op's receipt-id)
// whose body contains body.
func requireRefused(t *testing.T, what, message, body string, results, bodies []string, i int) {
	t.Helper()
	if !strings.HasPrefix(results[i], message+" receipt-id=") || !strings.Contains(bodies[i], body) {
		t.Fatalf("%s: got %q / %q, want ERROR %s with %q in the body", what, results[i], bodies[i], message, body)
	}
}

// L: durable subscription names are owned by the user that made them, in every dialect
// (events-store durable-name; RabbitMQ durable:true with the id; ActiveMQ
// activemq.subscriptionName and Artemis durable-subscription-name with the client-id): another
// user with the same name gets ERROR access refused instead of the subscription and its
// backlog, also after a restart, and cannot delete it with an UNSUBSCRIBE; making one needs
// create.
func TestSecurity29DurableOwnership(t *testing.T) {
	pythonClient.require(t)
	dir := t.TempDir()
	users := quotaUsers29(t, dir, auth.Quotas{})
	node := newTitanNode(t, pebbleConfig(dir+"/data", "")+fmt.Sprintf("  security: {users-file: %q}\n", users))
	b := node.start().broker()

	dialects := []struct {
		name, dest, id string
		hdrs           map[string]string
	}{
		{"events-store durable-name", "/events-store/audit.x", "1", map[string]string{"durable-name": "d1"}},
		{"RabbitMQ durable:true", "/topic/prices.eu", "r1", map[string]string{"durable": "true"}},
		{"ActiveMQ activemq.subscriptionName", "/topic/prices.eu", "1", map[string]string{"activemq.subscriptionName": "a1"}},
		{"Artemis durable-subscription-name", "/topic/prices.us", "1", map[string]string{"durable-subscription-name": "s1"}},
	}
	// team1 makes them (a message waits in the events-store log for d1).
	ops := []map[string]any{{"op": "send", "dest": "/events-store/audit.x", "body": "backlog"}}
	for _, d := range dialects {
		ops = append(ops, subOp(d.dest, d.id, d.hdrs))
	}
	res, _ := opsAs(t, b, "team1", "cid", ops...)
	requireEqual(t, "ok,ok,ok,ok,ok", strings.Join(res, ","), "team1 makes its durable subscriptions")

	takeover := func(when string) {
		t.Helper()
		var ops []map[string]any
		for _, d := range dialects {
			ops = append(ops, subOp(d.dest, d.id, d.hdrs))
		}
		res, bodies := opsAs(t, b, "team2", "cid", ops...)
		for i, d := range dialects {
			requireRefused(t, when+": team2 takes "+d.name, "access refused", "belongs to another user", res, bodies, i)
		}
		res, _ = opsAs(t, b, "team1", "cid", ops...)
		requireEqual(t, "ok,ok,ok,ok", strings.Join(res, ","), when+": team1 resumes its own")
	}
	takeover("before the restart")

	// Making a durable subscription needs create (Artemis: createDurableQueue); a plain
	// subscription does not.
	res, bodies := opsAs(t, b, "guest", "gid",
		subOp("/topic/prices.eu", "g1", map[string]string{"durable": "true"}),
		subOp("/topic/prices.eu", "g2", map[string]string{"activemq.subscriptionName": "g2"}),
		subOp("/topic/prices.eu", "g3", nil))
	requireRefused(t, "guest makes a RabbitMQ durable subscription", "access refused", "needs create", res, bodies, 0)
	requireRefused(t, "guest makes an ActiveMQ durable subscription", "access refused", "needs create", res, bodies, 1)
	requireEqual(t, "ok", res[2], "guest's plain subscription")

	// The owners are stored: a restart keeps them.
	node.stop()
	b = node.start().broker()
	takeover("after the restart")

	// Nor may another user delete it (an UNSUBSCRIBE in its peer's way deletes a durable
	// topic subscription); its owner may, and then the name is free.
	unsub := func(d int) map[string]any {
		return map[string]any{"op": "unsubscribe", "id": dialects[d].id, "headers": dialects[d].hdrs}
	}
	res, bodies = opsAs(t, b, "team2", "cid", unsub(1), unsub(2), unsub(3))
	for i := range 3 {
		requireRefused(t, "team2 deletes "+dialects[i+1].name, "access refused", "belongs to another user", res, bodies, i)
	}
	res, _ = opsAs(t, b, "team1", "cid", unsub(2))
	requireEqual(t, "ok", res[0], "team1 deletes its ActiveMQ durable subscription")
	res, _ = opsAs(t, b, "team2", "cid", subOp(dialects[2].dest, dialects[2].id, dialects[2].hdrs))
	requireEqual(t, "ok", res[0], "team2 makes one with the freed name")
}

// M: per-user quotas on durable subscriptions and destinations created: over its quota a
// user gets ERROR quota exceeded naming the quota, counted in titan_quota_refused_total;
// deleting one gives room back; others are unaffected.
func TestSecurity29DurableAndDestinationQuotas(t *testing.T) {
	pythonClient.require(t)
	dir := t.TempDir()
	users := quotaUsers29(t, dir, auth.Quotas{Users: map[string]auth.Quota{"team1": {DurableSubscriptions: 2, Destinations: 2}}})
	b := startBroker(t, yamlConfigWith("", fmt.Sprintf("  security: {users-file: %q}\n", users)))

	res, bodies := opsAs(t, b, "team1", "cid",
		subOp("/events-store/audit.x", "1", map[string]string{"durable-name": "d1"}),
		subOp("/topic/prices.eu", "1", map[string]string{"activemq.subscriptionName": "a1"}),
		subOp("/events-store/audit.x", "1", map[string]string{"durable-name": "d1"}), // resumes: not one more
		subOp("/topic/prices.eu", "r3", map[string]string{"durable": "true"}),
		subOp("/events-store/audit.x", "1", map[string]string{"durable-name": "d3"}))
	requireEqual(t, "ok,ok,ok", strings.Join(res[:3], ","), "team1's first durable subscriptions")
	requireRefused(t, "a third durable subscription (RabbitMQ)", "quota exceeded", "quota durable-subscriptions", res, bodies, 3)
	requireRefused(t, "a third durable subscription (durable-name)", "quota exceeded", "quota durable-subscriptions", res, bodies, 4)

	send := func(d string) map[string]any { return map[string]any{"op": "send", "dest": d, "body": "x"} }
	res, bodies = opsAs(t, b, "team1", "", send("/queue/t.1"), send("/events-store/audit.y"), send("/queue/t.1"),
		subOp("/queue/t.3", "1", nil), send("/queue/t.4"))
	requireEqual(t, "ok,ok,ok", strings.Join(res[:3], ","), "team1 creates two destinations and reuses one")
	requireRefused(t, "a SUBSCRIBE creating a third queue", "quota exceeded", "quota destinations", res, bodies, 3)
	requireRefused(t, "a SEND creating a third queue", "quota exceeded", "quota destinations", res, bodies, 4)

	// Others are unaffected by team1's quota.
	res, _ = opsAs(t, b, "team2", "cid2", send("/queue/t.5"), subOp("/events-store/audit.x", "1", map[string]string{"durable-name": "d9"}))
	requireEqual(t, "ok,ok", strings.Join(res, ","), "team2 is not limited by team1's quota")

	req, err := http.NewRequest(http.MethodGet, monitorURL(b)+"/metrics", nil)
	requireNoError(t, err)
	req.SetBasicAuth("ops", "ops-pw")
	resp, err := httpClient.Do(req)
	requireNoError(t, err)
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	requireNoError(t, err)
	requireEqual(t, http.StatusOK, resp.StatusCode, "GET /metrics: %s", data)
	m := string(data)
	requireEqual(t, 2.0, metricValue(m, `titan_quota_refused_total{quota="durable-subscriptions"}`), "durable-subscriptions refusals")
	requireEqual(t, 2.0, metricValue(m, `titan_quota_refused_total{quota="destinations"}`), "destinations refusals")

	// Deleting a queue it made (the CLI, with manage on it) gives room back.
	requireCLIOK(t, b, "--user", "team1", "--password-file", secretFile(t, "team1-pw"), "queue", "delete", "/queue/t.1", "--force")
	res, _ = opsAs(t, b, "team1", "", send("/queue/t.4"))
	requireEqual(t, "ok", res[0], "a destination once one was deleted")
}
