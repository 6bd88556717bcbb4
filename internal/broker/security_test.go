package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/config"
)

// A monitor API beyond loopback without users or a token is refused at start-up, with an
// error that says how to fix it; nothing stays bound.
func TestMonitorBeyondLoopbackWithoutAuthenticationIsRefused(t *testing.T) {
	c := config.Default()
	c.Servers[0].Host, c.Servers[0].Port = "127.0.0.1", 0
	c.Monitor.Host, c.Monitor.Port = "0.0.0.0", 0
	c.Store.Type = "memory"
	b, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start()
	if err == nil {
		t.Fatal("started a monitor on 0.0.0.0 without authentication")
	}
	for _, want := range []string{"without authentication", "--users FILE", "--monitor-token", "--monitor-host 127.0.0.1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_ = b.Shutdown(context.Background())

	c.Monitor.Token = "t"
	if err := checkMonitorExposure(c, true); err != nil {
		t.Errorf("with a token: %v", err)
	}
	c.Monitor.Token = ""
	if err := checkMonitorExposure(c, false); err != nil {
		t.Errorf("with users: %v", err)
	}
	c.Monitor.Host = "127.0.0.1"
	if err := checkMonitorExposure(c, true); err != nil {
		t.Errorf("on loopback: %v", err)
	}
}
