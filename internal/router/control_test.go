package router_test

import (
	"os"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/router"
)

// TestControlHeadersDocumented: every peer control header the router honours or refuses is
// named in the README's migration guide, so the guide and the broker agree (issue 26).
func TestControlHeadersDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	guide := string(readme)
	if i := strings.Index(guide, "## Migrating from RabbitMQ, ActiveMQ or Artemis"); i >= 0 {
		guide = guide[i:]
	} else {
		t.Fatal("README has no migration guide")
	}
	for _, h := range router.ControlHeaders() {
		if !strings.Contains(guide, "`"+h.Name) {
			t.Errorf("control header %s (%s) is not in the README's migration guide", h.Name, h.Peer)
		}
	}
}
